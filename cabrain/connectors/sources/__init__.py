"""The connector kinds, each a module of :mod:`cabrain.connectors.sources`, loaded when used.

A kind's module declares:

- ``KIND``: its name (also the memories' ``source_kind``);
- ``LOCAL``: whether it reads files on the host that runs the sync (a folder, an export), rather
  than a server over the network;
- ``configure(config) -> dict``: the config checked and normalised (unknown keys, missing ones and
  bad values raise :class:`~cabrain.errors.InputError` naming the key). A credential is never in
  the config: ``token_env`` (and, where a source has one, ``username``) names the environment
  variable the sync reads it from;
- ``build(spec, retry) -> Source``: the source, given the config, the credential and how to retry.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from cabrain.connectors.base import Source, SourceSpec
from cabrain.connectors.retry import Retry
from cabrain.errors import InputError

__all__ = ["KINDS", "build", "configure", "is_local", "module"]

KINDS: dict[str, str] = {
    "folder": "cabrain.connectors.sources.folder",
    "webdav": "cabrain.connectors.sources.webdav",
    "gitlab": "cabrain.connectors.sources.gitlab",
    "gdrive": "cabrain.connectors.sources.gdrive",
    "vikunja": "cabrain.connectors.sources.vikunja",
    "slack-export": "cabrain.connectors.sources.slack_export",
    "whatsapp": "cabrain.connectors.sources.whatsapp",
}


def module(kind: str) -> ModuleType:
    if kind not in KINDS:
        raise InputError(f"unknown connector kind {kind!r}; the kinds are: {', '.join(sorted(KINDS))}")
    return importlib.import_module(KINDS[kind])


def configure(kind: str, config: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(config, Mapping):
        raise InputError(f"a {kind} connector's config must be a JSON object")
    return dict(module(kind).configure(config))


def is_local(kind: str) -> bool:
    return bool(module(kind).LOCAL)


def build(spec: SourceSpec, retry: Retry) -> Source:
    source: Source = module(spec.kind).build(spec, retry)
    return source
