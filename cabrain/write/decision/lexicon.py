"""The word lists the write decision reads statements with (Arabic and English, normalised)."""

from __future__ import annotations

from cabrain.text.dates import MONTHS_AR, MONTHS_EN
from cabrain.text.tokenizer import normalize


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
# The month names of cabrain.text.dates (English, Egyptian/Gulf Arabic), and the Arabic ones as
# often written without their hamza.
MONTHS = {*MONTHS_EN, *(names[0] for names in MONTHS_AR), "ابريل", "اغسطس", "اكتوبر"}
# Nouns that look like an Arabic imperfect verb (ي/ت + root): months, and verbal nouns of form II.
AR_NOT_VERBS = _words(
    " ".join(MONTHS) + " تاريخ تذكره تذكرة تقرير تطبيق تكلفه تكلفة تحويل تسليم تدريب تعليم تصميم تحديث "
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
    "جيجابايت ميجابايت تيرابايت كيلو كجم كم متر مترا نقطه مقعد مقاعد غرفه غرف " + " ".join(sorted(MONTHS))
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
AUX = _words(
    "is are was were am be been being has have had does do did will would shall should can could may "
    "might must isnt arent wasnt werent hasnt havent doesnt dont didnt wont cant"
)
VERBS = (
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
IRREGULAR = _words(
    "ran held led left took sat kept paid met grew fell rose became got went came made put gave sent "
    "built wrote read knew drove rode flew ate drank wore slept woke bought sold chose meant broke fed "
    "drew swam taught spoke began lives works leads runs holds costs totals owns uses has"
)
# Arabic: possession, copulas, common verbs (a preposition is no marker: it may sit inside a subject).
AR_MARKERS = _words(
    "لديه لديها لدي لدى لدينا لديهم عنده عندها عندي عندنا عندهم فيه فيها هو هي هم كان كانت يكون تكون أصبح اصبح "
    "أصبحت اصبحت صار صارت ليس ليست تم تمت يبلغ تبلغ بلغ بلغت يوجد توجد موجود موجودة"
)
TO_WORDS = _words("إلى الى لـ to into")
AR_OPENERS = _words("بعد منذ اعتبارا ابتداء تبين اتضح")
CLAUSE_OPENERS = (
    _words("after under from since as for these starting beginning effective following with per") | AR_OPENERS
)
COPULAS = _words("is are was were هو هي هم")
NUMBER_WORDS = {
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
TRUTH = frozenset(
    normalize(w) for w in "true actually after all rumour rumor correct accurate صحيح صحيحا صحيحه صحه".split()
)
RETRACTION_PREFIXES = (
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
DETERMINERS = _words("the a an this that these those his her their our my your its each every any some no")
PRONOUNS = _words("i we they you he she it هو هي هم نحن")
# What a speaker says when revising what they said earlier in a conversation: a turn revises an
# earlier turn of the same speaker only with one of these (write.decision.origin). Narrower than
# REVISION_CUES: "now", "went", "up" are everyday talk, not corrections.
TURN_REVISIONS = tuple(
    normalize(p)
    for p in (
        "actually",
        "correction",
        "to correct",
        "i meant",
        "i mean",
        "scratch that",
        "i was wrong",
        "my mistake",
        "my bad",
        "not anymore",
        "no longer",
        "instead of",
        "changed to",
        "changed my",
        "moved to",
        "has moved",
        "have moved",
        "rescheduled",
        "postponed",
        "cancelled",
        "canceled",
        "called off",
        "turns out",
        "ignore what i said",
        "update:",
        "تصحيح",
        "قصدي",
        "أقصد",
        "اقصد",
        "بدلا من",
        "بدلاً من",
        "لم يعد",
        "لم أعد",
        "لم اعد",
        "ما عاد",
        "ما عدت",
        "تأجل",
        "تأجيل",
        "تم إلغاء",
        "ألغي",
        "الغي",
        "انتقلت إلى",
        "انتقلنا إلى",
        "غلطت",
        "كنت غلطان",
        "كنت مخطئ",
        "في الحقيقة",
    )
)
