"""Export and import (``/v1/export``, ``/v1/import``): a namespace's owner exports it as JSON Lines;
an agent imports another tool's file into a namespace it may write; an admin imports a CaBrain
export. Each is one call of :class:`cabrain.portable.facade.Portable` over the replica's engine.
A body is limited by ``CABRAIN_API_MAX_BODY_BYTES``: larger imports run on the server's command line."""

from __future__ import annotations

import re
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import StreamingResponse

from cabrain.serve.deps import Caller, Svc
from cabrain.serve.routing import router

routes = router(tags=["export and import"])

CHUNK = 1 << 20


@routes.get(
    "/v1/export",
    summary="Export namespaces you own as JSON Lines (memories, versions, entities, links, grants)",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}, "description": "One JSON record per line."}},
)
async def export(
    svc: Svc,
    p: Caller,
    namespace: Annotated[list[str], Query(min_length=1)],
    with_embeddings: bool = False,
) -> StreamingResponse:
    name = "-".join(namespace).replace("/", "_")[:80]
    return await export_download(svc, p.agent_id, namespace, name, with_embeddings=with_embeddings)


async def export_download(
    svc: Svc,
    agent: str,
    namespaces: list[str],
    name: str,
    *,
    with_embeddings: bool = False,
    headers: dict[str, str] | None = None,
) -> StreamingResponse:
    """The export of ``namespaces`` as ``agent`` (written to a spool file first, so a refusal is an
    error answer, never a cut download), streamed as ``cabrain-<name>.jsonl``; the API's route and
    the console's download both."""
    spool = tempfile.TemporaryFile("w+", encoding="utf-8")
    try:
        await svc.run(lambda b: svc.portable(b).export(agent, namespaces, spool, with_embeddings=with_embeddings))
    except BaseException:
        spool.close()
        raise
    spool.seek(0)

    async def body() -> AsyncIterator[bytes]:
        try:
            while text := spool.read(CHUNK):
                yield text.encode("utf-8")
        finally:
            spool.close()

    disposition = {"Content-Disposition": f'attachment; filename="cabrain-{name}.jsonl"'}
    return StreamingResponse(body(), media_type="application/x-ndjson", headers={**(headers or {}), **disposition})


@routes.post("/v1/import", summary="Import a file: a CaBrain export (admin), or mem0, claude-mem, letta, markdown")
async def import_file(
    request: Request,
    svc: Svc,
    p: Caller,
    format: Annotated[str, Query(description="cabrain | mem0 | claude-mem | letta | markdown")],
    namespace: str | None = None,
    visibility: str = "team",
    decide: bool = True,
    filename: Annotated[
        str | None,
        Query(
            max_length=1000,
            description="where the file is at its origin (the client sends its path): what messages call it, "
            "and the source its records' keys are scoped by unless `source` names one",
        ),
    ] = None,
    source: Annotated[
        str | None,
        Query(max_length=1000, description="what the records' keys are scoped by (default: the file's name)"),
    ] = None,
    mirror: Annotated[bool, Query(description="forget the records the source no longer holds")] = False,
    dry_run: Annotated[bool, Query(description="say what would be done, writing nothing")] = False,
) -> dict[str, Any]:
    name = _upload_name(filename, format)
    with tempfile.TemporaryDirectory(prefix="cabrain-import-") as folder:
        path = Path(folder) / name
        with path.open("wb") as f:
            async for piece in request.stream():
                f.write(piece)
        report = await svc.run(
            lambda b: svc.portable(b).import_file(
                p.agent_id,
                format,
                path,
                namespace,
                visibility=visibility,
                decide=decide,
                source=source,
                origin=filename or name,
                mirror=mirror,
                dry_run=dry_run,
            )
        )
    return report.to_json()


def _upload_name(filename: str | None, fmt: str) -> str:
    """The uploaded file's name, to save it under (a Markdown file's name says what it is): its last
    part, in safe characters; ``upload`` when none is given."""
    name = re.sub(r"[^\w.\-]+", "_", (filename or "").replace("\\", "/").rsplit("/", 1)[-1]).strip("._")
    return name[:120] or ("upload.md" if fmt == "markdown" else "upload")
