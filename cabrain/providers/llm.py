"""Chat models behind one Protocol; an OpenAI-compatible ``/v1/chat/completions`` client.

Used off the recall path only: the write decision and entity extraction on retain (when
configured), and later the sleep cycle. Works with Ollama, vLLM, llama.cpp's server, OpenAI and
anything else speaking the same API. Calls ask for a JSON object back (``response_format``);
servers that ignore that field still work, since callers validate what comes back.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import httpx

from cabrain.errors import LLMError


@runtime_checkable
class ChatModel(Protocol):
    name: str

    async def complete(self, system: str, user: str) -> str: ...


class OpenAIChat:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        max_tokens: int | None = None,
    ) -> None:
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._max_tokens = max_tokens
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout_s
        self.name = f"openai-chat:{model}@{base_url}"

    async def complete(self, system: str, user: str) -> str:
        body = {
            "model": self._model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        }
        if self._max_tokens is not None:
            body["max_tokens"] = self._max_tokens
        try:
            async with httpx.AsyncClient(timeout=self._timeout) as client:
                response = await client.post(self._url, json=body, headers=self._headers)
        except httpx.HTTPError as exc:
            raise LLMError(f"cannot reach the chat model at {self._url}: {exc}", hint="check CABRAIN_LLM_URL") from exc
        if response.status_code != 200:
            raise LLMError(f"chat model {self._url} answered {response.status_code}: {response.text[:300]}")
        try:
            return response.json()["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"chat model {self._url} sent an unexpected body: {exc}") from exc


def load_chat_model(settings) -> ChatModel | None:
    """The configured chat model, or None when ``CABRAIN_LLM_URL`` is unset."""
    if not settings.llm_url:
        return None
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    return OpenAIChat(
        settings.llm_url,
        settings.llm_model,
        api_key=key,
        timeout_s=settings.llm_timeout_s,
        max_tokens=settings.llm_max_tokens,
    )
