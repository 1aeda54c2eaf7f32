"""The Apache Iceberg cold tier: catalog and warehouse from settings.

Embedded default: a SQL catalog on SQLite and a local warehouse, both under ``<home>/cold``.
Production: ``CABRAIN_COLD_CATALOG_URI=postgresql+psycopg2://...`` and an ``s3://`` warehouse on
S3-compatible storage (``CABRAIN_COLD_S3_*``). Demotion and archive recall build on
:func:`open_catalog`.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from cabrain.errors import ColdStoreError
from cabrain.settings import Settings
from cabrain.settings import redact_url as _redact

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog

CATALOG_NAME = "cabrain"
# Processes opening a fresh catalog at once race to create its tables; the losers retry.
_INIT_RACE = ("already exists", "duplicate key")
_INIT_ATTEMPTS = 6


def catalog_properties(settings: Settings) -> dict[str, str]:
    """pyiceberg catalog properties for the configured cold tier."""
    props = {
        "uri": settings.resolved_cold_catalog_uri,
        "warehouse": settings.resolved_cold_warehouse,
    }
    if settings.cold_s3_endpoint:
        props["s3.endpoint"] = settings.cold_s3_endpoint
    if settings.cold_s3_region:
        props["s3.region"] = settings.cold_s3_region
    if settings.cold_s3_access_key:
        props["s3.access-key-id"] = settings.cold_s3_access_key.get_secret_value()
    if settings.cold_s3_secret_key:
        props["s3.secret-access-key"] = settings.cold_s3_secret_key.get_secret_value()
    return props


_UMASK = threading.RLock()  # re-entered: a table opened (and made) inside a commit


@contextlib.contextmanager
def private_files() -> Iterator[None]:
    """Files and directories made meanwhile (by pyarrow, pyiceberg, SQLite) are the service user's
    alone: mode 0600 and 0700. (The umask is the process's: the lock keeps two writers from
    restoring each other's; anything else made meanwhile is only more private.)"""
    with _UMASK:
        previous = os.umask(0o077)
        try:
            yield
        finally:
            os.umask(previous)


def make_private(root: Path) -> None:
    """``root`` and everything under it: no access for group or others (an older cold tier's files)."""
    for path in [root, *root.rglob("*")]:
        try:
            mode = stat.S_IMODE(path.lstat().st_mode)
            if mode & 0o077 and not path.is_symlink():
                path.chmod(mode & 0o700)
        except FileNotFoundError:
            continue


def local_cold_dir(settings: Settings) -> Path | None:
    """The local folder of the embedded default's catalog or warehouse (None when both are elsewhere)."""
    return settings.cold_dir if settings.cold_catalog_uri is None or settings.cold_warehouse is None else None


def open_catalog(settings: Settings) -> SqlCatalog:
    """Open the Iceberg SQL catalog (creating the local directories of the embedded default,
    private to this user: the cold tier keeps every memory's text)."""
    local = local_cold_dir(settings)
    if local is not None:
        with private_files():
            local.mkdir(parents=True, exist_ok=True)
            if settings.cold_warehouse is None:
                (local / "warehouse").mkdir(exist_ok=True)
        if stat.S_IMODE(local.stat().st_mode) & 0o077:  # made by an older CaBrain: close it, once
            make_private(local)
    try:
        from pyiceberg.catalog.sql import SqlCatalog  # heavy (SQLAlchemy): loaded with the cold tier

        for attempt in range(1, _INIT_ATTEMPTS + 1):
            try:
                with private_files():
                    return SqlCatalog(CATALOG_NAME, **catalog_properties(settings))
            except Exception as exc:
                if attempt == _INIT_ATTEMPTS or not any(m in str(exc) for m in _INIT_RACE):
                    raise
                time.sleep(0.05 * attempt)  # another process is creating the catalog's tables
        raise AssertionError("unreachable")
    except ImportError as exc:
        raise ColdStoreError(
            f"the cold-tier catalog driver is missing: {exc}",
            hint="pip install 'cabrain[postgres-catalog]' for a PostgreSQL catalog",
        ) from exc
    except Exception as exc:  # SQLAlchemy and pyiceberg raise many types here
        raise ColdStoreError(
            f"cannot open the Iceberg catalog at {_redact(settings.resolved_cold_catalog_uri)}: {exc}",
            hint="check CABRAIN_COLD_CATALOG_URI",
        ) from exc


def probe(settings: Settings) -> str:
    """Open the catalog and write + remove a probe file in the warehouse; describe the result."""
    catalog = open_catalog(settings)
    try:
        namespaces = catalog.list_namespaces()
    except Exception as exc:
        raise ColdStoreError(
            f"the Iceberg catalog does not answer: {exc}", hint="check CABRAIN_COLD_CATALOG_URI"
        ) from exc
    warehouse = settings.resolved_cold_warehouse.rstrip("/")
    probe_path = f"{warehouse}/.cabrain-probe-{uuid.uuid4().hex}"
    try:
        from pyiceberg.io import load_file_io  # heavy: loaded with the cold tier

        io = load_file_io(catalog_properties(settings), probe_path)
        with io.new_output(probe_path).create(overwrite=True) as out:
            out.write(b"ok")
        io.delete(probe_path)
    except Exception as exc:
        raise ColdStoreError(
            f"the Iceberg warehouse {warehouse} is not writable: {exc}",
            hint="check CABRAIN_COLD_WAREHOUSE and the CABRAIN_COLD_S3_* credentials",
        ) from exc
    return f"catalog {_redact(settings.resolved_cold_catalog_uri)} ({len(namespaces)} namespaces), warehouse {warehouse} writable"


__all__ = ["catalog_properties", "open_catalog", "probe"]
