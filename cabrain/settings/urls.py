"""Checking and redacting the URLs that settings hold."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

POSTGRES_SCHEMES = ("postgres", "postgresql")
REDIS_SCHEMES = ("redis", "rediss", "unix")


def check_url(url: str, schemes: tuple[str, ...]) -> None:
    """Raise ``ValueError`` with a readable message if ``url`` is not a usable URL of ``schemes``."""
    wanted = " or ".join(f"{s}://" for s in schemes)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise ValueError(f"{redact_url(url)!r} is not a valid URL ({exc})") from None
    if parts.scheme not in schemes or not url.startswith(f"{parts.scheme}://"):
        raise ValueError(f"must be a URL starting with {wanted}, got {redact_url(url)!r}")


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for logs, errors and doctor)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
