"""Deterministic entity extraction (the default; an LLM extractor can replace it).

Finds, in English and Arabic text alike: URLs, file paths and file names, code identifiers
(snake_case, camelCase, PascalCase with two capitals, dotted.names, calls()), #hashtags,
@mentions, capitalised names (one or more capitalised words not opening a sentence, or two or
more anywhere), and any 1-3 word phrase already known as an entity in the namespace - which is
how names in scripts without capitals (Arabic) and names opening a sentence are found.
"""

from __future__ import annotations

import re

from cabrain.search.tokenizer import STOP_WORDS, normalize

_URL = re.compile(r"https?://[^\s<>\"')\]]+")
_PATH = re.compile(r"(?<![\w/])(?:~|\.{1,2})?(?:/[\w.\-]+){2,}/?|\b[\w\-]+(?:/[\w.\-]+)+\.\w{1,8}\b")
_FILE = re.compile(r"\b[\w\-]+\.(?:py|js|ts|tsx|jsx|go|rs|java|rb|sql|md|json|yaml|yml|toml|sh|c|h|cpp|css|html)\b")
_CODE = re.compile(
    r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b"  # snake_case
    r"|\b[a-z]+[A-Z][A-Za-z0-9]*\b"  # camelCase
    r"|\b[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*\b"  # PascalCase
    r"|\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(\))?"  # dotted.names
    r"|\b[A-Za-z_]\w*\(\)"  # calls()
)
_TAG = re.compile(r"(?<![\w#])#[\w\-]+")
_MENTION = re.compile(r"(?<![\w@])@[\w\-.]+\w")
_NAME = re.compile(r"\b[A-Z][\w\-]*[A-Za-z0-9](?:\s+(?:of\s+|de\s+|al-)?[A-Z][\w\-]*[A-Za-z0-9])*")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n]\s*|[\"'(\[]\s*)$")
_WORD = re.compile(r"[^\W_]+")

MAX_ENTITIES = 20
# Words that open a chat line without naming anything: "Hey Mel", "Thanks Nate", "Wow Jon" name Mel,
# Nate and Jon; "OK" and "Bye" name nobody. Stripped from the front of a capitalised name.
INTERJECTIONS = frozenset(
    normalize(w)
    for w in (
        "hey hi hello hiya howdy yo bye goodbye wow whoa woah thanks thank thx yeah yes yep yup yah nope no "
        "oh ohh ah ahh aw aww ok okay hmm hm um uh er ooh oops wow yay hooray hurray cheers congrats "
        "congratulations sure great awesome cool nice dear sorry please well omg lol haha hahaha welcome "
        "morning evening night afternoon good gosh geez alright "
        "مرحبا مرحباً اهلا أهلا هلا شكرا شكراً واو تمام حسنا حسناً طيب صباح مساء يا"
    ).split()
)
# A unit or a count word before "of": "GB of RAM" is a quantity, not a name.
UNIT_WORDS = frozenset(normalize(w) for w in "gb mb tb kb kg km ms lbs percent hours minutes days weeks".split())


def extract(text: str, known_keys: set[str] | None = None) -> list[str]:
    """Entity names found in ``text``, in order of first appearance, without duplicates."""
    found: list[tuple[int, str]] = []
    taken: list[tuple[int, int]] = []

    def add(match_start: int, match_end: int, value: str) -> None:
        if any(s <= match_start < e or s < match_end <= e for s, e in taken):
            return
        taken.append((match_start, match_end))
        found.append((match_start, value))

    for pattern in (_URL, _PATH, _FILE, _MENTION, _TAG, _CODE):
        for m in pattern.finditer(text):
            add(m.start(), m.end(), m.group(0).rstrip(".,;:"))
    for m in _NAME.finditer(text):
        words = m.group(0).split()
        opens_sentence = bool(_SENTENCE_START.search(text[: m.start()]))
        if opens_sentence:
            if len(words) == 1:
                continue
            if words[0].lower() in STOP_WORDS:
                words = words[1:]
        while words and normalize(words[0]) in INTERJECTIONS:
            words = words[1:]
        if words and normalize(words[0]) in UNIT_WORDS:
            continue  # "GB of RAM", "KB of data": a quantity
        name = " ".join(words)
        if name and name.lower() not in STOP_WORDS and len(name) > 1:
            add(m.start() + m.group(0).index(words[0]), m.end(), name)
    if known_keys:
        spans = list(_WORD.finditer(text))
        for size in (3, 2, 1):
            for i in range(len(spans) - size + 1):
                span = spans[i : i + size]
                phrase = text[span[0].start() : span[-1].end()]
                if entity_key(phrase) in known_keys:
                    add(span[0].start(), span[-1].end(), phrase)
    seen: set[str] = set()
    names = []
    for _, name in sorted(found):
        key = entity_key(name)
        if key not in seen:
            seen.add(key)
            names.append(name)
    return names[:MAX_ENTITIES]


def entity_key(name: str) -> str:
    """The normalised key entities are matched on."""
    return " ".join(normalize(name).split())


def phrases(text: str) -> set[str]:
    """Keys of every 1-3 word phrase in ``text`` (to look up known entities)."""
    words = [entity_key(w) for w in _WORD.findall(text)]
    keys = set()
    for size in (1, 2, 3):
        for i in range(len(words) - size + 1):
            keys.add(" ".join(words[i : i + size]))
    return keys
