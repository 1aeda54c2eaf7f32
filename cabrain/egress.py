"""The one egress policy: where the server may send a request, and which secrets it may send.

Every outbound URL an admin configures (a notifier's, a subscription's target, a connector's or
tracker's server, a workflow model's endpoint) and every request the server makes to one goes
through an :class:`Egress`, built from the settings where the process starts::

    egress = Egress.of(settings, environ)
    egress.check_url(config["url"], "a webhook notifier's url")   # when it is set: 403 if refused
    async with egress.async_client(timeout=10) as http:           # when it is used
        await http.post(url, json=body)

**Addresses.** A request may reach a public (globally routable) address, or an address or host
the operator lists in ``CABRAIN_EGRESS_ALLOW`` (comma-separated host names and CIDRs, e.g.
``gitlab.internal,10.20.0.0/16,127.0.0.1``), or one port of a host or address listed with it
(``127.0.0.1:11434``, ``[::1]:8080``, ``ollama.internal:11434``: that port only, nothing else there;
the local models ``cabrain up`` starts are allowed so, each its own port). Loopback, link-local (the cloud metadata service
169.254.169.254 among them), private (RFC 1918, IPv6 ULA), shared (CGNAT 100.64.0.0/10),
unspecified, multicast and reserved addresses are refused unless listed; an IPv4 address inside
IPv6 (mapped, 6to4, NAT64) is judged as the IPv4 address it carries.

- *When a URL is set*, its scheme must be http(s), it may hold no user name or password, and a
  host written as an address (in any numeric form) must be allowed. A host name is not resolved
  then: what a name resolves to may change.
- *When a request is made*, the host name is resolved, every address it resolves to must be
  allowed (one refused address refuses the name), and the connection is made to an address that
  was checked, never to the name again: a DNS answer that changes between the check and the
  connection (rebinding) cannot reach a refused address. A listed host name is allowed whatever it
  resolves to. Each HTTP stack the senders and sources use is given this check where it connects:
  httpx (a network backend), requests (the connection's socket), aiohttp (its resolver), httplib2.
  Redirects are either not followed (httpx) or each hop connects through the same check
  (requests, aiohttp, httplib2).
  Proxies from the environment are not used: a proxy would connect on the server's behalf.

**Secrets.** A credential is named, never stored: by an environment variable the operator lists
in ``CABRAIN_SECRET_ENV_ALLOW``, or by a file of that name in ``CABRAIN_SECRETS_DIR`` (read without
following links). Any other name, and every ``CABRAIN_*`` variable, is refused when it is set (403)
and when it would be read (:meth:`Egress.secret`), so nothing else in the server's environment
(``AWS_SECRET_ACCESS_KEY``, ``PGPASSWORD``, ``RAY_AUTH_TOKEN`` ...) can be sent anywhere.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import socket
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from cabrain import egress_http
from cabrain.errors import AccessDenied, ConfigError, InputError

if TYPE_CHECKING:
    import aiohttp
    import httpx
    import requests

__all__ = ["ALLOW_SETTING", "SECRET_SETTING", "Egress", "EgressDenied", "allowed_entry", "secret_name"]

ALLOW_SETTING = "CABRAIN_EGRESS_ALLOW"
SECRET_SETTING = "CABRAIN_SECRET_ENV_ALLOW"
DIR_SETTING = "CABRAIN_SECRETS_DIR"
MAX_SECRET_BYTES = 64 * 1024
_DEFAULT_PORTS = {"http": 80, "https": 443}

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_HOST = re.compile(r"^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*$")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_PORTED = re.compile(r"^(?:\[([0-9A-Fa-f:.]+)\]|([^:\[\]/]+)):([0-9]{1,5})$")  # [v6]:port or host-or-v4:port


class Configured(Protocol):
    """What :meth:`Egress.of` reads of :class:`cabrain.settings.Settings` (which imports this module
    to check its values: the settings are described here rather than imported)."""

    @property
    def egress_allow(self) -> list[str]: ...
    @property
    def secret_env_allow(self) -> list[str]: ...
    @property
    def secrets_dir(self) -> Path | None: ...


class EgressDenied(AccessDenied):
    """A request to an address the egress policy refuses (403 where a face answers it)."""


def allowed_entry(entry: str) -> Network | str | tuple[str, int]:
    """One ``CABRAIN_EGRESS_ALLOW`` entry: a network (an address is a /32 or /128), a host name
    (lower case, no trailing dot), or one port of an address or host name (``(address or name,
    port)``, the address as :mod:`ipaddress` writes it). Raises ``ValueError`` for anything else."""
    text = entry.strip()
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        pass
    found = _PORTED.match(text)
    if found:
        where, port = found.group(1) or found.group(2), int(found.group(3))
        if not 0 < port < 65536:
            raise ValueError(f"{entry!r}: a port is 1-65535")
        try:
            return str(ipaddress.ip_address(where)), port
        except ValueError:
            pass
        if found.group(1) is None and _HOST.match(where.lower().rstrip(".")):
            return where.lower().rstrip("."), port
        raise ValueError(f"{entry!r} is neither a host name nor an address with a port")
    name = text.lower().rstrip(".")
    if not _HOST.match(name):
        raise ValueError(f"{entry!r} is neither a host name nor an address or CIDR (with a port: host:port)")
    return name


def secret_name(entry: str) -> str:
    """One ``CABRAIN_SECRET_ENV_ALLOW`` entry: a variable's name, never one of CaBrain's own."""
    name = entry.strip()
    if not _ENV.match(name):
        raise ValueError(f"{entry!r} is not an environment variable's name")
    if name.upper().startswith("CABRAIN_"):
        raise ValueError(f"{name} is one of CaBrain's own settings: it is never sent anywhere")
    return name


def _carried(address: Address) -> Address:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, NAT64), else the address itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def public(address: Address) -> bool:
    """A globally routable unicast address: not loopback, link-local, private, shared, unspecified,
    multicast or reserved."""
    inner = _carried(address)
    return inner.is_global and not inner.is_multicast and not inner.is_reserved


def _numeric(host: str) -> Address | None:
    """``host`` as an address when it is written as one in any numeric form the resolver takes
    (``127.1``, ``2130706433``, ``0x7f.0.0.1``, ``[::1]``), else None; no DNS is asked."""
    bare = host.strip("[]")
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(bare, None, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError, ValueError):
        return None
    return ipaddress.ip_address(str(found[0][4][0]).split("%", 1)[0])


class Egress:
    """The policy of one process: the allowed networks and hosts, and where secrets come from.

    ``Egress()`` allows public addresses only and no secret at all: what a library default should
    be. :meth:`of` builds the deployment's from its settings and the environment."""

    def __init__(
        self,
        allow: Iterable[str] = (),
        *,
        secret_names: Iterable[str] = (),
        secrets_dir: Path | str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        entries = [allowed_entry(e) for e in allow if e.strip()]
        self.networks: tuple[Network, ...] = tuple(
            e for e in entries if isinstance(e, ipaddress.IPv4Network | ipaddress.IPv6Network)
        )
        self.hosts: frozenset[str] = frozenset(e for e in entries if isinstance(e, str))
        # (address or host name, port): that port only
        self.ports: frozenset[tuple[str, int]] = frozenset(e for e in entries if isinstance(e, tuple))
        self.secret_names: frozenset[str] = frozenset(secret_name(n) for n in secret_names if n.strip())
        self.secrets_dir = Path(secrets_dir) if secrets_dir else None
        self.environ: Mapping[str, str] = dict(environ) if environ is not None else {}

    @classmethod
    def of(cls, settings: Configured, environ: Mapping[str, str] | None = None) -> Egress:
        return cls(
            settings.egress_allow,
            secret_names=settings.secret_env_allow,
            secrets_dir=settings.secrets_dir,
            environ=environ,
        )

    # --- addresses -------------------------------------------------------------------------------
    def allows_address(self, address: Address, port: int | None = None) -> bool:
        if any(address in net or _carried(address) in net for net in self.networks):
            return True
        if port is not None and ((str(address), port) in self.ports or (str(_carried(address)), port) in self.ports):
            return True
        return public(address)

    def _listed(self, host: str, port: int | None = None) -> bool:
        name = host.lower().rstrip(".")
        return name in self.hosts or (port is not None and (name, port) in self.ports)

    def refusal(self, host: str, address: Address | None = None) -> EgressDenied:
        where = host if address is None or str(address) == host else f"{host} ({address})"
        return EgressDenied(
            f"the egress policy refuses requests to {where}: loopback, private, link-local and metadata "
            "addresses are reached only when the operator lists them",
            hint=f"list the host or its network in {ALLOW_SETTING} (e.g. {ALLOW_SETTING}={address or host}) "
            "where CaBrain runs",
        )

    def check_url(self, url: Any, what: str, *, schemes: Sequence[str] = ("http", "https")) -> str:
        """``url`` if it may be configured: an http(s) URL without credentials whose host, where it
        is written as an address, the policy allows. Raises :class:`InputError` for a malformed URL
        and :class:`EgressDenied` (403) for a refused address."""
        if not isinstance(url, str) or not url.strip():
            raise InputError(f"{what} must be a URL, got {url!r}")
        try:
            parts = urlsplit(url.strip())
            host = parts.hostname
            parts.port  # noqa: B018 - a port out of range raises here
        except ValueError:
            raise InputError(f"{what} is not a valid URL: {url!r}") from None
        if parts.scheme.lower() not in schemes or not host:
            raise InputError(f"{what} must be a {' or '.join(schemes)} URL with a host, got {url!r}")
        if parts.username is not None or parts.password is not None:
            raise InputError(
                f"{what} holds a user name or password", hint="name the credential's variable instead (its *_env)"
            )
        self.check_host(host, parts.port or _DEFAULT_PORTS.get(parts.scheme.lower()))
        return url.strip()

    def check_host(self, host: str, port: int | None = None) -> None:
        """Refuse ``host`` (on ``port``, when known) when it is written as an address the policy
        refuses (no DNS asked)."""
        if self._listed(host, port):
            return
        address = _numeric(host)
        if address is not None and not self.allows_address(address, port):
            raise self.refusal(host, address)

    def _checked(self, host: str, found: Iterable[str], port: int | None = None) -> list[str]:
        addresses: list[str] = []
        listed = self._listed(host, port)
        for text in found:
            address = ipaddress.ip_address(text.split("%", 1)[0])
            if not listed and not self.allows_address(address, port):
                raise self.refusal(host, address)
            if text not in addresses:
                addresses.append(text)
        if not addresses:
            raise EgressDenied(f"{host} resolves to no address")
        return addresses

    def addresses(self, host: str, port: int) -> list[str]:
        """The addresses ``host`` resolves to, every one allowed, or :class:`EgressDenied`."""
        found = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
        return self._checked(host, (str(info[4][0]) for info in found), port)

    async def resolve(self, host: str, port: int) -> list[str]:
        found = await asyncio.get_running_loop().getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
        return self._checked(host, (str(info[4][0]) for info in found), port)

    def check_resolved(self, host: str, found: Iterable[str], port: int | None = None) -> list[str]:
        """Check addresses another resolver found for ``host`` (aiohttp's), on ``port``."""
        return self._checked(host, found, port)

    # --- clients -----------------------------------------------------------------------------------
    def async_client(self, **kwargs: Any) -> httpx.AsyncClient:
        """An httpx client that connects only where the policy allows, follows no redirect and uses
        no proxy from the environment."""
        import httpx

        kwargs.pop("follow_redirects", None)
        transport = httpx.AsyncHTTPTransport(trust_env=False, verify=kwargs.pop("verify", True))
        transport._pool._network_backend = egress_http.AsyncBackend(self, transport._pool._network_backend)  # type: ignore[assignment]
        return httpx.AsyncClient(transport=transport, follow_redirects=False, trust_env=False, **kwargs)

    def client(self, **kwargs: Any) -> httpx.Client:
        """The synchronous :meth:`async_client`."""
        import httpx

        kwargs.pop("follow_redirects", None)
        transport = self.transport(verify=kwargs.pop("verify", True))
        return httpx.Client(transport=transport, follow_redirects=False, trust_env=False, **kwargs)

    def transport(self, **kwargs: Any) -> httpx.HTTPTransport:
        import httpx

        transport = httpx.HTTPTransport(trust_env=False, **kwargs)
        transport._pool._network_backend = egress_http.SyncBackend(self, transport._pool._network_backend)  # type: ignore[assignment]
        return transport

    def session(self) -> requests.Session:
        """A requests session whose every connection, each redirect's included, is made to a
        checked address; no proxy or .netrc from the environment."""
        import requests

        session = requests.Session()
        session.trust_env = False
        adapter = egress_http.adapter(self)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        return session

    def aiohttp_connector(self) -> aiohttp.TCPConnector:
        """An aiohttp connector whose every resolved address (literal ones included) is checked."""
        import aiohttp

        egress = self

        class Connector(aiohttp.TCPConnector):
            async def _resolve_host(self, host: str, port: int, traces: Any = None) -> list[Any]:
                found = await super()._resolve_host(host, port, traces=traces)
                egress.check_resolved(host, [str(r["host"]) for r in found], port)
                return found

        return Connector()

    def httplib2(self, timeout: float | None = None) -> Any:
        """An ``httplib2.Http`` whose connections are made to checked addresses."""
        import httplib2

        return egress_http.httplib2_http(self, httplib2, timeout)

    # --- secrets -----------------------------------------------------------------------------------
    def check_secret(self, name: Any, what: str) -> str:
        """``name`` if a credential may be read from it: a variable the operator lists in
        ``CABRAIN_SECRET_ENV_ALLOW``, or a file of that name in ``CABRAIN_SECRETS_DIR``. Raises
        :class:`InputError` for a malformed or ``CABRAIN_*`` name and :class:`AccessDenied` (403) for
        one the operator does not allow."""
        if not isinstance(name, str) or not _ENV.match(name):
            raise InputError(f"{what} must name an environment variable (A-Z, 0-9, _), got {name!r}")
        if name.upper().startswith("CABRAIN_"):
            raise InputError(
                f"{what} may not name a CaBrain setting ({name}): CaBrain's own settings never leave the server",
                hint="put the credential in a variable of its own and list it in " + SECRET_SETTING,
            )
        if name in self.secret_names or self._secret_file(name) is not None:
            return name
        where = f" or a file {name} in {DIR_SETTING}" if self.secrets_dir else ""
        raise AccessDenied(
            f"{what} names {name}, which is not a secret the operator allows",
            hint=f"the operator lists the variable in {SECRET_SETTING} (comma-separated){where}",
        )

    def secret(self, name: str | None, what: str = "a credential") -> str | None:
        """The credential named ``name`` (None: none named): the listed variable's value, else the
        secrets folder's file. A name the policy refuses, or one that holds nothing, raises
        :class:`ConfigError`; nothing else of the environment is ever read."""
        if not name:
            return None
        try:
            self.check_secret(name, what)
        except (InputError, AccessDenied) as exc:
            raise ConfigError(exc.message, hint=exc.hint) from None
        value = self.environ.get(name) if name in self.secret_names else None
        if not value:
            value = self._secret_file(name)
        if not value:
            raise ConfigError(
                f"{what} is read from {name}, which is not set where CaBrain runs",
                hint=f"export {name}=... where CaBrain runs (or put it in a file {name} in {DIR_SETTING})",
            )
        return value

    def _secret_file(self, name: str) -> str | None:
        """The file ``name`` in the secrets folder, opened without following a link (the folder's
        own path included), if it is a regular file; its text without the final newline."""
        if self.secrets_dir is None or not _ENV.match(name):
            return None
        try:
            folder = os.open(self.secrets_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
        except OSError:
            return None
        finally:
            os.close(folder)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data = os.read(fd, MAX_SECRET_BYTES + 1)
        finally:
            os.close(fd)
        if len(data) > MAX_SECRET_BYTES:
            raise ConfigError(f"the secret file {name} is larger than {MAX_SECRET_BYTES} bytes")
        return data.decode("utf-8", "replace").rstrip("\r\n") or None
