"""The sleep pages: the runs an agent may see, each run's steps (what ran where, what it counted),
what it did (the facts and summaries it wrote, what it merged, superseded, decayed and archived,
with the texts) and its judgments, each linked to its memories and revertible, the whole run too;
an admin starts a cycle here."""

from __future__ import annotations

import urllib.parse
import uuid

from fastapi import Request
from fastapi.responses import Response

from cabrain.brain import as_uuid
from cabrain.errors import InputError
from cabrain.serve.console import session as sessions
from cabrain.serve.console.render import page
from cabrain.serve.console.routing import Current, change_form, router, see_other, text
from cabrain.serve.deps import Svc
from cabrain.sleep.cycle import STEPS

routes = router()


@routes.get("/sleep")
async def runs(request: Request, svc: Svc, session: Current) -> Response:
    found = await svc.run(lambda b: svc.sleep_runs(b).runs(session.agent, limit=50))
    return page(request, "sleep.html", title="Sleep", runs=found, steps=STEPS)


@routes.get("/sleep/{run_id}")
async def run(request: Request, run_id: str, svc: Svc, session: Current) -> Response:
    ident = as_uuid(run_id, "sleep run id")
    found = await svc.run(lambda b: svc.sleep_runs(b).run(session.agent, ident))
    done = request.query_params.get("done") == "reverted"
    return page(
        request, "sleep_run.html", title="Sleep run", run=found, running=found["status"] == "running", done=done
    )


@routes.post("/sleep/start")
async def start(request: Request, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    names = [n.strip() for n in text(form, "namespaces").split(",") if n.strip()]
    steps = [s.strip() for s in text(form, "steps").split(",") if s.strip()]
    run_id: uuid.UUID = await svc.run(lambda b: svc.sleep_runs(b).start(session.agent, names or None, steps or None))
    return see_other(f"{sessions.PATH}/sleep/{urllib.parse.quote(str(run_id))}")


@routes.post("/sleep/{run_id}/cancel")
async def cancel(request: Request, run_id: str, svc: Svc, session: Current) -> Response:
    await change_form(request, session)
    ident = as_uuid(run_id, "sleep run id")
    await svc.run(lambda b: svc.sleep_runs(b).cancel(session.agent, ident))
    return see_other(f"{sessions.PATH}/sleep/{urllib.parse.quote(str(ident))}")


@routes.post("/sleep/{run_id}/revert")
async def revert(request: Request, run_id: str, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    ident = as_uuid(run_id, "sleep run id")
    if text(form, "confirm") != "yes":
        raise InputError("tick the confirmation to revert this run", hint="the revert can itself be reverted")
    reason = text(form, "reason") or None
    await svc.run(lambda b: b.revert_run(session.agent, ident, reason=reason))
    return see_other(f"{sessions.PATH}/sleep/{urllib.parse.quote(str(ident))}?done=reverted")
