"""The write decision (SPEC §4.1 step 3): ADD, UPDATE, INVALIDATE or NOOP against neighbours.

One implementation of every automatic judgment about two statements, used by retain, by the
chat-model decider (whose answer goes through the same subject check) and by sleep's dedup and
reconsolidation. Its public interface:

- :func:`compare` reads two statements side by side and says what differs between them;
- :func:`decide` is the deterministic write decision against a write's nearest neighbours;
- :func:`check_decision` holds any decision (the chat model's) to the subject check;
- :func:`duplicates` and :func:`contradiction` are sleep's dedup and reconsolidation tests.

**What a statement is about.** Two statements are aligned word by word (after the tokenizer's
Arabic/English normalisation and light stemming). Each sentence is split into its *subject* - the
words before its predicate (a verb, an auxiliary, ``has``/``لديه``, a number read as a value, "to"
after an opening change verb such as ``تم نقل``; in two nominal sentences, where they part at the
end, else the last word) - and its predicate; an opening verb (Arabic verb-subject order) is skipped. Where the two statements *replace* a word of the
subject by another (``Server alpha``/``Server beta``, ``Invoice 1001``/``Invoice 1002``,
``staging``/``production``, ``Ahmed's``/``Mona's``, ``last year's``/``this year's``), they are
about different subjects, and whatever their similarity both are kept (ADD). Only a statement
about the same subject may revise it:

- UPDATE: the same subject with a new value of the same attribute - the predicate keeps some of
  its words, or the new statement carries a revision cue ("now", "moved to", "no longer ... but",
  "أصبح", "انتقل", ...) - and something substantive changed (a number, a name, a word);
- INVALIDATE: the new statement retracts the old one ("cancelled", "not true", "ignore ...",
  "ألغي", "ليس صحيحاً"), restates what it withdraws and brings no new value; a plain negation
  ("we no longer use X", "Khalid will not attend") is itself a fact, so it is an UPDATE;
- NOOP: the same thing again: no substantive word differs (fillers, stop words, number words
  and formatting aside), or, with nothing substantive in the way, similarity at least
  ``duplicate_similarity``;
- ADD otherwise - a different subject, a different attribute, or nothing close enough.

Visibility is never narrowed by a decision: a write is only absorbed (NOOP) by a neighbour at
least as widely visible as it, and only supersedes (UPDATE/INVALIDATE) a neighbour at most as
widely visible, so nobody loses sight of a memory because someone else wrote a similar one.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import uuid
from dataclasses import dataclass
from functools import lru_cache

from cabrain.search.tokenizer import STOP_WORDS, fold_marks, normalize, tokenize
from cabrain.types import Decision

__all__ = [
    "Comparison",
    "Neighbour",
    "WriteDecision",
    "check_decision",
    "compare",
    "contradiction",
    "decide",
    "duplicates",
]

WIDTH = {"private": 0, "team": 1, "global": 2}
RETRACTION_MARGIN = 0.1  # a retraction restates less of what it withdraws: it may be this much less similar


def _words(text: str) -> frozenset[str]:
    return frozenset(normalize(w) for w in text.split())


# Words that mark a change without being the change itself.
REVISION_CUES = _words(
    "now currently instead anymore longer changed changes change switched switch moved move relocated "
    "replaced replace renamed raised lowered increased decreased reduced cut bumped went became become "
    "becomes promoted transferred updated update corrected correction actually henceforth effective "
    "rerouted reassigned took upgraded downgraded migrated extended shortened postponed "
    "rescheduled pushed delayed brought forward revised adjusted rose fell grew dropped up down "
    "sold expanded tightened loosened completed says said reset swapped shifted bumped recalibrated "
    "الان الآن حاليا حالياً بدلا بدلاً أصبح اصبح أصبحت اصبحت صار صارت يعد تعد تغير تغيرت تغيير انتقل انتقلت "
    "انتقلنا نقل نقلت استبدل استبدلنا تصحيح ارتفع ارتفعت انخفض انخفضت زاد زادت رفع رفعت خفض خفضت ترقية "
    "ترقيته ترقيتها تمت تم تأجيل أجل تأجل تحول تحولت غادر غادرت عاد الجديد الجديدة أعيد أعيدت اعيد بقت بقى "
    "الحين خفضنا قلصنا وسعنا رفعنا اعتمدنا نقلنا مددنا"
)
RETRACTION_CUES = _words(
    "ignore disregard forget cancelled canceled cancel cancels scratch withdrawn withdraw withdrew "
    "retracted retract rescinded rescind revoked void voided invalid untrue wrong mistake mistaken rumour rumor "
    "erroneous incorrect error nixed abandoned struck stopped discontinued unsubscribed scrapped false alarm "
    "غلط كنسل اتكنسل تجاهل تجاهلوا انس انسى إلغاء الغاء ألغي الغي ألغيت الغيت أُلغي ملغي ملغى ملغاة ألغى الغى خطأ خاطئ "
    "خاطئة صحيح صحيحة صحة سحب سحبت مسحوب"
)
NEGATIONS = _words(
    "not no never none nobody nothing cannot cant dont doesnt didnt wont isnt arent wasnt werent "
    "shouldnt hasnt havent hadnt longer لا لم لن ليس ليست يعد تعد نعد ما مش"
)
_MONTHS = {
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
    "يناير",
    "فبراير",
    "مارس",
    "ابريل",
    "أبريل",
    "مايو",
    "يونيو",
    "يوليو",
    "اغسطس",
    "أغسطس",
    "سبتمبر",
    "اكتوبر",
    "أكتوبر",
    "نوفمبر",
    "ديسمبر",
}
# Nouns that look like an Arabic imperfect verb (ي/ت + root): months, and verbal nouns of form II.
_AR_NOT_VERBS = _words(
    " ".join(_MONTHS) + " تاريخ تذكره تذكرة تقرير تطبيق تكلفه تكلفة تحويل تسليم تدريب تعليم تصميم تحديث "
    "تقييم توقيع تجديد ترقيه ترقية تمديد تخفيض تغيير تحسين تسجيل تشغيل تنبيه توصيل تطوير تقديم تنفيذ "
    "يوم يوما"
)
# Words a retraction uses to point at what it withdraws ("the note about ...", "المعلومة عن ...").
RETRACTION_CONTEXT = _words(
    "note notes entry entered record recorded file filed remove removed delete deleted statement "
    "announcement claim information info message earlier said say what about reported report reports "
    "request plan plans please it its alarm logged mention mentioned "
    "المعلومه معلومه الملاحظه ملاحظه الكلام كلام الخبر خبر قلته قلت ذكرت المذكور بالغلط غلط مسجله "
    "انسوا طلب"
)
UNITS = _words(
    "usd dollars dollar eur euros euro gbp sar aed egp gb mb tb kb ms seconds second minutes minute hours "
    "hour days day weeks week months month years year people persons users nodes engineers cores rows "
    "requests items pallets percent km kg meters staff employees members seats rooms units pieces "
    "ريال ريالا ريالات دولار دولارا يورو جنيه جنيها درهم دينار يوم يوما ايام ساعه ساعات دقيقه دقائق "
    "ثانيه ثواني شهر اشهر شهور سنه سنوات عام اعوام اسبوع اسابيع موظف موظفا موظفين شخص شخصا اشخاص "
    "جيجابايت ميجابايت تيرابايت كيلو كجم كم متر مترا نقطه مقعد مقاعد غرفه غرف " + " ".join(sorted(_MONTHS))
)
LABELS = _words("number no nr رقم نمره")
# Words that say nothing about the fact itself.
FILLERS = _words(
    "also still just please note fyi really indeed officially currently actually that it is are was "
    "were be been being has have had will would shall the a an of for to at on in by with as per "
    "reminder heads confirmed confirm again yes okay ok so well "
    "فقط ايضا أيضا حاليا للتذكير تذكير ملاحظة يرجى رجاء اكيد أكيد"
)
# Words that pick out *which* thing is meant: never fillers, even when they are stop words.
DEICTIC = _words(
    "this last next previous former current upcoming old first second third yesterday today "
    "tomorrow morning evening weekend weekly monthly annual daily his her their my our your "
    "هذا هذه الماضي الماضية القادم القادمة المقبل المقبلة السابق السابقة الحالي الحالية الأول الاول "
    "الثاني أمس امس اليوم غدا غداً"
)
# Where a predicate starts: auxiliaries, copulas, modals, possession, and common verbs.
_AUX = _words(
    "is are was were am be been being has have had does do did will would shall should can could may "
    "might must isnt arent wasnt werent hasnt havent doesnt dont didnt wont cant"
)
_VERBS = (
    "run host hold own live work lead manage report cost total listen open close start begin end finish "
    "leave arrive depart take sit stay belong contain include require need prefer like love hate want "
    "speak teach drive ride play study serve support handle store keep pay charge earn weigh measure last "
    "meet happen expire renew ship deliver deploy point connect depend rely call know head chair oversee "
    "coordinate review approve sign book reserve schedule plan move relocate switch change replace rename "
    "raise lower increase decrease reduce grow drop rise fall become get go come make set put give send "
    "receive build write read allow block cap limit default resolve route map sync replicate mirror fail "
    "restart reboot boot upgrade downgrade migrate install configure enable disable attend visit fly "
    "travel commute train eat drink wear sleep wake follow rent lease borrow lend buy sell order purchase "
    "hire fire join quit retire graduate marry operate maintain monitor track alert notify cover insure "
    "treat prescribe seat fit accept reject choose decide agree intend expect use show mean represent "
    "reach exceed average peak due cancel postpone delay reschedule assign transfer promote sit share "
    "supervise coach mentor own print bill invoice refund ship process handle process answer respond "
    "close cost fix patch break occupy face overlook border neighbour neighbor employ staff seat house "
    "accommodate carry store produce generate consume draw power feed supply stock sell land depart "
    "arrive board dock berth park charge sleep run walk swim cycle remain"
)
_IRREGULAR = _words(
    "ran held led left took sat kept paid met grew fell rose became got went came made put gave sent "
    "built wrote read knew drove rode flew ate drank wore slept woke bought sold chose meant broke fed "
    "drew swam taught spoke began lives works leads runs holds costs totals owns uses has"
)
# Arabic: possession, copulas, common verbs (a preposition is no marker: it may sit inside a subject).
_AR_MARKERS = _words(
    "لديه لديها لدي لدى لدينا لديهم عنده عندها عندي عندنا عندهم فيه فيها هو هي هم كان كانت يكون تكون أصبح اصبح "
    "أصبحت اصبحت صار صارت ليس ليست تم تمت يبلغ تبلغ بلغ بلغت يوجد توجد موجود موجودة"
)
_TO = _words("إلى الى لـ to into")
_AR_OPENERS = _words("بعد منذ اعتبارا ابتداء تبين اتضح")
_CLAUSE_OPENERS = (
    _words("after under from since as for these starting beginning effective following with per") | _AR_OPENERS
)
_COPULAS = _words("is are was were هو هي هم")
_NUMBER_WORDS = {
    normalize(w): str(n)
    for n, words in enumerate(
        [
            "zero صفر",
            "one واحد واحدة",
            "two اثنان اثنين اثنتان",
            "three ثلاثة ثلاث",
            "four أربعة اربعة أربع",
            "five خمسة خمس",
            "six ستة ست",
            "seven سبعة سبع",
            "eight ثمانية ثمان",
            "nine تسعة تسع",
            "ten عشرة عشر",
            "eleven",
            "twelve",
        ]
    )
    for w in words.split()
}
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
_TRUTH = frozenset(
    normalize(w) for w in "true actually after all rumour rumor correct accurate صحيح صحيحا صحيحه صحه".split()
)
_RETRACTION_PREFIXES = (
    "الغ",
    "ملغ",
    "اتلغ",
    "انلغ",
    "تلغ",
    "يلغ",
    "تجاهل",
    "انس",
    "تراجع",
    "سحب",
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
_DETERMINERS = _words("the a an this that these those his her their our my your its each every any some no")
_PRONOUNS = _words("i we they you he she it هو هي هم نحن")
_AR_PREFIX = ("وال", "بال", "كال", "فال", "لل", "ال")


def _canonical_time(m: re.Match) -> str:
    if m.group(4) is not None:
        return f"{int(m.group(4))}:{m.group(5)}"
    hour = int(m.group(1)) % 12 + (12 if m.group(3).lower() == "p" else 0)
    return f"{hour}:{m.group(2) or '00'}"


def _canonical_scale(m: re.Match) -> str:
    value = float(m.group(1).replace(",", "")) * _SCALES[m.group(2).lower()]
    return str(int(value)) if value == int(value) else str(value)


@lru_cache(maxsize=1)
def _verb_forms() -> tuple[frozenset[str], frozenset[str]]:
    """(inflected forms - verbs wherever they stand, base forms - verbs only after a pronoun or modal)."""
    inflected = set(_IRREGULAR)
    for v in _VERBS.split():
        stem = v[:-1] if v.endswith("e") else v
        inflected.update({v + "s", v + "es", stem + "ed", v + "d"})
        if v.endswith("y"):
            inflected.update({v[:-1] + "ies", v[:-1] + "ied"})
        if re.search(r"[^aeiou][aeiou][bdgmnprt]$", v):  # stop -> stopped
            inflected.add(v + v[-1] + "ed")
    return frozenset(normalize(f) for f in inflected), frozenset(normalize(v) for v in _VERBS.split())


@dataclass(frozen=True)
class _Token:
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
def _stem(word: str) -> str:
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
    return _stem(word) or word


@lru_cache(maxsize=8192)
def _tokens(text: str) -> tuple[_Token, ...]:
    text = text.replace("\u066b", ".").replace("\u066c", ",")  # Arabic decimal and thousands separators
    text = fold_marks(text)  # digits to ASCII; diacritics and tatweel split no word
    text = _TIME.sub(_canonical_time, text)
    text = _SCALE.sub(_canonical_scale, text)
    out: list[_Token] = []
    text = re.sub(r"\bلا غير\b", " ", text)  # "only, nothing else": no negation
    text = _CALLED_OFF.sub(" cancelled ", text)
    text = re.sub(r"\bo['\u2019]clock\b", "", text, flags=re.I)
    text = re.sub(r"(?<=\w)n['\u2019]t\b", "nt", text)  # isn't -> isnt (a negation word)
    for m in _TOKEN.finditer(text):
        raw = m.group(0)
        if "@" in raw or "://" in raw or (not raw[0].isdigit() and any(ch.isdigit() for ch in raw)):
            # a code: Q1, FY24, cache-01, PLAT-90, an address
            code = normalize(raw)
            out.append(_Token(code, code, False, False, True))
            continue
        if raw[0].isdigit():
            value = raw.replace(",", "") if re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", raw) else raw
            if re.fullmatch(r"\d+(\.\d+)?", value):
                value = value.rstrip("0").rstrip(".") if "." in value else value.lstrip("0") or "0"
            out.append(_Token(value, value, True, False))
            continue
        word = normalize(raw)
        if word == "s" and out and text[m.start() - 1 : m.start()] in ("'", "\u2019"):
            out[-1] = _Token(
                out[-1].text,
                out[-1].key,
                out[-1].number,
                out[-1].stop,
                out[-1].capital,
                True,
            )
            continue
        if word in _NUMBER_WORDS:
            out.append(_Token(word, _NUMBER_WORDS[word], True, False))
            continue
        opens = not out or bool(re.search(r"[.!?:;]\s*$", text[: m.start()]))
        capital = raw[0].isupper() and not opens and word not in _DETERMINERS and word != "i"
        out.append(
            _Token(
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


def _is_marker(tokens: tuple[_Token, ...], i: int) -> bool:
    t = tokens[i]
    word = t.text
    if word in _AUX or word in _AR_MARKERS:
        return True
    inflected, base = _verb_forms()
    prev = tokens[i - 1] if i > 0 else None
    after = tokens[i + 1] if i + 1 < len(tokens) else None
    if word in inflected or word in base:
        if prev is not None and (prev.text in _DETERMINERS or prev.possessive):
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
        and prev.text not in _DETERMINERS
        and not prev.possessive
    ):
        return True  # a past tense after its subject: "Arjun's rotation shifted", "Keiko reset"
    if word in inflected or word in base:
        if after is not None and (after.number or after.capital):
            return False  # "report 5520", "order 88": a label
        # a base form is a verb after a pronoun, a modal or a plural noun ("the servers run")
        return prev is not None and (
            prev.text in _PRONOUNS
            or prev.text in _AUX
            or (prev.substantive and prev.text.endswith("s") and not prev.capital)
        )
    # an Arabic imperfect verb: يعمل, تسكن, يقود (a noun rarely starts with ي/ت and has no article)
    return (
        len(word) >= 4
        and word[0] in "يت"
        and bool(re.match(r"^[\u0621-\u064a]+$", word))
        and word not in _AR_NOT_VERBS
        and not (len(word) == 5 and word[0] == "ت" and word[3] == "ي")
    )  # تفعيل: a noun


def _predicate_start(tokens: tuple[_Token, ...]) -> int | None:
    """Index of the first word of the predicate, or None when none is found. A verb opening the
    sentence (Arabic verb-subject order) is skipped: its subject follows it. A number ends the
    subject when it reads as a value ("راتب خالد الشهري ١٢٠٠٠ ريال"), not when it labels a
    noun ("Invoice 1001 from", "room 12 is"). With neither, the sentence is nominal and its
    predicate is its last word ("مكتب أحمد في الطابق الثالث")."""
    n = len(tokens)
    start = _opening(tokens)
    content = 0
    for i in range(start, n):
        t = tokens[i]
        if content and _is_marker(tokens, i):
            return _back(tokens, i, start)
        if (
            content and start and t.text in _TO
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
    return None  # a nominal sentence: its predicate is its last word (see _predicates)


def _opening(tokens: tuple[_Token, ...]) -> int:
    """How many words open the sentence before its subject: a verb or a revision cue in verb-subject
    order ("انتقل عمر ...", "تمت ترقية ياسمين", "خفضنا حد ...", "Starting Monday, ...")."""
    i = 0
    if tokens and tokens[0].text in _CLAUSE_OPENERS:  # "After the refit, ...", "بعد التنظيف صار ..."
        for j in range(min(len(tokens) - 1, 7)):
            if tokens[j].comma:
                i = j + 1
                break
            if (
                j
                and (tokens[j].text in REVISION_CUES or (j > 1 and _is_marker(tokens, j)))
                and tokens[0].text in _AR_OPENERS
            ):
                i = j
                break
    limit = i + 3
    while i < len(tokens) and i < limit:
        t = tokens[i]
        verb_first = (
            _is_marker(tokens, i)
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
        if i + 1 < len(tokens) and _is_marker(tokens, i + 1) and t.text not in REVISION_CUES | NEGATIONS:
            break  # "ياسمين تعمل ...": a name that looks like a verb, before its verb
        i += 1
    return i if i < len(tokens) else 0


def _back(tokens: tuple[_Token, ...], i: int, start: int) -> int:
    """Move a predicate's start back over the cues and fillers before it ("... الآن ١٣٥٠٠")."""
    while i > start + 1 and not tokens[i - 1].substantive and tokens[i - 1].text not in _DETERMINERS:
        i -= 1
    return i


@dataclass(frozen=True)
class Comparison:
    """What differs between a new statement and an older one (see the module docstring)."""

    same_subject: bool
    subject_change: str  # the words that name another subject ("alpha -> beta"), "" when the same
    changed: bool  # a substantive word, number or name differs
    replaced: bool  # ... and the old statement loses one (not only words added)
    shared_predicate: bool  # the predicates keep a substantive word (the same attribute)
    revision_cue: bool  # the new statement says it changes something
    retraction: bool  # the new statement withdraws the old one, bringing no new value
    restates: bool  # the new statement repeats what the old one is about and adds little (see retraction)
    negation_differs: bool
    numbers_differ: bool
    names_differ: bool = False  # a name or code in place of another ("Rebecca" / "Victor")

    @property
    def signals(self) -> list[str]:
        out = []
        if self.negation_differs:
            out.append("negation differs")
        if self.numbers_differ:
            out.append("numbers differ")
        if self.names_differ:
            out.append("names differ")
        if self.revision_cue:
            out.append("revision cue")
        if self.retraction:
            out.append("retraction")
        return out


def _predicates(a: tuple[_Token, ...], b: tuple[_Token, ...], blocks: list) -> tuple[int, int]:
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


def _shared_tail(a: tuple[_Token, ...], b: tuple[_Token, ...], blocks: list) -> tuple[int, int] | None:
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


def _copula_slot(a: tuple[_Token, ...], b: tuple[_Token, ...], pa: int, pb: int, opcodes: list) -> bool:
    """ "Chen's line manager is Rebecca" / "... is Victor": the same copula, and after it one value
    (a name, a code, a number) in place of another - the subject itself is the attribute."""
    if pa >= len(a) or pb >= len(b) or a[pa].key != b[pb].key or a[pa].text not in _COPULAS:
        return False
    rest_a = [t for t in a[pa + 1 :] if t.substantive]
    rest_b = [t for t in b[pb + 1 :] if t.substantive]
    return (
        bool(rest_a and rest_b)
        and all(t.capital or t.number for t in rest_a + rest_b)
        and len(rest_a) <= 3
        and len(rest_b) <= 3
    )


def _retracts(tokens: tuple[_Token, ...]) -> bool:
    return any(t.text in RETRACTION_CUES or t.text.startswith(_RETRACTION_PREFIXES) for t in tokens)


def _loose(t: _Token) -> str:
    """A word's light stem (Arabic suffixes too), for comparing what two statements mention."""
    if t.number or t.capital:
        return t.key
    return _stem(t.text) or t.key


def compare(new: str, old: str) -> Comparison:
    """Align ``new`` with ``old`` and say what differs (pure; both languages)."""
    a, b = _tokens(new), _tokens(old)
    matcher = difflib.SequenceMatcher(a=[t.key for t in a], b=[t.key for t in b], autojunk=False)
    pa, pb = _predicates(a, b, matcher.get_matching_blocks())
    oa, ob = _opening(a), _opening(b)
    subject_change: list[str] = []
    elaborated: list[str] = []  # words only one side's subject has ("The doctor increased the dose")
    changed = replaced = names = False
    predicate_shared = False
    opcodes = matcher.get_opcodes()
    for op, i1, i2, j1, j2 in opcodes:
        if op == "equal":
            if any(a[i].substantive and i >= pa and j >= pb for i, j in zip(range(i1, i2), range(j1, j2), strict=True)):
                predicate_shared = True
            continue
        new_words = [t for t in a[i1:i2] if t.substantive]
        old_words = [t for t in b[j1:j2] if t.substantive]
        if not new_words and not old_words:
            continue
        changed = True
        replaced = replaced or bool(old_words)
        names = names or (any(t.capital for t in new_words) and any(t.capital for t in old_words))
        if i2 <= oa and j2 <= ob:
            continue  # the verb that opens a verb-subject sentence
        if (i2 > i1 and oa <= i1 < pa) or (j2 > j1 and ob <= j1 < pb):
            what = f"{' '.join(t.text for t in old_words) or '-'} -> {' '.join(t.text for t in new_words) or '-'}"
            (subject_change if new_words and old_words else elaborated).append(what)
    if not predicate_shared and _copula_slot(a, b, pa, pb, opcodes):
        predicate_shared = True
    na = {t.key for t in a if t.number}
    nb = {t.key for t in b if t.number}
    neg_a = sum(t.text in NEGATIONS for t in a)
    neg_b = sum(t.text in NEGATIONS for t in b)
    cue = any(t.text in REVISION_CUES for t in a) and not any(t.text in REVISION_CUES for t in b)
    # "cancelled", "ignore ...", "ألغي"; or a negation of its truth: "not true", "not ... after all", "ليس صحيحاً"
    retract_cue = (_retracts(a) or (neg_a > neg_b and any(t.text in _TRUTH for t in a))) and not _retracts(b)
    # a retraction restates (part of) what it withdraws and brings nothing new: no new number or name
    loose_old = {_loose(t) for t in b if t.substantive}
    novel = {_loose(t) for t in a if t.substantive and _loose(t) not in loose_old and t.text not in RETRACTION_CONTEXT}
    allowed = 2 if retract_cue else 1  # an explicit "cancelled" may carry a word or two more than a bare "not"
    restates = bool({_loose(t) for t in a if t.substantive} & loose_old) and len(novel) <= allowed and na <= nb
    retraction = retract_cue and restates and not any(t.capital and t.key in novel for t in a)
    if elaborated and not cue:  # without a revision cue, words only one subject has make it another
        subject_change += elaborated
    when_a = {t.key for t in a if t.text in DEICTIC}
    when_b = {t.key for t in b if t.text in DEICTIC}
    if when_a != when_b and not cue and not subject_change:  # "this month" / "last month": another time
        subject_change.append(f"{' '.join(sorted(when_b)) or '-'} -> {' '.join(sorted(when_a)) or '-'}")
    return Comparison(
        same_subject=not subject_change,
        subject_change="; ".join(subject_change),
        changed=changed,
        replaced=replaced,
        shared_predicate=predicate_shared,
        revision_cue=cue,
        retraction=retraction,
        restates=restates,
        negation_differs=neg_a != neg_b,
        numbers_differ=bool(na - nb and nb - na),
        names_differ=names,
    )


@dataclass(frozen=True)
class Neighbour:
    id: uuid.UUID
    content: str
    similarity: float
    visibility: str = "private"


@dataclass(frozen=True)
class WriteDecision:
    decision: Decision
    target: uuid.UUID | None  # the neighbour reinforced (NOOP) or superseded (UPDATE/INVALIDATE)
    reason: str
    similarity: float | None = None  # to the target


def judge(
    new: str,
    old: str,
    similarity: float,
    *,
    duplicate_similarity: float,
    revision_similarity: float,
) -> tuple[Decision, str]:
    """The decision for one pair (no visibility rules): what :func:`decide` applies per neighbour."""
    c = compare(new, old)
    if c.retraction and similarity >= revision_similarity - RETRACTION_MARGIN:
        return (
            Decision.INVALIDATE,
            f"retracts a memory about the same subject ({', '.join(c.signals)})",
        )
    if not c.same_subject:
        return Decision.ADD, f"about another subject ({c.subject_change})"
    if not c.changed and not c.negation_differs:
        return (
            Decision.NOOP,
            f"says the same as an existing memory (similarity {similarity:.3f})",
        )
    if similarity < revision_similarity:
        return Decision.ADD, "new information"
    valued = c.numbers_differ or c.names_differ or c.negation_differs or c.revision_cue
    if not valued and similarity >= duplicate_similarity:
        return (
            Decision.NOOP,
            f"near-duplicate of an existing memory (similarity {similarity:.3f})",
        )
    if c.revision_cue or (c.shared_predicate and (c.replaced or c.negation_differs)):
        return (
            Decision.UPDATE,
            f"revises a memory about the same subject ({', '.join(c.signals) or 'a new value'})",
        )
    return Decision.ADD, "new information about the same subject (another attribute)"


def decide(
    text: str,
    neighbours: list[Neighbour],
    *,
    duplicate_similarity: float,
    revision_similarity: float,
    visibility: str = "private",
) -> WriteDecision:
    """The deterministic decision (see the module docstring). ``neighbours``: most similar first."""
    width = WIDTH[visibility]
    floor = revision_similarity - RETRACTION_MARGIN
    for n in neighbours:
        if n.similarity < floor:
            break
        decision, reason = judge(
            text,
            n.content,
            n.similarity,
            duplicate_similarity=duplicate_similarity,
            revision_similarity=revision_similarity,
        )
        if decision in (Decision.UPDATE, Decision.INVALIDATE) and WIDTH[n.visibility] <= width:
            return WriteDecision(decision, n.id, reason, n.similarity)
        if decision is Decision.NOOP and WIDTH[n.visibility] >= width:
            return WriteDecision(decision, n.id, reason, n.similarity)
    return WriteDecision(Decision.ADD, None, "new information")


def check_decision(text: str, choice: WriteDecision, neighbours: list[Neighbour]) -> WriteDecision:
    """Hold a decision made elsewhere (the chat model's) to the subject check: it may only
    supersede (UPDATE) a neighbour about the same subject, and only retract (INVALIDATE) one it
    restates. NOOP is the model's call: absorbing a write loses nothing that is not already stored."""
    if choice.decision not in (Decision.UPDATE, Decision.INVALIDATE) or choice.target is None:
        return choice
    target = next((n for n in neighbours if n.id == choice.target), None)
    if target is None:
        return WriteDecision(Decision.ADD, None, "new information (the decision named no neighbour)")
    c = compare(text, target.content)
    if choice.decision is Decision.INVALIDATE and (c.same_subject or c.restates):
        return choice
    if choice.decision is Decision.UPDATE and c.same_subject:
        return choice
    why = c.subject_change or "it restates nothing of it"
    return WriteDecision(Decision.ADD, None, f"{choice.decision.value} refused: about another subject ({why})")


def duplicates(a: str, b: str, similarity: float, threshold: float) -> bool:
    """Sleep's dedup: ``a`` and ``b`` say the same thing, read either way round (a merge keeps one
    of them, so neither may carry a subject, a value, a negation or a cue the other lacks)."""
    if similarity < threshold:
        return False
    for new, old in ((a, b), (b, a)):
        c = compare(new, old)
        if not c.same_subject or c.signals:
            return False
    return True


def contradiction(
    newer: str, older: str, similarity: float, *, revision_similarity: float, duplicate_similarity: float
) -> str | None:
    """Sleep's reconsolidation: why ``newer`` supersedes ``older`` (the same subject, a new value
    or a retraction), or None."""
    decision, reason = judge(
        newer, older, similarity, duplicate_similarity=duplicate_similarity, revision_similarity=revision_similarity
    )
    return reason if decision in (Decision.UPDATE, Decision.INVALIDATE) else None
