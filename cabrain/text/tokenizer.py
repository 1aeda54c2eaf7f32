"""CaBrain's keyword tokenizer, for Arabic and English alike.

Pipeline for each text:

1. Unicode NFKC; Arabic-Indic and Persian digits become ASCII digits (so "١٩٩٠" matches "1990").
2. Arabic normalisation: strip diacritics (tashkeel, U+064B-U+065F, U+0670) and tatweel (U+0640);
   alef variants أ إ آ ٱ -> ا; alef maqsura ى -> ي; ta marbuta ة -> ه; hamza seats ؤ -> و, ئ -> ي.
3. Lower-case; split into runs of letters/digits (an apostrophe inside a word is dropped: "don't"
   -> "dont"; "_" and "-" split, so code identifiers yield their parts).
4. Stop words of both languages are dropped (after normalisation).
5. Light stemming. Arabic: the Light10 rules (Larkey, Ballesteros & Connell 2007) - a leading و
   when the word stays >= 3 letters, then one of the prefixes ال وال بال كال فال لل, then suffixes
   ها ان ات ون ين يه ه ي (ية/ة are already يه/ه), each only while >= 2 letters remain. English: a conservative
   suffix stemmer (plural -s/-es/-ies, -ing, -ed) that only strips when a stem of >= 3 letters is
   left.

The same function tokenizes documents and queries, so both sides agree by construction.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

_DIGITS = str.maketrans("٠١٢٣٤٥٦٧٨٩۰۱۲۳۴۵۶۷۸۹", "01234567890123456789")
_ARABIC_MAP = str.maketrans(
    {
        "أ": "ا",
        "إ": "ا",
        "آ": "ا",
        "ٱ": "ا",
        "ى": "ي",
        "ة": "ه",
        "ؤ": "و",
        "ئ": "ي",
        "ـ": None,  # tatweel
    }
)
_DIACRITICS = re.compile("[\u064b-\u065f\u0670\u06d6-\u06ed]")
_APOSTROPHES = re.compile("(?<=\\w)['\u2019](?=\\w)")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_ARABIC_LETTERS = re.compile("[\u0621-\u064a]")
POSSESSIVE = re.compile("(?<=\\w)['\u2019][sS]\\b")  # "Melanie's": left off before matching a name

_AR_PREFIXES = ("وال", "بال", "كال", "فال", "لل", "ال")
_AR_SUFFIXES = ("ها", "ان", "ات", "ون", "ين", "يه", "ه", "ي")  # ية and ة fold into يه and ه

MAX_TOKEN_CHARS = 64


def fold_marks(text: str) -> str:
    """Step 1 and the marks of step 2 (diacritics, tatweel), letters and case kept as written."""
    text = unicodedata.normalize("NFKC", text).translate(_DIGITS)
    return _DIACRITICS.sub("", text).replace("\u0640", "")


def normalize(text: str) -> str:
    """Steps 1-2 and lower-casing: the canonical form both sides are compared in."""
    return _APOSTROPHES.sub("", fold_marks(text).translate(_ARABIC_MAP)).lower()


def _stem_arabic(word: str) -> str:
    if len(word) > 3 and word.startswith("و"):
        word = word[1:]
    for prefix in _AR_PREFIXES:
        if word.startswith(prefix) and len(word) - len(prefix) >= 2:
            word = word[len(prefix) :]
            break
    for suffix in _AR_SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 2:
            word = word[: -len(suffix)]
    return word


def _stem_english(word: str) -> str:
    if len(word) <= 3 or not word.isascii() or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes")) and len(word) > 5:
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        word = word[:-1]
    if word.endswith("ing") and len(word) - 3 >= 3:
        return word[:-3]
    if word.endswith("ed") and len(word) - 2 >= 3:
        return word[:-2]
    return word


def _stem(word: str) -> str:
    if _ARABIC_LETTERS.search(word):
        return _stem_arabic(word)
    return _stem_english(word)


_EN_STOP = """
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not of off on once only or other our ours ourselves out over own same she should so
some such than that the their theirs them themselves then there these they this those through to too
under until up very was we were what when where which while who whom why will with would you your
yours yourself yourselves
""".split()
_AR_STOP = """
في من على الى إلى عن مع ان أن إن كان كانت هذا هذه ذلك تلك هو هي هم هن انا أنا نحن انت أنت التي الذي
الذين اللذان اللتان ما ماذا متى اين أين كيف لماذا هل لم لن لا قد ثم او أو بل لكن حتى اذا إذا كل بعض غير
بين عند عندما منذ قبل بعد فوق تحت حيث كما ايضا أيضا التى الى به بها له لها لهم فيه فيها منه منها عليه
عليها و ف ب ل ك يا اي أي ال
""".split()
STOP_WORDS = frozenset(normalize(w) for w in _EN_STOP + _AR_STOP)


def tokenize(text: str) -> list[str]:
    """Normalised, stop-word-free, stemmed tokens of ``text``, in order."""
    tokens = []
    for word in _WORD.findall(normalize(text)):
        if word in STOP_WORDS or len(word) > MAX_TOKEN_CHARS:
            continue
        stem = _stem(word)
        if stem and stem not in STOP_WORDS:
            tokens.append(stem)
    return tokens


def term_frequencies(text: str) -> tuple[Counter[str], int]:
    """Term -> count for ``text``, and its length in tokens."""
    tokens = tokenize(text)
    return Counter(tokens), len(tokens)


def name_tokens(text: str) -> list[str]:
    """``text``'s tokens with a possessive 's left off first ("Melanie's" is "melanie"), for matching
    a person's name: :func:`tokenize` alone reads "melanie's" as the plural-looking "melany"."""
    return tokenize(POSSESSIVE.sub("", text))


def query_terms(texts: Iterable[str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(tokenize(text))
    return counts
