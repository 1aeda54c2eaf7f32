"""Pushes: notifiers (``/v1/notifiers``, an admin's), subscriptions (``/v1/subscriptions``), the
outbox with the gate's decisions (``/v1/outbox``), and the event stream (``/v1/events``, server-sent
events: each event once, in order, with ``Last-Event-ID`` to resume)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import Header, Query
from fastapi.responses import StreamingResponse
from pydantic import Field

from cabrain.errors import InputError
from cabrain.notify.stream import HeldStream, last_seen, sse
from cabrain.serve.deps import Caller, Svc
from cabrain.serve.routing import router
from cabrain.serve.schemas import Body

routes = router(tags=["pushes"])


class NotifierIn(Body):
    name: str = Field(examples=["team-slack"])
    kind: str = Field(description="slack | whatsapp | talk | webpush | webhook")
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="Base URLs and options; never a credential.",
        examples=[{"base_url": "https://slack.com/api/"}],
    )
    secret_env: str = Field(description="The variable holding its token, bot secret, VAPID key or signing secret.")


class SubscriptionIn(Body):
    subscriber: str = Field(description="Who is told (a person's or agent's name).", examples=["nora"])
    kinds: list[str] = Field(
        description="contradiction | stale | pattern | action_pending", examples=[["contradiction"]]
    )
    namespace: str | None = Field(default=None, description="One namespace, or every one you read.")
    notifier: str | None = Field(default=None, description="How to reach them; none: the event stream only.")
    target: dict[str, Any] = Field(
        default_factory=dict,
        description="Where: {channel} (Slack), {to} (WhatsApp), {room} (Talk), a PushSubscription (web push).",
        examples=[{"channel": "C0123456"}],
    )
    min_importance: float = Field(default=0.5, ge=0, le=1)
    max_per_hour: int = Field(default=6, ge=0, le=1000)
    quiet_start: str | None = Field(default=None, examples=["22:00"])
    quiet_end: str | None = Field(default=None, examples=["07:00"])
    timezone: str = Field(default="UTC", examples=["Asia/Riyadh"])


@routes.post("/v1/notifiers", status_code=201, summary="Add a notifier (admin)")
async def add_notifier(body: NotifierIn, svc: Svc, p: Caller) -> dict[str, Any]:
    return await svc.run(
        lambda b: svc.notify(b).add_notifier(p.agent_id, body.name, body.kind, body.config, body.secret_env)
    )


@routes.get("/v1/notifiers", summary="The notifiers")
async def list_notifiers(svc: Svc, p: Caller) -> dict[str, Any]:
    return {"notifiers": await svc.run(lambda b: svc.notify(b).notifiers(p.agent_id))}


@routes.delete("/v1/notifiers/{name}", summary="Remove a notifier (admin)")
async def remove_notifier(name: str, svc: Svc, p: Caller) -> dict[str, Any]:
    return {"removed": await svc.run(lambda b: svc.notify(b).remove_notifier(p.agent_id, name))}


@routes.post("/v1/subscriptions", status_code=201, summary="Subscribe to pushes")
async def subscribe(body: SubscriptionIn, svc: Svc, p: Caller) -> dict[str, Any]:
    return await svc.run(lambda b: svc.notify(b).subscribe(p.agent_id, **body.model_dump()))


@routes.get("/v1/subscriptions", summary="Your subscriptions (all=true: everyone's, admin)")
async def subscriptions(svc: Svc, p: Caller, all: bool = False) -> dict[str, Any]:
    return {"subscriptions": await svc.run(lambda b: svc.notify(b).subscriptions(p.agent_id, everyone=all))}


@routes.delete("/v1/subscriptions/{sub_id}", summary="Stop a subscription")
async def unsubscribe(sub_id: uuid.UUID, svc: Svc, p: Caller) -> dict[str, Any]:
    return {"removed": await svc.run(lambda b: svc.notify(b).unsubscribe(p.agent_id, sub_id))}


@routes.get("/v1/outbox", summary="Pushes and the gate's decisions (yours; an admin's: all)")
async def outbox(
    svc: Svc,
    p: Caller,
    status: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:
    return {"pushes": await svc.run(lambda b: svc.notify(b).outbox(p.agent_id, status=status, limit=limit))}


@routes.post("/v1/outbox/{push_id}/release", summary="Send a suppressed or failed push after all")
async def release(push_id: uuid.UUID, svc: Svc, p: Caller) -> dict[str, Any]:
    return {"released": await svc.run(lambda b: svc.notify(b).release(p.agent_id, push_id))}


@routes.get(
    "/v1/events",
    summary="Server-sent events: what the brain found, in namespaces you read",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def events(
    svc: Svc,
    p: Caller,
    namespace: str | None = None,
    after: Annotated[int, Query(ge=0, description="Start after this event's seq (or send Last-Event-ID).")] = 0,
    seconds: Annotated[
        float | None,
        Query(
            gt=0,
            description="Close the stream after this long: at most CABRAIN_EVENTS_MAX_SECONDS (600), by default "
            "300 or that if less.",
        ),
    ] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:
    if seconds is None:
        seconds = min(300.0, svc.settings.events_max_seconds)
    if seconds > svc.settings.events_max_seconds:
        raise InputError(
            f"seconds is at most {svc.settings.events_max_seconds:g}, got {seconds:g}",
            hint="reconnect with Last-Event-ID when the stream closes",
        )
    brain = await svc.get_brain()
    hub = svc.notify(brain)
    after = last_seen(after, last_event_id)
    give_back = svc.streams.take(p.agent_id)  # 429 past CABRAIN_MAX_STREAMS_PER_AGENT
    try:
        first = await brain.riding_out(lambda: hub.events(p.agent_id, after=after, namespace=namespace))
    except BaseException:
        give_back()
        raise
    stream = sse(
        hub,
        p.agent_id,
        after=after,
        namespace=namespace,
        seconds=seconds,
        poll_s=svc.settings.notify_poll_s,
        first=first,
    )
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return HeldStream(give_back, stream, media_type="text/event-stream", headers=headers)
