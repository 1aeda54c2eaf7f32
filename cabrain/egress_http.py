"""Where each HTTP stack CaBrain sends with opens its connections, made to go through the egress
policy (:mod:`cabrain.egress`): the host is resolved, every address checked, and the connection made
to a checked address; TLS still verifies the certificate against the URL's host name.

- httpx: an httpcore network backend (:class:`AsyncBackend`, :class:`SyncBackend`);
- requests (python-gitlab, pywebpush): urllib3 connections whose socket is :func:`_connect`'s
  (:func:`adapter`), every redirect's hop included;
- httplib2 (google-api-python-client): connection classes given to every request
  (:func:`httplib2_http`), redirects included.

This module knows the policy only as :class:`Checks`; it imports nothing of CaBrain.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any, Protocol
from urllib.parse import urlsplit

__all__ = ["AsyncBackend", "Checks", "SyncBackend", "adapter", "httplib2_http"]


class Checks(Protocol):
    """The policy's address checks (:class:`cabrain.egress.Egress`): a host's addresses, each one
    allowed, or its refusal raised."""

    def addresses(self, host: str, port: int) -> list[str]: ...

    async def resolve(self, host: str, port: int) -> list[str]: ...


class AsyncBackend:
    """httpcore's network backend, connecting to the checked addresses of a host; TLS is started
    by httpcore with the URL's host name, so certificates are checked against the name."""

    def __init__(self, egress: Checks, inner: Any) -> None:
        self.egress, self.inner = egress, inner

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, **kwargs: Any) -> Any:
        import httpcore

        try:
            addresses = await asyncio.wait_for(self.egress.resolve(host, port), timeout)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"resolving {host} took too long") from exc
        except socket.gaierror as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        error: Exception | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(address, port, timeout=timeout, **kwargs)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
        import httpcore

        raise httpcore.ConnectError("the egress policy allows no unix socket")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class SyncBackend:
    def __init__(self, egress: Checks, inner: Any) -> None:
        self.egress, self.inner = egress, inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, **kwargs: Any) -> Any:
        import httpcore

        try:
            addresses = self.egress.addresses(host, port)
        except socket.gaierror as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        error: Exception | None = None
        for address in addresses:
            try:
                return self.inner.connect_tcp(address, port, timeout=timeout, **kwargs)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
        import httpcore

        raise httpcore.ConnectError("the egress policy allows no unix socket")

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


def _connect(egress: Checks, host: str, port: int, timeout: Any, source: Any, options: Any) -> socket.socket:
    """A socket connected to one of ``host``'s checked addresses (the first that answers)."""
    from urllib3.util import connection

    error: OSError | None = None
    for address in egress.addresses(host, port):
        try:
            return connection.create_connection((address, port), timeout, source_address=source, socket_options=options)
        except OSError as exc:
            error = exc
    assert error is not None
    raise error


def adapter(egress: Checks) -> Any:
    """A requests adapter whose urllib3 connections connect through :func:`_connect`."""
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
    from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError

    def new_conn(self: Any) -> socket.socket:
        try:
            return _connect(egress, self._dns_host, self.port, self.timeout, self.source_address, self.socket_options)
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc
        except TimeoutError as exc:
            raise ConnectTimeoutError(self, f"connection to {self.host} timed out") from exc
        except OSError as exc:
            raise NewConnectionError(self, f"failed to establish a new connection: {exc}") from exc

    plain = type("GuardedHTTPConnection", (HTTPConnection,), {"_new_conn": new_conn})
    tls = type("GuardedHTTPSConnection", (HTTPSConnection,), {"_new_conn": new_conn})
    pools = {
        "http": type("GuardedHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": plain}),
        "https": type("GuardedHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": tls}),
    }

    class Adapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = pools

        def proxy_manager_for(self, *args: Any, **kwargs: Any) -> Any:
            from requests.exceptions import ProxyError

            raise ProxyError("the egress policy connects directly, never through a proxy")

    return Adapter()


def httplib2_http(egress: Checks, httplib2: Any, timeout: float | None) -> Any:
    """httplib2's connections, made to checked addresses (its own ``connect`` resolves the name
    twice and connects to the name); TLS is wrapped with the URL's host name."""
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]

    def raw(self: Any) -> socket.socket:
        wait = self.timeout if isinstance(self.timeout, int | float) else None
        return _connect(egress, self.host, self.port, wait, None, nodelay)

    def plain_connect(self: Any) -> None:
        self.sock = raw(self)

    def tls_connect(self: Any) -> None:
        self.sock = self._context.wrap_socket(raw(self), server_hostname=self.host)

    plain = type("GuardedHTTPConnection", (httplib2.HTTPConnectionWithTimeout,), {"connect": plain_connect})
    tls = type("GuardedHTTPSConnection", (httplib2.HTTPSConnectionWithTimeout,), {"connect": tls_connect})

    class Http(httplib2.Http):
        def request(self, uri: str, *args: Any, **kwargs: Any) -> Any:
            kwargs["connection_type"] = tls if urlsplit(uri).scheme == "https" else plain
            return super().request(uri, *args, **kwargs)

    return Http(timeout=timeout, proxy_info=None)  # a redirect is followed through request(): checked too
