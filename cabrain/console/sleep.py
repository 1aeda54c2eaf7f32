"""The sleep pages: the runs an agent may see, each run's steps (what ran where, what it counted)
and its judgments, each linked to its memories and revertible; an admin starts a cycle here."""

from __future__ import annotations

import urllib.parse
import uuid

from fastapi import Request
from fastapi.responses import Response

from cabrain.brain import Brain, as_uuid
from cabrain.console import session as sessions
from cabrain.console.render import page
from cabrain.console.routing import Current, change_form, router, see_other, text
from cabrain.errors import AccessDenied
from cabrain.serve.deps import Svc
from cabrain.sleep.cycle import STEPS
from cabrain.sleep.runs import SleepRuns

routes = router()


def _runs(b: Brain) -> SleepRuns:
    return SleepRuns(b.engine)


@routes.get("/sleep")
async def runs(request: Request, svc: Svc, session: Current) -> Response:
    found = await svc.run(lambda b: _runs(b).runs(session.agent, limit=50))
    return page(request, "sleep.html", title="Sleep", runs=found, steps=STEPS)


@routes.get("/sleep/{run_id}")
async def run(request: Request, run_id: str, svc: Svc, session: Current) -> Response:
    ident = as_uuid(run_id, "sleep run id")
    found = await svc.run(lambda b: _runs(b).run(session.agent, ident))
    return page(request, "sleep_run.html", title="Sleep run", run=found, running=found["status"] == "running")


@routes.post("/sleep/start")
async def start(request: Request, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    if not session.principal.is_admin:
        raise AccessDenied(f"agent {session.agent!r} is not an admin", hint="starting a sleep cycle needs an admin key")
    names = [n.strip() for n in text(form, "namespaces").split(",") if n.strip()]
    steps = [s.strip() for s in text(form, "steps").split(",") if s.strip()]
    run_id: uuid.UUID = await svc.run(lambda b: _runs(b).start(session.agent, names or None, steps or None))
    return see_other(f"{sessions.PATH}/sleep/{urllib.parse.quote(str(run_id))}")
