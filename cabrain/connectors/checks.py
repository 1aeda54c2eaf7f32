"""What is checked when a connector is added, before it is stored.

- :func:`local_path`: a local connector (``folder``, ``slack-export``, ``whatsapp``) added through
  the API names a path under ``CABRAIN_CONNECTOR_ROOTS``, reached from its root without a link (the
  operator's command line may name any path);
- :func:`reach`: the source itself, reached once (:meth:`Source.check
  <cabrain.connectors.base.Source.check>`): the path there and readable, the credential accepted,
  the project or folder visible. A refusal (a path not there, a credential or project refused) is
  :class:`~cabrain.errors.SourceRefused` or :class:`~cabrain.errors.SourceAuthRefused` (422: the
  request is wrong); a source unreachable or failing is its own error (502); each names the
  connector not added and how to add one that is not reachable yet (``--no-check``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cabrain.connectors.base import Source
from cabrain.connectors.retry import Retry
from cabrain.errors import AccessDenied, SourceAuthError, SourceAuthRefused, SourceError, SourceRefused
from cabrain.localfiles import LinkRefused, open_confined

__all__ = ["TRIES", "UNCHECKED_HINT", "local_path", "reach"]

UNCHECKED_HINT = 'or, for a source not reachable from here yet, add it unchecked (--no-check; over HTTP "check": false)'
TRIES = 2  # a source checked while it is added is tried twice at most, not with a sync's full retries


def local_path(kind: str, config: Mapping[str, Any], roots: Sequence[Path] | None) -> None:
    """A local connector's path lies under ``roots`` (None: the operator's, any path)."""
    if roots is None:
        return
    path = Path(str(config["path"])).expanduser().resolve()
    if not roots:
        raise AccessDenied(
            f"a {kind} connector reads files on the server, and no folder is open to connectors added this way",
            hint='the operator sets CABRAIN_CONNECTOR_ROOTS (JSON, e.g. ["/srv/docs"]), or adds it with the '
            "command line on the server",
        )
    if not any(path == root or root in path.parents for root in roots):
        shown = ", ".join(str(r) for r in roots)
        raise AccessDenied(f"{path} is outside the folders connectors may read ({shown})")
    try:  # reached from its root without a link, as every sync will read it
        os.close(open_confined(str(config["path"]), roots))
    except LinkRefused as exc:
        raise AccessDenied(str(exc), hint="name the folder itself, not a link to it") from None
    except OSError:
        pass  # not there: the source's check says so, or (added unchecked) each sync looks again


async def reach(name: str, build: Callable[[Retry], Source], retry: Retry) -> None:
    """Build the source (with at most :data:`TRIES` tries of each request) and check it, in a
    worker thread; a failure is raised again as the same error, naming the connector not added."""
    retry = dataclasses.replace(retry, attempts=min(retry.attempts, TRIES))

    def check() -> None:
        source = build(retry)
        try:
            source.check()
        finally:
            source.close()

    try:
        await asyncio.to_thread(check)
    except SourceError as exc:
        # what the config names was refused (a 4xx, a path not there): the request is wrong (422);
        # the source unreachable, or failing (5xx): as a sync would say it (502)
        kind: type[SourceError] = type(exc)
        if isinstance(exc, SourceAuthError):
            kind = SourceAuthRefused
        elif not exc.transient:
            kind = SourceRefused
        raise kind(
            f"connector {name!r} was not added: {exc.message}",
            hint=f"{exc.hint}; {UNCHECKED_HINT}" if exc.hint else UNCHECKED_HINT,
            status_code=exc.status_code,
        ) from exc
