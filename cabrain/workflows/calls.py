"""Calling registered models and recording every call (``llm_calls``): model, purpose, tokens in
and out, cost, duration, attempts, error. The agent's measured latency (a moving average over its
successful calls) and its call and failure counts are kept in the registry."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg

from cabrain.providers.llm_calls import CallPolicy, Completion, ModelCallError, TaskModel
from cabrain.redact import redact
from cabrain.store import workflow_models as sql
from cabrain.workflows.registry import ModelAgent


def cost_of(
    agent: ModelAgent, prices: dict[str, tuple[float, float]], tokens_in: int | None, tokens_out: int | None
) -> float | None:
    """USD for a call; None when the price or either token count is unknown (never guessed)."""
    rate = agent.prices(prices)
    if rate is None or tokens_in is None or tokens_out is None:
        return None
    return tokens_in / 1000 * rate[0] + tokens_out / 1000 * rate[1]


@dataclass(frozen=True)
class Step:
    """One call of a chain, as stored with an attempt."""

    role: str
    agent: str
    model: str
    output: str
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    duration_ms: float

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "agent": self.agent,
            "model": self.model,
            "output": self.output,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": self.cost_usd,
            "duration_ms": round(self.duration_ms, 1),
        }


class Meter(Protocol):
    async def __call__(
        self, kind: str, units: int, *, cost_usd: float = 0.0, check: bool = True, count: bool = True
    ) -> None: ...


class Caller:
    """Calls models from the registry and records each call on ``pool``."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        policy: CallPolicy,
        prices: dict[str, tuple[float, float]],
        max_tokens: int,
        meter: Meter | None = None,
        scrub: bool = True,
    ) -> None:
        self.pool, self.policy, self.prices, self.max_tokens = pool, policy, prices, max_tokens
        self.scrub = scrub  # answers and errors redacted (CABRAIN_REDACT_SECRETS) before they are kept
        self.meter = meter  # usage: each call counted (tokens, cost) to the agent the task acts for
        self._models: dict[str, TaskModel] = {}

    def model(self, agent: ModelAgent) -> TaskModel:
        key = f"{agent.name}|{agent.provider}|{agent.endpoint}|{agent.model}|{agent.api_key_env}"
        if key not in self._models:
            self._models[key] = agent.build(self.policy)
        return self._models[key]

    async def call(
        self,
        agent: ModelAgent,
        system: str,
        user: str,
        *,
        purpose: str,
        task_id: Any,
        role: str = "answer",
        schema: dict[str, Any] | None = None,
    ) -> Step:
        """One recorded call (its answer held to ``schema`` when given); raises
        :class:`ModelCallError` (recorded too) when it fails."""
        model = self.model(agent)  # a missing key or a bad endpoint: ConfigError, before any call
        if self.meter is not None:
            await self.meter("workflow", 0, count=False)  # a cap reached stops the call before it spends
        started = time.perf_counter()
        try:
            done: Completion = await model.complete(system, user, max_tokens=self.max_tokens, schema=schema)
        except ModelCallError as exc:
            await self._record(
                task_id,
                agent,
                purpose,
                None,
                None,
                None,
                (time.perf_counter() - started) * 1000,
                exc.attempts,
                (redact(str(exc)) if self.scrub else str(exc))[:2000],
            )
            raise
        cost = cost_of(agent, self.prices, done.tokens_in, done.tokens_out)
        if self.meter is not None:
            tokens = (done.tokens_in or 0) + (done.tokens_out or 0)
            await self.meter("workflow", tokens, cost_usd=cost or 0.0, check=False)
        await self._record(
            task_id, agent, purpose, done.tokens_in, done.tokens_out, cost, done.duration_ms, done.attempts, None
        )
        # A model's answer is stored (the task's output, a reference, an attempt) and passed on: without secrets.
        text = redact(done.text) if self.scrub else done.text
        return Step(role, agent.name, agent.model, text, done.tokens_in, done.tokens_out, cost, done.duration_ms)

    async def _record(
        self,
        task_id: Any,
        agent: ModelAgent,
        purpose: str,
        tokens_in: int | None,
        tokens_out: int | None,
        cost: float | None,
        duration_ms: float,
        attempts: int,
        error: str | None,
    ) -> None:
        async with self.pool.acquire() as conn:
            await conn.execute(
                sql.RECORD,
                task_id,
                agent.name,
                purpose,
                agent.model,
                tokens_in,
                tokens_out,
                cost,
                duration_ms,
                attempts,
                error,
            )


def totals(steps: list[Step]) -> dict[str, Any]:
    """Summed tokens, cost (None if any step's is unknown) and time of a chain's steps."""

    def total(values: list) -> Any:
        return None if any(v is None for v in values) else sum(values)

    return {
        "tokens_in": total([s.tokens_in for s in steps]),
        "tokens_out": total([s.tokens_out for s in steps]),
        "cost_usd": total([s.cost_usd for s in steps]),
        "duration_ms": sum(s.duration_ms for s in steps),
    }
