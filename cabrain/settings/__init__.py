"""CaBrain's one settings object, read from the environment (prefix ``CABRAIN_``).

Build it at an entrypoint (CLI command, Serve deployment ``__init__``, Ray job ``main``, test
fixture) with :func:`load_settings` and pass it down. Library code never reads ``os.environ``.
Importing this package does no I/O.

The fields are declared in groups (:mod:`cabrain.settings.core`, :mod:`cabrain.settings.operations`)
and put together in :mod:`cabrain.settings.model`; every public name is importable from here.
"""

from __future__ import annotations

from cabrain.settings.core import EmbeddingProvider, RerankerProvider, default_schema_dir
from cabrain.settings.model import (
    OTHER_VARIABLES,
    Settings,
    describe_unknown,
    known_variables,
    load_settings,
    settings_for_replicas,
    unknown_variables,
)
from cabrain.settings.urls import POSTGRES_SCHEMES, REDIS_SCHEMES, check_url, redact_url

__all__ = [
    "OTHER_VARIABLES",
    "POSTGRES_SCHEMES",
    "REDIS_SCHEMES",
    "EmbeddingProvider",
    "RerankerProvider",
    "Settings",
    "check_url",
    "default_schema_dir",
    "describe_unknown",
    "known_variables",
    "load_settings",
    "redact_url",
    "settings_for_replicas",
    "unknown_variables",
]
