"""The schema migration runner behind ``cabrain migrate``.

Migrations are plain SQL files in ``cabrain/schema/`` (package data, so a wheel carries them) named
``NNNN_description.sql``, applied in order, forward only. The runner

- holds a transaction-scoped advisory lock, so concurrent runs (two CLIs, many Ray workers)
  serialise and the later ones find nothing left to do;
- applies every pending file in ONE transaction, recording each (name, SHA-256 of the file) in
  ``schema_migrations`` in that same transaction: a failure anywhere leaves the schema exactly
  as it was before the run;
- refuses to run when an applied file was edited since (checksum mismatch) or when the database
  has migrations this version does not know (it was migrated by a newer CaBrain);
- fills template variables (``{{embedding_dim}}``) from validated settings, and records the
  embedding dimension the schema was created for in ``cabrain_settings``.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import asyncpg

from cabrain.clock import utc_today
from cabrain.errors import (
    EmbeddingDimensionMismatch,
    ExtensionMissing,
    MigrationChecksumMismatch,
    MigrationError,
    SchemaError,
)

# Arbitrary constant shared by every CaBrain process: "CaBrain1" as an int64.
ADVISORY_LOCK_KEY = int.from_bytes(b"CaBrain1", "big", signed=True)
FILENAME_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
TEMPLATE_RE = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")
SLEEP_ROLE = "cabrain_sleep"

CREATE_LEDGER = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     integer PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    checksum    text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    duration_ms integer NOT NULL
)
"""
LEDGER_EXISTS = "SELECT to_regclass('public.schema_migrations') IS NOT NULL"
SELECT_APPLIED = "SELECT version, name, checksum FROM schema_migrations ORDER BY version"
INSERT_APPLIED = "INSERT INTO schema_migrations (version, name, checksum, duration_ms) VALUES ($1, $2, $3, $4)"
SETTINGS_EXIST = "SELECT to_regclass('public.cabrain_settings') IS NOT NULL"
SELECT_SETTING = "SELECT value FROM cabrain_settings WHERE key = $1"
UPSERT_SETTING = """
INSERT INTO cabrain_settings (key, value) VALUES ($1, $2)
ON CONFLICT (key) DO NOTHING
"""
ENSURE_PARTITION = "SELECT cabrain_ensure_memories_partition($1::date)"


@dataclass(frozen=True)
class Migration:
    """One file of the schema folder (``cabrain/schema/`` unless ``CABRAIN_SCHEMA_DIR`` says otherwise)."""

    version: int
    name: str
    path: Path
    checksum: str
    text: str

    def render(self, variables: Mapping[str, int]) -> str:
        def fill(match: re.Match[str]) -> str:
            key = match.group(1)
            if key not in variables:
                raise MigrationError(
                    f"{self.name} uses the unknown template variable {{{{{key}}}}}",
                    hint=f"known variables: {', '.join(sorted(variables))}",
                )
            return str(int(variables[key]))

        return TEMPLATE_RE.sub(fill, self.text)


@dataclass
class MigrationReport:
    """What a run did."""

    applied: list[str] = field(default_factory=list)
    already_applied: list[str] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)
    sleep_role: str = ""
    duration_ms: int = 0


@dataclass(frozen=True)
class SchemaState:
    """What the database holds, compared with the files on disk (read-only; see :func:`inspect`)."""

    applied: list[str]
    pending: list[str]
    edited: list[str]
    unknown: list[str]
    embedding_dim: int | None
    embedding_model: str | None

    @property
    def current(self) -> bool:
        return not (self.pending or self.edited or self.unknown)

    @property
    def version(self) -> str:
        return self.applied[-1] if self.applied else "(empty)"


def discover(schema_dir: Path) -> list[Migration]:
    """Read and validate the migration files of ``schema_dir``, in version order."""
    if not schema_dir.is_dir():
        raise SchemaError(
            f"the schema directory {schema_dir} does not exist",
            hint="reinstall CaBrain (its migrations ship in the package, in cabrain/schema/) or set CABRAIN_SCHEMA_DIR",
        )
    migrations: dict[int, Migration] = {}
    for path in sorted(schema_dir.iterdir()):
        if path.suffix != ".sql":
            continue
        match = FILENAME_RE.match(path.name)
        if not match:
            raise SchemaError(
                f"migration file {path.name} is not named NNNN_lowercase_words.sql",
                hint="rename it, e.g. 0002_add_entities.sql",
            )
        version = int(match.group(1))
        if version in migrations:
            raise SchemaError(
                f"two migrations share version {version:04d}: {migrations[version].name} and {path.name}",
                hint="give the newer file the next free number",
            )
        raw = path.read_bytes()
        migrations[version] = Migration(
            version=version,
            name=path.name,
            path=path,
            checksum=hashlib.sha256(raw).hexdigest(),
            text=raw.decode("utf-8"),
        )
    if not migrations:
        raise SchemaError(f"no migrations found in {schema_dir}", hint="check CABRAIN_SCHEMA_DIR")
    return [migrations[v] for v in sorted(migrations)]


def _compare(
    files: list[Migration], applied_rows: list[asyncpg.Record]
) -> tuple[list[str], list[str], list[str], list[Migration]]:
    by_version = {m.version: m for m in files}
    applied, edited, unknown = [], [], []
    for row in applied_rows:
        m = by_version.get(row["version"])
        if m is None or m.name != row["name"]:
            unknown.append(row["name"])
        elif m.checksum != row["checksum"]:
            edited.append(row["name"])
        else:
            applied.append(row["name"])
    done = {row["version"] for row in applied_rows}
    pending = [m for m in files if m.version not in done]
    return applied, edited, unknown, pending


async def _stored_settings(conn: asyncpg.Connection) -> tuple[int | None, str | None]:
    if not await conn.fetchval(SETTINGS_EXIST):
        return None, None
    dim = await conn.fetchval(SELECT_SETTING, "embedding_dim")
    model = await conn.fetchval(SELECT_SETTING, "embedding_model")
    return (int(dim) if dim is not None else None), model


async def inspect(conn: asyncpg.Connection, schema_dir: Path) -> SchemaState:
    """Compare the database with the files on disk, changing nothing."""
    files = discover(schema_dir)
    rows = await conn.fetch(SELECT_APPLIED) if await conn.fetchval(LEDGER_EXISTS) else []
    applied, edited, unknown, pending = _compare(files, rows)
    dim, model = await _stored_settings(conn)
    return SchemaState(
        applied=applied,
        pending=[m.name for m in pending],
        edited=edited,
        unknown=unknown,
        embedding_dim=dim,
        embedding_model=model,
    )


async def require_current(conn: asyncpg.Connection, schema_dir: Path) -> SchemaState:
    """:func:`inspect`, raising :class:`SchemaError` unless every migration is applied as on disk."""
    state = await inspect(conn, schema_dir)
    if not state.current:
        raise SchemaError(
            f"the database schema is not current (pending: {', '.join(state.pending) or '-'}, "
            f"edited: {', '.join(state.edited) or '-'}, unknown: {', '.join(state.unknown) or '-'})",
            hint="run: cabrain migrate",
        )
    return state


def check_embedding_dim(state: SchemaState, dim: int, model: str) -> None:
    """Raise unless the configured model fits the vectors the schema was created for."""
    if state.embedding_dim is not None and state.embedding_dim != dim:
        raise EmbeddingDimensionMismatch(
            f"the database stores {state.embedding_dim}-dimensional embeddings "
            f"(model {state.embedding_model or 'unknown'}), but the configured model {model} "
            f"produces {dim}-dimensional ones",
            hint=(
                f"set CABRAIN_EMBEDDING_MODEL back to {state.embedding_model or 'the original model'}, "
                "or point CABRAIN_DATABASE_URL / CABRAIN_HOME at a new database"
            ),
        )


def _raise_for_drift(edited: list[str], unknown: list[str]) -> None:
    if edited:
        raise MigrationChecksumMismatch(
            f"applied migration(s) edited since they ran: {', '.join(edited)}",
            hint="restore the original file(s) (git checkout cabrain/schema/) and put changes in a new numbered file",
        )
    if unknown:
        raise SchemaError(
            f"the database has migration(s) this CaBrain does not know: {', '.join(unknown)}",
            hint="it was migrated by a newer or different CaBrain; upgrade this installation",
        )


async def migrate(
    conn: asyncpg.Connection,
    schema_dir: Path,
    *,
    embedding_dim: int,
    embedding_model: str,
    today: date | None = None,
    months_ahead: int = 3,
) -> MigrationReport:
    """Bring the schema up to date (see the module docstring). Safe to run concurrently."""
    started = time.perf_counter()
    files = discover(schema_dir)
    report = MigrationReport()
    variables = {"embedding_dim": embedding_dim}
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", ADVISORY_LOCK_KEY)
        await conn.execute(CREATE_LEDGER)
        applied, edited, unknown, pending = _compare(files, await conn.fetch(SELECT_APPLIED))
        _raise_for_drift(edited, unknown)
        stored_dim, stored_model = await _stored_settings(conn)
        check_embedding_dim(SchemaState(applied, [], [], [], stored_dim, stored_model), embedding_dim, embedding_model)
        report.already_applied = applied
        for m in pending:
            sql = m.render(variables)
            t0 = time.perf_counter()
            try:
                await conn.execute(sql)
            except asyncpg.InsufficientPrivilegeError as exc:
                if "extension" not in str(exc):
                    raise MigrationError(
                        f"migration {m.name} failed: {_describe(exc, sql)}; nothing of this run was applied",
                        hint="connect as the owner of the database (or a superuser) to migrate",
                    ) from exc
                raise ExtensionMissing(
                    f"migration {m.name} could not create an extension: {exc}; nothing was applied",
                    hint="have a superuser run CREATE EXTENSION vector; in this database, then migrate again",
                ) from exc
            except asyncpg.PostgresError as exc:
                raise MigrationError(
                    f"migration {m.name} failed: {_describe(exc, sql)}; nothing of this run was applied",
                    hint=f"fix {m.path} (if it is yours) and run cabrain migrate again",
                ) from exc
            await conn.execute(INSERT_APPLIED, m.version, m.name, m.checksum, int((time.perf_counter() - t0) * 1000))
            report.applied.append(m.name)
        await conn.execute(UPSERT_SETTING, "embedding_dim", str(embedding_dim))
        await conn.execute(UPSERT_SETTING, "embedding_model", embedding_model)
        report.partitions = await ensure_partitions(conn, today or utc_today(), months_ahead=months_ahead)
        report.sleep_role = await ensure_sleep_role(conn)
    report.duration_ms = int((time.perf_counter() - started) * 1000)
    return report


async def ensure_partitions(
    conn: asyncpg.Connection, today: date, *, months_back: int = 1, months_ahead: int = 3
) -> list[str]:
    """Create the monthly ``memories`` partitions around ``today`` (a UTC date; idempotent)."""
    first = date(today.year, today.month, 1)
    names = []
    async with conn.transaction():
        for offset in range(-months_back, months_ahead + 1):
            year, month = divmod(first.month - 1 + offset, 12)
            names.append(await conn.fetchval(ENSURE_PARTITION, date(first.year + year, month + 1, 1)))
    return names


SLEEP_ROLE_STATE = """
SELECT
    (SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user) AS can_create,
    EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1) AS role_exists,
    current_user AS me
"""
SLEEP_GRANTS = f"""
GRANT USAGE ON SCHEMA public TO {SLEEP_ROLE};
GRANT SELECT ON ALL TABLES IN SCHEMA public TO {SLEEP_ROLE};
GRANT INSERT, UPDATE ON memories, memory_ids, entities, memory_entities, memory_events,
    memory_terms, bm25_terms, bm25_namespaces, memory_chunks TO {SLEEP_ROLE};
-- memory_entities: alias merges; cold_indexes: an index rebuilt
GRANT DELETE ON memories, memory_terms, memory_chunks, memory_entities, cold_indexes TO {SLEEP_ROLE};
GRANT UPDATE (memory_count, chunk_count) ON namespaces TO {SLEEP_ROLE};
GRANT INSERT, UPDATE ON memory_sources, cold_batches, cold_indexes, cold_index_terms, sleep_runs, sleep_steps, sleep_watermarks, judgments
    TO {SLEEP_ROLE};
GRANT EXECUTE ON FUNCTION cabrain_ensure_memories_partition(date) TO {SLEEP_ROLE};
GRANT EXECUTE ON FUNCTION cabrain_maintain(text, text) TO {SLEEP_ROLE};
REVOKE ALL ON agent_keys, console_sessions, capture_inbox FROM {SLEEP_ROLE};
"""


async def ensure_sleep_role(conn: asyncpg.Connection) -> str:
    """Create the ``cabrain_sleep`` role for the offline plane where allowed, and grant it access.

    Returns a one-line description of the outcome, for the CLI and ``doctor``. Runs inside the
    caller's transaction (savepoints keep a refusal from aborting it).
    """
    state = await conn.fetchrow(SLEEP_ROLE_STATE, SLEEP_ROLE)
    if not state["role_exists"]:
        if not state["can_create"]:
            return (
                f"role {SLEEP_ROLE} not created: {state['me']} may not create roles; sleep jobs will "
                f"connect as {state['me']}. To separate them, have a superuser run "
                f"'CREATE ROLE {SLEEP_ROLE} LOGIN PASSWORD ...' and run cabrain migrate again"
            )
        try:
            async with conn.transaction():
                await conn.execute(f"CREATE ROLE {SLEEP_ROLE} LOGIN")
        except (asyncpg.DuplicateObjectError, asyncpg.UniqueViolationError):
            pass  # another database on this server (or a concurrent run) created it
    try:
        async with conn.transaction():
            await conn.execute(SLEEP_GRANTS)
    except asyncpg.InsufficientPrivilegeError as exc:
        return f"role {SLEEP_ROLE} exists but could not be granted access: {exc}"
    return f"role {SLEEP_ROLE} ready"


def _describe(exc: asyncpg.PostgresError, sql: str) -> str:
    text = str(exc)
    position = getattr(exc, "position", None)
    if position:
        line = sql.count("\n", 0, int(position) - 1) + 1
        text += f" (line {line})"
    detail = getattr(exc, "detail", None)
    if detail:
        text += f" - {detail}"
    return text
