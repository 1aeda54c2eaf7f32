"""Where a statement comes from, as far as the write decision is concerned: a turn, a record, or neither.

Similarity says two texts are alike; it does not say one replaces the other. Two kinds of memory
are distinct by where they come from, however alike their words:

- a **turn** (``metadata.speaker``: a conversation's utterance) is what one person said at one
  moment. Another speaker's turn never supersedes, retracts or absorbs it ("Melanie: seven years
  now ..." does not revise "Caroline: ... ten years ago"); the same speaker revises it only
  explicitly (a revision cue or a retraction, about the same subject). Two turns are never merged
  on similarity: each is its own moment of the conversation.
- a **record** of a structured source (``source_kind`` one of ``CABRAIN_RECORD_SOURCE_KINDS``: a
  connector's parts, an import's records, the memory tool's files) is one section, item, block or
  document part. Records are never superseded by each other, nor by other memories, on
  similarity; a later version of the same record (the same kind, reference and anchor) revises it.
  A record says the same as another only when the two texts say the same (no substantive word
  differs), and then it is absorbed as a duplicate.

Everything else (an agent's statements, a capture's decisions) is decided by the rules of
:mod:`cabrain.write.decision` alone. Decisions between claims in turns and records happen during
sleep, between the facts distilled from them, where the subject is resolved.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cabrain.text.tokenizer import normalize
from cabrain.write.decision.lexicon import TURN_REVISIONS

_PREFIX = re.compile(r"^\s*([^:\n]{1,80}):\s+")
_REVISION = re.compile(
    r"(?<!\w)(?:" + "|".join(re.escape(p) for p in sorted(TURN_REVISIONS, key=len, reverse=True)) + r")(?!\w)"
)


@dataclass(frozen=True)
class Origin:
    speaker: str | None = None  # a turn's speaker, normalised (case and script forms folded)
    record: tuple[str, str, str] | None = None  # a record's (source kind, reference, anchor)

    @property
    def plain(self) -> bool:
        return self.speaker is None and self.record is None


PLAIN = Origin()


def is_record_kind(source_kind: str | None, patterns: Iterable[str]) -> bool:
    if not source_kind:
        return False
    return any(fnmatch.fnmatchcase(source_kind, p) for p in patterns)


def origin_of(
    source_kind: str | None,
    source_ref: str | None,
    metadata: Mapping[str, Any] | str | None,
    record_kinds: Iterable[str],
) -> Origin:
    """The origin of a memory (or of a write), from its source and metadata."""
    if isinstance(metadata, str):  # a row's jsonb, as text
        try:
            metadata = json.loads(metadata)
        except ValueError:
            metadata = None
    meta: Mapping[str, Any] = metadata if isinstance(metadata, Mapping) else {}
    speaker = meta.get("speaker")
    spoken = normalize(speaker).strip() if isinstance(speaker, str) and speaker.strip() else None
    record = None
    if is_record_kind(source_kind, record_kinds):
        anchor = meta.get("anchor")
        record = (str(source_kind), source_ref or "", anchor if isinstance(anchor, str) else "")
    return Origin(spoken, record)


def without_speaker(text: str, speaker: str) -> str:
    """A turn's words without the ``Name:`` it may open with (chat exports and transcripts write it)."""
    match = _PREFIX.match(text)
    if match and normalize(match.group(1)).strip() == speaker:
        return text[match.end() :]
    return text


def explicit_revision(text: str) -> bool:
    """The turn says it revises something said before ("actually", "I meant", "no longer", "تصحيح")."""
    return _REVISION.search(normalize(text)) is not None


def compatible(new: Origin, old: Origin) -> str | None:
    """Why no similarity-based judgment may join ``new`` and ``old`` at all, or None if one may.

    Turns of different speakers (or a turn and a statement no one spoke) are never judged
    against each other."""
    if new.speaker is None and old.speaker is None:
        return None
    if new.speaker != old.speaker:
        if new.speaker is None or old.speaker is None:
            return "a turn of a conversation and a statement are distinct"
        return "turns of different speakers are distinct utterances"
    return None
