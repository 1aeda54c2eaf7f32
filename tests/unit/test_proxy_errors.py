"""Serve's proxy answers in CaBrain's JSON error shape (cabrain/serve/proxy.py), as an ASGI middleware
driven here with the messages Serve's proxy sends; the service test kills a real ingress replica."""

from __future__ import annotations

import json

from cabrain.serve.proxy import JsonErrors, middlewares


async def _through(app) -> tuple[int, dict, dict]:
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    await JsonErrors(app)({"type": "http", "method": "POST", "path": "/v1/recall"}, receive, send)
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, json.loads(body)


def _plain(status: int, text: bytes):
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": text, "more_body": False})

    return app


async def test_a_replica_that_died_under_the_request_is_a_json_503_with_retry_after():
    status, headers, body = await _through(_plain(500, b"Internal Server Error"))
    assert status == 503 and headers["content-type"] == "application/json" and headers["retry-after"]
    assert body["error"]["type"] == "service_unavailable" and "retry" in body["error"]["hint"]


async def test_serves_own_503_keeps_its_reason_and_a_timeout_stays_408():
    status, _, body = await _through(_plain(503, b"Request dropped due to backpressure"))
    assert status == 503 and "backpressure" in body["error"]["message"]
    status, _, body = await _through(_plain(408, b"Request timed out"))
    assert status == 408 and body["error"]["type"] == "timeout"


async def test_an_app_that_raises_before_answering_is_a_json_503():
    async def app(scope, receive, send):
        raise RuntimeError("the replica's actor died")

    status, _, body = await _through(app)
    assert status == 503 and body["error"]["message"]


async def test_answers_of_the_app_pass_untouched():
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 500, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"error": {"type": "misconfigured"}}', "more_body": False})

    status, _, body = await _through(app)
    assert status == 500 and body == {"error": {"type": "misconfigured"}}
    status, _, _ = await _through(_plain(404, b"{}"))  # not an error this middleware rewrites
    assert status == 404


async def test_a_console_page_keeps_its_own_error_status():
    sent = []

    async def app(scope, receive, send):
        headers = [(b"content-type", b"text/html; charset=utf-8"), (b"x-cabrain-answer", b"console")]
        await send({"type": "http.response.start", "status": 502, "headers": headers})
        await send({"type": "http.response.body", "body": b"<p>the model failed</p>", "more_body": False})

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    await JsonErrors(app)({"type": "http", "method": "GET", "path": "/console/recall"}, receive, send)
    assert sent[0]["status"] == 502 and sent[1]["body"] == b"<p>the model failed</p>"


def test_serve_gets_it_as_a_starlette_middleware():
    from starlette.middleware import Middleware

    [entry] = middlewares()
    assert isinstance(entry, Middleware) and entry.cls is JsonErrors
