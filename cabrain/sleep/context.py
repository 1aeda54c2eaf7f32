"""What a sleep step runs with: a connection pool on the sleep plane, the settings, the run, and
the providers it may need (loaded on first use: most steps need no model at all)."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import asyncpg

from cabrain.clock import Clock, utc_now
from cabrain.providers.embedders import Embedder, load_embedder
from cabrain.providers.llm import ChatModel, load_chat_model
from cabrain.settings import Settings
from cabrain.store.pool import create_pool

if TYPE_CHECKING:  # pyarrow loads with the cold tier, on first use (cold())
    from cabrain.store.cold import ColdTier


@dataclass
class StepResult:
    """Counts (always complete) and changes (ids with what happened, capped) of one step."""

    counts: dict[str, int] = field(default_factory=dict)
    changes: list[dict[str, Any]] = field(default_factory=list)
    cap: int = 200

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def change(self, **what: Any) -> None:
        if len(self.changes) < self.cap:
            self.changes.append({k: str(v) if isinstance(v, uuid.UUID) else v for k, v in what.items()})

    def to_json(self) -> dict[str, Any]:
        return {"counts": self.counts, "changes": self.changes}


class StepContext:
    def __init__(self, settings: Settings, dsn: str, run_id: uuid.UUID, *, clock: Clock = utc_now) -> None:
        self.settings, self.dsn, self.run_id = settings, dsn, run_id
        self.clock = clock  # "now" for every age a step decides on (passed into its SQL; cabrain.clock)
        self._pool: asyncpg.Pool | None = None
        self._embedder: Embedder | None = None
        self._chat: ChatModel | Literal[False] | None = None  # False: none configured
        self._cold: ColdTier | None = None
        self._lock = asyncio.Lock()

    async def pool(self) -> asyncpg.Pool:
        async with self._lock:
            if self._pool is None:
                self._pool = await create_pool(self.dsn, self.settings)
        return self._pool

    async def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = await asyncio.to_thread(load_embedder, self.settings)
        return self._embedder

    def chat(self) -> ChatModel | None:
        if self._chat is None:
            self._chat = load_chat_model(self.settings) or False
        return self._chat or None

    def cold(self) -> ColdTier:
        if self._cold is None:
            from cabrain.store.cold import ColdTier  # pyarrow (and pyiceberg) load on first use

            self._cold = ColdTier(self.settings)
        return self._cold

    def result(self) -> StepResult:
        return StepResult(cap=self.settings.sleep_max_changes)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


def jsonb(value: Any) -> str:
    return json.dumps(value, default=str)


__all__ = ["StepContext", "StepResult", "jsonb"]
