"""The model registry: the frontier and local models tasks can be handed to (``llm_agents``).

An entry names a model behind an endpoint (provider ``openai`` for any OpenAI-compatible server,
``anthropic`` for the Messages API), its layer, capabilities, price per 1k tokens in and out
(unset: ``CABRAIN_WORKFLOW_PRICES`` by model name), and the environment variable holding its API
key. Calls keep its measured latency and its call and failure counts. Entries are deactivated,
never deleted: calls and runs refer to them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import asyncpg

from cabrain.errors import ConfigError, InputError, NotFound
from cabrain.fixes import Fix
from cabrain.providers.llm_calls import CallPolicy, TaskModel, Wire, build_model
from cabrain.store import workflow_models as sql

LAYERS = ("frontier", "local")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
EDITABLE = (
    "layer",
    "provider",
    "model",
    "endpoint",
    "api_key_env",
    "capabilities",
    "cost_in_per_1k",
    "cost_out_per_1k",
    "active",
)


@dataclass(frozen=True)
class ModelAgent:
    name: str
    layer: str
    provider: str
    model: str
    endpoint: str
    api_key_env: str | None = None
    capabilities: tuple[str, ...] = ()
    cost_in_per_1k: float | None = None
    cost_out_per_1k: float | None = None
    latency_ms: float | None = None
    calls: int = 0
    failures: int = 0
    active: bool = True
    tokens_per_s: float | None = None  # measured when CaBrain serves it (cabrain.localmodels)
    source: str | None = None  # its weights, when CaBrain serves it; None: registered by hand

    @classmethod
    def from_row(cls, row: asyncpg.Record) -> ModelAgent:
        def num(value: Decimal | float | None) -> float | None:
            return None if value is None else float(value)

        return cls(
            row["name"],
            row["layer"],
            row["provider"],
            row["model"],
            row["endpoint"],
            row["api_key_env"],
            tuple(row["capabilities"] or ()),
            num(row["cost_in_per_1k"]),
            num(row["cost_out_per_1k"]),
            num(row["latency_ms"]),
            row["calls"],
            row["failures"],
            row["active"],
            num(row["tokens_per_s"]),
            row["source"],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "layer": self.layer,
            "provider": self.provider,
            "model": self.model,
            "endpoint": self.endpoint,
            "api_key_env": self.api_key_env,
            "capabilities": list(self.capabilities),
            "cost_in_per_1k": self.cost_in_per_1k,
            "cost_out_per_1k": self.cost_out_per_1k,
            "latency_ms": None if self.latency_ms is None else round(self.latency_ms, 1),
            "calls": self.calls,
            "failures": self.failures,
            "active": self.active,
            "tokens_per_s": None if self.tokens_per_s is None else round(self.tokens_per_s, 1),
            "source": self.source,
        }

    def prices(self, table: dict[str, tuple[float, float]]) -> tuple[float, float] | None:
        """Price per 1k tokens in and out: the entry's own, else the settings' table by model name."""
        if self.cost_in_per_1k is not None and self.cost_out_per_1k is not None:
            return self.cost_in_per_1k, self.cost_out_per_1k
        return table.get(self.model)

    def build(self, policy: CallPolicy) -> TaskModel:
        return build_model(self.provider, self.endpoint, self.model, api_key_env=self.api_key_env, policy=policy)


def check_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Validate registry fields (any subset); raises :class:`InputError`."""
    out = dict(fields)
    if "name" in out and not NAME.fullmatch(str(out["name"] or "")):
        raise InputError(f"agent name {out['name']!r}: 1-64 letters, digits, '.', '_', ':' or '-'")
    if "layer" in out and out["layer"] not in LAYERS:
        raise InputError(f"layer must be one of {', '.join(LAYERS)}, got {out['layer']!r}")
    if "provider" in out and out["provider"] not in {w.value for w in Wire}:
        raise InputError(f"provider must be one of {', '.join(w.value for w in Wire)}, got {out['provider']!r}")
    if "model" in out and not str(out["model"] or "").strip():
        raise InputError("model is empty")
    if "endpoint" in out and not str(out["endpoint"] or "").startswith(("http://", "https://")):
        raise InputError(f"endpoint must be an http(s) URL, got {out['endpoint']!r}")
    if out.get("api_key_env") is not None and not ENV_NAME.fullmatch(str(out["api_key_env"])):
        raise InputError(
            f"api_key_env must name an environment variable, got {out['api_key_env']!r}",
            hint="the key itself is never stored: export it and give its variable's name",
        )
    for key in ("cost_in_per_1k", "cost_out_per_1k"):
        if out.get(key) is not None:
            try:
                out[key] = float(out[key])
            except (TypeError, ValueError):
                raise InputError(f"{key} must be a number, got {out[key]!r}") from None
            if out[key] < 0 or out[key] != out[key]:
                raise InputError(f"{key} must be 0 or more, got {out[key]!r}")
    if "capabilities" in out:
        caps = out["capabilities"] or []
        if isinstance(caps, str):
            caps = [c.strip() for c in caps.split(",") if c.strip()]
        if not all(isinstance(c, str) and c for c in caps):
            raise InputError("capabilities must be a list of names")
        out["capabilities"] = list(dict.fromkeys(caps))
    if "active" in out and not isinstance(out["active"], bool):
        raise InputError(f"active must be true or false, got {out['active']!r}")
    return out


async def add(conn: asyncpg.Connection, **fields: Any) -> ModelAgent:
    missing = [k for k in ("name", "layer", "provider", "model", "endpoint") if not fields.get(k)]
    if missing:
        raise InputError(f"a model agent needs {', '.join(missing)}")
    unknown = set(fields) - {"name", *EDITABLE}
    if unknown:
        raise InputError(f"unknown field(s): {', '.join(sorted(unknown))}")
    f = check_fields(fields)
    row = await conn.fetchrow(
        sql.INSERT,
        f["name"],
        f["layer"],
        f["provider"],
        f["model"],
        f["endpoint"],
        f.get("api_key_env"),
        f.get("capabilities", []),
        f.get("cost_in_per_1k"),
        f.get("cost_out_per_1k"),
        f.get("active", True),
    )
    if row is None:
        raise InputError(f"model agent {f['name']!r} already exists", fix=Fix("update_model", {"name": f["name"]}))
    return ModelAgent.from_row(row)


async def update(conn: asyncpg.Connection, name: str, **fields: Any) -> ModelAgent:
    unknown = set(fields) - set(EDITABLE)
    if unknown:
        raise InputError(
            f"unknown or read-only field(s): {', '.join(sorted(unknown))}", hint=f"editable: {', '.join(EDITABLE)}"
        )
    f = check_fields(fields)
    if not f:
        return await get(conn, name)
    row = await conn.fetchrow(sql.update(f), name, *f.values())
    if row is None:
        raise NotFound(f"no model agent named {name!r}")
    return ModelAgent.from_row(row)


async def get(conn: asyncpg.Connection, name: str) -> ModelAgent:
    row = await conn.fetchrow(sql.GET, name)
    if row is None:
        raise NotFound(f"no model agent named {name!r}", fix=Fix("list_models"))
    return ModelAgent.from_row(row)


async def listed(conn: asyncpg.Connection, *, layer: str | None = None, active_only: bool = False) -> list[ModelAgent]:
    rows = await conn.fetch(sql.LISTED, layer, active_only)
    return [ModelAgent.from_row(r) for r in rows]


async def frontier(conn: asyncpg.Connection, preferred: str | None = None) -> ModelAgent:
    """The frontier agent a task goes to: ``preferred`` when given, else the first active one."""
    if preferred:
        agent = await get(conn, preferred)
        if agent.layer != "frontier" or not agent.active:
            raise InputError(f"model agent {preferred!r} is not an active frontier model")
        return agent
    agents = await listed(conn, layer="frontier", active_only=True)
    if not agents:
        raise ConfigError(
            "no active frontier model is registered",
            fix=Fix(
                "register_model",
                {"layer": "frontier", "provider": "anthropic", "endpoint": "https://api.anthropic.com"},
            ),
        )
    return agents[0]
