"""Signing in to the console, and proving that a change came from its own pages.

- The key is posted once, from the sign-in form, and never leaves the server again: the cookie holds
  a random session id (``secrets.token_urlsafe``), of which PostgreSQL keeps only the digest
  (``console_sessions``), with the key it was opened with and an expiry
  (``CABRAIN_CONSOLE_SESSION_TTL_S``). Browsers do not separate cookies by port, so another local web
  app may see the cookie: it gets an id that works on this console only, until it ends - never the
  key, which works everywhere. The cookie is ``HttpOnly``, sent only on the console's own requests
  (``SameSite=Strict``, ``Path=/console``, ``Secure`` over HTTPS) and ends with the browser.
- Every request looks the session up (:meth:`cabrain.membership.Membership.console_session`): it
  ends at once, on every replica, when its key is revoked or its agent disabled, at sign-out (its
  row is deleted) and at a new sign-in in the same browser (a new id replaces it).
- Every change (a POST) carries a CSRF token in its form: an HMAC keyed by the session id, which a
  page of another site can neither read nor compute. Sign-in, before there is a key, uses a random nonce in
  a cookie and the form (double submit). A POST whose ``Origin`` is another site's is refused too.
- The key never travels in a URL: it is posted once, from the sign-in form.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import urllib.parse
from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import Response

from cabrain.errors import AccessDenied, Unauthenticated
from cabrain.identity import Principal

COOKIE = "cabrain_console"
LOGIN_COOKIE = "cabrain_console_login"
PATH = "/console"
CSRF_FIELD = "csrf"


@dataclass(frozen=True)
class Session:
    """A signed-in person: the agent their session's key names, and the token their forms carry."""

    principal: Principal
    csrf: str

    @property
    def agent(self) -> str:
        return self.principal.agent_id


def csrf_token(session_id: str) -> str:
    """The CSRF token of a session: an HMAC keyed by its id (the same on every replica)."""
    return hmac.new(session_id.encode(), b"cabrain-console-csrf", hashlib.sha256).hexdigest()


def secure(request: Request) -> bool:
    """The console is reached over HTTPS (directly, or behind a proxy that says so)."""
    forwarded = request.headers.get("x-forwarded-proto", "")
    return request.url.scheme == "https" or forwarded.split(",")[0].strip().lower() == "https"


def set_cookie(response: Response, request: Request, name: str, value: str) -> None:
    response.set_cookie(name, value, path=PATH, httponly=True, samesite="strict", secure=secure(request))


def clear_cookie(response: Response, request: Request, name: str) -> None:
    response.delete_cookie(name, path=PATH, httponly=True, samesite="strict", secure=secure(request))


def session_id(request: Request) -> str | None:
    """The session id the browser sent (never a key: a cookie holding one is no session)."""
    return request.cookies.get(COOKIE) or None


def login_nonce() -> str:
    return secrets.token_urlsafe(24)


def check_origin(request: Request) -> None:
    """A change must come from this site: an ``Origin`` (or, without one, a ``Referer``) naming
    another host is refused. Browsers send one of them on every form POST."""
    claimed = request.headers.get("origin") or request.headers.get("referer")
    if claimed is None:
        return
    parts = urllib.parse.urlsplit(claimed)
    host = request.headers.get("host", "")
    if claimed == "null" or parts.netloc.lower() != host.lower():
        raise AccessDenied("this change came from another site's page", hint="use the console's own forms")


def check_csrf(given: str | None, expected: str) -> None:
    if not given or not hmac.compare_digest(given, expected):
        raise AccessDenied(
            "the form's CSRF token is missing or wrong", hint="reload the page and submit its form again"
        )


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a console page of this site, never another site."""
    if not target:
        return f"{PATH}/memories"
    parts = urllib.parse.urlsplit(target)
    if parts.scheme or parts.netloc or not (parts.path == PATH or parts.path.startswith(PATH + "/")):
        return f"{PATH}/memories"
    if "\\" in target or target.startswith("//") or ".." in parts.path.split("/"):
        return f"{PATH}/memories"
    return target


def signed_out(message: str = "") -> Unauthenticated:
    return Unauthenticated(message or "sign in with an API key", hint="open /console/login")


__all__ = [
    "COOKIE",
    "CSRF_FIELD",
    "LOGIN_COOKIE",
    "PATH",
    "Session",
    "check_csrf",
    "check_origin",
    "clear_cookie",
    "csrf_token",
    "login_nonce",
    "safe_next",
    "session_id",
    "set_cookie",
    "signed_out",
]
