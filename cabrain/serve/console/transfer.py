"""Import and export in the console (``/console/transfer``): upload another tool's memory file
(mem0, Letta, claude-mem, Markdown) into a namespace, or a CaBrain export (an admin's), with a dry
run and a mirror, and read the import's summary; download a namespace's export as JSON Lines.

Both are the :class:`cabrain.portable.facade.Portable` operations the API's ``/v1/import`` and
``/v1/export`` call, as the signed-in agent: who may import into or export what is the gate's and
the facade's, never this page's. A refusal is shown on the page, with the form as it was sent.
The upload is a multipart form; ``console.js`` sends it with its upload's progress, asking for the
import's progress from the server too (``Accept: application/x-ndjson``): the answer is then the
import's counts as it runs, one JSON event a line, and last the page the form would have answered.
Without the script the form posts as it is and the page comes back when the import is done. An
import whose page goes away finishes all the same."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import Response, StreamingResponse
from starlette.datastructures import UploadFile

from cabrain.brain import Brain
from cabrain.errors import CabrainError, InputError
from cabrain.progress import Events, Progress
from cabrain.serve.console import filters
from cabrain.serve.console.render import HEADERS, page
from cabrain.serve.console.routing import Current, change_form, console_hint, router, text
from cabrain.serve.console.session import Session
from cabrain.serve.deps import Svc
from cabrain.serve.routes.portable import CHUNK, _upload_name, export_download

routes = router()
log = logging.getLogger(__name__)
STREAM = "application/x-ndjson"  # what the page's script asks for: the import's progress, then the page

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
    named = upload.filename if isinstance(upload, UploadFile) else None
    try:
        if not isinstance(upload, UploadFile) or not upload.filename:
            raise InputError(
                "choose a file to import", hint="mem0 JSON, a Letta .af, claude-mem, Markdown or a CaBrain export"
            )
        if fmt not in FORMATS:
            raise InputError(f"format: {fmt!r} is not one of {', '.join(FORMATS)}")
        if fmt != "cabrain" and not namespace:
            raise InputError("choose the namespace to import into", hint="one you own, or may write")
        into = None if fmt == "cabrain" else namespace
        work = _Import(svc, session, await _saved(upload, fmt), fmt, into, chosen, upload.filename)
    except CabrainError as exc:
        return await _refused(request, svc, session, exc, chosen, named)
    finally:
        if isinstance(upload, UploadFile):
            await upload.close()
    if STREAM in request.headers.get("accept", ""):
        return StreamingResponse(_streamed(request, svc, session, work), media_type=STREAM, headers=HEADERS)
    try:
        report = await work.run(None)
    except CabrainError as exc:
        return await _refused(request, svc, session, exc, chosen, named)
    return await _page(request, svc, session, chosen=chosen, report=report, filename=named)


async def _refused(
    request: Request, svc: Svc, session: Session, exc: CabrainError, chosen: dict[str, Any], filename: str | None
) -> Response:
    """The page again, with the form as it was sent and the refusal above it."""
    error = {"kind": exc.kind, "message": exc.message, "hint": console_hint(exc)}
    return await _page(request, svc, session, status=exc.status, chosen=chosen, error=error, filename=filename)


async def _saved(upload: UploadFile, fmt: str) -> Path:
    """The upload saved under its safe name, in a folder of its own (removed when its import ends)."""
    folder = Path(tempfile.mkdtemp(prefix="cabrain-console-import-"))
    path = folder / _upload_name(upload.filename, fmt)
    try:
        with path.open("wb") as out:
            await asyncio.to_thread(shutil.copyfileobj, upload.file, out, CHUNK)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return path


class _Import:
    """One uploaded file's import, as the signed-in agent."""

    def __init__(
        self,
        svc: Svc,
        session: Session,
        path: Path,
        fmt: str,
        namespace: str | None,
        chosen: dict[str, Any],
        filename: str,
    ) -> None:
        self.svc, self.session, self.path, self.fmt, self.namespace = svc, session, path, fmt, namespace
        self.chosen, self.filename = chosen, filename

    async def run(self, progress: Progress | None) -> dict[str, Any]:
        """The import's report as JSON (``kind``: ``import`` or ``restore``); the upload's folder is
        removed when it ends, however it ends."""

        async def run(b: Brain) -> Any:
            return await self.svc.portable(b).import_file(
                self.session.agent,
                self.fmt,
                self.path,
                self.namespace,
                origin=self.filename,
                mirror=self.chosen["mirror"],
                dry_run=self.chosen["dry_run"],
                progress=progress,
            )

        try:
            report = (await self.svc.run(run)).to_json()
        finally:
            await asyncio.to_thread(shutil.rmtree, self.path.parent, True)
        return {**report, "kind": "restore" if self.fmt == "cabrain" else "import"}


# Imports whose page went away while they ran: they finish (nothing is lost), held here meanwhile.
_RUNNING: set[asyncio.Task] = set()


async def _streamed(request: Request, svc: Svc, session: Session, work: _Import) -> AsyncIterator[bytes]:
    """The import's progress as it runs, one JSON event a line (``cabrain.progress.Events``), then
    ``{"status", "html"}``: the page the plain form would have answered, with its status (the
    summary, or the refusal with the form as it was sent)."""
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    task = asyncio.create_task(work.run(Events(queue.put_nowait)))
    _RUNNING.add(task)
    task.add_done_callback(_RUNNING.discard)
    task.add_done_callback(lambda _: queue.put_nowait(None))
    while (event := await queue.get()) is not None:
        yield _line(event)
    try:
        response = await _page(request, svc, session, chosen=work.chosen, report=task.result(), filename=work.filename)
    except CabrainError as exc:
        response = await _refused(request, svc, session, exc, work.chosen, work.filename)
    except Exception:  # said on the page; the log has the traceback
        log.exception("console import failed", extra={"format": work.fmt})
        yield _line({"status": 500, "message": "the import failed on the server; its log says why"})
        return
    yield _line({"status": response.status_code, "html": bytes(response.body).decode()})


def _line(event: dict[str, Any]) -> bytes:
    return json.dumps(event, ensure_ascii=False).encode() + b"\n"


@routes.get("/transfer/export")
async def export(request: Request, svc: Svc, session: Current) -> Response:
    namespace = filters.field(request.query_params, "namespace")
    if not namespace:
        raise InputError("choose a namespace to export")
    name = _upload_name(namespace.replace("/", "_"), "cabrain")[:80]
    return await export_download(svc, session.agent, [namespace], name, headers=HEADERS)
