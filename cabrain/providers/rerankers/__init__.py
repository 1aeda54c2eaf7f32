"""Rerankers: score (query, passage) pairs with a cross-encoder; scores come back in input order.

| provider        | what                                                              |
|-----------------|-------------------------------------------------------------------|
| ``none``        | no rerank (the default: no cross-encoder weights ship with CaBrain) |
| ``cross-encoder`` | a sentence-transformers CrossEncoder by name or path, e.g. BAAI/bge-reranker-v2-m3 |
| ``http``        | a TEI-style ``POST /rerank`` endpoint                              |
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from cabrain.errors import ConfigError
from cabrain.settings import RerankerProvider, Settings


@runtime_checkable
class Reranker(Protocol):
    name: str

    async def rank(self, query: str, passages: Sequence[str]) -> list[float]: ...


# Each loader imports its backend's module: only the configured backend (and its libraries) loads.
def _load_cross_encoder(settings: Settings) -> Reranker:
    from cabrain.providers.rerankers.cross_encoder import CrossEncoderReranker

    if not settings.reranker_model:
        raise ConfigError(
            "the cross-encoder reranker needs a model",
            hint="set CABRAIN_RERANKER_MODEL, e.g. BAAI/bge-reranker-v2-m3",
        )
    return CrossEncoderReranker(
        settings.reranker_model, device=settings.reranker_device, offline=settings.models_offline
    )


def _load_http(settings: Settings) -> Reranker:
    from cabrain.providers.rerankers.http import HttpReranker

    if not settings.reranker_url:
        raise ConfigError("the http reranker needs a URL", hint="set CABRAIN_RERANKER_URL, e.g. http://127.0.0.1:8081")
    return HttpReranker(settings.reranker_url, timeout_s=settings.embedding_timeout_s)


AVAILABLE_RERANKERS: dict[RerankerProvider, Callable[[Settings], Reranker]] = {
    RerankerProvider.CROSS_ENCODER: _load_cross_encoder,
    RerankerProvider.HTTP: _load_http,
}


def load_reranker(settings: Settings) -> Reranker | None:
    """The configured reranker, or None when rerank is off."""
    if settings.reranker_provider is RerankerProvider.NONE:
        return None
    return AVAILABLE_RERANKERS[settings.reranker_provider](settings)
