"""A TEI-style rerank endpoint: ``POST {url}/rerank {"query", "texts"}`` -> ``[{"index", "score"}]``."""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from cabrain.errors import EmbedderError


class HttpReranker:
    def __init__(self, base_url: str, *, timeout_s: float = 30.0) -> None:
        self._url = base_url.rstrip("/") + "/rerank"
        self._timeout = timeout_s
        self.name = f"http:{self._url}"
        self._client: httpx.AsyncClient | None = None  # one pooled client, made in the caller's loop

    async def rank(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout)
        try:
            response = await self._client.post(self._url, json={"query": query, "texts": list(passages)})
        except httpx.HTTPError as exc:
            raise EmbedderError(f"cannot reach the reranker at {self._url}: {exc}") from exc
        if response.status_code != 200:
            raise EmbedderError(f"reranker {self._url} answered {response.status_code}: {response.text[:300]}")
        try:
            scores = [0.0] * len(passages)
            seen = set()
            for item in response.json():
                scores[int(item["index"])] = float(item["score"])
                seen.add(int(item["index"]))
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise EmbedderError(f"reranker {self._url} sent an unexpected body: {exc}") from exc
        if len(seen) != len(passages):
            raise EmbedderError(f"reranker {self._url} scored {len(seen)} of {len(passages)} passages")
        return scores
