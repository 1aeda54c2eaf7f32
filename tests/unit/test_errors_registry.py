"""One error tree: every kind an error body can carry is registered by the class that declares it,
the API answers an error with its class's status and kind, and the client raises that class back.
Walks every registered kind through a real FastAPI app with the API's handlers (the service test
makes the same round trips through the running service)."""

from __future__ import annotations

import json

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from cabrain import errors
from cabrain.client import raise_for
from cabrain.errors import KINDS, CabrainError, error_class
from cabrain.fixes import Fix
from cabrain.providers.llm import LLMError
from cabrain.providers.llm_calls import ModelCallError
from cabrain.serve import schemas
from cabrain.serve.errors import ERROR_RESPONSES, add_handlers, error_json, error_response
from cabrain.serve.routing import router

# Every kind the API, its proxy or the client may name, and the class behind it.
EXPECTED = {
    "bad_request": (400, errors.InputError),
    "archive_too_large": (413, errors.ArchiveTooLarge),
    "unauthenticated": (401, errors.Unauthenticated),
    "forbidden": (403, errors.AccessDenied),
    "policy_denied": (403, errors.PolicyDenied),
    "confirmation_required": (403, errors.ConfirmationRequired),
    "quota_exceeded": (429, errors.QuotaExceeded),
    "not_found": (404, errors.NotFound),
    "method_not_allowed": (405, errors.MethodNotAllowed),
    "timeout": (408, errors.ServiceTimeout),
    "already_exists": (409, errors.AlreadyExists),
    "conflict": (409, errors.ConflictError),
    "payload_too_large": (413, errors.PayloadTooLarge),
    "invalid": (422, errors.InvalidRequest),
    "too_many_requests": (429, errors.ServiceBusy),
    "misconfigured": (500, errors.ConfigError),
    "model_failed": (502, errors.ModelError),
    "source_failed": (502, errors.SourceError),
    "source_unauthorized": (502, errors.SourceAuthError),
    "source_refused": (422, errors.SourceRefused),
    "source_unauthorized_at_add": (422, errors.SourceAuthRefused),
    "database_unavailable": (503, errors.DatabaseUnreachable),
    "model_unavailable": (503, errors.EmbedderError),
    "cache_unavailable": (503, errors.CacheError),
    "cold_tier_unavailable": (503, errors.ColdStoreError),
    "service_unavailable": (503, errors.ServiceError),
}


def _app() -> FastAPI:
    """The API's handlers and a route that raises the error its path names."""
    app = FastAPI(responses=ERROR_RESPONSES)
    add_handlers(app)
    routes = router()

    @routes.get("/raise/{kind}")
    async def raise_kind(kind: str) -> dict[str, str]:
        raise KINDS[kind](f"a {kind} error", hint=f"do something about {kind}")

    @routes.post("/body")
    async def body(item: schemas.NamespaceIn) -> dict[str, str]:
        return {"name": item.name}

    app.include_router(routes)
    return app


def test_the_registry_holds_every_kind_with_its_status() -> None:
    assert {kind: (cls.status, cls) for kind, cls in KINDS.items()} == EXPECTED
    for kind, cls in KINDS.items():
        assert cls.kind == kind and issubclass(cls, CabrainError) and error_class(kind) is cls
    assert error_class("internal") is errors.ServiceError and error_class("no-such-kind") is errors.ServiceError


def test_every_class_answers_its_ancestors_kind_unless_it_declares_its_own() -> None:
    assert (errors.SchemaError.status, errors.SchemaError.kind) == (503, "database_unavailable")
    assert (errors.UsageError.status, errors.UsageError.kind) == (500, "internal")
    for cls in (LLMError, ModelCallError):  # the model errors are in the tree: a failed model is a 502
        assert issubclass(cls, errors.ModelError) and (cls.status, cls.kind) == (502, "model_failed")


def test_two_unrelated_classes_cannot_declare_one_kind() -> None:
    with pytest.raises(TypeError, match="not_found"):

        class Lost(CabrainError):  # a second, unrelated class for "not_found"
            kind = "not_found"

    assert KINDS["not_found"] is errors.NotFound


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_the_api_answers_each_kind_and_the_client_raises_its_class(kind: str) -> None:
    status, cls = EXPECTED[kind]
    with TestClient(_app()) as client:
        response = client.get(f"/raise/{kind}")
    assert response.status_code == status
    assert response.json() == {
        "error": {"type": kind, "message": f"a {kind} error", "hint": f"do something about {kind}"}
    }
    assert (response.headers.get("www-authenticate") == "Bearer") is (status == 401)
    with pytest.raises(CabrainError) as raised:
        raise_for(httpx.Response(response.status_code, content=response.content))
    assert type(raised.value) is cls
    assert (
        raised.value.message == f"a {kind} error (HTTP {status})" and raised.value.hint == f"do something about {kind}"
    )


def test_the_frameworks_own_errors_answer_by_the_tree() -> None:
    with TestClient(_app()) as client:
        answers = {
            "invalid": client.post("/body", json={"name": 1, "extra": True}),
            "bad_request": client.post("/body", content=b"{", headers={"content-type": "application/json"}),
            "not_found": client.get("/no/such/route"),
            "method_not_allowed": client.delete("/body"),
        }
    for kind, response in answers.items():
        cls = KINDS[kind]
        assert (response.status_code, response.json()["error"]["type"]) == (cls.status, kind)
        with pytest.raises(cls):
            raise_for(httpx.Response(response.status_code, content=response.content))


def test_a_model_error_is_a_502_and_any_other_a_500_internal() -> None:
    answer = error_response(LLMError("the chat model answered nonsense"))
    assert answer.status_code == 502  # was a 500 "internal" before the model errors joined the tree
    plain = error_response(CabrainError("unexpected error: KeyError", hint="see the server logs"))
    assert plain.status_code == 500 and json.loads(plain.body)["error"]["type"] == "internal"
    with pytest.raises(errors.ServiceError):
        raise_for(httpx.Response(500, content=plain.body))


def test_a_fix_travels_with_its_error() -> None:
    body = error_json(
        errors.NotFound("namespace 'notes' does not exist", fix=Fix("create_namespace", {"namespace": "notes"}))
    )
    assert body["error"]["fix"] == {"action": "create_namespace", "params": {"namespace": "notes"}}
    with pytest.raises(errors.NotFound) as raised:
        raise_for(httpx.Response(404, json=body))
    assert raised.value.fix == Fix("create_namespace", {"namespace": "notes"})


def test_every_status_of_the_tree_is_documented_on_every_route() -> None:
    assert set(ERROR_RESPONSES) == {status for status, _ in EXPECTED.values()} | {500}
