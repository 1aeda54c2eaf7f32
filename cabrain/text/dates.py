"""Time as words: what makes a memory's own time searchable, and a question's time expressions.

A memory is indexed for keyword search with the words of its ``valid_at`` date (UTC): the day,
the month's English name and its Arabic names (the Egyptian/Gulf one and the Levantine one, whose
first word alone is kept where it has two: تشرين, كانون), and the year - "8 May 2023" is searchable as ``8 may مايو أيار 2023``. A question that says "in May
2023", "on 8 May" or "في أيار" then matches the memories of that time by the same words, whether
or not their text names the date.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

from cabrain.text.tokenizer import normalize

MONTHS_EN = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
MONTHS_AR = (  # single words only: a two-word name's parts ("الأول") are everyday words
    ("يناير", "كانون"),
    ("فبراير", "شباط"),
    ("مارس", "آذار"),
    ("أبريل", "نيسان"),
    ("مايو", "أيار"),
    ("يونيو", "حزيران"),
    ("يوليو", "تموز"),
    ("أغسطس",),  # the Levantine آب is أب ("father") once normalised
    ("سبتمبر", "أيلول"),
    ("أكتوبر", "تشرين"),
    ("نوفمبر", "تشرين"),
    ("ديسمبر", "كانون"),
)


def month_words(month: int) -> str:
    """Every name of ``month`` (1-12) this module knows, English then Arabic."""
    return " ".join((MONTHS_EN[month - 1], *MONTHS_AR[month - 1]))


def date_terms(moment: datetime) -> str:
    """The words ``moment``'s date is searchable by (its UTC date; a naive time is taken as UTC)."""
    return _day(_utc_date(moment))


def _utc_date(moment: datetime) -> date:
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC).date()


# --- Relative time in a question -------------------------------------------------------------------
#
# "What did we decide last month?" names no date, so its words match no memory's date words.
# ``relative_terms`` resolves such expressions against the current time into the words above: a day
# as ``date_terms`` gives it, a month as its names and year, a year as its number, and a week or a
# weekend as the names and year of the month(s) it falls in (day numbers are too common in text to
# stand for seven days). Absolute expressions ("in May 2023", "في مايو ٢٠٢٣") are left alone: their
# words are in the question already.
#
# The expressions are matched on the question's ``normalize``d form (the patterns are written as
# Arabic is usually spelled and normalised the same way). A cheap check for cue words comes first,
# so a question with no time words costs a few substring tests.

_EN_CUES = ("today", "tonight", "yesterday", "ago", "week", "month", "year", "last", "morning", "afternoon", "evening")
_AR_CUES = tuple("يوم امس أمس إمس آمس البارح سبوع شهر سنة سنه عام قبل منذ ماض فائت فايت فات منصرم".split())
# What ``normalize`` would fold and the cues above would miss: marks, tatweel, presentation forms,
# Latin ligatures, full-width Latin. A question holding any goes straight to the full match.
_MARKED = re.compile("[\u0640\u064b-\u065f\u0670\u06d6-\u06ed\ufb00-\ufdff\ufe70-\ufeff\uff01-\uff5e]")

_EN_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
_EN_NUMBERS |= {"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_AR_NUMBERS = {"ثلاث": 3, "أربع": 4, "خمس": 5, "ست": 6, "سبع": 7, "ثماني": 8, "تسع": 9, "عشر": 10}
_AR_NUMBERS |= {word + "ة": n for word, n in _AR_NUMBERS.items()} | {"ثمان": 8}
_AR_UNITS = {"يوم": "day", "يوما": "day", "أيام": "day", "أسبوع": "week", "أسبوعا": "week", "أسابيع": "week"}
_AR_UNITS |= {"شهر": "month", "شهرا": "month", "أشهر": "month", "شهور": "month", "سنة": "year", "سنوات": "year"}
_AR_UNITS |= {"سنين": "year", "عام": "year", "عاما": "year", "أعوام": "year"}
_AR_ONE = {"يومين": ("day", 2), "يوم": ("day", 1), "أسبوعين": ("week", 2), "أسبوع": ("week", 1)}
_AR_ONE |= {"شهرين": ("month", 2), "شهر": ("month", 1), "سنتين": ("year", 2), "سنة": ("year", 1)}
_AR_ONE |= {"عامين": ("year", 2), "عام": ("year", 1)}
_AR_MONTHS = {
    name: month for month, names in enumerate(MONTHS_AR, 1) for name in names if name not in ("تشرين", "كانون")
}
_AR_MONTHS |= {"تشرين الأول": 10, "تشرين الثاني": 11, "كانون الأول": 12, "كانون الثاني": 1}
_AR_MONTHS |= {"آب": 8, "إبريل": 4, "يونيه": 6, "يوليه": 7}
_WEEKDAYS_EN = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAYS_AR = ("اثنين", "ثلاثاء", "أربعاء", "خميس", "جمعة", "سبت", "أحد")  # after the article


def _key(words: str) -> str:
    return " ".join(normalize(words).split())


def _alternatives(words: Iterable[str]) -> str:
    """A regex matching any of ``words`` (normalised; a space matches any run of white space), longest first."""
    keys = sorted({_key(word) for word in words}, key=len, reverse=True)
    return "(?:" + "|".join(r"\s+".join(map(re.escape, key.split())) for key in keys) + ")"


_AL = r"\bو?ف?(?:[بك]?ال|لل)"  # the article, with the clitics that may lead it: الشهر, والشهر, بالأمس, للعام
_W = r"\bو?ف?"  # a word without the article, with its leading conjunction: أمس, وأمس
_PAST = r"(?:(?:الماضي|الفائت|المنصرم)ة?|اللي\s+فاتت?)"  # "last", either gender, formal or colloquial
_NOW = r"(?:الحالي|الجاري)ة?"  # "current"
_EN_N = r"(?:\d{1,4}|" + "|".join(_EN_NUMBERS) + r"|(?:a\s+)?couple\s+of)"
_AR_N = rf"(?:\d{{1,4}}|{_alternatives(_AR_NUMBERS)})"

# One named group per kind of expression, both languages in it; a match's ``lastgroup`` is its kind.
# Where two can start at the same place the longer comes first ("أمس الأول" before "أمس").
_KINDS = {
    "day2": rf"\b(?:the\s+)?day\s+before\s+yesterday\b|{_W}أول\s+(?:من\s+)?(?:ال)?أمس\b|{_W}(?:ال)?أمس\s+الأول\b",
    "day1": rf"\b(?:yesterdays?|last\s+night)\b|(?:{_AL}|{_W})أمس\b|{_AL}بارحة\b|{_AL}ليلة\s+{_PAST}\b",
    "day0": rf"\b(?:todays?|tonight|this\s+(?:morning|afternoon|evening))\b|{_AL}يوم\b",
    "weekend0": rf"\bthis\s+weekends?\b|{_W}(?:عطلة\s+)?نهاية\s+(?:هذا\s+الأسبوع|الأسبوع\s+{_NOW})\b",
    "weekend1": rf"\blast\s+weekends?\b|{_W}(?:عطلة\s+)?نهاية\s+الأسبوع\s+{_PAST}\b",
    "week0": rf"\bthis\s+weeks?\b|{_W}هذا\s+الأسبوع\b|{_AL}أسبوع\s+{_NOW}\b",
    "week1": rf"\blast\s+weeks?\b(?!\s+of\b)|{_AL}أسبوع\s+{_PAST}\b",
    "week2": rf"\b(?:the\s+)?week\s+before\s+last\b|{_AL}أسبوع\s+قبل\s+{_PAST}\b",
    "month0": rf"\bthis\s+months?\b|{_W}هذا\s+الشهر\b|{_AL}شهر\s+{_NOW}\b",
    "month1": rf"\blast\s+months?\b(?!\s+of\b)|{_AL}شهر\s+{_PAST}\b",
    "month2": rf"\b(?:the\s+)?month\s+before\s+last\b|{_AL}شهر\s+قبل\s+{_PAST}\b",
    "year0": rf"\bthis\s+years?\b|{_W}(?:هذه\s+السنة|هذا\s+العام)\b|{_AL}(?:سنة|عام)\s+{_NOW}\b",
    "year1": rf"\blast\s+years?\b(?!\s+of\b)|{_AL}(?:سنة|عام)\s+{_PAST}\b",
    "year2": rf"\b(?:the\s+)?year\s+before\s+last\b|{_AL}(?:سنة|عام)\s+قبل\s+{_PAST}\b",
    "ago": (
        rf"\b(?P<en_n>{_EN_N})\s+(?P<en_unit>day|week|month|year)s?\s+ago\b"
        rf"|{_W}(?:قبل|منذ)\s+(?:(?P<ar_n>{_AR_N})\s+(?P<ar_unit>{_alternatives(_AR_UNITS)})"
        rf"|(?P<ar_one>{_alternatives(set(_AR_ONE) - {'يوم'})}|يوم(?!\s+ال)))\b"
    ),
    "month": (
        rf"\blast\s+(?P<en_month>{'|'.join(MONTHS_EN)})\b"
        rf"|{_W}(?P<ar_month>{_alternatives(_AR_MONTHS)})\s+{_PAST}\b"
    ),
    "weekday": (
        rf"\blast\s+(?P<en_day>{'|'.join(_WEEKDAYS_EN)})\b"
        rf"|{_AL}(?P<ar_day>{_alternatives(_WEEKDAYS_AR)})\s+{_PAST}\b"
    ),
}
# Every expression starts a word; saying so up front spares the engine most positions. The Arabic
# is normalised as the question is.
_SOURCE = r"\b(?=\w)(?:" + "|".join(f"(?P<{kind}>{pattern})" for kind, pattern in _KINDS.items()) + ")"
_EXPRESSION = re.compile(re.sub("[\u0600-\u06ff]+", lambda run: normalize(run[0]), _SOURCE))
_UNITS = {_key(word): unit for word, unit in _AR_UNITS.items()}
_ONE = {_key(word): unit for word, unit in _AR_ONE.items()}
_NUMBERS = {_key(word): n for word, n in _AR_NUMBERS.items()} | _EN_NUMBERS | {"couple of": 2, "a couple of": 2}
_MONTHS = {_key(word): month for word, month in _AR_MONTHS.items()} | {name: i for i, name in enumerate(MONTHS_EN, 1)}
_WEEKDAYS = {_key(word): i for i, word in enumerate(_WEEKDAYS_AR)} | {name: i for i, name in enumerate(_WEEKDAYS_EN)}


def _has_cue(query: str) -> bool:
    """False only when ``query`` surely holds no relative time expression."""
    low = query.lower()
    for cue in _EN_CUES:
        if cue in low:
            return True
    if low.isascii():
        return False
    if _MARKED.search(low):
        return True
    for cue in _AR_CUES:
        if cue in low:
            return True
    return False


def _day(day: date) -> str:
    return f"{day.day} {month_words(day.month)} {day.year}"


def _month(year: int, month: int) -> str:
    return f"{month_words(month)} {year}" if year >= 1 else ""


def _days(first: date, last: date) -> str:
    """The months (names and year) the days ``first`` to ``last`` fall in; a week spans two at most."""
    if (first.year, first.month) == (last.year, last.month):
        return _month(first.year, first.month)
    return f"{_month(first.year, first.month)} {_month(last.year, last.month)}"


def _ago(unit: str, n: int, today: date) -> str:
    """The ``unit`` ("day", "week", "month" or "year") ``n`` of them before ``today``'s."""
    if unit == "day":
        return _day(today - timedelta(days=n))
    if unit == "week":
        monday = today - timedelta(days=today.weekday() + 7 * n)
        return _days(monday, monday + timedelta(days=6))
    if unit == "month":
        year, month = divmod(today.year * 12 + today.month - 1 - n, 12)
        return _month(year, month + 1)
    return str(today.year - n) if today.year > n else ""


def _count(number: str) -> int:
    return int(number) if number.isdigit() else _NUMBERS[_key(number)]


def _resolve(match: re.Match[str], today: date) -> str:
    kind = match.lastgroup or ""
    if kind[-1:].isdigit():  # day0..year2: this one, the last one, the one before it
        unit, n = kind[:-1], int(kind[-1])
        if unit != "weekend":
            return _ago(unit, n, today)
        saturday = today - timedelta(days=today.weekday() - 5 + 7 * n)
        return _days(saturday, saturday + timedelta(days=1))
    if kind == "ago":
        if match["ar_one"]:
            unit, n = _ONE[_key(match["ar_one"])]
        elif match["ar_n"]:
            unit, n = _UNITS[_key(match["ar_unit"])], _count(match["ar_n"])
        else:
            unit, n = match["en_unit"], _count(match["en_n"])
        return _ago(unit, n, today)
    if kind == "month":
        month = _MONTHS[_key(match["en_month"] or match["ar_month"])]
        return _month(today.year - (month >= today.month), month)
    weekday = _WEEKDAYS[_key(match["en_day"] or match["ar_day"])]
    return _day(today - timedelta(days=(today.weekday() - weekday - 1) % 7 + 1))


def relative_terms(query: str, now: datetime) -> str:
    """Words naming the dates a question's *relative* time expressions point at, resolved against
    ``now``; "" when it has none.

    ``now``'s UTC date is "today" (a naive time is taken as UTC). Weeks run Monday to Sunday; a
    weekend is the Saturday and Sunday of a week: "this weekend" the current week's, "last weekend"
    the previous week's. "Last May" is the latest May before the current month; "last Monday" the
    latest Monday before today. The words of all expressions, in order, each word once.
    """
    if not _has_cue(query):
        return ""
    today = _utc_date(now)
    words: dict[str, None] = {}
    for match in _EXPRESSION.finditer(normalize(query)):
        try:
            words.update(dict.fromkeys(_resolve(match, today).split()))
        except (OverflowError, ValueError):  # a date out of range: "9999 years ago"
            continue
    return " ".join(words)
