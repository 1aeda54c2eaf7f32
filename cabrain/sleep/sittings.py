"""The deterministic distiller of a conversation's turns: facts a person would write, without a model.

A turn (a memory with ``metadata.speaker``) is what one person said at one moment. Its statements
about the speaker's own life, plans, likes and people become facts the way an annotator writes them:

- what one turn claims, as one fact: the speaker's own statements of the turn (a question, a
  greeting, thanks, praise of the listener and talk too thin to hold a claim are left out), kept
  when together they carry at least ``CABRAIN_SLEEP_TURN_MIN_WORDS`` content words - an
  annotator writes a turn's claims about one moment as one fact, and chit-chat as none;
- third person, the speaker resolved: "I" -> "Caroline", "my sister" -> "Caroline's sister",
  "I'm" -> "Caroline is", and the verb after the speaker agrees ("I love" -> "Caroline loves");
- relative times resolved against the turn's date: "yesterday" -> "on 7 May 2023", "last year" ->
  "in 2022", "next month" -> "in June 2023", "two weeks ago" -> "around 24 April 2023";
- each fact linked to the turn it comes from (``memory_sources``).

English is read this way; an Arabic turn's first-person statements (أنا، لدي، عندي) become facts
with the speaker named before them. What is not a claim stays in the turn, which recall still finds.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

from cabrain.search.tokenizer import STOP_WORDS, normalize
from cabrain.write.decision.lexicon import IRREGULAR
from cabrain.write.decision.origin import without_speaker
from cabrain.write.entities import INTERJECTIONS

MIN_CONTENT_WORDS = 3  # words that are neither stop words nor interjections
_SENTENCES = re.compile(r"(?<=[.!?؟])\s+|\n+")
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself|we|we're|we've|our|us)\b", re.IGNORECASE)
_LISTENER = re.compile(r"\b(?:you|your|you're|you've|yours|u)\b", re.IGNORECASE)
_AR_FIRST_PERSON = re.compile(r"(?:^|\s)(?:أنا|انا|لدي|لديّ|عندي|نحن|لدينا|عندنا)(?:\s|$)")
_WORD = re.compile(r"[A-Za-z\u0621-\u064a']+")
# irregular agreement after a third-person subject
_AGREE = {"am": "is", "have": "has", "do": "does", "go": "goes", "don't": "doesn't", "haven't": "hasn't"}
_NO_AGREE = frozenset(
    "was were did had can could will would should might must may shall also really just still never always "
    "recently finally actually even already usually often sometimes kinda gotta wanna totally definitely "
    "is has does".split()
)
_MONTHS = "January February March April May June July August September October November December".split()


def _day(d: date) -> str:
    return f"{d.day} {_MONTHS[d.month - 1]} {d.year}"


def _month(year: int, month: int) -> str:
    year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
    return f"{_MONTHS[month - 1]} {year}"


_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "few": 3, "couple": 2}


def resolve_times(text: str, when: datetime) -> str:
    """Relative times in ``text`` said on ``when``, as dates a later reader can place."""
    d = when.date()
    monday = d - timedelta(days=d.weekday())
    fixed = [
        (r"\byesterday\b", f"on {_day(d - timedelta(days=1))}"),
        (r"\btoday\b", f"on {_day(d)}"),
        (r"\btonight\b", f"on the night of {_day(d)}"),
        (r"\btomorrow\b", f"on {_day(d + timedelta(days=1))}"),
        (r"\blast weekend\b", f"the weekend before {_day(d)}"),
        (r"\bthis weekend\b", f"the weekend of {_day(monday + timedelta(days=5))}"),
        (r"\bnext weekend\b", f"the weekend after {_day(d)}"),
        (r"\blast week\b", f"the week before {_day(d)}"),
        (r"\bthis week\b", f"the week of {_day(monday)}"),
        (r"\bnext week\b", f"the week after {_day(d)}"),
        (r"\blast month\b", f"in {_month(d.year, d.month - 1)}"),
        (r"\bthis month\b", f"in {_month(d.year, d.month)}"),
        (r"\bnext month\b", f"in {_month(d.year, d.month + 1)}"),
        (r"\blast year\b", f"in {d.year - 1}"),
        (r"\bthis year\b", f"in {d.year}"),
        (r"\bnext year\b", f"in {d.year + 1}"),
        (r"\brecently\b", f"recently (before {_day(d)})"),
    ]
    for pattern, words in fixed:
        text = re.sub(pattern, words, text, flags=re.IGNORECASE)

    def ago(m: re.Match[str]) -> str:
        n = _NUMBERS.get(m.group(1).lower()) or int(m.group(1))
        unit = m.group(2).lower().rstrip("s")
        if unit == "year":
            return f"in {d.year - n}"
        if unit == "month":
            return f"in {_month(d.year, d.month - n)}"
        return f"around {_day(d - timedelta(days=n * (7 if unit == 'week' else 1)))}"

    return re.sub(
        r"\b(\d+|a|an|one|two|three|four|five|six|few|couple)\s+(?:of\s+)?(days?|weeks?|months?|years?)\s+ago\b",
        ago,
        text,
        flags=re.IGNORECASE,
    )


def _third_person(sentence: str, speaker: str) -> str:
    """``sentence`` with the speaker for "I", "my", "me", "we" ... and the verb after them agreeing."""
    possessive = f"{speaker}'" if speaker.endswith("s") else f"{speaker}'s"
    subjects = [
        (r"\bI'm\b", f"{speaker} is"),
        (r"\bI am\b", f"{speaker} is"),
        (r"\bI've\b", f"{speaker} has"),
        (r"\bI'd\b", f"{speaker} would"),
        (r"\bI'll\b", f"{speaker} will"),
        (r"\bwe're\b", f"{speaker} and others are"),
        (r"\bwe've\b", f"{speaker} and others have"),
        (r"\b(?:my|our)\b", possessive),
        (r"\bmine\b", possessive),
        (r"\bmyself\b", speaker),
        (r"\b(?:me|us)\b", speaker),
    ]
    for pattern, words in subjects:
        sentence = re.sub(pattern, words, sentence, flags=re.IGNORECASE)

    def subject(m: re.Match[str]) -> str:
        verb = m.group(2)
        low = verb.lower()
        if low in _AGREE:
            verb = _AGREE[low]
        elif (
            m.group(1).lower() == "i"
            and not m.group(0).lower().startswith("and")
            and low.isalpha()
            and low not in _NO_AGREE
            and low not in IRREGULAR
            and not low.endswith(("ed", "s"))
        ):
            verb = (
                verb[:-1] + "ies"
                if re.search(r"[^aeiou]y$", low)
                else verb + ("es" if re.search(r"(?:sh|ch|x|o)$", low) else "s")
            )
        who = speaker if m.group(1).lower() == "i" else f"{speaker} and others"
        return f"{who} {verb}"

    sentence = re.sub(r"(?<!\band )\b(I|we)\s+([A-Za-z']+)", subject, sentence, flags=re.IGNORECASE)
    return re.sub(r"\b(?:I|we)\b", speaker, sentence, flags=re.IGNORECASE)


def _content_words(sentence: str) -> int:
    return sum(
        1
        for w in _WORD.findall(sentence)
        if len(w) > 2 and w.lower() not in STOP_WORDS and w.lower() not in INTERJECTIONS
    )


def turn_facts(text: str, speaker: str, when: datetime) -> list[str]:
    """The facts one turn states, in third person with its times resolved (see the module docstring)."""
    text = without_speaker(text, normalize(speaker).strip())
    facts: list[str] = []
    for raw in _SENTENCES.split(text):
        sentence = raw.strip().strip("\"'")
        if not sentence or sentence.endswith(("?", "؟")):
            continue
        words = sentence.split()
        while words and re.sub(r"\W", "", words[0]).lower() in INTERJECTIONS:
            words = words[1:]  # "Wow, ...", "Thanks! ..."
        sentence = " ".join(words).lstrip(",;: ")
        if _LISTENER.search(sentence) or _content_words(sentence) < MIN_CONTENT_WORDS:
            continue  # about the listener ("you did great"), or too thin to hold a claim
        if _AR_FIRST_PERSON.search(sentence):
            facts.append(f"{speaker}: {resolve_times(sentence, when)}")
        elif _FIRST_PERSON.search(sentence):
            fact = resolve_times(_third_person(sentence, speaker), when)
            facts.append(fact[0].upper() + fact[1:] if fact else fact)
    return facts


def turn_fact(text: str, speaker: str, when: datetime, min_words: int) -> str | None:
    """The fact one turn states (its claims together), or None when it states too little."""
    claims = turn_facts(text, speaker, when)
    if not claims:
        return None
    fact = " ".join(claims)
    return fact if _content_words(fact) >= min_words else None
