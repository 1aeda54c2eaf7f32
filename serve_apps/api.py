"""The HTTP ingress: CaBrain's versioned API (``/v1``) as a Serve deployment.

Each ingress replica holds one :class:`cabrain.brain.Brain` (a connection pool to the shared hot
tier, the L1 cache) whose embedder and reranker are handles to the model deployments. Every
request carries an API key (``Authorization: Bearer cbk_...``) that names the agent it acts as;
scoping is then enforced in SQL exactly as in process.

Status codes: 400 malformed, 401 no or bad key, 403 outside one's grants (or not an admin),
404 unknown or unreadable, 409 exists already, 413 body too large, 422 well-formed JSON of the
wrong shape, 503 not ready / a dependency is down. Every error body is
``{"error": {"type", "message", "hint"}}``, the hint in this API's terms; with ``"fix": {"action",
"params"}`` too when the fix is an action the caller takes (:mod:`cabrain.fixes`), which the client,
the CLI and ``cabrain mcp`` word again for their own callers.
"""

# No ``from __future__ import annotations``: FastAPI must see the route-local dependency types.
import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import asyncpg
from fastapi import Depends, FastAPI, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from ray import serve
from starlette.exceptions import HTTPException as StarletteHTTPException

from cabrain import __version__, identity
from cabrain.brain import Brain
from cabrain.errors import (
    AccessDenied,
    AlreadyExists,
    CabrainError,
    CacheError,
    ColdStoreError,
    ConfigError,
    ConflictError,
    DatabaseError,
    DatabaseUnreachable,
    EmbedderError,
    InputError,
    NotFound,
    ServiceError,
    Unauthenticated,
)
from cabrain.fixes import Fix
from cabrain.identity import Principal
from cabrain.providers.llm_calls import ModelCallError
from cabrain.redact import redact_deep
from cabrain.settings import load_settings
from cabrain.types import (
    ArchiveResult,
    EntityPage,
    EntityWithMemories,
    MemoryWithHistory,
    RecallQuery,
    RecallResult,
    RetainResult,
    archive_to_dict,
    entity_memories_to_dict,
    entity_page_to_dict,
    history_to_dict,
    jsonable,
    memory_to_dict,
    recall_to_dict,
    retain_to_dict,
)
from serve_apps import schemas
from serve_apps.metrics import IngressMetrics, collect
from serve_apps.models import (
    LocalQueries,
    RemoteEmbedder,
    RemoteReranker,
    call_with_retry,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

STATUS: list[tuple[type[CabrainError], int, str]] = [
    (Unauthenticated, 401, "unauthenticated"),
    (AccessDenied, 403, "forbidden"),
    (NotFound, 404, "not_found"),
    (AlreadyExists, 409, "already_exists"),
    (ConflictError, 409, "conflict"),
    (InputError, 400, "bad_request"),
    (EmbedderError, 503, "model_unavailable"),
    (DatabaseError, 503, "database_unavailable"),
    (CacheError, 503, "cache_unavailable"),
    (ColdStoreError, 503, "cold_tier_unavailable"),
    (ServiceError, 503, "service_unavailable"),
    (ModelCallError, 502, "model_failed"),
    (ConfigError, 500, "misconfigured"),
]
# The hot tier went away under a pooled connection (restart, failover): reconnect and retry.
CONNECTION_LOST = (
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.InternalClientError,  # a pooled connection left mid-protocol when the server died
    ConnectionError,  # refused / reset while the server restarts (TimeoutError is not one of these)
    FileNotFoundError,  # its unix socket is gone while it restarts
)
INBOX_QUIET_S = 0.3  # the capture inbox is worked once requests pause this long...
INBOX_MAX_DELAY_S = 5.0  # ...or once its oldest work has waited this long
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": schemas.ErrorOut} for code in (400, 401, 403, 404, 409, 413, 422, 503)
}


def error_response(
    status: int, kind: str, message: str, hint: str | None = None, *, fix: Fix | None = None, **headers: str
) -> JSONResponse:
    error: dict[str, Any] = {"type": kind, "message": message, "hint": hint}
    if fix is not None:  # the client words it again for its own caller (the CLI, an MCP server on it)
        error["fix"] = fix.to_json()
    return JSONResponse({"error": error}, status_code=status, headers=headers or None)


def map_error(exc: CabrainError) -> JSONResponse:
    for cls, status, kind in STATUS:
        if isinstance(exc, cls):
            headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
            return error_response(status, kind, exc.message, exc.hint_for("http"), fix=exc.fix, **headers)
    return error_response(500, "internal", exc.message, exc.hint_for("http"), fix=exc.fix)


class BodyTooLarge(Exception):
    pass


class Guard:
    """ASGI middleware: refuses bodies over the limit (413) and records per-route metrics."""

    def __init__(self, app: Any, *, max_bytes: int, metrics: IngressMetrics) -> None:
        self.app, self.max_bytes, self.metrics = app, max_bytes, metrics

    async def _buffered(self, receive: Callable) -> Callable:
        """The whole request body read now (:class:`BodyTooLarge` past the limit), handed on as one
        message; then whatever the client sends next (its disconnect)."""
        body, disconnected = bytearray(), False
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                disconnected = True
                break
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                raise BodyTooLarge
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            if disconnected:
                return {"type": "http.disconnect"}
            return await receive()

        return replay

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500, "sent": False}
        self.metrics.started()

        async def send_wrapper(message: dict) -> None:
            if message["type"] == "http.response.start":
                status["code"], status["sent"] = message["status"], True
            await send(message)

        try:
            headers = dict(scope.get("headers") or [])
            length = headers.get(b"content-length")
            if length is not None and length.isdigit() and int(length) > self.max_bytes:
                raise BodyTooLarge
            if length is None and b"chunked" in headers.get(b"transfer-encoding", b"").lower():
                # A body of unknown length is read (up to the limit) before the app sees it: a too large
                # one is a 413, not a parse error halfway through.
                receive = await self._buffered(receive)
            seen = 0

            async def limited_receive() -> dict:
                nonlocal seen
                message = await receive()
                if message["type"] == "http.request":
                    seen += len(message.get("body", b""))
                    if seen > self.max_bytes:
                        raise BodyTooLarge
                return message

            await self.app(scope, limited_receive, send_wrapper)
        except BodyTooLarge:
            if status["sent"]:
                raise
            response = error_response(
                413,
                "payload_too_large",
                f"the request body is larger than {self.max_bytes} bytes",
                "send smaller batches, or raise CABRAIN_API_MAX_BODY_BYTES",
            )
            await response(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            self.metrics.finished(
                path,
                scope.get("method", ""),
                status["code"],
                (time.perf_counter() - started) * 1000,
            )


@serve.deployment(name="Ingress", health_check_period_s=5)
@serve.ingress()
class Ingress:
    """One replica of the HTTP API."""

    async def __init__(
        self, settings: dict[str, Any], embedder: Any, reranker: Any = None, local_queries: bool = False
    ) -> None:
        # Models run in their own deployments (never a reranker in the ingress itself), except the
        # query embedder where it pays to keep a copy here (IngressArgs.query_embedding).
        self.settings = load_settings(**{**settings, "reranker_provider": "none"})
        self._embedder_handle, self._reranker_handle = embedder, reranker
        self._local_queries = local_queries
        self.metrics = IngressMetrics()
        self.brain: Brain | None = None
        self.models: dict[str, Any] = {}
        self.start_error: str | None = None
        self._keys: dict[bytes, tuple[Principal, float]] = {}
        self.inbox_ready = asyncio.Event()
        self._started = asyncio.create_task(self._start())
        self._inbox_worker = asyncio.create_task(self._work_inbox())

    def __serve_build_asgi_app__(self) -> FastAPI:
        return create_api(self)

    # --- start-up: wait for the models, then open the hot tier ---------------------------------
    async def _start(self) -> None:
        timeout = self.settings.serve_ready_timeout_s
        try:
            info = await call_with_retry("embedder", lambda: self._embedder_handle.info.remote(), timeout)
            local = None
            if self._local_queries:
                from cabrain.providers.embedders import load_embedder

                model = await asyncio.to_thread(load_embedder, self.settings)
                local = LocalQueries(model, max_batch_size=int(info.get("max_batch_size") or 32))
                info = {**info, "queries": "local"}
            embedder = RemoteEmbedder(
                self._embedder_handle, info, timeout_s=self.settings.embedding_timeout_s, local=local
            )
            self.models["embedder"] = info
            reranker = None
            if self._reranker_handle is not None:
                rinfo = await call_with_retry("reranker", lambda: self._reranker_handle.info.remote(), timeout)
                reranker = RemoteReranker(
                    self._reranker_handle,
                    rinfo,
                    timeout_s=self.settings.embedding_timeout_s,
                )
                self.models["reranker"] = rinfo
            delay = 0.5
            while True:
                try:
                    self.brain = await Brain.open(self.settings, embedder=embedder, reranker=reranker)
                    self.start_error = None
                    return
                except (
                    DatabaseUnreachable,
                    *CONNECTION_LOST,
                ) as exc:  # the hot tier is not up yet
                    self.start_error = f"waiting for the database: {exc}"
                    log.warning("database not ready", extra={"error": str(exc)})
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
        except Exception as exc:  # schema not current, wrong dimension, bad settings: say so on every request
            self.start_error = str(exc)
            log.error("ingress cannot start", extra={"error": str(exc)})
            raise

    async def _quiet_moment(self) -> None:
        """Background retains wait for a pause in this replica's requests (a burst of hook events
        gathers into fewer, larger embedding batches, and the recalls those events wait on do not
        share the CPU with them), but never longer than INBOX_MAX_DELAY_S."""
        first = time.monotonic()
        await asyncio.sleep(INBOX_QUIET_S)
        while time.monotonic() - first < INBOX_MAX_DELAY_S and (
            self.metrics.in_flight_now or time.monotonic() - self.metrics.last_request_at < INBOX_QUIET_S
        ):
            await asyncio.sleep(0.05)

    async def _work_inbox(self, poll_s: float = 2.0) -> None:
        """Retain captured memories handed over through /v1/capture (any replica's)."""
        from cabrain.faces import inbox

        while True:
            try:
                await asyncio.wait_for(self.inbox_ready.wait(), poll_s)
                await self._quiet_moment()
            except TimeoutError:
                pass
            self.inbox_ready.clear()
            if self.brain is None:
                continue
            try:
                while await self.run(lambda b: inbox.drain(b)):
                    pass
            except Exception as exc:  # noqa: BLE001 - the worker must outlive a bad moment
                log.warning("capture inbox", extra={"error": str(exc)})

    async def get_brain(self, wait_s: float = 30.0) -> Brain:
        if self.brain is not None:
            return self.brain
        failed = ServiceError(
            f"the service failed to start: {self.start_error}", hint="fix the cause above and redeploy (cabrain up)"
        )
        if self._started.done() and self._started.exception() is not None:
            raise failed
        try:
            await asyncio.wait_for(asyncio.shield(self._started), wait_s)
        except TimeoutError:
            raise ServiceError(
                f"the service is still starting ({self.start_error or 'loading models'})",
                fix=Fix("wait_ready"),
            ) from None
        except Exception:  # noqa: BLE001 - the start task's failure, reported with its cause
            raise failed from None
        assert self.brain is not None
        return self.brain

    async def run(self, op: Callable[[Brain], Awaitable[T]]) -> T:
        """Run ``op`` on the Brain; if the hot tier dropped its connections (restart, failover),
        reconnect and retry until ``db_connect_timeout_s``."""
        brain = await self.get_brain()
        deadline = time.monotonic() + self.settings.db_connect_timeout_s
        delay = 0.1
        while True:
            try:
                return await op(brain)
            except CONNECTION_LOST as exc:
                brain.pool.expire_connections()
                if time.monotonic() + delay > deadline:
                    raise DatabaseUnreachable(
                        f"the database connection was lost and could not be re-established: {exc}",
                        hint="check that PostgreSQL is running; requests resume as soon as it is back",
                    ) from exc
                log.warning("database connection lost; reconnecting", extra={"error": str(exc)})
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    # --- identity ---------------------------------------------------------------------------------
    async def authenticate(self, key: str | None) -> Principal:
        ttl = self.settings.api_key_cache_ttl_s
        digest = identity.hash_key(key) if key else b""
        cached = self._keys.get(digest)
        now = time.monotonic()
        if cached is not None and cached[1] > now:
            return cached[0]
        principal = await self.run(lambda b: b.authenticate(key))
        if ttl > 0:
            if len(self._keys) > 10_000:
                self._keys.clear()
            self._keys[digest] = (principal, now + ttl)
        return principal

    def forget_keys(self) -> None:
        """After a revocation or a disabled agent: this replica re-checks every key."""
        self._keys.clear()

    async def ready(self) -> tuple[bool, dict[str, Any]]:
        body: dict[str, Any] = {"version": __version__, "models": self.models}
        if self.brain is None:
            body["reason"] = self.start_error or "loading models"
            return False, body
        try:
            await asyncio.wait_for(self._embedder_handle.info.remote(), 5)
            async with self.brain.pool.acquire() as conn:
                await conn.fetchval("SELECT 1")
        except Exception as exc:  # noqa: BLE001 - any failure means not ready
            if isinstance(exc, CONNECTION_LOST):
                self.brain.pool.expire_connections()
            body["reason"] = f"{type(exc).__name__}: {exc}"
            return False, body
        return True, body

    async def __del__(self) -> None:
        self._inbox_worker.cancel()
        if self.brain is not None:
            await self.brain.close()


class McpAuth:
    """ASGI guard in front of the MCP endpoint: the bearer key names the agent the tools act as."""

    def __init__(self, app: Any, svc: Ingress) -> None:
        self.app, self.svc = app, svc

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        scheme, _, token = header.partition(" ")
        try:
            principal = await self.svc.authenticate(token.strip() if scheme.lower() == "bearer" else None)
        except CabrainError as exc:
            await map_error(exc)(scope, receive, send)
            return
        if scope.get("method") == "GET":
            # A stateless server sends nothing on its own: no stream to hold open (and hold a request
            # slot of the ingress) for ever. The MCP spec's answer for that is 405.
            await error_response(
                405,
                "method_not_allowed",
                "this MCP endpoint is stateless: it opens no server-sent event stream",
                "send requests with POST",
                Allow="POST, DELETE",
            )(scope, receive, send)
            return
        scope.setdefault("state", {})[MCP_PRINCIPAL] = principal
        await self.app(scope, receive, send)


MCP_PRINCIPAL = "cabrain_principal"


def mount_mcp(app: FastAPI, svc: Ingress) -> Any:
    """Streamable HTTP MCP at ``/mcp`` (stateless, JSON responses); returns the MCP server, whose
    session manager must run for the app's lifetime."""
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.routing import Route

    from cabrain.faces.backend import BrainBackend
    from cabrain.faces.mcp import build_server

    async def backend_for(ctx: Any) -> BrainBackend:
        principal = ctx.request_context.request.scope["state"][MCP_PRINCIPAL]
        return BrainBackend(await svc.get_brain(), principal.agent_id)

    server = build_server(backend_for)
    # Every call is authenticated by its key, and the API may sit behind any host name: the SDK's
    # DNS-rebinding check (meant for unauthenticated local servers) would only refuse real clients.
    inner = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    app.router.routes.append(Route("/mcp", endpoint=McpAuth(inner, svc), methods=["GET", "POST", "DELETE"]))
    return server


def create_api(svc: Ingress) -> FastAPI:
    """The FastAPI app of one ingress replica (routes close over ``svc``)."""
    mcp_holder: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI):
        async with mcp_holder["server"].session_manager.run():
            yield

    app = FastAPI(
        lifespan=lifespan,
        title="CaBrain",
        version=__version__,
        description=(
            "Shared, self-hosted memory for AI agents. Every `/v1` route except health and readiness "
            "needs `Authorization: Bearer <API key>`; the key decides which agent the call acts as."
        ),
        responses=ERROR_RESPONSES,
    )
    app.add_middleware(Guard, max_bytes=svc.settings.api_max_body_bytes, metrics=svc.metrics)
    mcp_holder["server"] = mount_mcp(app, svc)
    bearer = HTTPBearer(auto_error=False, description="An agent's API key (cbk_...).")

    @app.exception_handler(CabrainError)
    async def _cabrain_error(request: Request, exc: CabrainError) -> JSONResponse:
        response = map_error(exc)
        if response.status_code >= 500:
            log.warning("request failed", extra={"path": request.url.path, "error": str(exc)})
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return error_response(
                400,
                "bad_request",
                "the request body is not valid JSON",
                "send a JSON object",
            )
        parts = []
        for e in errors[:10]:
            where = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
            parts.append(f"{where}: {e.get('msg')}")
        return error_response(422, "invalid", "; ".join(parts), "see /docs for the expected body")

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error_response(exc.status_code, kind, str(exc.detail), "see /docs for the API's routes")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", extra={"path": request.url.path})
        return error_response(
            500,
            "internal",
            f"unexpected error: {type(exc).__name__}",
            "see the server logs",
        )

    async def caller(
        creds: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
    ) -> Principal:
        return await svc.authenticate(creds.credentials if creds else None)

    async def admin(principal: Annotated[Principal, Depends(caller)]) -> Principal:
        if not principal.is_admin:
            raise AccessDenied(f"agent {principal.agent_id!r} is not an admin", hint="use an admin key")
        return principal

    Caller = Annotated[Principal, Depends(caller)]
    Admin = Annotated[Principal, Depends(admin)]

    # --- health ---------------------------------------------------------------------------------
    @app.get("/v1/health", tags=["health"], summary="Liveness: the process answers")
    async def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    @app.get(
        "/v1/ready",
        tags=["health"],
        summary="Readiness: models loaded and the database reachable",
    )
    async def ready() -> JSONResponse:
        ok, body = await svc.ready()
        return JSONResponse({"ready": ok, **body}, status_code=200 if ok else 503)

    @app.get(
        "/metrics",
        tags=["health"],
        response_class=PlainTextResponse,
        summary="Prometheus metrics of every replica on every node (an admin key, or CABRAIN_METRICS_KEY)",
    )
    async def metrics(creds: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)]) -> PlainTextResponse:
        token = creds.credentials if creds else None
        scrape_key = svc.settings.metrics_key.get_secret_value() if svc.settings.metrics_key else None
        if not (scrape_key and token and hmac.compare_digest(token.encode(), scrape_key.encode())):
            await admin(await caller(creds))  # otherwise an admin's key
        return PlainTextResponse(await collect(), media_type="text/plain; version=0.0.4")

    @app.get("/v1/whoami", tags=["agents"], summary="The agent this key acts as")
    async def whoami(p: Caller) -> dict[str, Any]:
        return {"agent_id": p.agent_id, "is_admin": p.is_admin, "key_id": str(p.key_id)}

    # --- memories -------------------------------------------------------------------------------
    @app.post(
        "/v1/memories",
        tags=["memories"],
        response_model=RetainResult,
        summary="Retain one memory (ADD / UPDATE / INVALIDATE / NOOP)",
    )
    async def retain_one(body: schemas.MemoryIn, p: Caller) -> JSONResponse:
        [result] = await svc.run(lambda b: b.retain(p.agent_id, [body.to_input()]))
        return JSONResponse(retain_to_dict(result))

    @app.post(
        "/v1/memories/batch",
        tags=["memories"],
        response_model=schemas.RetainBatchOut,
        summary="Retain a batch in one transaction (all or nothing)",
    )
    async def retain_batch(body: schemas.RetainBatchIn, p: Caller) -> JSONResponse:
        items = [i.to_input() for i in body.items]
        results = await svc.run(lambda b: b.retain(p.agent_id, items, decide=body.decide))
        return JSONResponse({"results": [retain_to_dict(r) for r in results]})

    @app.get("/v1/memories", tags=["memories"], summary="Current memories of a namespace, by provenance")
    async def list_memories(
        namespace: Annotated[str, Query()],
        p: Caller,
        source_kind: Annotated[str | None, Query()] = None,
        source_ref_prefix: Annotated[str | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
        include_archived: Annotated[
            bool, Query(description="also current ones of source_kind in the cold tier")
        ] = False,
    ) -> JSONResponse:
        rows = await svc.run(
            lambda b: b.list_memories(
                p.agent_id,
                namespace,
                source_kind=source_kind,
                source_ref_prefix=source_ref_prefix,
                limit=limit,
                include_archived=include_archived,
            )
        )
        return JSONResponse({"memories": [memory_to_dict(m) for m in rows]})

    @app.get(
        "/v1/memories/{memory_id}",
        tags=["memories"],
        response_model=MemoryWithHistory,
        summary="A memory with its provenance and version history",
    )
    async def get_memory(memory_id: str, p: Caller) -> JSONResponse:
        result = await svc.run(lambda b: b.get(p.agent_id, memory_id))
        return JSONResponse(history_to_dict(result))

    @app.post(
        "/v1/memories/{memory_id}/forget",
        tags=["memories"],
        response_model=MemoryWithHistory,
        summary="Soft-forget: the memory leaves recall but is kept",
    )
    async def forget(memory_id: str, p: Caller, body: schemas.ForgetIn | None = None) -> JSONResponse:
        reason = body.reason if body else None
        result = await svc.run(lambda b: b.forget(p.agent_id, memory_id, reason=reason))
        return JSONResponse(history_to_dict(result))

    @app.get(
        "/v1/memories/{memory_id}/judgments",
        tags=["judgments"],
        response_model=schemas.JudgmentsOut,
        summary="The judgments that changed a memory: supersessions, merges, corrections, reverts",
    )
    async def memory_judgments(
        memory_id: str, p: Caller, limit: Annotated[int, Query(ge=1, le=500)] = 50
    ) -> JSONResponse:
        rows = await svc.run(lambda b: b.judgments(p.agent_id, memory_id, limit=limit))
        return JSONResponse({"judgments": rows})

    @app.post(
        "/v1/memories/{memory_id}/revert",
        tags=["judgments"],
        response_model=schemas.JudgmentOut,
        summary="Undo the latest judgment that changed a memory (writers of its namespace)",
    )
    async def revert_memory(memory_id: str, p: Caller, body: schemas.RevertIn | None = None) -> JSONResponse:
        reason = body.reason if body else None
        return JSONResponse(await svc.run(lambda b: b.revert(p.agent_id, memory_id=memory_id, reason=reason)))

    @app.post(
        "/v1/judgments/{judgment_id}/revert",
        tags=["judgments"],
        response_model=schemas.JudgmentOut,
        summary="Undo a judgment (a revert too) by its id (writers of its namespace)",
    )
    async def revert_judgment(judgment_id: str, p: Caller, body: schemas.RevertIn | None = None) -> JSONResponse:
        reason = body.reason if body else None
        return JSONResponse(await svc.run(lambda b: b.revert(p.agent_id, judgment_id=judgment_id, reason=reason)))

    @app.post(
        "/v1/memories/{memory_id}/unarchive",
        tags=["memories"],
        summary="Bring an archived current memory back to the hot tier (writers of its namespace)",
    )
    async def unarchive(memory_id: str, p: Caller) -> JSONResponse:
        return JSONResponse(memory_to_dict(await svc.run(lambda b: b.unarchive(p.agent_id, memory_id))))

    @app.post(
        "/v1/memories/accessed", tags=["memories"], summary="Count a read of these memories (a memory-tool file viewed)"
    )
    async def touch(body: schemas.TouchIn, p: Caller) -> JSONResponse:
        return JSONResponse({"counted": await svc.run(lambda b: b.touch(p.agent_id, body.ids))})

    @app.post(
        "/v1/memories/{memory_id}/reconsolidate",
        tags=["memories"],
        response_model=RetainResult,
        summary="Replace a memory with a corrected version (the old one is superseded)",
    )
    async def reconsolidate(memory_id: str, body: schemas.ReconsolidateIn, p: Caller) -> JSONResponse:
        result = await svc.run(
            lambda b: b.reconsolidate(
                p.agent_id, memory_id, body.content, reason=body.reason, source_ref=body.source_ref
            )
        )
        return JSONResponse(retain_to_dict(result))

    @app.post(
        "/v1/recall",
        tags=["memories"],
        response_model=RecallResult,
        summary="Hybrid recall: vectors + BM25, fused, reranked, one entity hop",
    )
    async def recall(body: schemas.RecallIn, p: Caller) -> JSONResponse:
        result = await svc.run(lambda b: b.recall(p.agent_id, body.to_query()))
        if svc.brain is not None and svc.brain.cache is not None:
            svc.metrics.recall_cache(result.cached)
        return JSONResponse(recall_to_dict(result))

    @app.post(
        "/v1/recall/archive",
        tags=["memories"],
        response_model=ArchiveResult,
        summary="Archive recall: search the cold tier (demoted memories), same scoping as recall",
    )
    async def recall_archive(body: schemas.ArchiveRecallIn, p: Caller) -> JSONResponse:
        result = await svc.run(lambda b: b.recall_archive(p.agent_id, body.to_query()))
        return JSONResponse(archive_to_dict(result))

    @app.post(
        "/v1/capture",
        tags=["memories"],
        status_code=202,
        summary="Hand over captured memories (Claude Code hooks): stored at once, retained in the background",
    )
    async def capture(body: schemas.CaptureIn, p: Caller) -> JSONResponse:
        from cabrain.faces import inbox
        from cabrain.write.retain import check_write_access

        if (body.namespace is None) == (body.project is None):
            raise InputError("give either namespace (a configured one) or project (a derived one)")
        target: dict[str, Any] = {}

        async def op(b: Brain) -> int:
            target["namespace"], target["injectable"] = await b.capture_namespace(
                p.agent_id, namespace=body.namespace, project=body.project
            )
            if not body.items:
                return 0
            async with b.pool.acquire() as conn:
                await check_write_access(conn, p.agent_id, target["namespace"])
                items = redact_deep([i.model_dump(mode="json") for i in body.items])  # before the inbox holds them
                return await inbox.enqueue(conn, p.agent_id, target["namespace"], items, decide=body.decide)

        warm = None
        if body.recall is not None and svc.brain is not None and len(body.recall.query) <= svc.settings.max_query_chars:
            # embed the query while the items are stored
            warm = asyncio.create_task(svc.brain.embed_query(body.recall.query))
        try:
            queued = await svc.run(op)
        finally:
            if warm is not None:  # the recall below takes the vector from the query cache
                await asyncio.gather(warm, return_exceptions=True)
        if queued:
            svc.inbox_ready.set()
        answer: dict[str, Any] = {"namespace": target["namespace"], "queued": queued, "items": len(body.items)}
        if body.recall is not None:
            if target["injectable"]:
                query = RecallQuery(body.recall.query, target["namespace"], k=body.recall.k, expand=False)
                result = await svc.run(lambda b: b.recall(p.agent_id, query))
                recalled = recall_to_dict(result)
                answer["hits"], answer["timings_ms"] = recalled["hits"], recalled["timings_ms"]
            else:  # another agent's namespace the caller never accepted: nothing of it goes into its context
                from cabrain.faces.capture import WITHHELD

                answer["hits"], answer["withheld"] = [], WITHHELD.format(target["namespace"])
        return JSONResponse(answer, status_code=202)

    # --- entities -------------------------------------------------------------------------------
    @app.get(
        "/v1/entities",
        tags=["entities"],
        response_model=EntityPage,
        summary="Entities of a namespace (what its memories mention), with sleep's summaries",
    )
    async def list_entities(
        namespace: Annotated[str, Query(description="A namespace the caller may read.")],
        p: Caller,
        q: Annotated[str | None, Query(max_length=200, description="Only names containing this (any case).")] = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        cursor: Annotated[str | None, Query(description="The next_cursor of the page before.")] = None,
    ) -> JSONResponse:
        page = await svc.run(lambda b: b.list_entities(p.agent_id, namespace, query=q, limit=limit, cursor=cursor))
        return JSONResponse(entity_page_to_dict(page))

    @app.get(
        "/v1/entities/{name_or_id:path}",
        tags=["entities"],
        response_model=EntityWithMemories,
        summary="One entity (by name or id): its summary and the memories that mention it",
    )
    async def get_entity(
        name_or_id: str,
        namespace: Annotated[str, Query(description="The entity's namespace.")],
        p: Caller,
        history: Annotated[bool, Query(description="Also superseded and forgotten memories.")] = False,
        limit: Annotated[int, Query(ge=1, le=200, description="Memories returned at most.")] = 20,
    ) -> JSONResponse:
        found = await svc.run(lambda b: b.get_entity(p.agent_id, namespace, name_or_id, history=history, limit=limit))
        return JSONResponse(entity_memories_to_dict(found))

    # --- namespaces and grants ------------------------------------------------------------------
    @app.get(
        "/v1/namespaces",
        tags=["namespaces"],
        summary="Namespaces the caller owns or holds a grant on",
    )
    async def list_namespaces(p: Caller) -> JSONResponse:
        rows = await svc.run(lambda b: b.list_namespaces(p.agent_id))
        return JSONResponse({"namespaces": [jsonable(r) for r in rows]})

    @app.post(
        "/v1/namespaces",
        tags=["namespaces"],
        status_code=201,
        summary="Create a namespace the caller owns",
    )
    async def create_namespace(body: schemas.NamespaceIn, p: Caller) -> JSONResponse:
        created = await svc.run(lambda b: b.create_namespace(p.agent_id, body.name))
        return JSONResponse({"name": body.name, "created": created}, status_code=201 if created else 200)

    @app.get(
        "/v1/grants",
        tags=["namespaces"],
        summary="Grants on a namespace (its owner or an admin)",
    )
    async def list_grants(namespace: Annotated[str, Query()], p: Caller) -> JSONResponse:
        rows = await svc.run(lambda b: b.list_grants(p.agent_id, namespace))
        return JSONResponse({"grants": [jsonable(r) for r in rows]})

    @app.post(
        "/v1/grants",
        tags=["namespaces"],
        summary="Offer an agent access to a namespace's team memories (it reads at once, writes once it accepts)",
    )
    async def share(body: schemas.GrantIn, p: Caller) -> JSONResponse:
        accepted = await svc.run(
            lambda b: b.share(p.agent_id, body.namespace, body.agent, can_read=body.can_read, can_write=body.can_write)
        )
        return JSONResponse({**body.model_dump(), "accepted": accepted})

    @app.post(
        "/v1/grants/accept",
        tags=["namespaces"],
        summary="Accept the grant the caller was offered on a namespace (writes, and capture, need it)",
    )
    async def accept_grant(body: schemas.GrantAnswerIn, p: Caller) -> JSONResponse:
        row = await svc.run(lambda b: b.accept_grant(p.agent_id, body.namespace))
        return JSONResponse(jsonable(row))

    @app.post(
        "/v1/grants/decline", tags=["namespaces"], summary="Decline (or give up) the caller's grant on a namespace"
    )
    async def decline_grant(body: schemas.GrantAnswerIn, p: Caller) -> JSONResponse:
        declined = await svc.run(lambda b: b.decline_grant(p.agent_id, body.namespace))
        return JSONResponse({"namespace": body.namespace, "agent": p.agent_id, "declined": declined})

    @app.delete(
        "/v1/grants",
        tags=["namespaces"],
        summary="Revoke an agent's grant on a namespace",
    )
    async def revoke(
        namespace: Annotated[str, Query()],
        agent: Annotated[str, Query()],
        p: Caller,
    ) -> JSONResponse:
        removed = await svc.run(lambda b: b.revoke(p.agent_id, namespace, agent))
        return JSONResponse({"namespace": namespace, "agent": agent, "revoked": removed})

    # --- agents and keys (admin) ----------------------------------------------------------------
    @app.get("/v1/agents", tags=["agents"], summary="Every agent (admin)")
    async def list_agents(p: Admin) -> JSONResponse:
        agents = await svc.run(lambda b: b.list_agents())
        return JSONResponse({"agents": [jsonable(a.__dict__) for a in agents]})

    @app.post(
        "/v1/agents",
        tags=["agents"],
        status_code=201,
        response_model=schemas.NewKeyOut,
        summary="Create an agent and its first key (admin); the key is shown once",
    )
    async def create_agent(body: schemas.AgentIn, p: Admin) -> JSONResponse:
        async def op(b: Brain) -> identity.NewKey:
            await b.create_agent(
                body.id,
                display_name=body.display_name,
                is_admin=body.is_admin,
                exist_ok=False,
            )
            return await b.create_key(body.id, label=body.key_label)

        new = await svc.run(op)
        return JSONResponse(_new_key(new), status_code=201)

    @app.get(
        "/v1/agents/{agent_id}/keys",
        tags=["agents"],
        summary="An agent's keys, without their secrets (admin)",
    )
    async def list_keys(agent_id: str, p: Admin) -> JSONResponse:
        keys = await svc.run(lambda b: b.list_keys(agent_id))
        return JSONResponse({"keys": [jsonable(k.__dict__) for k in keys]})

    @app.post(
        "/v1/agents/{agent_id}/keys",
        tags=["agents"],
        status_code=201,
        response_model=schemas.NewKeyOut,
        summary="Make another key for an agent (admin)",
    )
    async def create_key(agent_id: str, p: Admin, body: schemas.KeyIn | None = None) -> JSONResponse:
        new = await svc.run(lambda b: b.create_key(agent_id, label=body.label if body else None))
        return JSONResponse(_new_key(new), status_code=201)

    @app.delete(
        "/v1/agents/{agent_id}/keys/{key_id}",
        tags=["agents"],
        summary="Revoke a key (admin)",
    )
    async def revoke_key(agent_id: str, key_id: str, p: Admin) -> JSONResponse:
        if not await svc.run(lambda b: b.revoke_key(key_id, agent_id=agent_id)):
            raise NotFound(f"agent {agent_id!r} has no active key {key_id}")
        svc.forget_keys()
        return JSONResponse({"key_id": key_id, "revoked": True})

    @app.post(
        "/v1/agents/{agent_id}/disable",
        tags=["agents"],
        summary="Disable an agent: its keys stop (admin)",
    )
    async def disable_agent(agent_id: str, p: Admin) -> JSONResponse:
        changed = await svc.run(lambda b: b.disable_agent(agent_id))
        svc.forget_keys()
        return JSONResponse({"agent_id": agent_id, "disabled": True, "changed": changed})

    from serve_apps.workflows_api import add_routes

    add_routes(app, svc, Caller, Admin)
    return app


def _new_key(new: identity.NewKey) -> dict[str, str]:
    return {
        "agent_id": new.agent_id,
        "key_id": str(new.id),
        "key": new.key,
        "prefix": new.prefix,
    }
