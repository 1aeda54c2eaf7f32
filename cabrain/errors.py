"""The CaBrain error tree.

Every error a user can see says what was wrong and what to do about it. Core code raises these;
each face maps them once (exit codes in the CLI, tool errors in MCP). Over HTTP each class carries
its answer: ``status`` and ``kind`` (the error body's ``type``), inherited unless a class declares
its own. Every class that declares a ``kind`` is registered in :data:`KINDS`, from which the API
answers and the client raises the class back (:func:`error_class`), so the two cannot drift.

    CabrainError                    500 internal
    ├── ConfigError                 500 misconfigured: a setting is missing, malformed or inconsistent
    ├── UsageError                  a command was given a bad flag or argument (the CLI exits 2)
    ├── DatabaseError               503 database_unavailable: the hot tier cannot be used
    │   ├── DatabaseUnreachable     connection refused, unknown host, bad credentials
    │   ├── ExtensionMissing        pgvector / pg_trgm not installed or too old
    │   ├── EmbeddedPostgresError   the embedded server could not be initialised, started or stopped
    │   └── SchemaError             the schema is not what this version expects
    │       ├── MigrationError      a migration failed to apply (nothing of the run was kept)
    │       ├── MigrationChecksumMismatch   an applied migration file was edited
    │       └── EmbeddingDimensionMismatch  the configured model does not fit the stored vectors
    ├── InputError                  400 bad_request: malformed (empty, oversized, out of range, bad UTF-8)
    │   ├── InvalidRequest          422 invalid: well-formed JSON of the wrong shape
    │   ├── PayloadTooLarge         413 payload_too_large: a request body over the limit
    │   ├── ArchiveTooLarge         413 archive_too_large: an archive over its member, size or ratio limits
    │   └── MethodNotAllowed        405 method_not_allowed: a route called with a method it lacks
    ├── AlreadyExists               409 already_exists: a namespace or agent with that name exists
    ├── ConflictError               409 conflict: the request conflicts with the current state
    ├── NotFound                    404 not_found: an unknown memory, namespace or agent
    ├── AccessDenied                403 forbidden: reading or writing outside the caller's grants
    │   └── PolicyDenied            403 policy_denied: the agent's role does not allow the operation
    │       └── ConfirmationRequired 403 confirmation_required: held until a person approves it
    ├── QuotaExceeded               429 quota_exceeded: the agent reached a cap on its usage
    ├── Unauthenticated             401 unauthenticated: no API key, or an unknown or revoked one
    ├── EmbedderError               503 model_unavailable: the embedding model cannot be loaded or run
    ├── ModelError                  502 model_failed: a chat or task model failed to answer
    │   ├── LLMError                the chat model (write decisions, sleep) could not be used
    │   └── ModelCallError          a task model (workflows) failed after every retry
    ├── ServiceError                503 service_unavailable: Ray / Serve / the API cannot be reached
    │   ├── ServiceTimeout          408 timeout: the request took longer than the service allows
    │   └── ServiceBusy             429 too_many_requests: the service refused it for load
    ├── CacheError                  503 cache_unavailable: the Redis L1 cache cannot be reached
    ├── ColdStoreError              503 cold_tier_unavailable: the Iceberg catalog or warehouse
    └── SourceError                 502 source_failed: a connector's source failed after every retry
        └── SourceAuthError         502 source_unauthorized: the source refused the credential (401/403)
"""

from __future__ import annotations

from typing import Any, ClassVar

from cabrain.fixes import Fix, render

KINDS: dict[str, type[CabrainError]] = {}
"""Every kind an error body can carry, to the class a client raises for it."""


class CabrainError(Exception):
    """Base of every error CaBrain raises on purpose.

    ``hint`` tells the user what to do; it is printed under the message by the CLI. When what to do
    is an action the caller takes on its own surface (create a namespace, accept a grant), the error
    carries it as ``fix`` (:mod:`cabrain.fixes`) and each face words it with :meth:`hint_for`; the
    plain ``hint`` then names every surface's way.

    A subclass that declares ``kind`` registers it in :data:`KINDS`; one that declares the kind of
    a class above it takes it over (a client then raises the subclass for it).
    """

    status: ClassVar[int] = 500
    kind: ClassVar[str] = "internal"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" not in vars(cls):
            return
        holder = KINDS.get(cls.kind)
        if holder is not None and not issubclass(cls, holder):
            raise TypeError(f"{cls.__name__} declares kind {cls.kind!r}, which {holder.__name__} holds")
        KINDS[cls.kind] = cls

    def __init__(self, message: str, *, hint: str | None = None, fix: Fix | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.hint = hint if hint is not None or fix is None else render(fix, None)

    def hint_for(self, surface: str) -> str | None:
        """The hint in the words of ``surface`` (mcp, http, cli): its fix, else the plain hint."""
        return (render(self.fix, surface) if self.fix is not None else None) or self.hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  fix: {self.hint}"
        return self.message


def error_class(kind: str) -> type[CabrainError]:
    """The class a client raises for an error body of ``kind`` (an unknown kind: :class:`ServiceError`)."""
    return KINDS.get(kind, ServiceError)


class ConfigError(CabrainError):
    """A setting is missing, malformed or inconsistent with another."""

    status = 500
    kind = "misconfigured"


class UsageError(CabrainError):
    """A command line flag or argument is malformed or out of range (exit code 2, like argparse's)."""


class DatabaseError(CabrainError):
    """The PostgreSQL hot tier cannot be used."""

    status = 503
    kind = "database_unavailable"


class DatabaseUnreachable(DatabaseError):
    """The database server did not accept a connection."""

    kind = "database_unavailable"  # taken over from DatabaseError: a client raises this class for it


class ExtensionMissing(DatabaseError):
    """A required PostgreSQL extension is not installed, not creatable, or too old."""


class EmbeddedPostgresError(DatabaseError):
    """The embedded PostgreSQL server could not be initialised, started or stopped."""


class SchemaError(DatabaseError):
    """The database schema is not what this version of CaBrain expects."""


class MigrationError(SchemaError):
    """A migration failed; the run was rolled back and the schema is as it was before."""


class MigrationChecksumMismatch(SchemaError):
    """A migration file that was already applied has been edited since."""


class EmbeddingDimensionMismatch(SchemaError):
    """The configured embedding model's dimension differs from the one the schema was created for."""


class InputError(CabrainError):
    """A request is malformed: empty, oversized, out of range, not valid UTF-8."""

    status = 400
    kind = "bad_request"


class InvalidRequest(InputError):
    """A request of the wrong shape: a missing or unknown field, a value of the wrong type."""

    status = 422
    kind = "invalid"


class PayloadTooLarge(InputError):
    """A request body over the size the API takes."""

    status = 413
    kind = "payload_too_large"


class ArchiveTooLarge(InputError):
    """An archive over the limits it is read with (a zip bomb, or just too much)."""

    status = 413
    kind = "archive_too_large"


class MethodNotAllowed(InputError):
    """A route called with an HTTP method it does not answer."""

    status = 405
    kind = "method_not_allowed"


class AlreadyExists(CabrainError):
    """Something with that name exists already (a namespace of another agent, an agent id)."""

    status = 409
    kind = "already_exists"


class NotFound(CabrainError):
    """An unknown memory, namespace or agent (or one the caller may not know exists)."""

    status = 404
    kind = "not_found"


class ConflictError(CabrainError):
    """The request conflicts with the current state (a judgment reverted already, a memory changed since)."""

    status = 409
    kind = "conflict"


class AccessDenied(CabrainError):
    """The caller is not allowed to read or write there."""

    status = 403
    kind = "forbidden"


class PolicyDenied(AccessDenied):
    """The agent's role does not allow this kind of operation (:mod:`cabrain.policy`); the message
    names the policy."""

    kind = "policy_denied"

    def __init__(self, message: str, *, policy: str = "", hint: str | None = None, fix: Fix | None = None) -> None:
        super().__init__(message, hint=hint, fix=fix)
        self.policy = policy


class ConfirmationRequired(PolicyDenied):
    """The agent's role holds this operation until a person approves it (the pending action's id is
    in the fix)."""

    kind = "confirmation_required"


class QuotaExceeded(CabrainError):
    """The agent reached a cap on its usage (``cabrain usage cap``); it resets at midnight UTC."""

    status = 429
    kind = "quota_exceeded"


class Unauthenticated(CabrainError):
    """A request carries no API key, or one that is unknown, revoked or of a disabled agent."""

    status = 401
    kind = "unauthenticated"


class ServiceError(CabrainError):
    """The CaBrain service (Ray, Serve, the HTTP API) cannot be started or reached."""

    status = 503
    kind = "service_unavailable"


class ServiceTimeout(ServiceError):
    """The service gave up on a request that took longer than it allows (Serve's request timeout)."""

    status = 408
    kind = "timeout"


class ServiceBusy(ServiceError):
    """The service refused a request for load (retry after the time it names)."""

    status = 429
    kind = "too_many_requests"
    retry_after_s: int = 2  # the API answers it with Retry-After


class EmbedderError(CabrainError):
    """The embedding model cannot be loaded or run."""

    status = 503
    kind = "model_unavailable"


class ModelError(CabrainError):
    """A chat or task model could not be reached or did not answer usefully."""

    status = 502
    kind = "model_failed"


class LLMError(ModelError):
    """The chat model could not be reached or answered nonsense."""


class ModelCallError(ModelError):
    """A model could not be reached or did not answer usefully, after every retry."""

    def __init__(self, message: str, *, hint: str | None = None, attempts: int = 1) -> None:
        super().__init__(message, hint=hint)
        self.attempts = attempts


class CacheError(CabrainError):
    """The Redis L1 cache cannot be reached."""

    status = 503
    kind = "cache_unavailable"


class ColdStoreError(CabrainError):
    """The Iceberg cold tier (catalog or warehouse) cannot be used."""

    status = 503
    kind = "cold_tier_unavailable"


class SourceError(CabrainError):
    """A connector's source (GitLab, a WebDAV server, Drive, a file) could not be read, after every
    retry the failure allowed."""

    status = 502
    kind = "source_failed"

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        fix: Fix | None = None,
        status_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, hint=hint, fix=fix)
        self.status_code = status_code  # the source's HTTP status, where it answered one
        self.retry_after = retry_after  # seconds the source asked to wait (Retry-After), if it did

    @property
    def transient(self) -> bool:
        """Worth another try: rate-limited (429), a server error (5xx), or no answer at all."""
        return self.status_code is None or self.status_code == 429 or self.status_code >= 500


class SourceAuthError(SourceError):
    """The source refused the connector's credential (401, or 403 where the source means "who are you"):
    the connector stops until its credential is fixed."""

    kind = "source_unauthorized"

    @property
    def transient(self) -> bool:
        return False


class SourceRefused(SourceError):
    """While a connector was being added, its source refused what the config names (a path that is
    not there or not a folder, a project or folder not visible): the request is what is wrong, so
    nothing is added and the caller is told so (422), unlike a sync's failure of the source (502)."""

    status = 422
    kind = "source_refused"

    @property
    def transient(self) -> bool:
        return False


class SourceAuthRefused(SourceAuthError):
    """While a connector was being added, its source refused the credential the config names (422)."""

    status = 422
    kind = "source_unauthorized_at_add"
