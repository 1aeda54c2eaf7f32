"""python-gitlab the way CaBrain uses it, for the gitlab connector's source and its issue tracker.

One :class:`GitLabClient` is one GitLab project over one HTTP session. python-gitlab's own retries
are off (``retry_transient_errors``, ``obey_rate_limit`` and ``max_retries`` on every call: pass
:data:`ONCE`): each request, each page of a listing included, goes through
:meth:`~cabrain.connectors.retry.Retry.call`, the one retry layer, with the ``Retry-After`` a 429 or
a 503 asked for. Failures become :class:`~cabrain.errors.SourceError` (a refused or under-scoped
token :class:`~cabrain.errors.SourceAuthError`, whose hint names the token's variable and the
``scope`` the caller needs: ``read_api`` to read, ``api`` to write). The token travels as
``PRIVATE-TOKEN``. python-gitlab is imported when a client is built, not with CaBrain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from cabrain.connectors.retry import Retry, retry_after
from cabrain.egress import Egress
from cabrain.errors import SourceAuthError, SourceError

if TYPE_CHECKING:
    import gitlab
    import requests
    from gitlab.v4.objects import Project

__all__ = ["ONCE", "PER_PAGE", "TIMEOUT_S", "GitLabClient", "UnreadableAnswer"]

PER_PAGE = 100
TIMEOUT_S = 60.0
# Every call: python-gitlab neither sleeps on a 429 nor retries a 5xx or a lost connection itself.
ONCE: dict[str, Any] = {"obey_rate_limit": False, "max_retries": 0, "retry_transient_errors": False}

T = TypeVar("T")


class GitLabClient:
    """One GitLab project (``config``: a gitlab connector's checked config) through python-gitlab,
    each request retried by ``retry``; ``scope`` is the token scope the caller's requests need."""

    def __init__(
        self,
        config: Mapping[str, Any],
        token: str | None,
        retry: Retry,
        *,
        scope: str = "read_api",
        egress: Egress | None = None,
    ) -> None:
        import gitlab
        import requests

        self.url: str = config["url"]
        self.ident: str | int = config["project"]
        self.token_env: str | None = config.get("token_env")
        self.scope = scope
        self.retry = retry
        self._errors = (gitlab.exceptions.GitlabError, requests.RequestException)
        self._auth_error = gitlab.exceptions.GitlabAuthenticationError
        self._parse_error = gitlab.exceptions.GitlabParsingError
        self._ssl_error = requests.exceptions.SSLError
        self._headers: Mapping[str, str] = {}
        session = (egress or Egress()).session()  # every connection, each redirect's, to a checked address
        session.hooks["response"].append(self._answered)  # a failure's Retry-After: python-gitlab drops headers
        self.gl: gitlab.Gitlab = gitlab.Gitlab(
            self.url,
            private_token=token or None,
            ssl_verify=bool(config.get("ssl_verify", True)),
            timeout=TIMEOUT_S,
            retry_transient_errors=False,
            keep_base_url=True,  # pagination links follow the URL configured, not GitLab's external_url
            session=session,
        )
        self.project: Project | None = None

    @property
    def name(self) -> str:
        """The project as people name it (its path), once read; the configured id or path before."""
        if self.project is not None:
            return str(self.project.attributes.get("path_with_namespace") or self.ident)
        return str(self.ident)

    def load_project(self) -> Project:
        """The project, read (and kept as :attr:`project`)."""
        self.project = self.call(
            f"read project {self.ident}",
            lambda: self.gl.projects.get(self.ident, **ONCE),
            missing=f"no project {self.ident!r} at {self.url}",
            hint="check the project's numeric id or its path (group/name); GitLab answers 404 too for a "
            "private project the token's user cannot see",
        )
        return self.project

    def call(self, what: str, fn: Callable[[], T], *, missing: str | None = None, hint: str | None = None) -> T:
        """``fn()`` (one request to GitLab), its failures as SourceError, retried by the Retry;
        ``missing`` (and ``hint``) say what a 404 means."""
        return self.retry.call(what, lambda: self.once(what, fn, missing=missing, hint=hint))

    def once(self, what: str, fn: Callable[[], T], *, missing: str | None = None, hint: str | None = None) -> T:
        """``fn()`` tried once, its failure as SourceError: for a caller whose retries need more
        than trying again (a create that may have happened), inside its own :meth:`Retry.call`."""
        self._headers = {}
        try:
            return fn()
        except self._errors as exc:
            raise self.error(what, exc, missing=missing, hint=hint) from exc

    def pages(self, what: str, start: Callable[[], Iterator[T]], *, missing: str | None = None) -> Iterator[T]:
        """Every object of a listing. Its first page comes with ``start``; each next one is fetched
        (and retried alone) when the one before is used up."""
        listing = self.call(what, start, missing=missing)
        while True:
            item = self.call(what, lambda: next(listing, None), missing=missing)
            if item is None:
                return
            yield item

    def close(self) -> None:
        self.gl.session.close()

    def _answered(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        self._headers = response.headers

    def error(self, what: str, exc: Exception, *, missing: str | None = None, hint: str | None = None) -> SourceError:
        """The SourceError for a failed request: auth errors stop the caller, 429/5xx/no answer are retried."""
        where = f"GitLab at {self.url}"
        code: int | None = getattr(exc, "response_code", None)
        if isinstance(exc, self._auth_error) or code == 401:
            if not self.token_env:
                return SourceAuthError(
                    f"{where} refused to {what} without a token (401)",
                    hint=f"set token_env to the name of a variable holding an access token with the {self.scope} scope",
                )
            return SourceAuthError(
                f"{where} refused the token to {what} (401): check the token in ${self.token_env}",
                hint=f"${self.token_env} may be mistyped, expired or revoked; it needs the {self.scope} scope",
            )
        if code == 403:
            token = f"the token in ${self.token_env}" if self.token_env else "the token"
            return SourceAuthError(
                f"{where} forbids {what} (403): {token} lacks the {self.scope} scope or access to {self.name}",
                hint=f"give {token} the {self.scope} scope, and its user at least the Reporter role in {self.name}",
            )
        if code == 404:
            return SourceError(missing or f"{what}: {where} answered 404 (not found)", status_code=404, hint=hint)
        if code is not None:
            message = str(getattr(exc, "error_message", "") or exc)[:200]
            return SourceError(
                f"{what}: {where} answered {code} ({message})",
                status_code=code,
                retry_after=retry_after(self._headers.get("Retry-After")),
            )
        if isinstance(exc, self._parse_error):
            return UnreadableAnswer(
                f"{what}: {where} answered something that is not GitLab's JSON",
                hint="check that url is the GitLab instance's address (without /api/v4), and any proxy before it",
            )
        tls = isinstance(exc, self._ssl_error)
        return SourceError(
            f"{what}: could not reach {where} ({type(exc).__name__}: {exc})",
            hint="a self-signed certificate needs its CA installed, or ssl_verify false"
            if tls
            else "check the url, and that the instance is up and reachable from here",
        )


class UnreadableAnswer(SourceError):
    """GitLab (or a proxy before it) answered a request with something other than its JSON (a
    maintenance page with status 200). Not retried: python-gitlab's listing has moved past the page
    by then, so a retry would skip it, and the items on it would read as deleted."""

    @property
    def transient(self) -> bool:
        return False
