"""``cabrain doctor``: check every part CaBrain depends on and say how to fix what is wrong.

Checks run in dependency order; when one fails, those that need it are reported as skipped
rather than failing again with a confusing message. Doctor changes nothing in the database.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import asyncpg

from cabrain.client import AsyncClient
from cabrain.errors import CabrainError, EmbeddingDimensionMismatch
from cabrain.providers.cache import probe_redis
from cabrain.providers.cold_store import probe
from cabrain.providers.embedders import load_embedder
from cabrain.providers.rerankers import load_reranker
from cabrain.settings import Settings, describe_unknown
from cabrain.store import db as db_sql
from cabrain.store import migrations
from cabrain.store import sleep as sleep_sql
from cabrain.store.db import check_server, connect, describe_target, hot_tier, server_facts

API_TIMEOUT_S = 10.0  # how long each of the API's answers may take (a busy machine answers slowly)


class Status(str, enum.Enum):
    OK = "ok"
    WARN = "warn"
    FAIL = "FAIL"
    SKIP = "skip"


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    hint: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        return {**asdict(self), "status": self.status.value}


def _failed(name: str, exc: CabrainError) -> Check:
    return Check(name, Status.FAIL, exc.message, exc.hint)


async def run_doctor(settings: Settings, *, unknown: Sequence[tuple[str, str | None]] = ()) -> list[Check]:
    """Run every check; never raises for a failing dependency (it becomes a FAIL row). ``unknown``:
    the ``CABRAIN_*`` variables of the environment that no setting reads (see settings.unknown_variables)."""
    embed_check, model_dim = await _check_embedder(settings)
    if unknown:
        settings_check = Check(
            "settings",
            Status.WARN,
            f"home {settings.home}; {describe_unknown(list(unknown))}",
            "fix or remove the variable(s): CaBrain ignores them",
        )
    else:
        settings_check = Check("settings", Status.OK, f"home {settings.home}")
    checks: list[Check] = [settings_check, embed_check]
    target = describe_target(settings)
    try:
        with hot_tier(settings) as dsn:
            checks += await _database_checks(settings, dsn, target, model_dim)
    except CabrainError as exc:
        checks.append(Check("database", Status.FAIL, f"{target}: {exc.message}", exc.hint))
    checks.append(await asyncio.to_thread(_check_reranker, settings))
    checks.append(await asyncio.to_thread(_check_local_models, settings))
    checks.append(await _check_redis(settings))
    checks.append(await asyncio.to_thread(_check_cold_store, settings))
    checks.append(await _check_api(settings))
    return checks


async def _check_embedder(settings: Settings) -> tuple[Check, int | None]:
    started = time.perf_counter()
    try:
        embedder = await asyncio.to_thread(load_embedder, settings)
        vector = await embedder.embed_query("doctor: هل يعمل النموذج؟ does the model work?")
    except CabrainError as exc:
        return _failed("embedding model", exc), None
    if len(vector) != embedder.dim:
        return (
            Check(
                "embedding model",
                Status.FAIL,
                f"{embedder.name} reports {embedder.dim} dimensions but returned {len(vector)}",
            ),
            None,
        )
    ms = (time.perf_counter() - started) * 1000
    detail = f"{embedder.name}, {embedder.dim}-dim, loaded offline in {ms:.0f} ms"
    return Check("embedding model", Status.OK, detail), embedder.dim


async def _database_checks(settings: Settings, dsn: str, target: str, model_dim: int | None) -> list[Check]:
    checks: list[Check] = []
    try:
        conn = await connect(dsn, timeout=settings.db_connect_timeout_s)
    except CabrainError as exc:
        return [Check("database", Status.FAIL, f"{target}: {exc.message}", exc.hint)]
    try:
        facts = await server_facts(conn)
        checks.append(Check("database", Status.OK, f"{target} (database {facts.database}, user {facts.user_name})"))
        try:
            check_server(facts)
        except CabrainError as exc:
            checks.append(_failed("postgresql + pgvector", exc))
            return checks
        vector = facts.vector_installed or f"{facts.vector_available} (available, not yet created)"
        checks.append(Check("postgresql + pgvector", Status.OK, f"PostgreSQL {facts.version}, pgvector {vector}"))
        try:
            state = await migrations.inspect(conn, settings.schema_dir)
        except CabrainError as exc:
            checks.append(_failed("schema", exc))
            return checks
        checks.append(_schema_check(state))
        if state.embedding_dim is not None and model_dim is not None:
            try:
                migrations.check_embedding_dim(state, model_dim, settings.embedding_model)
                checks.append(Check("embedding dimension", Status.OK, f"schema and model agree on {model_dim}"))
            except EmbeddingDimensionMismatch as exc:
                checks.append(_failed("embedding dimension", exc))
        if state.applied:
            checks += await _hot_tier_facts(conn, settings.sleep_stuck_after_s)
    finally:
        await conn.close()
    return checks


def _schema_check(state: migrations.SchemaState) -> Check:
    if state.edited:
        return Check(
            "schema",
            Status.FAIL,
            f"applied migration(s) edited since: {', '.join(state.edited)}",
            "restore the original file(s) (git checkout cabrain/schema/); put changes in a new numbered file",
        )
    if state.unknown:
        return Check(
            "schema",
            Status.FAIL,
            f"database has migration(s) unknown here: {', '.join(state.unknown)}",
            "upgrade this CaBrain installation",
        )
    if state.pending:
        return Check(
            "schema",
            Status.FAIL,
            f"{len(state.applied)} applied, {len(state.pending)} pending ({', '.join(state.pending)})",
            "run: cabrain migrate",
        )
    return Check(
        "schema",
        Status.OK,
        f"{state.version} ({len(state.applied)} migrations), embeddings {state.embedding_dim}-dim",
    )


async def _hot_tier_facts(conn: asyncpg.Connection, stuck_after_s: float) -> list[Check]:
    facts = await conn.fetchrow(db_sql.PARTITION_FACTS)
    partition = Check(
        "partitions",
        Status.OK if facts["in_default"] == 0 else Status.WARN,
        f"{facts['monthly']} monthly, {facts['in_default']} rows in the default partition",
        None if facts["in_default"] == 0 else "run cabrain migrate to create their months' partitions",
    )
    if await conn.fetchval(db_sql.SLEEP_ROLE_EXISTS):
        role = Check("sleep role", Status.OK, "cabrain_sleep exists")
    else:
        role = Check(
            "sleep role",
            Status.WARN,
            "cabrain_sleep does not exist; sleep jobs will use the main role",
            "have a superuser run CREATE ROLE cabrain_sleep LOGIN, then cabrain migrate",
        )
    return [partition, role, await _sleep_check(conn, stuck_after_s)]


async def _sleep_check(conn: asyncpg.Connection, stuck_after_s: float) -> Check:
    if not await conn.fetchval(db_sql.SLEEP_TABLES_EXIST):
        return Check("sleep cycle", Status.SKIP, "schema without the sleep tables")
    last = await conn.fetchrow(sleep_sql.LAST_SLEEP)
    if last is None:
        return Check("sleep cycle", Status.OK, "no run yet", "schedule it: README, 'Every night'")
    hours = last["age"].total_seconds() / 3600
    detail = f"last run {last['status']}, {hours:.1f} h ago"
    if last["status"] == "running" and last["age"].total_seconds() > stuck_after_s:
        return Check(
            "sleep cycle",
            Status.FAIL,
            f"run {last['id']} has been running for {hours:.1f} h (CABRAIN_SLEEP_STUCK_AFTER_S is "
            f"{stuck_after_s:g} s)" + (f": {last['note']}" if last["note"] else ""),
            f"see its steps (GET /v1/sleep/runs/{last['id']}, the console's Sleep page); cancel it there or with "
            f"POST /v1/sleep/runs/{last['id']}/cancel (a run whose driver is gone ends at once)",
        )
    if last["open_batches"]:
        return Check(
            "sleep cycle",
            Status.WARN,
            f"{detail}; {last['open_batches']} demotion batch(es) unfinished",
            "run cabrain sleep --steps demote: it finishes them without losing or duplicating anything",
        )
    if last["status"] in ("failed", "partial"):
        return Check("sleep cycle", Status.WARN, detail, "see sleep_steps.error for that run, then run cabrain sleep")
    if last["status"] == "done" and hours > 48:
        return Check("sleep cycle", Status.WARN, detail, "the nightly schedule seems to have stopped")
    return Check("sleep cycle", Status.OK, detail)


def _check_reranker(settings: Settings) -> Check:
    try:
        reranker = load_reranker(settings)
    except CabrainError as exc:
        return _failed("reranker", exc)
    if reranker is None:
        return Check(
            "reranker",
            Status.OK,
            "off: no reranker configured, recall ranks by fusion alone "
            "(set CABRAIN_RERANKER_PROVIDER and CABRAIN_RERANKER_MODEL to enable one)",
        )
    return Check("reranker", Status.OK, f"{reranker.name} loaded")


async def _check_redis(settings: Settings) -> Check:
    if settings.redis_url is None:
        return Check("redis (L1 cache)", Status.OK, "not configured: recall runs without the L1 cache")
    try:
        version = await probe_redis(settings.redis_url.get_secret_value())
    except CabrainError as exc:
        return _failed("redis (L1 cache)", exc)
    return Check("redis (L1 cache)", Status.OK, f"Redis {version} reachable")


def _check_local_models(settings: Settings) -> Check:
    """``CABRAIN_LOCAL_MODELS``: llama.cpp's server is installed, each model's weights and template
    are found (weights still to be assembled from a package's parts are said so, not assembled)."""
    from cabrain.localmodels import sources

    name = "local models"
    if not settings.local_models:
        return Check(name, Status.OK, "none configured (CABRAIN_LOCAL_MODELS): workflows use registered agents only")
    try:
        import xllamacpp  # noqa: F401 - what serves them
    except ImportError:
        return Check(name, Status.FAIL, "xllamacpp (llama.cpp's server) is not installed", "pip install xllamacpp")
    found = []
    for model in settings.local_models:
        try:
            path = sources.weights(model, settings.resolved_local_models_dir, assemble=False)
            sources.template(model)
        except CabrainError as exc:
            return _failed(name, exc)
        if path is None:
            found.append(f"{model.name or model.source} (assembled from its package's parts at the first start)")
        else:
            found.append(f"{sources.default_name(model, path)} ({path.name}, {path.stat().st_size / 2**20:,.0f} MiB)")
    return Check(name, Status.OK, f"{len(found)} served by cabrain up: " + "; ".join(found))


def _check_cold_store(settings: Settings) -> Check:
    try:
        return Check("cold tier (iceberg)", Status.OK, probe(settings))
    except CabrainError as exc:
        return _failed("cold tier (iceberg)", exc)


async def _check_api(settings: Settings) -> Check:
    """The service at ``CABRAIN_API_URL`` answers (``/v1/health``), is ready (``/v1/ready``) and,
    with ``CABRAIN_API_KEY`` set, accepts the key (``/v1/whoami``)."""
    if not settings.api_url:
        return Check(
            "api", Status.OK, "not configured (CABRAIN_API_URL unset): the commands work on the hot tier directly"
        )
    url = settings.api_url.rstrip("/")
    key = settings.api_key.get_secret_value() if settings.api_key else None
    start_it = "start it (cabrain up prints the URL and key to export), or correct CABRAIN_API_URL"
    async with AsyncClient(url, key, timeout_s=API_TIMEOUT_S) as client:
        try:
            await client.health()
        except CabrainError as exc:
            return Check("api", Status.FAIL, f"no answer from {url}/v1/health: {exc.message}", start_it)
        try:
            ready = await client.ready()
        except CabrainError as exc:
            return Check("api", Status.FAIL, f"{url}/v1/ready: {exc.message}", start_it)
        if not ready:
            return Check(
                "api",
                Status.FAIL,
                f"{url} answers but is not ready (models loading, or the database unreachable)",
                "wait for cabrain up to print that it is up; GET /v1/ready says why it is not",
            )
        if key is None:
            return Check(
                "api",
                Status.WARN,
                f"{url} answers and is ready; CABRAIN_API_KEY is not set",
                "export CABRAIN_API_KEY (cabrain up prints the line; an admin makes keys: cabrain agents key NAME)",
            )
        try:
            me = await client.whoami()
        except CabrainError as exc:
            hint = exc.hint_for("cli") or "ask an admin for a new key (cabrain agents key NAME)"
            return Check("api", Status.FAIL, f"{url} refused CABRAIN_API_KEY: {exc.message}", hint)
    admin = "an admin" if me.get("is_admin") else "not an admin"
    return Check("api", Status.OK, f"{url} answers and is ready; the key is {me.get('agent_id')!r}'s ({admin})")


def render(checks: list[Check]) -> str:
    """A plain-text table, one row per check, hints indented under failing rows."""
    width = max(len(c.name) for c in checks)
    lines = []
    for c in checks:
        lines.append(f"{c.name:<{width}}  {c.status.value:<4}  {c.detail}")
        if c.hint and c.status in (Status.FAIL, Status.WARN):
            lines.append(f"{'':<{width}}        fix: {c.hint}")
    return "\n".join(lines)
