"""The sleep bench's synthetic workload: memories with a similarity structure that gives every
sleep step work.

Why synthetic. Embedding 100k texts on two CPU cores takes hours, and word salad has
no real similarity structure (its real e5 embeddings are all within cosine 0.86 of each other, so
every text would cluster with every other). So the vectors are built around the mean direction of
real embeddings, with a similarity structure that exercises every step:

- 70% of the memories are episodes in groups of 3-6 paraphrases (cosine about 0.94 within a group,
  0.75-0.8 between groups): consolidation distills them;
- 5% are near-duplicate pairs (cosine about 0.985): dedup merges them;
- 20% are conversation turns ("Name: I ..." or "Name: أنا ..." with ``metadata.speaker`` and a
  sitting as ``metadata.thread``), which the sitting distiller makes a fact of, one each;
- 5% are facts, half of them in pairs that contradict each other (the same statement with another
  number): reconsolidation supersedes the older.

``valid_at`` is spread over the last 12 months (stored that long ago as well), so decay and
demotion have real partitions to work through. Texts are synthetic sentences of the bench's
Arabic and English word lists.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np

from cabrain.bench.corpus import AGENT, AR_WORDS, EN_WORDS, synthetic_text

# Cosine targets of the workload, as per-dimension noise for unit vectors of dimension d:
# cos(a, b) of two noisy copies of one vector is about 1 / (1 + d * sigma^2).
GROUP_SPREAD = 0.25  # between groups: about 0.8
PARAPHRASE = 0.06  # within a group: about 0.94
DUPLICATE = 0.015  # near-duplicates: about 0.985
# How often each kind is drawn (groups, duplicate pairs, isolated, facts), so that the shares of
# *rows* are 70 / 5 / 20 / 5 % (groups hold 4.5 rows on average, pairs 2, facts 1.5).
DRAWS = [0.70 / 4.5, 0.05 / 2, 0.20 / 1, 0.05 / 1.5]
SPEAKERS = ("Caroline", "Melanie", "Jon", "Gina", "سارة", "أحمد")


def _noisy(center: np.ndarray, spread: float, rng: np.random.Generator, count: int = 1) -> np.ndarray:
    dim = center.shape[0]
    out = center + rng.normal(0.0, np.sqrt(spread / dim), (count, dim)).astype(np.float32)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def _variant(text: str, rng: random.Random) -> str:
    """A paraphrase of ``text``: two of its words swapped for others of its language."""
    words = text.split()
    pool = AR_WORDS if words[0] in AR_WORDS else EN_WORDS
    for _ in range(2):
        words[rng.randrange(len(words) - 1)] = rng.choice(pool)
    return " ".join(words)


def workload(n: int, namespaces: list[str], mean: np.ndarray, seed: int):
    """The bench's memories (see the module docstring), as rows for ``insert_memories``."""
    rng, np_rng = random.Random(seed), np.random.default_rng(seed)
    now = datetime.now(UTC)
    weights = [0.5] + [0.5 / (len(namespaces) - 1)] * (len(namespaces) - 1) if len(namespaces) > 1 else [1.0]
    made = 0
    while made < n:
        namespace = rng.choices(namespaces, weights)[0]
        when = now - timedelta(seconds=rng.randint(3600, 365 * 86400))
        center = _noisy(mean, GROUP_SPREAD, np_rng)[0]
        text = synthetic_text(rng)
        roll = rng.choices(range(4), DRAWS)[0]
        if roll == 0:  # a group of paraphrases
            size = min(rng.randint(3, 6), n - made)
            texts = [text] + [_variant(text, rng) for _ in range(size - 1)]
            vectors, kind = _noisy(center, PARAPHRASE, np_rng, size), ("experience", "episodic")
        elif roll == 1:  # near-duplicates
            size = min(2, n - made)
            texts, vectors, kind = (
                [text, text + " ."][:size],
                _noisy(center, DUPLICATE, np_rng, size),
                ("experience", "episodic"),
            )
        elif roll == 2:  # a conversation turn: the speaker's own claim ("I ...", "أنا ...")
            speaker = rng.choice(SPEAKERS)
            said = f"{'أنا' if text.split()[0] in AR_WORDS else 'I'} {text}"
            size, texts, vectors, kind = 1, [f"{speaker}: {said}"], center[None, :], ("experience", "episodic")
        else:  # a fact, and in half the cases a newer one that contradicts it
            subject = " ".join(text.split()[:6])
            size = min(2 if rng.random() < 0.5 else 1, n - made)
            texts = [f"{subject} limit is {rng.randint(10, 99)}", f"{subject} limit is {rng.randint(100, 999)}"][:size]
            vectors, kind = _noisy(center, DUPLICATE, np_rng, size), ("fact", "semantic")
        for i in range(size):
            valid_at = when + timedelta(minutes=10 * i)
            content = texts[i]
            yield {
                "id": uuid.uuid4(),
                "namespace": namespace,
                "owner_agent_id": AGENT,
                "visibility": "team",
                "network": kind[0],
                "memory_type": kind[1],
                "content": content,
                "source_kind": "bench",
                "source_ref": None,
                "embedding": vectors[i],
                "importance": round(rng.random(), 3),
                "valid_at": valid_at,
                "metadata": {"speaker": speaker, "thread": f"{namespace}@{when:%Y-%m-%d}"} if roll == 2 else {},
                "content_hash": hashlib.sha256(content.encode()).digest(),
            }
        made += size
