"""Held actions (``/console/actions``): what an agent's role held for a person's confirmation
(:mod:`cabrain.actions`), with a form to approve or deny each. A person sees the actions on the
namespaces it owns (an admin: all) and decides them as the API lets it: an agent never decides its
own, and the server checks who may, whatever the page shows.

Pushes (``/console/pushes``): the outbox, with the gate's reasons and the delivery errors, for the
agent's subscriptions (an admin: all); a suppressed or failed push can be sent after all."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from cabrain.errors import InputError
from cabrain.membership import as_uuid
from cabrain.notify.stream import HeldStream, last_seen, sse
from cabrain.serve.console import filters
from cabrain.serve.console import session as sessions
from cabrain.serve.console.render import HEADERS, page
from cabrain.serve.console.routing import Current, change_form, router, see_other, text
from cabrain.serve.deps import Svc

routes = router()


@routes.get("/actions")
async def actions(request: Request, svc: Svc, session: Current) -> Response:
    every = await svc.run(lambda b: b.pending_actions(session.agent, status=None))
    pending = [a for a in every if a["status"] == "pending"]
    decided = [a for a in every if a["status"] != "pending"][:50]
    done = filters.field(request.query_params, "done")
    return page(request, "actions.html", title="Held actions", pending=pending, decided=decided, done=done)


@routes.post("/actions/{action_id}")
async def decide(request: Request, action_id: str, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    answer = text(form, "answer")
    if answer not in ("approve", "deny"):
        raise InputError("answer approve or deny")
    done = await svc.run(lambda b: b.decide_action(session.agent, action_id, approve=answer == "approve"))
    return see_other(f"{sessions.PATH}/actions?done={done['status']}")


@routes.get("/pushes")
async def pushes(request: Request, svc: Svc, session: Current) -> Response:
    status = filters.choice(
        request.query_params, "status", ["pending", "delivered", "failed", "suppressed", "streamed"]
    )
    found = await svc.run(lambda b: svc.notify(b).outbox(session.agent, status=status or None, limit=200))
    done = filters.field(request.query_params, "done")
    return page(request, "pushes.html", title="Pushes", pushes=found, chosen=status, done=done)


@routes.post("/pushes/{push_id}/release")
async def release(request: Request, push_id: str, svc: Svc, session: Current) -> Response:
    await change_form(request, session)
    key = as_uuid(push_id, "push id")
    released = await svc.run(lambda b: svc.notify(b).release(session.agent, key))
    return see_other(f"{sessions.PATH}/pushes?done={'released' if released else 'nothing to release'}")


@routes.get("/events")
async def events(request: Request, svc: Svc, session: Current) -> Response:
    """The live findings' stream: the same events as ``/v1/events``, as the signed-in agent, from
    the latest (or after ``Last-Event-ID``); the browser reconnects when it closes."""
    brain = await svc.get_brain()
    hub = svc.notify(brain)
    after = last_seen(0, request.headers.get("last-event-id"))
    if after == 0:  # a page opened now shows what is new from now on
        after = await brain.riding_out(hub.latest)
    give_back = svc.streams.take(session.agent)  # the same per-agent cap as /v1/events
    stream = sse(hub, session.agent, after=after, namespace=None, seconds=300, poll_s=svc.settings.notify_poll_s)
    headers = {**HEADERS, "Cache-Control": "no-store"}
    return HeldStream(give_back, stream, media_type="text/event-stream", headers=headers)
