"""The connectors pages: the connectors writing to namespaces the agent may write (an admin: every
one), each with its status and last sync; and one connector with its config and recent syncs: what
each listed, indexed, added and forgot, and what its source skipped, by reason (a chat's system
lines, attachments, calls and deleted messages; a file too large), so nothing a source held leaves
unseen. Read only: syncing and removing are the API's and the command line's."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import Response

from cabrain.brain import Brain
from cabrain.serve.console.render import page
from cabrain.serve.console.routing import Current, router
from cabrain.serve.deps import Svc
from cabrain.write.tally import skipped_line

routes = router()

RUNS = 20


@routes.get("/connectors")
async def connectors(request: Request, svc: Svc, session: Current) -> Response:
    found = await svc.run(lambda b: svc.connectors(b).listing(session.agent))
    return page(request, "connectors.html", title="Connectors", connectors=[c.to_json() for c in found])


@routes.get("/connectors/{name}")
async def connector(request: Request, name: str, svc: Svc, session: Current) -> Response:
    async def read(b: Brain) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        hub = svc.connectors(b)
        found = await hub.get(session.agent, name)
        return found.to_json(), await hub.runs(session.agent, name, limit=RUNS)

    found, runs = await svc.run(read)
    return page(request, "connector.html", title=f"Connector {name}", connector=found, runs=[_run(r) for r in runs])


def _run(run: dict[str, Any]) -> dict[str, Any]:
    """A run as the page shows it: its counts that are not zero, and what its source skipped."""
    counts = run.get("counts") or {}
    found = counts.get("skipped")
    skipped: dict[str, int] = found if isinstance(found, dict) else {}
    return {
        **run,
        "numbers": [(k, v) for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool) and v],
        "skipped": sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])),
        "skipped_line": skipped_line(skipped),
    }
