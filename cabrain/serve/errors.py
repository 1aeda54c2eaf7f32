"""Errors as HTTP answers. Every error body is ``{"error": {"type", "message", "hint"}}``, the hint in
this API's terms; with ``"fix": {"action", "params"}`` too when the fix is an action the caller takes
(:mod:`cabrain.fixes`), which the client, the CLI and ``cabrain mcp`` word again for their own
callers. The status and the type come from the error's class (:mod:`cabrain.errors`): 400
malformed, 401 no or bad key, 403 outside one's grants (or not an admin), 404 unknown or
unreadable, 405 a method the route lacks, 409 exists already or conflicts, 413 body too large,
422 well-formed JSON of the wrong shape, 500 misconfigured or unexpected, 502 a model failed, 503
not ready or a dependency is down.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from cabrain.edge import bad_value
from cabrain.errors import KINDS, CabrainError, InputError, InvalidRequest, MethodNotAllowed, NotFound, ServiceBusy
from cabrain.serve.responses import ErrorOut

__all__ = ["ERROR_RESPONSES", "add_handlers", "bad_value", "error_json", "error_response"]

log = logging.getLogger(__name__)

# What every route may answer besides its own body (the OpenAPI document shows each).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut} for status in sorted({cls.status for cls in KINDS.values()} | {CabrainError.status})
}


def error_json(exc: CabrainError) -> dict[str, Any]:
    """The body of ``exc``'s answer (Serve's proxy sends it too: :mod:`cabrain.serve.proxy`)."""
    error: dict[str, Any] = {"type": exc.kind, "message": exc.message, "hint": exc.hint_for("http")}
    if exc.fix is not None:  # the client words it again for its own caller (the CLI, an MCP server on it)
        error["fix"] = exc.fix.to_json()
    return {"error": error}


def error_response(exc: CabrainError, **headers: str) -> JSONResponse:
    """``exc`` as the API answers it: its class's status and type."""
    if exc.status == 401:
        headers.setdefault("WWW-Authenticate", "Bearer")
    if isinstance(exc, ServiceBusy):
        headers.setdefault("Retry-After", str(exc.retry_after_s))
    return JSONResponse(error_json(exc), status_code=exc.status, headers=headers or None)


def add_handlers(app: FastAPI) -> None:
    """Every failure of a route answers in the error shape: CaBrain's errors by their class, FastAPI's
    and Starlette's by the class of the same meaning, anything else as a 500 ``internal``."""

    @app.exception_handler(CabrainError)
    async def _cabrain_error(request: Request, exc: CabrainError) -> JSONResponse:
        response = error_response(exc)
        if response.status_code >= 500:
            log.warning("request failed", extra={"path": request.url.path, "error": str(exc)})
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return error_response(InputError("the request body is not valid JSON", hint="send a JSON object"))
        parts = []
        for e in errors[:10]:
            where = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
            parts.append(f"{where}: {e.get('msg')}")
        return error_response(InvalidRequest("; ".join(parts), hint="see /openapi.json for the expected body"))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        hint = "see /openapi.json for the API's routes"
        if exc.status_code == NotFound.status:
            return error_response(NotFound(str(exc.detail), hint=hint))
        if exc.status_code == MethodNotAllowed.status:
            return error_response(MethodNotAllowed(str(exc.detail), hint=hint))
        error = {"type": "http_error", "message": str(exc.detail), "hint": hint}
        return JSONResponse({"error": error}, status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        refused = bad_value(exc)
        if refused is not None:
            log.warning("a bad value reached the database", extra={"path": request.url.path, "error": str(exc)[:300]})
            return error_response(refused)
        log.exception("unhandled error", extra={"path": request.url.path})
        return error_response(CabrainError(f"unexpected error: {type(exc).__name__}", hint="see the server logs"))
