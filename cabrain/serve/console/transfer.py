"""Import and export in the console (``/console/transfer``): upload another tool's memory file
(mem0, Letta, claude-mem, Markdown) into a namespace, or a CaBrain export (an admin's), with a dry
run and a mirror, and read the import's summary; download a namespace's export as JSON Lines.

Both are the :class:`cabrain.portable.facade.Portable` operations the API's ``/v1/import`` and
``/v1/export`` call, as the signed-in agent: who may import into or export what is the gate's and
the facade's, never this page's. A refusal is shown on the page, with the form as it was sent.
The upload is a multipart form; ``console.js`` sends it with its upload's progress and then shows
"importing" until the summary comes back (the page works without the script too)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from starlette.datastructures import UploadFile

from cabrain.brain import Brain
from cabrain.errors import CabrainError, InputError
from cabrain.serve.console import filters
from cabrain.serve.console.render import HEADERS, page
from cabrain.serve.console.routing import Current, change_form, console_hint, router, text
from cabrain.serve.console.session import Session
from cabrain.serve.deps import Svc
from cabrain.serve.routes.portable import CHUNK, _upload_name, export_download

routes = router()

# The formats a person may pick, in words (cabrain.portable.facade.FORMATS).
FORMATS = {
    "mem0": "mem0 JSON export",
    "letta": "Letta agent file (.af)",
    "claude-mem": "claude-mem database or export",
    "markdown": "Markdown memory file (CLAUDE.md, notes)",
    "cabrain": "CaBrain export (.jsonl; admins only)",
}


async def _namespaces(svc: Svc, session: Session) -> tuple[list[str], list[str]]:
    """The namespaces the agent may import into (it may write them) and export (it owns them; an
    admin: every one), for the forms' choices. The operations check again whatever is sent."""
    found = await svc.run(lambda b: b.namespaces(session.agent))
    admin = session.principal.is_admin
    writable = [n["name"] for n in found if n["can_write"]]
    owned = [n["name"] for n in found if admin or n["owner_agent_id"] == session.agent]
    return writable, owned


async def _page(request: Request, svc: Svc, session: Session, *, status: int = 200, **context: Any) -> Response:
    writable, owned = await _namespaces(svc, session)
    context.setdefault("chosen", {})
    return page(
        request,
        "transfer.html",
        title="Import and export",
        status=status,
        formats=FORMATS,
        writable=writable,
        owned=owned,
        max_bytes=svc.settings.api_max_body_bytes,
        **{"report": None, "error": None, "filename": None, **context},
    )


@routes.get("/transfer")
async def transfer(request: Request, svc: Svc, session: Current) -> Response:
    return await _page(request, svc, session, chosen={"namespace": filters.field(request.query_params, "namespace")})


@routes.post("/transfer/import")
async def import_file(request: Request, svc: Svc, session: Current) -> Response:
    form = await change_form(request, session)
    fmt, namespace = text(form, "format"), text(form, "namespace")
    chosen = {
        "format": fmt,
        "namespace": namespace,
        "dry_run": text(form, "dry_run") == "yes",
        "mirror": text(form, "mirror") == "yes",
    }
    upload = form.get("file")
    try:
        if not isinstance(upload, UploadFile) or not upload.filename:
            raise InputError(
                "choose a file to import", hint="mem0 JSON, a Letta .af, claude-mem, Markdown or a CaBrain export"
            )
        if fmt not in FORMATS:
            raise InputError(f"format: {fmt!r} is not one of {', '.join(FORMATS)}")
        if fmt != "cabrain" and not namespace:
            raise InputError("choose the namespace to import into", hint="one you own, or may write")
        report = await _import(svc, session, upload, fmt, None if fmt == "cabrain" else namespace, chosen)
    except CabrainError as exc:
        error = {"kind": exc.kind, "message": exc.message, "hint": console_hint(exc)}
        named = upload.filename if isinstance(upload, UploadFile) else None
        return await _page(request, svc, session, status=exc.status, chosen=chosen, error=error, filename=named)
    finally:
        if isinstance(upload, UploadFile):
            await upload.close()
    return await _page(request, svc, session, chosen=chosen, report=report, filename=upload.filename)


async def _import(
    svc: Svc, session: Session, upload: UploadFile, fmt: str, namespace: str | None, chosen: dict[str, Any]
) -> dict[str, Any]:
    """The upload saved under its safe name in a folder of its own, imported as the signed-in agent;
    the report as JSON (``kind``: ``import`` or ``restore``)."""
    with tempfile.TemporaryDirectory(prefix="cabrain-console-import-") as folder:
        path = Path(folder) / _upload_name(upload.filename, fmt)
        with path.open("wb") as out:
            await asyncio.to_thread(shutil.copyfileobj, upload.file, out, CHUNK)

        async def run(b: Brain) -> Any:
            return await svc.portable(b).import_file(
                session.agent,
                fmt,
                path,
                namespace,
                origin=upload.filename,
                mirror=chosen["mirror"],
                dry_run=chosen["dry_run"],
            )

        report = (await svc.run(run)).to_json()
    return {**report, "kind": "restore" if fmt == "cabrain" else "import"}


@routes.get("/transfer/export")
async def export(request: Request, svc: Svc, session: Current) -> Response:
    namespace = filters.field(request.query_params, "namespace")
    if not namespace:
        raise InputError("choose a namespace to export")
    name = _upload_name(namespace.replace("/", "_"), "cabrain")[:80]
    return await export_download(svc, session.agent, [namespace], name, headers=HEADERS)
