"""Chat channels (``/v1/channels``) and issues (``/v1/issues``).

``/v1/channels/NAME/events`` is where a platform delivers: it carries no API key, and is
authenticated instead by the platform's own signature: a request to an unknown channel, or without
its platform's signature headers, is refused before a byte of its body is read; the body is read up
to ``CABRAIN_CHANNEL_MAX_BODY_BYTES`` (413 beyond) and its signature checked before it is parsed.
Every refusal is the same 401 (which channel names exist is not told) and stores nothing. Adding, listing and removing channels is an admin's. New
messages of a channel with a live agent are handed to it in the replica's background, so the
platform gets its answer at once (Slack wants one within 3 s).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import PlainTextResponse, Response
from pydantic import Field

from cabrain.channels.inbound import RawRequest
from cabrain.serve.deps import Caller, Svc
from cabrain.serve.guard import bounded_body
from cabrain.serve.routing import router
from cabrain.serve.schemas import Body

routes = router(tags=["channels"])


class ChannelIn(Body):
    name: str = Field(description="Lowercase letters, digits, '.', '_' and '-'; at most 63.", examples=["support-wa"])
    kind: str = Field(description="slack | whatsapp | talk | webhook")
    namespace: str = Field(description="Where its messages are retained.")
    visibility: str = Field(default="team", description="private | team | global")
    agent: str | None = Field(default=None, description="The agent its messages are retained as (default: you).")
    secret_env: str = Field(description="The variable holding the platform's signing secret (never the secret).")
    verify_token_env: str | None = Field(default=None, description="WhatsApp: the variable holding the verify token.")
    notifier: str | None = Field(default=None, description="The notifier that replies reach its threads through.")
    live_agent: str | None = Field(default=None, description="An agent of role live that answers the channel.")
    tracker: str | None = Field(default=None, description="A gitlab or vikunja connector its issues are filed in.")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="file_issues (all | prefix | model), prefix, labels, approvers (platform user ids).",
        examples=[{"file_issues": "all", "labels": ["from-chat"], "approvers": ["15550001111"]}],
    )


class IssueIn(Body):
    tracker: str = Field(description="A gitlab or vikunja connector (its project takes the issue).")
    title: str = Field(max_length=255)
    description: str = Field(default="", max_length=100_000)
    labels: list[str] = Field(default_factory=list)
    key: str | None = Field(default=None, description="The same key again files nothing new (idempotent).")


@routes.post("/v1/channels", status_code=201, summary="Add a chat channel (admin)")
async def add_channel(body: ChannelIn, svc: Svc, p: Caller) -> dict[str, Any]:
    return await svc.run(lambda b: svc.channels(b).add(p.agent_id, body.model_dump()))


@routes.get("/v1/channels", summary="The chat channels (admin)")
async def list_channels(svc: Svc, p: Caller) -> dict[str, Any]:
    return {"channels": await svc.run(lambda b: svc.channels(b).listing(p.agent_id))}


@routes.delete("/v1/channels/{name}", summary="Remove a chat channel (admin); what it stored stays")
async def remove_channel(name: str, svc: Svc, p: Caller) -> dict[str, Any]:
    return {"removed": await svc.run(lambda b: svc.channels(b).remove(p.agent_id, name))}


async def _deliver(name: str, request: Request, svc: Svc) -> Response:
    raw = RawRequest(
        request.method, {k.lower(): v for k, v in request.headers.items()}, dict(request.query_params), b""
    )
    read: list[bytes] = []

    async def body(limit: int) -> bytes:
        """The body, read once the channel exists and the request carries its signature headers: at
        most ``limit`` bytes (the ingress's guard refused a longer declared length already)."""
        if not read:
            read.append(await bounded_body(request, limit))
        return read[0]

    brain = await svc.get_brain()
    channels = svc.channels(brain)
    delivery = await brain.riding_out(lambda: channels.receive(name, raw, body))
    if delivery.stored:
        svc.hand_to_live_agent(brain, name, delivery.stored)
    return Response(delivery.body, status_code=delivery.status, media_type=delivery.content_type)


@routes.post(
    "/v1/channels/{name}/events",
    summary="Where a platform delivers (authenticated by its signature, not an API key)",
    response_class=Response,
    responses={
        200: {
            "description": "What was stored; or the challenge a platform's check asks for, as text",
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "properties": {
                            "ok": {"type": "boolean"},
                            "stored": {"type": "integer"},
                            "duplicates": {"type": "integer"},
                        },
                        "required": ["ok", "stored", "duplicates"],
                    }
                },
                "text/plain": {"schema": {"type": "string"}},
            },
        }
    },
)
async def channel_events(name: str, request: Request, svc: Svc) -> Response:
    return await _deliver(name, request, svc)


@routes.get(
    "/v1/channels/{name}/events",
    summary="A platform's subscription check (WhatsApp's hub.challenge)",
    response_class=PlainTextResponse,
)
async def channel_check(name: str, request: Request, svc: Svc) -> Response:
    return await _deliver(name, request, svc)


@routes.post("/v1/issues", status_code=201, summary="File an issue through a tracker connector")
async def file_issue(body: IssueIn, svc: Svc, p: Caller) -> dict[str, Any]:
    issue = await svc.run(
        lambda b: svc.channels(b).file_issue(
            p.agent_id, body.tracker, body.title, body.description, labels=body.labels, key=body.key
        )
    )
    return {"kind": issue.kind, "project": issue.project, "ref": issue.ref, "url": issue.url, "title": issue.title}


@routes.get("/v1/issues", summary="Issues the live agents filed (admin)")
async def live_issues(
    svc: Svc, p: Caller, channel: str | None = None, limit: Annotated[int, Query(ge=1, le=500)] = 100
) -> dict[str, Any]:
    return {"issues": await svc.run(lambda b: svc.channels(b).issues(p.agent_id, channel, limit))}
