"""Splitting long memories into passages of whole sentences (Arabic and English punctuation)."""

from __future__ import annotations

import re

# A sentence ends at . ! ? ؟ or a newline; Arabic text often omits the space after the mark.
_SENTENCE_END = re.compile(r"(?<=[.!?\u061f\u06d4])\s+|(?<=[.!?\u061f])(?=[A-Z\u0621-\u064a])|\n+")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def chunk(text: str, *, target_chars: int = 250, min_chars: int = 400, max_chunks: int = 64) -> list[str]:
    """Passages of ``text`` (runs of whole sentences of about ``target_chars``), or [] when the
    text is short enough to be one passage already. A sentence longer than twice the target is
    cut at word boundaries."""
    if len(text) <= min_chars:
        return []
    pieces: list[str] = []
    for sentence in sentences(text):
        while len(sentence) > 2 * target_chars:
            cut = sentence.rfind(" ", 0, target_chars) if " " in sentence[:target_chars] else target_chars
            cut = cut if cut > 0 else target_chars
            pieces.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        if sentence:
            pieces.append(sentence)
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        if current and len(current) + 1 + len(piece) > target_chars:
            chunks.append(current)
            current = piece
        else:
            current = f"{current} {piece}".strip()
    if current:
        chunks.append(current)
    if len(chunks) < 2:
        return []
    return chunks[:max_chunks]
