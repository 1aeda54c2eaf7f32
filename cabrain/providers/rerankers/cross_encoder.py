"""A sentence-transformers CrossEncoder (e.g. BAAI/bge-reranker-v2-m3) in process, CPU or CUDA."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from cabrain.errors import EmbedderError


class CrossEncoderReranker:
    def __init__(self, model: str, *, device: str = "cpu", offline: bool = True) -> None:
        from sentence_transformers import CrossEncoder  # heavy (torch): loaded with the model

        if device == "auto":
            import torch  # heavy: loaded only to pick the device

            device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            self._model = CrossEncoder(model, device=device, local_files_only=offline)
        except (OSError, ValueError) as exc:
            raise EmbedderError(
                f"cannot load reranker model {model!r}: {exc}",
                hint=(
                    f"download it once (huggingface-cli download {model}), point CABRAIN_RERANKER_MODEL "
                    "at a local directory, or set CABRAIN_RERANKER_PROVIDER=none"
                ),
            ) from exc
        self.name = f"cross-encoder:{model}"

    async def rank(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        scores = await asyncio.to_thread(self._model.predict, [(query, p) for p in passages])
        return [float(s) for s in scores]
