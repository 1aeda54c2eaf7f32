"""Checking a connector's config: every kind's ``configure`` states its keys here once.

    configure = checked(
        "gitlab",
        required={"url": str, "project": (str, int)},
        optional={"token_env": (str, None), "include": (list, ["issues", "merge_requests", "wiki"])},
    )

An unknown key, a missing required one or a value of the wrong type raises
:class:`~cabrain.errors.InputError` naming the key; a ``*_env`` value must be an environment
variable's name and may not name one of CaBrain's own settings (``CABRAIN_*``): a connector must
never send the database's password to a server it was pointed at.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping
from typing import Any

from cabrain.errors import InputError

__all__ = ["checked", "env_name", "globs", "http_url", "matches"]

_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

TypeSpec = type | tuple[type, ...]


def env_name(kind: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not _ENV.fullmatch(value):
        raise InputError(f"{kind} connector: {key} must name an environment variable (A-Z, 0-9, _), got {value!r}")
    if value.upper().startswith("CABRAIN_"):
        raise InputError(
            f"{kind} connector: {key} may not name a CaBrain setting ({value}); "
            "put the source's credential in a variable of its own, e.g. GITLAB_TOKEN"
        )
    return value


def http_url(kind: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not re.match(r"^https?://[^\s/]+", value):
        raise InputError(f"{kind} connector: {key} must be an http:// or https:// URL, got {value!r}")
    return value.rstrip("/")


def checked(
    kind: str,
    *,
    required: Mapping[str, TypeSpec],
    optional: Mapping[str, tuple[TypeSpec, Any]] | None = None,
    check: Callable[[dict[str, Any]], None] | None = None,
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A ``configure`` function for ``kind``: the config with defaults filled in, or InputError.
    Keys ending in ``_env`` are checked with :func:`env_name`, ``url`` with :func:`http_url`;
    ``check`` sees the result last, for rules between keys."""
    optional = optional or {}

    def configure(config: Mapping[str, Any]) -> dict[str, Any]:
        unknown = set(config) - set(required) - set(optional)
        if unknown:
            known = ", ".join(sorted([*required, *optional]))
            raise InputError(f"{kind} connector: unknown config key(s) {', '.join(sorted(unknown))}; known: {known}")
        out: dict[str, Any] = {}
        for key, types in required.items():
            if config.get(key) in (None, ""):
                raise InputError(f"{kind} connector: {key} is required")
            out[key] = _typed(kind, key, config[key], types)
        for key, (types, default) in optional.items():
            value = config.get(key)
            out[key] = default if value is None else _typed(kind, key, value, types)
        if check is not None:
            check(out)
        return out

    return configure


def _typed(kind: str, key: str, value: Any, types: TypeSpec) -> Any:
    allowed = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool) and bool not in allowed:
        raise InputError(f"{kind} connector: {key} must be {_names(allowed)}, got {value!r}")
    if not isinstance(value, allowed):
        raise InputError(f"{kind} connector: {key} must be {_names(allowed)}, got {value!r}")
    if key.endswith("_env"):
        return env_name(kind, key, value)
    if key == "url":
        return http_url(kind, key, value)
    return value


def _names(types: tuple[type, ...]) -> str:
    words = {
        str: "a string",
        int: "an integer",
        bool: "true or false",
        list: "a list",
        dict: "an object",
        float: "a number",
    }
    return " or ".join(words.get(t, t.__name__) for t in types)


def globs(kind: str, *keys: str) -> Callable[[dict[str, Any]], None]:
    """A ``check`` that ``keys`` are lists of glob patterns."""

    def check(config: dict[str, Any]) -> None:
        for key in keys:
            if not all(isinstance(p, str) and p.strip() for p in config[key]):
                raise InputError(f"{kind} connector: {key} must be a list of glob patterns")

    return check


def matches(rel: str, patterns: list[str]) -> bool:
    """``rel`` (a/b/c.md) matches a pattern: by its whole path, or by its name for a pattern without
    a slash (``*.md`` takes every Markdown file at any depth)."""
    name = rel.rsplit("/", 1)[-1]
    for pattern in patterns:
        pattern = pattern.removeprefix("./").removeprefix("**/")
        if fnmatch.fnmatchcase(rel, pattern) or ("/" not in pattern and fnmatch.fnmatchcase(name, pattern)):
            return True
    return False
