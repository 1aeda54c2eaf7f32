"""Held actions (``/console/actions``): what an agent's role held for a person's confirmation
(:mod:`cabrain.actions`), with a form to approve or deny each. A person sees the actions on the
namespaces it owns (an admin: all) and decides them as the API lets it: an agent never decides its
own, and the server checks who may, whatever the page shows. Each action is said in words: what it
asks (an "accept grant" is no "share"), the memory it touches as its text when the person may read
it, who asked and when; a decision's outcome is shown as what it became, a failure as a failure.

Pushes (``/console/pushes``): the outbox, with the gate's reasons and the delivery errors, for the
agent's subscriptions (an admin: all); a suppressed or failed push can be sent after all."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from cabrain.brain import Brain
from cabrain.errors import InputError, NotFound
from cabrain.membership import as_uuid
from cabrain.notify.stream import HeldStream, last_seen, sse
from cabrain.serve.console import filters
from cabrain.serve.console import session as sessions
from cabrain.serve.console.render import HEADERS, page
from cabrain.serve.console.routing import Current, change_form, router, see_other, text
from cabrain.serve.deps import Svc

routes = router()


# Arguments a held call names that the page shows otherwise (the memory as its text) or not at all.
SHOWN_APART = frozenset({"memory_id", "old_id", "namespace", "idempotency_key"})


def message_of(error: str | None) -> str:
    """A failed action's error as its message alone: the fix kept with it names the API's route and
    the CLI's command (``str`` of the error), which are not the console's ways."""
    return (error or "").split("\n  fix:", 1)[0].strip()


def memory_of(action: dict[str, Any]) -> uuid.UUID | None:
    """The memory a held call names (``memory_id``, or a kept call's ``old_id``), if it is one."""
    args = action["args"].get("args") or {}
    try:
        return uuid.UUID(str(args.get("memory_id") or args.get("old_id")))
    except ValueError:
        return None


def details(args: dict[str, Any]) -> list[tuple[str, str]]:
    """A held call's other arguments, in words (``can_write``: "can write", True: "yes")."""
    shown = []
    for name, value in args.items():
        if name in SHOWN_APART or value is None:
            continue
        said = ("yes" if value else "no") if isinstance(value, bool) else str(value)
        shown.append((name.replace("_", " "), said))
    return shown


@routes.get("/actions")
async def actions(request: Request, svc: Svc, session: Current) -> Response:
    every = await svc.run(lambda b: b.pending_actions(session.agent, status=None))

    async def memories(b: Brain) -> dict[str, str | None]:
        """The text of each memory a pending action touches, as the person may read it (else None)."""
        texts: dict[str, str | None] = {}
        for action in every:
            memory = memory_of(action)
            if action["status"] != "pending" or memory is None or str(memory) in texts:
                continue
            try:
                texts[str(memory)] = (await b.get(session.agent, memory)).memory.content
            except NotFound:
                texts[str(memory)] = None
        return texts

    texts = await svc.run(memories)
    pending = [
        {
            **a,
            "memory": memory_of(a),
            "details": details(a["args"].get("args") or {}),
        }
        for a in every
        if a["status"] == "pending"
    ]
    decided = [{**a, "message": message_of(a.get("error"))} for a in every if a["status"] != "pending"]
    wanted = filters.field(request.query_params, "decided")
    outcome = next((a for a in decided if str(a["id"]) == wanted), None) if wanted else None
    decided = decided[:50]
    return page(
        request,
        "actions.html",
        title="Held actions",
        pending=pending,
        decided=decided,
        texts=texts,
        outcome=outcome,
    )


@routes.post("/actions/{action_id}")
async def decide(request: Request, action_id: str, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    answer = text(form, "answer")
    if answer not in ("approve", "deny"):
        raise InputError("answer approve or deny", hint="use the Approve or Deny button of the action")
    done = await svc.run(lambda b: b.decide_action(session.agent, action_id, approve=answer == "approve"))
    return see_other(f"{sessions.PATH}/actions?decided={done['id']}#done")


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
