"""Language models that do tasks (workflow learning): one Protocol, two wire formats.

- ``openai``: an OpenAI-compatible ``/chat/completions`` endpoint - Ollama, vLLM, llama.cpp's
  server, OpenAI itself, and anything else speaking it;
- ``anthropic``: Anthropic's Messages API (``/v1/messages``).

Every call returns what it cost to make: tokens in and out (as the server counted them; ``None``
when a server does not say, never a guess), and wall time. Retries (connection errors, timeouts,
429 and 5xx) and timeouts come from the caller; a call that still fails raises
:class:`ModelCallError` carrying how many attempts were made. Recording calls and pricing them is
the caller's business (:mod:`cabrain.workflows.calls`).
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import httpx

from cabrain.egress import Egress, EgressDenied
from cabrain.errors import ConfigError, ModelCallError
from cabrain.redact import redact

ANTHROPIC_VERSION = "2023-06-01"
RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


class Wire(str, enum.Enum):
    OPENAI = "openai"
    ANTHROPIC = "anthropic"


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    tokens_in: int | None
    tokens_out: int | None
    duration_ms: float
    attempts: int = 1


@runtime_checkable
class TaskModel(Protocol):
    """A model that answers a prompt (a system text and one user turn)."""

    name: str
    model: str

    async def complete(
        self, system: str, user: str, *, max_tokens: int, schema: dict[str, Any] | None = None
    ) -> Completion:
        """The answer; with ``schema``, held to that JSON Schema by the server (constrained decoding)."""
        ...


@dataclass(frozen=True)
class CallPolicy:
    timeout_s: float = 60.0
    retries: int = 2
    backoff_s: float = 0.5
    # where a model may be reached and which variables its key may come from (default: public
    # addresses, no key at all): the deployment's is Egress.of(settings, environ)
    egress: Egress = field(default_factory=Egress, compare=False)


class _HTTPModel:
    """The retrying HTTP call shared by both wire formats."""

    def __init__(self, endpoint: str, model: str, policy: CallPolicy, headers: dict[str, str]) -> None:
        if not endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"model endpoint {endpoint!r} is not an http(s) URL")
        self.endpoint = endpoint.rstrip("/")
        self.model = model
        self._policy = policy
        self._headers = headers

    async def _post(
        self, url: str, body: dict, parse: Callable[[dict], tuple[str, int | None, int | None]]
    ) -> Completion:
        policy, attempt, started = self._policy, 0, time.perf_counter()
        while True:
            attempt += 1
            retryable, problem = False, ""
            try:
                async with policy.egress.async_client(timeout=policy.timeout_s) as client:
                    response = await client.post(url, json=body, headers=self._headers)
            except EgressDenied as exc:
                raise ModelCallError(f"{self.model} at {url}: {exc.message}", attempts=attempt, hint=exc.hint) from exc
            except httpx.TimeoutException:
                retryable, problem = True, f"no answer within {policy.timeout_s:g} s"
            except httpx.HTTPError as exc:
                retryable, problem = True, f"cannot reach it: {type(exc).__name__}: {exc}"
            else:
                if response.status_code == 200:
                    try:
                        text, tokens_in, tokens_out = parse(response.json())
                    except (ValueError, KeyError, IndexError, TypeError) as exc:
                        raise ModelCallError(
                            f"{self.model} at {url} sent an unexpected body: {exc}", attempts=attempt
                        ) from exc
                    return Completion(
                        text, self.model, tokens_in, tokens_out, (time.perf_counter() - started) * 1000, attempt
                    )
                retryable = response.status_code in RETRY_STATUSES
                problem = f"answered {response.status_code}: {redact(response.text)[:300]}"
            if not retryable or attempt > policy.retries:
                raise ModelCallError(
                    f"{self.model} at {url} {problem}",
                    attempts=attempt,
                    hint=None if retryable else "check the agent's endpoint, model and key",
                )
            await asyncio.sleep(policy.backoff_s * 2 ** (attempt - 1))


def _tokens(usage: dict | None, key: str) -> int | None:
    value = (usage or {}).get(key)
    return int(value) if isinstance(value, int | float) and value >= 0 else None


class OpenAIModel(_HTTPModel):
    """``POST {endpoint}/chat/completions``; ``endpoint`` includes the API prefix (``.../v1``)."""

    def __init__(
        self, endpoint: str, model: str, *, api_key: str | None = None, policy: CallPolicy = CallPolicy()
    ) -> None:
        super().__init__(endpoint, model, policy, {"Authorization": f"Bearer {api_key}"} if api_key else {})
        self.name = f"openai:{model}@{self.endpoint}"

    async def complete(
        self, system: str, user: str, *, max_tokens: int, schema: dict[str, Any] | None = None
    ) -> Completion:
        body: dict[str, Any] = {
            "model": self.model,
            "temperature": 0,
            "max_tokens": max_tokens,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        }
        if schema is not None:  # OpenAI's structured outputs; llama.cpp, vLLM and Ollama take it too
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "strict": True, "schema": schema},
            }

        def parse(data: dict) -> tuple[str, int | None, int | None]:
            usage = data.get("usage")
            return (
                data["choices"][0]["message"]["content"] or "",
                _tokens(usage, "prompt_tokens"),
                _tokens(usage, "completion_tokens"),
            )

        return await self._post(self.endpoint + "/chat/completions", body, parse)


class AnthropicModel(_HTTPModel):
    """``POST {endpoint}/v1/messages`` (``endpoint``: ``https://api.anthropic.com`` or a proxy)."""

    def __init__(
        self, endpoint: str, model: str, *, api_key: str | None = None, policy: CallPolicy = CallPolicy()
    ) -> None:
        headers = {"anthropic-version": ANTHROPIC_VERSION, **({"x-api-key": api_key} if api_key else {})}
        super().__init__(endpoint, model, policy, headers)
        self.name = f"anthropic:{model}@{self.endpoint}"

    async def complete(
        self, system: str, user: str, *, max_tokens: int, schema: dict[str, Any] | None = None
    ) -> Completion:
        if schema is not None:
            raise ModelCallError(
                f"{self.name}: an output schema (constrained decoding) is sent only to OpenAI-compatible servers",
                hint="register the model with provider openai to use constrained chains",
                attempts=0,
            )
        body = {
            "model": self.model,
            "max_tokens": max_tokens,
            "temperature": 0,
            "system": system,
            "messages": [{"role": "user", "content": user}],
        }

        def parse(data: dict) -> tuple[str, int | None, int | None]:
            text = "".join(block.get("text", "") for block in data["content"] if block.get("type") == "text")
            usage = data.get("usage")
            return text, _tokens(usage, "input_tokens"), _tokens(usage, "output_tokens")

        url = self.endpoint + ("/messages" if self.endpoint.endswith("/v1") else "/v1/messages")
        return await self._post(url, body, parse)


AVAILABLE_WIRES: dict[Wire, type[OpenAIModel] | type[AnthropicModel]] = {
    Wire.OPENAI: OpenAIModel,
    Wire.ANTHROPIC: AnthropicModel,
}


def api_key_from(env_name: str | None, egress: Egress) -> str | None:
    """The key in the variable (or secrets file) ``env_name``, if the egress policy allows that
    name (keys are never stored in the database); :class:`ConfigError` otherwise."""
    return egress.secret(env_name, "this agent's API key (api_key_env)")


def build_model(wire: str, endpoint: str, model: str, *, api_key_env: str | None, policy: CallPolicy) -> TaskModel:
    try:
        kind = Wire(wire)
    except ValueError:
        raise ConfigError(f"unknown provider {wire!r}", hint=f"one of: {', '.join(w.value for w in Wire)}") from None
    return AVAILABLE_WIRES[kind](endpoint, model, api_key=api_key_from(api_key_env, policy.egress), policy=policy)
