"""Deterministic entity extraction (the default; an LLM extractor can replace it).

Finds, in English and Arabic text alike: URLs, file paths and file names, code identifiers
(snake_case, camelCase, PascalCase with two capitals, dotted.names, calls()), #hashtags,
@mentions, capitalised names (one or more capitalised words not opening a sentence, or two or
more anywhere; a greeting before a name is not part of it), Arabic names by what introduces them
(a title: الدكتور أحمد الغامدي; a kinship chain: محمد بن سلمان; an organisation or a place:
جامعة القاهرة, شركة أرامكو, مدينة جدة), and any 1-3 word phrase already known as an entity in the
namespace - which is how names without a cue and names opening a sentence are found.
"""

from __future__ import annotations

import re

from cabrain.text.tokenizer import STOP_WORDS, normalize

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
# Arabic has no capitals: a name is found by what introduces it. Person titles, then organisation
# words that are part of the name (جامعة القاهرة), then those that are not (شركة أرامكو: أرامكو), then places.
AR_PERSON_TITLES = (
    "السيد السيدة الدكتور الدكتورة المهندس المهندسة الأستاذ الأستاذة الاستاذ الاستاذة الشيخ الشيخة "
    "الأمير الأميرة الامير الاميرة الملك الملكة الرئيس الكابتن الزميل الزميلة"
)
AR_ORG_NAMED = "جامعة وزارة مستشفى بنك مصرف هيئة مدرسة معهد نادي مطار"
AR_ORG_CUES = "شركة مؤسسة مجموعة"
AR_PLACE_CUES = "مدينة محافظة منطقة قرية دولة حي"
_AR_LETTERS = "\u0621-\u063a\u0641-\u064a"
_AR_WORD = f"(?:عبد\\s?)?[{_AR_LETTERS}]{{2,}}"
_AR_PREFIX = "(?:و|ف|ب|ل|ك|لل|بال|وال|فال)?"


def _cue(words: str, *, keep: bool) -> re.Pattern[str]:
    cue = "|".join(sorted(words.split(), key=len, reverse=True))
    head = f"({cue})\\s+" if keep else f"(?:{cue})\\s+"
    return re.compile(f"(?<![{_AR_LETTERS}]){_AR_PREFIX}{head}({_AR_WORD}(?:\\s+{_AR_WORD}){{0,2}})")


_AR_CUES = (  # organisations first: مستشفى الملك فيصل is a hospital, not King Faisal
    (_cue(AR_ORG_NAMED, keep=True), True, 2),
    (_cue(AR_PERSON_TITLES, keep=False), False, 2),
    (_cue(AR_ORG_CUES, keep=False), False, 2),
    (_cue(AR_PLACE_CUES, keep=False), False, 1),
)
_AR_KIN = re.compile(f"(?<![{_AR_LETTERS}])({_AR_WORD}\\s+(?:بن|ابن|بنت)\\s+{_AR_WORD})")
_AR_NOT_NAME = frozenset(
    normalize(w) for w in "في من الى إلى على عن مع و أو او ثم قال قالت كان كانت هو هي الذي التي".split()
)
# A month or a day of the week alone is a date ("on 7 May 2023", "last Saturday"), not a name.
CALENDAR_WORDS = frozenset(
    normalize(w)
    for w in (
        "january february march april may june july august september october november december "
        "jan feb mar apr jun jul aug sep sept oct nov dec "
        "monday tuesday wednesday thursday friday saturday sunday"
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
        if len(words) == 1 and normalize(words[0]) in CALENDAR_WORDS:
            continue  # "in May", "on Saturday": a date
        name = " ".join(words)
        if name and name.lower() not in STOP_WORDS and len(name) > 1:
            add(m.start() + m.group(0).index(words[0]), m.end(), name)
    for m in _AR_KIN.finditer(text):
        add(m.start(1), m.end(1), m.group(1))
    for pattern, keeps_cue, most in _AR_CUES:
        for m in pattern.finditer(text):
            words = _arabic_name(m.group(m.lastindex or 1).split(), most)
            if words and words[-1] == "عبد":
                words = words[:-1]
            if words:
                name = " ".join([m.group(1), *words] if keeps_cue else words)
                add(m.start(1) if keeps_cue else m.start(m.lastindex or 1), m.end(), name)
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


def _arabic_name(words: list[str], most: int) -> list[str]:
    """The words after a cue that are the name: up to ``most``, stopping at a particle, a verb or a
    word that only links (``عبد`` joins the word after it)."""
    joined: list[str] = []
    for w in words:  # عبد الله is one word of a name
        if joined and joined[-1] == "عبد":
            joined[-1] = f"عبد {w}"
        else:
            joined.append(w)
    out: list[str] = []
    for w in joined:
        key = normalize(w)
        if key in STOP_WORDS or key in _AR_NOT_NAME or (_arabic_verb(key) and out):
            break
        out.append(w)
        if len(out) == most:
            break
    return out


def _arabic_verb(word: str) -> bool:
    """An imperfect verb after a name (تعمل, يقود), which ends it; never the name's first word."""
    return len(word) >= 4 and word[0] in "يت" and not word.startswith("ال")


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
