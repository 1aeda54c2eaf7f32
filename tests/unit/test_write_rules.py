import uuid
from datetime import UTC, datetime, timedelta

from cabrain.text.entities import extract
from cabrain.types import Decision
from cabrain.write.decision import Neighbour, WriteDecision, check_decision, compare, decide
from cabrain.write.salience import content_cue, importance

THRESHOLDS = {"duplicate_similarity": 0.95, "revision_similarity": 0.85}


def n(content, similarity):
    return Neighbour(uuid.uuid4(), content, similarity)


def test_a_near_duplicate_is_a_noop_on_that_memory():
    old = n("We deploy on Fridays.", 0.977)
    choice = decide("we deploy on fridays", [old], **THRESHOLDS)
    assert (choice.decision, choice.target) == (Decision.NOOP, old.id)


def test_negation_numbers_or_revision_cues_about_the_same_subject_supersede():
    for old_text, new_text in [
        ("We deploy on Fridays", "We never deploy on Fridays"),
        ("The API runs on port 8000", "The API runs on port 9000"),
        ("The team uses Jenkins for CI", "The team now uses GitHub Actions for CI instead"),
        ("نستخدم ريديس للتخزين المؤقت", "لم نعد نستخدم ريديس للتخزين المؤقت"),
    ]:
        old = n(old_text, 0.93)
        choice = decide(new_text, [old], **THRESHOLDS)
        assert (choice.decision, choice.target) == (Decision.UPDATE, old.id), (old_text, new_text)


def test_decisions_never_narrow_who_can_see_a_memory():
    team_note = Neighbour(uuid.uuid4(), "The roadmap review is on Monday", 0.99, "team")
    assert (
        decide("The roadmap review is on Monday.", [team_note], **THRESHOLDS, visibility="global").decision
        is Decision.ADD
    )
    assert (
        decide("The roadmap review is on Monday.", [team_note], **THRESHOLDS, visibility="private").decision
        is Decision.NOOP
    )
    moved = Neighbour(uuid.uuid4(), "The roadmap review is on Monday", 0.93, "team")
    assert (
        decide("The roadmap review is now on Tuesday", [moved], **THRESHOLDS, visibility="private").decision
        is Decision.ADD
    )
    assert (
        decide("The roadmap review is now on Tuesday", [moved], **THRESHOLDS, visibility="team").decision
        is Decision.UPDATE
    )


def test_similar_but_different_statements_are_added():
    assert (
        decide("Omar leads the backend team", [n("Sara leads the mobile team", 0.87)], **THRESHOLDS).decision
        is Decision.ADD
    )
    assert (
        decide(
            "The team prefers tabs over spaces in Python", [n("The team prefers tabs", 0.917)], **THRESHOLDS
        ).decision
        is Decision.ADD
    )
    assert decide("Lunch is at noon", [n("The database is PostgreSQL", 0.81)], **THRESHOLDS).decision is Decision.ADD
    assert decide("anything", [], **THRESHOLDS).decision is Decision.ADD


def test_a_signal_without_shared_subject_is_not_a_revision():
    old = n("Backups run at 02:00 on the storage node", 0.86)
    assert decide("Lunch is now at 13:00", [old], **THRESHOLDS).decision is Decision.ADD


def test_importance_rises_with_novelty_cues_source_flag_and_recency():
    now = datetime(2026, 11, 29, tzinfo=UTC)
    base = {
        "source_kind": "chat",
        "valid_at": now,
        "flagged": False,
        "source_weights": {"chat": 0.4, "manual": 0.8},
        "novelty_floor": 0.75,
        "now": now,
    }
    dull = importance(text="the sky was grey", nearest_similarity=0.97, **base)
    novel = importance(text="the sky was grey", nearest_similarity=0.70, **base)
    decided = importance(text="We decided to drop MongoDB", nearest_similarity=0.97, **base)
    flagged = importance(text="the sky was grey", nearest_similarity=0.97, **{**base, "flagged": True})
    old = importance(
        text="the sky was grey", nearest_similarity=0.97, **{**base, "valid_at": now - timedelta(days=365)}
    )
    manual = importance(text="the sky was grey", nearest_similarity=0.97, **{**base, "source_kind": "manual"})
    assert 0 <= old < dull < novel <= 1
    assert dull < decided and dull < flagged and dull < manual
    assert len({dull, novel, decided, flagged, old, manual}) == 6, "never a flat default"


def test_content_cues_in_english_and_arabic():
    assert content_cue("We decided to use Ray")[0] == "decision"
    assert content_cue("قررنا استخدام راي")[0] == "decision"
    assert content_cue("the build failed with an exception")[0] == "error"
    assert content_cue("we rejected Kafka, it doesn't work offline")[0] == "rejected"
    assert content_cue("Sara prefers dark mode")[0] == "preference"
    assert content_cue("the weather is nice") == (None, 0.0)


def test_entities_cover_names_code_paths_urls_tags_and_known_arabic_names():
    text = (
        "We moved the cache from Redis to Valkey. See https://example.org/x and src/cabrain/brain.py; "
        "load_settings() and brain.recall() changed. Ping @omar #infra. Sara Ahmed agreed."
    )
    assert extract(text) == [
        "Redis",
        "Valkey",
        "https://example.org/x",
        "src/cabrain/brain.py",
        "load_settings",
        "brain.recall()",
        "@omar",
        "#infra",
        "Sara Ahmed",
    ]
    assert extract("The meeting is tomorrow.") == []
    assert extract("Then Caroline met Maria on Saturday, 7 May 2023, in Paris.") == ["Caroline", "Maria", "Paris"]
    assert extract("The May Day Parade starts at noon.") == ["May Day Parade"]  # a month inside a name stays
    assert extract("قابلت جمال خاشقجي في المدينة المنورة", {"جمال خاشقجي", "المدينه المنوره"}) == [
        "جمال خاشقجي",
        "المدينة المنورة",
    ]


def test_statements_about_another_subject_are_kept_however_similar():
    for old_text, new_text in [
        ("Server alpha has 16 GB of RAM.", "Server beta has 32 GB of RAM."),
        ("Invoice 1001 from Acme totals 250 USD.", "Invoice 1002 from Acme totals 900 USD."),
        ("The staging cluster runs 3 nodes.", "The production cluster runs 12 nodes."),
        ("Ahmed's phone extension is 214.", "Mona's phone extension is 377."),
        ("Q1 revenue was 4.2 million dollars.", "Q2 revenue was 4.8 million dollars."),
        ("Host web-01 runs nginx 1.24.", "Host web-02 runs nginx 1.22."),
        ("فاتورة المياه لشقة بسام ١٢٠ ريالاً هذا الشهر.", "فاتورة المياه لشقة بسام ١٢٠ ريالاً الشهر الماضي."),
        ("مكتب أحمد في الطابق الثالث.", "مكتب منى في الطابق الثالث."),
        ("راتب خالد الشهري ١٢٠٠٠ ريال.", "راتب فاطمة الشهري ١٤٥٠٠ ريال."),
    ]:
        c = compare(new_text, old_text)
        assert not c.same_subject, (old_text, new_text)
        for similarity in (0.86, 0.93, 0.99):  # whatever the similarity
            assert decide(new_text, [n(old_text, similarity)], **THRESHOLDS).decision is Decision.ADD, new_text


def test_revisions_retractions_and_repeats_of_the_same_subject():
    cases = [
        (
            "The API rate limit is 100 requests per minute.",
            "The API rate limit is now 250 requests per minute.",
            Decision.UPDATE,
        ),
        ("Chen's line manager is Rebecca.", "Chen's line manager is Victor.", Decision.UPDATE),
        ("عمر يسكن في حي النخيل.", "انتقل عمر للسكن في حي الياسمين.", Decision.UPDATE),  # verb first, then its subject
        ("اجتماع الفريق يوم الخميس.", "اجتماع الفريق صار يوم الأربعاء.", Decision.UPDATE),
        ("The team offsite is on March 14.", "The team offsite on March 14 has been cancelled.", Decision.INVALIDATE),
        ("Omar is allergic to peanuts.", "It is not true that Omar is allergic to peanuts.", Decision.INVALIDATE),
        ("Khalid will attend the Dubai conference.", "Khalid will not attend the Dubai conference.", Decision.UPDATE),
        ("The 2023 budget was 2 million dollars.", "The 2023 budget was $2,000,000.", Decision.NOOP),
        ("The backup job runs at 2 am.", "The backup job runs at 02:00.", Decision.NOOP),
        ("Server gamma has 8 CPU cores.", "Server gamma has eight CPU cores.", Decision.NOOP),
        ("Server alpha has 16 GB of RAM.", "Server alpha runs Ubuntu 22.04.", Decision.ADD),  # another attribute
    ]
    for old_text, new_text, expected in cases:
        old = n(old_text, 0.96)
        choice = decide(new_text, [old], **THRESHOLDS)
        assert choice.decision is expected, (old_text, new_text, choice.reason)
        assert choice.target == (None if expected is Decision.ADD else old.id)


def test_the_chat_model_may_not_supersede_another_subject():
    old = n("Server alpha has 16 GB of RAM.", 0.95)
    refused = check_decision("Server beta has 32 GB of RAM.", WriteDecision(Decision.UPDATE, old.id, "model"), [old])
    assert refused.decision is Decision.ADD and "another subject" in refused.reason
    same = n("The weekly sync is on Monday.", 0.95)
    kept = check_decision("The weekly sync moved to Tuesday.", WriteDecision(Decision.UPDATE, same.id, "model"), [same])
    assert (kept.decision, kept.target) == (Decision.UPDATE, same.id)
    noop = check_decision("anything", WriteDecision(Decision.NOOP, same.id, "model"), [same])
    assert noop.decision is Decision.NOOP  # absorbing loses nothing: the model's call
    ghost = check_decision("x", WriteDecision(Decision.UPDATE, uuid.uuid4(), "model"), [same])
    assert ghost.decision is Decision.ADD


def test_greetings_and_quantities_are_not_entities():
    assert extract("Hey Mel! Thanks Nate, and Wow Jon") == ["Mel", "Nate", "Jon"]
    assert extract("Bye Caroline. OK then.") == ["Caroline"]
    assert extract("I bought 16 GB of RAM for the Dell laptop") == ["Dell"]
    assert extract("مرحبا Omar Khalid, welcome to Team Alpha") == ["Omar Khalid", "Team Alpha"]


def test_arabic_names_are_found_by_what_introduces_them():
    assert extract("قال الدكتور أحمد الغامدي إن المشروع تأخر") == ["أحمد الغامدي"]
    assert extract("التقى محمد بن سلمان بالوفد") == ["محمد بن سلمان"]
    assert extract("زرت المهندس عبد الله العتيبي أمس") == ["عبد الله العتيبي"]
    assert extract("الدكتورة فاطمة تعمل في مستشفى الملك فيصل") == ["فاطمة", "مستشفى الملك فيصل"]
    assert extract("انضمت إلى شركة أرامكو في مدينة جدة") == ["أرامكو", "جدة"]
    assert extract("يدرس في جامعة القاهرة منذ عامين") == ["جامعة القاهرة"]
    assert extract("ذهبنا إلى السوق ثم عدنا") == []  # no cue, no name
