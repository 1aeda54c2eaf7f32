"""Where a statement's subject ends and its predicate starts, and how two statements line up."""

from __future__ import annotations

import re
from functools import lru_cache

from cabrain.text.tokenizer import normalize
from cabrain.write.decision.lexicon import (
    AR_MARKERS,
    AR_NOT_VERBS,
    AR_OPENERS,
    AUX,
    CLAUSE_OPENERS,
    COPULAS,
    DETERMINERS,
    IRREGULAR,
    LABELS,
    NEGATIONS,
    PRONOUNS,
    REVISION_CUES,
    TO_WORDS,
    UNITS,
    VERBS,
)
from cabrain.write.decision.tokens import Token


@lru_cache(maxsize=1)
def _verb_forms() -> tuple[frozenset[str], frozenset[str]]:
    """(inflected forms - verbs wherever they stand, base forms - verbs only after a pronoun or modal)."""
    inflected = set(IRREGULAR)
    for v in VERBS.split():
        stem = v[:-1] if v.endswith("e") else v
        inflected.update({v + "s", v + "es", stem + "ed", v + "d"})
        if v.endswith("y"):
            inflected.update({v[:-1] + "ies", v[:-1] + "ied"})
        if re.search(r"[^aeiou][aeiou][bdgmnprt]$", v):  # stop -> stopped
            inflected.add(v + v[-1] + "ed")
    return frozenset(normalize(f) for f in inflected), frozenset(normalize(v) for v in VERBS.split())


def is_marker(tokens: tuple[Token, ...], i: int) -> bool:
    t = tokens[i]
    word = t.text
    if word in AUX or word in AR_MARKERS:
        return True
    inflected, base = _verb_forms()
    prev = tokens[i - 1] if i > 0 else None
    after = tokens[i + 1] if i + 1 < len(tokens) else None
    if word in inflected or word in base:
        if prev is not None and (prev.text in DETERMINERS or prev.possessive):
            return False  # "the orders table", "the user's train": a noun
        if word in inflected:
            return True
    if (
        len(word) >= 5
        and word.endswith("ed")
        and word.isascii()
        and prev is not None
        and prev.substantive
        and not prev.number
        and prev.text not in DETERMINERS
        and not prev.possessive
    ):
        return True  # a past tense after its subject: "Arjun's rotation shifted", "Keiko reset"
    if word in inflected or word in base:
        if after is not None and (after.number or after.capital):
            return False  # "report 5520", "order 88": a label
        # a base form is a verb after a pronoun, a modal or a plural noun ("the servers run")
        return prev is not None and (
            prev.text in PRONOUNS
            or prev.text in AUX
            or (prev.substantive and prev.text.endswith("s") and not prev.capital)
        )
    # an Arabic imperfect verb: يعمل, تسكن, يقود (a noun rarely starts with ي/ت and has no article)
    return (
        len(word) >= 4
        and word[0] in "يت"
        and bool(re.match(r"^[\u0621-\u064a]+$", word))
        and word not in AR_NOT_VERBS
        and not (len(word) == 5 and word[0] == "ت" and word[3] == "ي")
    )  # تفعيل: a noun


def _predicate_start(tokens: tuple[Token, ...]) -> int | None:
    """Index of the first word of the predicate, or None when none is found. A verb opening the
    sentence (Arabic verb-subject order) is skipped: its subject follows it. A number ends the
    subject when it reads as a value ("راتب خالد الشهري ١٢٠٠٠ ريال"), not when it labels a
    noun ("Invoice 1001 from", "room 12 is"). With neither, the sentence is nominal and its
    predicate is its last word ("مكتب أحمد في الطابق الثالث")."""
    n = len(tokens)
    start = opening(tokens)
    content = 0
    for i in range(start, n):
        t = tokens[i]
        if content and is_marker(tokens, i):
            return _back(tokens, i, start)
        if (
            content and start and t.text in TO_WORDS
        ):  # "تم نقل الاجتماع إلى يوم الاثنين": after a change verb, "to" gives the value
            return i
        if t.number and content and not tokens[i - 1].number and tokens[i - 1].text not in LABELS:
            # before any verb, a number is a value when a unit follows it or it ends the sentence
            # ("١٢٠٠٠ ريال", "٤٥ موظفاً"), else it labels its noun ("Invoice 1001 from", "بـ ٤٤٢١ مخصص")
            after = tokens[i + 1] if i + 1 < n else None
            last = after is not None and not any(x.substantive for x in tokens[i + 2 :])  # "٣ كيلوغرامات."
            if after is None or after.key in UNITS or after.text in UNITS or last:
                return _back(tokens, i, start)
        if t.substantive:
            content += 1
    return None  # a nominal sentence: its predicate is its last word (see predicates)


def opening(tokens: tuple[Token, ...]) -> int:
    """How many words open the sentence before its subject: a verb or a revision cue in verb-subject
    order ("انتقل عمر ...", "تمت ترقية ياسمين", "خفضنا حد ...", "Starting Monday, ...")."""
    i = 0
    if tokens and tokens[0].text in CLAUSE_OPENERS:  # "After the refit, ...", "بعد التنظيف صار ..."
        for j in range(min(len(tokens) - 1, 7)):
            if tokens[j].comma:
                i = j + 1
                break
            if (
                j
                and (tokens[j].text in REVISION_CUES or (j > 1 and is_marker(tokens, j)))
                and tokens[0].text in AR_OPENERS
            ):
                i = j
                break
    limit = i + 3
    while i < len(tokens) and i < limit:
        t = tokens[i]
        verb_first = (
            is_marker(tokens, i)
            or t.text in REVISION_CUES
            or t.text in NEGATIONS  # "لم نعد نستخدم ..."
            # we-forms of Arabic verbs: past "خفضنا", present "نستخدم"
            or (
                len(t.text) >= 5
                and (t.text.endswith("نا") or t.text.startswith("ن"))
                and bool(re.match(r"^[\u0621-\u064a]+$", t.text))
            )
        )
        if t.text in ("تم", "تمت") and i + 1 < len(tokens):
            i += 2  # تم + the verbal noun: "تم نقل", "تمت ترقية"; its subject follows
            break
        if not verb_first:
            break
        if i + 1 < len(tokens) and is_marker(tokens, i + 1) and t.text not in REVISION_CUES | NEGATIONS:
            break  # "ياسمين تعمل ...": a name that looks like a verb, before its verb
        i += 1
    return i if i < len(tokens) else 0


def _back(tokens: tuple[Token, ...], i: int, start: int) -> int:
    """Move a predicate's start back over the cues and fillers before it ("... الآن ١٣٥٠٠")."""
    while i > start + 1 and not tokens[i - 1].substantive and tokens[i - 1].text not in DETERMINERS:
        i -= 1
    return i


def predicates(a: tuple[Token, ...], b: tuple[Token, ...], blocks: list) -> tuple[int, int]:
    """Where each statement's predicate starts; one found on one side only is carried to the other
    through the alignment; found on neither, the predicate is the last word."""
    pa, pb = _predicate_start(a), _predicate_start(b)
    if pa is None and pb is None:  # two nominal sentences: their predicate is where they part at the end
        tail = _shared_tail(a, b, blocks)
        if tail is not None:
            return tail
    if pa is None and pb is not None:
        pa = _project(pb, [(j, i, size) for i, j, size in blocks])
    elif pb is None and pa is not None:
        pb = _project(pa, blocks)
    if pa is None:
        pa = max(len(a) - 1, 0)
    if pb is None:
        pb = max(len(b) - 1, 0)
    return pa, pb


def _project(p: int, blocks: list) -> int | None:
    """Position ``p`` of one statement carried to the other through the alignment ``blocks`` ((i, j,
    size) with i on p's side): inside a shared run, the same word; in a gap, right after the shared
    run before it."""
    at = None
    for i, j, size in blocks:
        if i <= p < i + size:
            return j + (p - i)
        if size and i + size <= p:
            at = j + size
    return at


def _shared_tail(a: tuple[Token, ...], b: tuple[Token, ...], blocks: list) -> tuple[int, int] | None:
    """Two sentences with no verb that agree word for word up to a point and differ only after it
    ("الطلب رقم ٥٥٠ في حالة «قيد المعالجة»" / "... «تم التسليم»"): the predicate starts there."""
    real = [blk for blk in blocks if blk[2]]
    if not real or real[0][:2] != (0, 0):
        return None
    i, j, size = real[0]
    rest = real[1:]
    if any(a[k].substantive for blk in rest for k in range(blk[0], blk[0] + blk[2])):
        return None  # they agree again later: the difference is in the middle (another subject)
    if i + size >= len(a) or j + size >= len(b) or size < 2:
        return None
    return i + size, j + size


def copula_slot(a: tuple[Token, ...], b: tuple[Token, ...], pa: int, pb: int, opcodes: list) -> bool:
    """ "Chen's line manager is Rebecca" / "... is Victor": the same copula, and after it one value
    (a name, a code, a number) in place of another - the subject itself is the attribute."""
    if pa >= len(a) or pb >= len(b) or a[pa].key != b[pb].key or a[pa].text not in COPULAS:
        return False
    rest_a = [t for t in a[pa + 1 :] if t.substantive]
    rest_b = [t for t in b[pb + 1 :] if t.substantive]
    return (
        bool(rest_a and rest_b)
        and all(t.capital or t.number for t in rest_a + rest_b)
        and len(rest_a) <= 3
        and len(rest_b) <= 3
    )
