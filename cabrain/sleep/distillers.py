"""The two distillers of a conversation's turns, behind one interface.

- :class:`Deterministic` (no model; :mod:`cabrain.sleep.sittings`): each turn's own claims as one
  fact in third person, its times resolved. The default where no chat model is configured.
- :class:`Chat` (an OpenAI-compatible chat model, ``CABRAIN_LLM_URL``): the turns of a sitting,
  at most ``CABRAIN_SLEEP_CHAT_TURNS`` at a time, numbered with their speaker and date; the model
  answers JSON ``{"facts": [{"text", "turn"}]}``. What comes back is checked before anything is
  written: a fact must cite a turn of the request, be at most ``MAX_FACT_CHARS`` long and be in the
  third person (a fact still saying "I" or "my" is dropped and counted); an answer that is not
  such JSON makes that request fall back to the deterministic distiller (counted as
  ``llm_fallbacks``), so a broken model never loses a night's facts.

Each also writes a sitting's summary from its facts (:meth:`TurnDistiller.summarise`): the
deterministic one as :func:`cabrain.sleep.sittings.sitting_summary`, the chat one by asking the
model, whose answer is checked the same way (third person, at most ``MAX_SUMMARY_CHARS``, naming a
speaker) and falls back to the deterministic summary.

``CABRAIN_SLEEP_DISTILLER``: ``auto`` (the chat model when one is configured, else deterministic),
``deterministic`` or ``chat`` (refused without ``CABRAIN_LLM_URL``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from cabrain.errors import ConfigError, LLMError
from cabrain.providers.llm import ChatModel
from cabrain.settings import Settings
from cabrain.sleep.context import StepResult
from cabrain.sleep.sittings import sitting_summary, turn_fact
from cabrain.text.tokenizer import normalize
from cabrain.write.decision.origin import without_speaker

MAX_FACT_CHARS = 400
MAX_SUMMARY_CHARS = 2000
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself)\b")
_MONTHS = "January February March April May June July August September October November December".split()


@dataclass(frozen=True)
class Turn:
    text: str
    speaker: str
    when: datetime
    sitting: str | None = None  # a chat request never mixes two


@dataclass(frozen=True)
class Sitting:
    """What a sitting's summary is written from: who spoke (first to speak first), when, and its
    current facts in the order they were said."""

    speakers: tuple[str, ...]
    first: datetime
    last: datetime
    facts: tuple[str, ...]


class TurnDistiller(Protocol):
    name: str

    async def distill(self, turns: Sequence[Turn], result: StepResult) -> list[tuple[str, list[int]]]:
        """The facts ``turns`` state: each fact's text and the indexes of the turns it comes from."""
        ...

    async def summarise(self, sitting: Sitting, result: StepResult) -> str:
        """The sitting's summary, from its facts only."""
        ...


class Deterministic:
    name = "sitting"

    def __init__(self, min_words: int, summary_facts: int = 8, claim_words: int | None = None) -> None:
        self.min_words, self.summary_facts, self.claim_words = min_words, summary_facts, claim_words

    async def summarise(self, sitting: Sitting, result: StepResult) -> str:
        return sitting_summary(
            list(sitting.speakers), sitting.first, sitting.last, list(sitting.facts), self.summary_facts
        )

    async def distill(self, turns: Sequence[Turn], result: StepResult) -> list[tuple[str, list[int]]]:
        out = []
        for i, t in enumerate(turns):
            text = turn_fact(t.text, t.speaker, t.when, self.min_words, self.claim_words)
            if text:
                out.append((text, [i]))
        return out


SYSTEM = (
    "You turn a conversation's turns into the facts a careful note-taker would write. Each turn is "
    "numbered, with its speaker and the date it was said. For each claim a speaker makes about their "
    "own life, plans, likes, work and people, write one short fact in the third person: the speaker's "
    "name instead of I, me or my; relative times (yesterday, last week, next month) as dates counted "
    "from that turn's date; one claim per fact; only what the turn says. Skip greetings, questions, "
    'thanks and praise of the listener. Answer JSON {"facts": [{"text": "<fact>", "turn": <number>}]}.'
)


SUMMARY_SYSTEM = (
    "You write the summary a careful note-taker keeps of one conversation, from the numbered facts "
    "distilled from it. Say who talked and when, then what was said, in the third person, using only "
    'the facts given, in at most eight sentences. Answer JSON {"summary": "<summary>"}.'
)


class Chat:
    name = "chat"

    def __init__(self, chat: ChatModel, per_request: int, fallback: Deterministic) -> None:
        self.chat, self.per_request, self.fallback = chat, per_request, fallback

    async def distill(self, turns: Sequence[Turn], result: StepResult) -> list[tuple[str, list[int]]]:
        out: list[tuple[str, list[int]]] = []
        starts = [i for i in range(len(turns)) if i == 0 or turns[i].sitting != turns[i - 1].sitting]
        batches = [
            (s, min(s + self.per_request, end))
            for s0, end in zip(starts, [*starts[1:], len(turns)], strict=True)
            for s in range(s0, end, self.per_request)
        ]
        for start, stop in batches:
            batch = turns[start:stop]
            try:
                facts = await self._ask(batch, result)
            except LLMError as exc:
                result.add("llm_fallbacks")
                result.change(action="chat distiller fell back", error=str(exc)[:200])
                facts = await self.fallback.distill(batch, result)
            out += [(text, [start + i for i in cited]) for text, cited in facts]
        return out

    async def summarise(self, sitting: Sitting, result: StepResult) -> str:
        def day(d: datetime) -> str:
            return f"{d.day} {_MONTHS[d.month - 1]} {d.year}"

        when = (
            day(sitting.first)
            if sitting.first.date() == sitting.last.date()
            else (f"{day(sitting.first)} to {day(sitting.last)}")
        )
        listing = f"Speakers: {', '.join(sitting.speakers)}\nDate: {when}\n" + "\n".join(
            f"{n}. {fact}" for n, fact in enumerate(sitting.facts, start=1)
        )
        try:
            answer = json.loads(await self.chat.complete(SUMMARY_SYSTEM, listing))
            text = re.sub(r"\s+", " ", str(answer["summary"])).strip()
            if not text or len(text) > MAX_SUMMARY_CHARS:
                raise ValueError("the summary is empty or too long")
            if _FIRST_PERSON.search(text):
                raise ValueError("the summary is not in the third person")
            if not any(normalize(name).strip() in normalize(text) for name in sitting.speakers):
                raise ValueError("the summary names none of the speakers")
            return text
        except (LLMError, ValueError, KeyError, TypeError) as exc:
            result.add("llm_fallbacks")
            result.change(action="chat summary fell back", error=str(exc)[:200])
            return await self.fallback.summarise(sitting, result)

    async def _ask(self, batch: Sequence[Turn], result: StepResult) -> list[tuple[str, list[int]]]:
        listing = "\n".join(  # each turn without the "Name:" it may open with: the line names its speaker
            f"{n}. [{t.speaker}, {t.when.day} {_MONTHS[t.when.month - 1]} {t.when.year}] "
            f"{without_speaker(t.text, normalize(t.speaker).strip()).strip()}"
            for n, t in enumerate(batch, start=1)
        )
        answer = await self.chat.complete(SYSTEM, listing)
        try:
            rows = json.loads(answer)["facts"]
            if not isinstance(rows, list):
                raise TypeError("'facts' is not a list")
        except (ValueError, KeyError, TypeError) as exc:
            raise LLMError(f"the chat model's facts are not usable JSON: {exc}") from exc
        out = []
        for row in rows:
            try:
                text = re.sub(r"\s+", " ", str(row["text"])).strip()
                turn = int(row["turn"])
            except (KeyError, TypeError, ValueError):
                result.add("chat_facts_dropped")
                continue
            if not text or len(text) > MAX_FACT_CHARS or not 1 <= turn <= len(batch) or _FIRST_PERSON.search(text):
                result.add("chat_facts_dropped")  # no turn of this request, too long, or not third person
                continue
            out.append((text, [turn - 1]))
        return out


def turn_distiller(settings: Settings, chat: ChatModel | None) -> TurnDistiller:
    """The distiller ``CABRAIN_SLEEP_DISTILLER`` asks for (see the module docstring)."""
    deterministic = Deterministic(
        settings.sleep_turn_min_words, settings.sleep_sitting_summary_facts, settings.sleep_claim_min_words
    )
    if settings.sleep_distiller == "deterministic" or (settings.sleep_distiller == "auto" and chat is None):
        return deterministic
    if chat is None:
        raise ConfigError(
            "CABRAIN_SLEEP_DISTILLER=chat needs a chat model", hint="set CABRAIN_LLM_URL (and CABRAIN_LLM_MODEL)"
        )
    return Chat(chat, settings.sleep_chat_turns, deterministic)


__all__ = ["Chat", "Deterministic", "Sitting", "Turn", "TurnDistiller", "turn_distiller"]
