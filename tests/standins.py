"""A stand-in of a hosted service (tests/fakes/gitlab_server.py, drive_server.py, vikunja_server.py)
running for one test: its URL, the state file it re-reads on every request, its request log, and the
sources a test built on it (closed when the test ends)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from cabrain.connectors.base import Source, SourceSpec
from cabrain.connectors.retry import Retry
from cabrain.connectors.sources import build, configure
from tests.conftest import loopback_egress, start_fake


@dataclass
class Running:
    """A stand-in on loopback: its URL, the state it re-reads on every request, and its log."""

    url: str
    state: Path
    log: Path

    def set(self, **state: Any) -> None:
        self.state.write_text(json.dumps(state))

    def seen(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def read(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.state.read_text())
        return data

    def edit(self, change: Callable[[dict[str, Any]], object]) -> None:
        """Change the service's contents as its users would (it re-reads them on the next request)."""
        data = self.read()
        change(data)
        self.state.write_text(json.dumps(data))


@dataclass
class RunningStand(Running):
    kind: str  # the connector kind its sources are
    url_key: str  # the config key that takes the stand-in's URL
    defaults: Mapping[str, Any]  # the rest of a source's config, unless a test says otherwise
    token: str
    sources: list[Source] = field(default_factory=list)

    def requests(self, ending: str | None = None) -> list[dict[str, Any]]:
        """The requests it answered, in order (those whose path ends with ``ending``)."""
        return [r for r in self.seen() if ending is None or r["path"].endswith(ending)]

    def source(self, sleeps: list[float], *, token: str | None = None, url: str | None = None, **config: Any) -> Source:
        """A source on the stand-in, its retries' waits recorded in ``sleeps`` instead of slept."""
        settings = {self.url_key: url or self.url, **self.defaults} | config
        spec = SourceSpec(
            self.kind,
            configure(self.kind, settings),
            secret=self.token if token is None else token,
            egress=loopback_egress(),
        )
        built = build(spec, Retry(sleep=sleeps.append))
        self.sources.append(built)
        return built


S = TypeVar("S", bound=RunningStand)


@contextlib.contextmanager
def running(
    cls: type[S],
    module: str,
    folder: Path,
    empty: Mapping[str, Any],
    *,
    token: str,
    kind: str,
    url_key: str,
    defaults: Mapping[str, Any],
) -> Iterator[S]:
    """``python -m tests.fakes.<module>`` on loopback with ``empty`` as its state, for the block."""
    state = folder / "state.json"
    state.write_text(json.dumps(dict(empty)))
    log = folder / "requests.jsonl"
    proc, port = start_fake(module, "--state", str(state), "--token", token, "--log", str(log))
    stand = cls(f"http://127.0.0.1:{port}", state, log, kind, url_key, defaults, token)
    try:
        yield stand
    finally:
        for source in stand.sources:
            source.close()
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def standing(module: str, folder: Path, token: str, **state: Any) -> Iterator[Running]:
    path, log = folder / f"{module}.json", folder / f"{module}.jsonl"
    path.write_text(json.dumps(state))
    proc, port = start_fake(module, "--state", str(path), "--token", token, "--log", str(log))
    try:
        yield Running(f"http://127.0.0.1:{port}", path, log)
    finally:
        proc.terminate()
        proc.wait(10)
