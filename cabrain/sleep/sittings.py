"""The deterministic distiller of a conversation's turns: facts a person would write, without a model.

A turn (a memory with ``metadata.speaker``) is what one person said at one moment. Its statements
about the speaker's own life, plans, likes and people become facts the way an annotator writes them:

- what one turn claims, as one fact: the speaker's own statements of the turn (a question, a
  greeting, thanks, praise of the listener and talk too thin to hold a claim are left out), kept
  when together they carry at least ``CABRAIN_SLEEP_TURN_MIN_WORDS`` content words, or
  ``CABRAIN_SLEEP_CLAIM_MIN_WORDS`` when a statement opens with the speaker as its subject ("I
  ...", "My ...", "We ..."): that is a claim about the speaker even when short, where a remark
  that only mentions them needs more to hold one - an annotator writes a turn's claims about one
  moment as one fact, and chit-chat as none;
- third person, the speaker resolved: "I" -> "Caroline", "my sister" -> "Caroline's sister",
  "I'm" -> "Caroline is", and the verb after the speaker agrees ("I love" -> "Caroline loves");
- relative times resolved against the turn's date: "yesterday" -> "on 7 May 2023", "last year" ->
  "in 2022", "next month" -> "in June 2023", "two weeks ago" -> "around 24 April 2023";
- each fact linked to the turn it comes from (``memory_sources``).

A sitting (the turns of one ``metadata.sitting``, found from time on the write path) with at least
``MIN_SUMMARY_FACTS`` facts gets a summary as a note-taker writes one (:func:`sitting_summary`): who
talked and when, then its richest facts (at most ``CABRAIN_SLEEP_SITTING_SUMMARY_FACTS``) in the order they were said.

English is read this way; an Arabic turn's first-person statements (أنا، لدي، عندي) become facts
with the speaker named before them. What is not a claim stays in the turn, which recall still finds.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

from cabrain.text.entities import INTERJECTIONS
from cabrain.text.tokenizer import STOP_WORDS, normalize
from cabrain.write.decision.lexicon import IRREGULAR
from cabrain.write.decision.origin import without_speaker

MIN_CONTENT_WORDS = 3  # words that are neither stop words nor interjections
_SENTENCES = re.compile(r"(?<=[.!?؟])\s+|\n+")
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself|we|we're|we've|our|us)\b", re.IGNORECASE)
_LISTENER = re.compile(r"\b(?:you|your|you're|you've|yours|u)\b", re.IGNORECASE)
_AR_FIRST_PERSON = re.compile(r"(?:^|\s)(?:أنا|انا|لدي|لديّ|عندي|نحن|لدينا|عندنا)(?:\s|$)")
_SUBJECT_FIRST = re.compile(r"^\W*(?:I|I'm|I've|I'd|I'll|my|we|we're|we've|our)\b", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z\u0621-\u064a']+")
# irregular agreement after a third-person subject
_AGREE = {"am": "is", "have": "has", "do": "does", "go": "goes", "don't": "doesn't", "haven't": "hasn't"}
_NO_AGREE = frozenset(
    "was were did had can could will would should might must may shall also really just still never always "
    "recently finally actually even already usually often sometimes kinda gotta wanna totally definitely "
    "is has does learnt felt spent lost dreamt burnt spelt spilt smelt dealt knelt".split()
)
# present tenses that end like a past one ("I need" -> "needs")
_PRESENT_IN_ED = frozenset("need feed bleed breed speed proceed succeed exceed heed shed embed".split())
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
            and (not low.endswith(("ed", "s")) or low in _PRESENT_IN_ED)
        ):
            verb = (
                verb[:-1] + "ies"
                if re.search(r"[^aeiou]y$", low)
                else verb + ("es" if re.search(r"(?:sh|ch|x|o)$", low) else "s")
            )
        who = speaker if m.group(1).lower() == "i" else f"{speaker} and others"
        return f"{who} {verb}"

    # "my sister and I go": the verb is theirs; ", and I need": a clause of the speaker's own
    sentence = re.sub(r"(?<!\w and )\b(I|we)\s+([A-Za-z']+)", subject, sentence, flags=re.IGNORECASE)
    return re.sub(r"\b(?:I|we)\b", speaker, sentence, flags=re.IGNORECASE)


def _content_words(sentence: str) -> int:
    return sum(
        1
        for w in _WORD.findall(sentence)
        if len(w) > 2 and w.lower() not in STOP_WORDS and w.lower() not in INTERJECTIONS
    )


def turn_facts(text: str, speaker: str, when: datetime) -> list[str]:
    """The facts one turn states, in third person with its times resolved (see the module docstring)."""
    return [fact for fact, _ in _claims(text, speaker, when)]


def _claims(text: str, speaker: str, when: datetime) -> list[tuple[str, bool]]:
    """Each statement of a turn about the speaker, as a fact, and whether the speaker is its subject."""
    text = without_speaker(text, normalize(speaker).strip())
    facts: list[tuple[str, bool]] = []
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
            facts.append((f"{speaker}: {resolve_times(sentence, when)}", bool(_AR_FIRST_PERSON.match(sentence))))
        elif _FIRST_PERSON.search(sentence):
            fact = resolve_times(_third_person(sentence, speaker), when)
            facts.append((fact[0].upper() + fact[1:] if fact else fact, bool(_SUBJECT_FIRST.match(sentence))))
    return facts


MIN_SUMMARY_FACTS = 2  # a sitting of one fact has that fact: a summary would repeat it
_AR_MONTHS = "يناير فبراير مارس أبريل مايو يونيو يوليو أغسطس سبتمبر أكتوبر نوفمبر ديسمبر".split()
_ARABIC_LETTER = re.compile(r"[\u0621-\u064a]")
_LATIN_LETTER = re.compile(r"[A-Za-z]")


def _names(names: list[str], conjunction: str) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" {conjunction} " + names[-1]


def sitting_summary(speakers: list[str], first: datetime, last: datetime, facts: list[str], limit: int) -> str:
    """A sitting's summary without a model: who talked and when (in the language most of its facts
    are in), then its ``limit`` richest facts - most content words - in the order they were said."""
    keep = sorted(sorted(range(len(facts)), key=lambda i: (-_content_words(facts[i]), i))[:limit])
    chosen = [facts[i].strip() for i in keep]
    body = " ".join(f if f.endswith((".", "!", "?", "؟")) else f + "." for f in chosen)
    text = " ".join(chosen)
    if len(_ARABIC_LETTER.findall(text)) > len(_LATIN_LETTER.findall(text)):
        day = lambda d: f"{d.day} {_AR_MONTHS[d.month - 1]} {d.year}"  # noqa: E731
        when = day(first) if first.date() == last.date() else f"من {day(first)} إلى {day(last)}"
        head = f"تحدّث {_names(speakers, 'و')} في {when}." if len(speakers) > 1 else f"تحدّث {speakers[0]} في {when}."
    else:
        when = f"on {_day(first)}" if first.date() == last.date() else f"from {_day(first)} to {_day(last)}"
        head = f"{_names(speakers, 'and')} talked {when}."
    return f"{head} {body}"


def turn_fact(text: str, speaker: str, when: datetime, min_words: int, claim_words: int | None = None) -> str | None:
    """The fact one turn states (its claims together), or None when it states too little: fewer
    than ``min_words`` content words, or than ``claim_words`` when a statement opens with the
    speaker as its subject."""
    claims = _claims(text, speaker, when)
    if not claims:
        return None
    fact = " ".join(c for c, _ in claims)
    need = min(min_words, claim_words) if claim_words is not None and any(s for _, s in claims) else min_words
    return fact if _content_words(fact) >= need else None
