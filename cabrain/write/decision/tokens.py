"""A statement as the write decision reads it: normalised tokens with their alignment keys.

Times, scales ("1.2 million"), number words and Arabic digits become canonical values; codes,
addresses and names are marked; each token knows whether it says something substantive.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from functools import lru_cache

from cabrain.text.tokenizer import STOP_WORDS, fold_marks, normalize, tokenize
from cabrain.write.decision.lexicon import (
    DEICTIC,
    DETERMINERS,
    FILLERS,
    NEGATIONS,
    NUMBER_WORDS,
    RETRACTION_CUES,
    REVISION_CUES,
)

_TOKEN = re.compile(
    r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+|https?://[^\s,;]+|[^\W\d_][^\W_]*(?:-[^\W_]+)*|\d+(?:[.,:]\d+)*(?:-\d+)*|[^\W\d_]+"
)
# Retractions said in more than one word ("called off", "will not take place", "rolled back").
_CALLED_OFF = re.compile(
    r"\b(?:called off|rolled back|(?:will|would) not (?:take place|happen|go ahead)|won['\u2019]?t (?:take place|happen)|"
    r"(?<=is )off\b|(?<=are )off\b|(?<=was )off\b|no longer (?:happening|going ahead|on|valid|true|the case)|"
    r"(?:turned out to be |was )?a false (?:positive|alarm)|لن (?:تقام|يقام|يتم|تتم))",
    re.I,
)
_TIME = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*([ap])\.?m\b\.?|\b(\d{1,2}):(\d{2})\b", re.I)
_SCALE = re.compile(r"(\d+(?:[.,]\d+)?)\s*(million|billion|thousand|k|مليون|مليار|ألف|الف)\b", re.I)
_SCALES = {
    "million": 10**6,
    "billion": 10**9,
    "thousand": 1000,
    "k": 1000,
    "مليون": 10**6,
    "مليار": 10**9,
    "ألف": 1000,
    "الف": 1000,
}
_AR_PREFIX = ("وال", "بال", "كال", "فال", "لل", "ال")


def _canonical_time(m: re.Match) -> str:
    if m.group(4) is not None:
        return f"{int(m.group(4))}:{m.group(5)}"
    hour = int(m.group(1)) % 12 + (12 if m.group(3).lower() == "p" else 0)
    return f"{hour}:{m.group(2) or '00'}"


def _canonical_scale(m: re.Match) -> str:
    value = float(m.group(1).replace(",", "")) * _SCALES[m.group(2).lower()]
    return str(int(value)) if value == int(value) else str(value)


@dataclass(frozen=True)
class Token:
    text: str  # normalised surface form
    key: str  # what alignment compares: the word less its light prefixes/suffixes, a number's value
    number: bool
    stop: bool
    capital: bool = False  # written with a capital not opening the sentence (a name, "Building A")
    possessive: bool = False  # "Ahmed's"
    comma: bool = False  # a comma follows it

    @property
    def substantive(self) -> bool:
        if self.text in DEICTIC or self.capital or self.number:
            return True
        return not (
            self.stop
            or self.text in FILLERS
            or self.text in REVISION_CUES
            or self.text in RETRACTION_CUES
            or self.text in NEGATIONS
        )


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The tokenizer's light stem of one word ("" for a stop word)."""
    stems = tokenize(word)
    return stems[0] if stems else ""


@lru_cache(maxsize=65536)
def _key(word: str) -> str:
    if "-" in word:
        return word
    if len(word) >= 5 and word[0] == "س" and word[1] in "يتنا" and re.match(r"^[\u0621-\u064a]+$", word):
        word = word[1:]  # the future: سيحضر -> يحضر
    if re.match(r"^[\u0621-\u064a]+$", word):  # Arabic: prefixes only (ابن/ابنة, جد/جدة stay apart)
        if len(word) > 3 and word.startswith("و"):
            word = word[1:]
        for prefix in _AR_PREFIX:
            if word.startswith(prefix) and len(word) - len(prefix) >= 2:
                return word[len(prefix) :]
        return word
    return stem(word) or word


@lru_cache(maxsize=8192)
def statement_tokens(text: str) -> tuple[Token, ...]:
    text = text.replace("\u066b", ".").replace("\u066c", ",")  # Arabic decimal and thousands separators
    text = fold_marks(text)  # digits to ASCII; diacritics and tatweel split no word
    text = _TIME.sub(_canonical_time, text)
    text = _SCALE.sub(_canonical_scale, text)
    out: list[Token] = []
    text = re.sub(r"\bلا غير\b", " ", text)  # "only, nothing else": no negation
    text = _CALLED_OFF.sub(" cancelled ", text)
    text = re.sub(r"\bo['\u2019]clock\b", "", text, flags=re.I)
    text = re.sub(r"(?<=\w)n['\u2019]t\b", "nt", text)  # isn't -> isnt (a negation word)
    for m in _TOKEN.finditer(text):
        raw = m.group(0)
        if "@" in raw or "://" in raw or (not raw[0].isdigit() and any(ch.isdigit() for ch in raw)):
            # a code: Q1, FY24, cache-01, PLAT-90, an address
            code = normalize(raw)
            out.append(Token(code, code, False, False, True))
            continue
        if raw[0].isdigit():
            value = raw.replace(",", "") if re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", raw) else raw
            if re.fullmatch(r"\d+(\.\d+)?", value):
                value = value.rstrip("0").rstrip(".") if "." in value else value.lstrip("0") or "0"
            out.append(Token(value, value, True, False))
            continue
        word = normalize(raw)
        if word == "s" and out and text[m.start() - 1 : m.start()] in ("'", "\u2019"):
            out[-1] = Token(
                out[-1].text,
                out[-1].key,
                out[-1].number,
                out[-1].stop,
                out[-1].capital,
                True,
            )
            continue
        if word in NUMBER_WORDS:
            out.append(Token(word, NUMBER_WORDS[word], True, False))
            continue
        opens = not out or bool(re.search(r"[.!?:;]\s*$", text[: m.start()]))
        capital = raw[0].isupper() and not opens and word not in DETERMINERS and word != "i"
        out.append(
            Token(
                word,
                _key(word),
                False,
                word in STOP_WORDS and word not in DEICTIC,
                capital,
            )
        )
    commas = {m.start() for m in re.finditer(r"\s*[,\u060c]", text)}
    if commas:  # mark the words a comma follows (where a leading clause ends)
        marked, ends = [], [m.end() for m in _TOKEN.finditer(text)]
        for token, end in zip(out, ends, strict=False):
            marked.append(dataclasses.replace(token, comma=end in commas) if end in commas else token)
        out = marked + out[len(marked) :]
    return tuple(out)
