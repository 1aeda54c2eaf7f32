"""One memory on its way through the write path: the input, normalised, embedded and decided."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from cabrain.types import MemoryInput
from cabrain.write.decision import WriteDecision


@dataclass
class Item:
    input: MemoryInput
    content: str
    valid_at: datetime
    content_hash: bytes
    embedding: list[float] | None = None
    chunks: list[str] = field(default_factory=list)  # passages of a long memory
    chunk_embeddings: list[list[float]] = field(default_factory=list)
    planned: WriteDecision | None = None  # the chat model's decision, made before the transaction
    planned_against: tuple[uuid.UUID, ...] = ()  # ... against these neighbours
    entities: list[str] | None = None  # the chat model's entities
