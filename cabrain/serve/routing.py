"""How a route answers: it returns the type its return annotation declares (a value of
:mod:`cabrain.types` or of :mod:`cabrain.serve.responses`), FastAPI documents that type as the
route's response model, and :class:`TypedRoute` sends the value as :func:`cabrain.types.jsonable`
makes it - the one JSON form the CLI and the L1 cache use too - without validating it again.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute

from cabrain.serve import timing
from cabrain.types import jsonable


def answer(value: Any, status_code: int = 200) -> JSONResponse:
    """``value`` as a JSON answer (for a route whose status depends on the outcome)."""
    return JSONResponse(jsonable(value), status_code=status_code)


class TypedRoute(APIRoute):
    """A route whose endpoint's value is sent by :func:`answer`, with the route's status code; a
    response the endpoint makes itself goes out as it is."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, _answering(endpoint, kwargs.get("status_code") or 200), **kwargs)


_answering_endpoints: set[Callable[..., Any]] = set()


def _answering(endpoint: Callable[..., Any], status_code: int) -> Callable[..., Any]:
    if endpoint in _answering_endpoints:  # made here already: a router's route, now the app's
        return endpoint

    @functools.wraps(endpoint)  # FastAPI reads the parameters and the return type through this
    async def answering(*args: Any, **kwargs: Any) -> Any:
        stages = timing.current()  # None unless CABRAIN_API_SERVER_TIMING (cabrain.serve.timing)
        if stages is None:
            value = await endpoint(*args, **kwargs)
            return value if isinstance(value, Response) else answer(value, status_code)
        stages.route_started()
        value = await endpoint(*args, **kwargs)
        if isinstance(value, Response):
            return value
        started = time.perf_counter()
        response = answer(value, status_code)
        stages.add("encode", (time.perf_counter() - started) * 1000)
        return response

    _answering_endpoints.add(answering)
    return answering


def router(**kwargs: Any) -> APIRouter:
    """A router of :class:`TypedRoute` routes."""
    return APIRouter(route_class=TypedRoute, **kwargs)
