"""The HTTP the httpx-based senders share: one POST whose lost connections and timeouts become
retryable :class:`DeliveryError`, and the error for an answer that is not a success."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from cabrain.connectors.retry import retry_after
from cabrain.egress import Egress, EgressDenied
from cabrain.notify.senders import DeliveryError, shown, timeout_s, transient

__all__ = ["client", "post", "refused"]


def client(config: Mapping[str, Any], egress: Egress, **kwargs: Any) -> httpx.AsyncClient:
    """An httpx client with the destination's timeout that connects only where ``egress`` allows;
    redirects are not followed (a notice is POSTed once, where it was configured to go)."""
    return egress.async_client(timeout=timeout_s(config), **kwargs)


async def post(http: httpx.AsyncClient, url: str, *, what: str, **kwargs: Any) -> httpx.Response:
    """``POST url``; a refused or reset connection and a timeout are worth another try."""
    try:
        return await http.post(url, **kwargs)
    except EgressDenied as exc:
        raise DeliveryError(f"{what}: {exc.message}", retry=False, hint=exc.hint) from exc
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        raise DeliveryError(f"{what}: {shown(url)} is not an http(s) URL", retry=False) from exc
    except httpx.TimeoutException as exc:
        raise DeliveryError(f"{what}: {shown(url)} did not answer in time", retry=True) from exc
    except httpx.TransportError as exc:
        raise DeliveryError(f"{what}: could not reach {shown(url)} ({type(exc).__name__})", retry=True) from exc


def refused(
    response: httpx.Response,
    what: str,
    *,
    detail: str = "",
    hint: str | None = None,
    gone: bool = False,
    retry: bool | None = None,
) -> DeliveryError:
    """The error for an answer that is not a success: retried on 429 and 5xx (after its
    ``Retry-After``) unless ``retry`` says otherwise, never when ``gone``."""
    status = response.status_code
    said = f": {detail}" if detail else ""
    retry = (transient(status) if retry is None else retry) and not gone
    return DeliveryError(
        f"{what}: {shown(str(response.request.url))} answered {status} {response.reason_phrase}{said}",
        retry=retry,
        retry_after=retry_after(response.headers.get("Retry-After")) if retry else None,
        gone=gone,
        hint=hint,
        status_code=status,
    )
