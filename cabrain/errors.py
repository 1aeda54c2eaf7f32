"""The CaBrain error tree.

Every error a user can see says what was wrong and what to do about it. Core code raises these;
each face maps them once (exit codes in the CLI, status codes over HTTP, tool errors in MCP).

    CabrainError
    ├── ConfigError                 a setting is missing, malformed or inconsistent
    ├── UsageError                  a command was given a bad flag or argument (the CLI exits 2)
    ├── DatabaseError               the hot tier cannot be used
    │   ├── DatabaseUnreachable     connection refused, unknown host, bad credentials
    │   ├── ExtensionMissing        pgvector / pg_trgm not installed or too old
    │   ├── EmbeddedPostgresError   the embedded server could not be initialised, started or stopped
    │   └── SchemaError             the schema is not what this version expects
    │       ├── MigrationError      a migration failed to apply (nothing of the run was kept)
    │       ├── MigrationChecksumMismatch   an applied migration file was edited
    │       └── EmbeddingDimensionMismatch  the configured model does not fit the stored vectors
    ├── InputError                  a request is malformed (empty, oversized, out of range, bad UTF-8)
    ├── AlreadyExists               a namespace or agent with that name exists already
    ├── NotFound                    an unknown memory, namespace or agent
    ├── AccessDenied                reading or writing outside the caller's grants
    ├── EmbedderError               the embedding model cannot be loaded or run
    ├── Unauthenticated             no API key, or an unknown or revoked one
    ├── ServiceError                Ray / Serve / the HTTP API cannot be started or reached
    ├── CacheError                  the Redis L1 cache cannot be reached
    └── ColdStoreError              the Iceberg catalog or warehouse cannot be used
"""

from __future__ import annotations

from cabrain.fixes import Fix, render


class CabrainError(Exception):
    """Base of every error CaBrain raises on purpose.

    ``hint`` tells the user what to do; it is printed under the message by the CLI. When what to do
    is an action the caller takes on its own surface (create a namespace, accept a grant), the error
    carries it as ``fix`` (:mod:`cabrain.fixes`) and each face words it with :meth:`hint_for`; the
    plain ``hint`` then names every surface's way.
    """

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


class ConfigError(CabrainError):
    """A setting is missing, malformed or inconsistent with another."""


class UsageError(CabrainError):
    """A command line flag or argument is malformed or out of range (exit code 2, like argparse's)."""


class DatabaseError(CabrainError):
    """The PostgreSQL hot tier cannot be used."""


class DatabaseUnreachable(DatabaseError):
    """The database server did not accept a connection."""


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


class AlreadyExists(CabrainError):
    """Something with that name exists already (a namespace of another agent, an agent id)."""


class NotFound(CabrainError):
    """An unknown memory, namespace or agent (or one the caller may not know exists)."""


class ConflictError(CabrainError):
    """The request conflicts with the current state (a judgment reverted already, a memory changed since)."""


class AccessDenied(CabrainError):
    """The caller is not allowed to read or write there."""


class Unauthenticated(CabrainError):
    """A request carries no API key, or one that is unknown, revoked or of a disabled agent."""


class ServiceError(CabrainError):
    """The CaBrain service (Ray, Serve, the HTTP API) cannot be started or reached."""


class EmbedderError(CabrainError):
    """The embedding model cannot be loaded or run."""


class CacheError(CabrainError):
    """The Redis L1 cache cannot be reached."""


class ColdStoreError(CabrainError):
    """The Iceberg cold tier (catalog or warehouse) cannot be used."""
