from datetime import UTC, datetime, timedelta, timezone

import pytest

from cabrain.text.dates import date_terms, relative_terms

NOW = datetime(2026, 3, 3, 10, tzinfo=UTC)  # a Tuesday: last month is February, two months ago January
NEW_YEAR = datetime(2027, 1, 1, 0, 30, tzinfo=UTC)  # a Friday
LEAP = datetime(2028, 3, 1, 9, tzinfo=UTC)  # a Wednesday after 29 February

JAN = "january يناير كانون"
FEB = "february فبراير شباط"
MAR = "march مارس آذار"
MAY = "may مايو أيار"
OCT = "october أكتوبر تشرين"
NOV = "november نوفمبر تشرين"
DEC = "december ديسمبر كانون"


def test_date_terms_names_the_utc_day_in_both_languages():
    assert date_terms(datetime(2023, 5, 8, 12, tzinfo=UTC)) == f"8 {MAY} 2023"
    assert date_terms(datetime(2023, 10, 1, tzinfo=UTC)) == f"1 {OCT} 2023"


def test_date_terms_takes_a_naive_time_as_utc():
    assert date_terms(datetime(2023, 5, 8, 23, 59)) == f"8 {MAY} 2023"


def test_date_terms_uses_the_utc_day_not_the_local_one():
    assert date_terms(datetime(2023, 5, 9, 1, tzinfo=timezone(timedelta(hours=3)))) == f"8 {MAY} 2023"
    assert date_terms(datetime(2023, 12, 31, 22, tzinfo=timezone(timedelta(hours=-5)))) == f"1 {JAN} 2024"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # days
        ("what did we do today?", f"3 {MAR} 2026"),
        ("Today's plan", f"3 {MAR} 2026"),
        ("tonight", f"3 {MAR} 2026"),
        ("this morning", f"3 {MAR} 2026"),
        ("what broke yesterday", f"2 {MAR} 2026"),
        ("last night", f"2 {MAR} 2026"),
        ("the day before yesterday", f"1 {MAR} 2026"),
        # weeks and weekends (Monday to Sunday; last week is 23 February - 1 March)
        ("this week", f"{MAR} 2026"),
        ("last week", f"{FEB} 2026 {MAR}"),
        ("last week's notes", f"{FEB} 2026 {MAR}"),
        ("the week before last", f"{FEB} 2026"),
        ("this weekend", f"{MAR} 2026"),
        ("last weekend", f"{FEB} 2026 {MAR}"),
        # months and years
        ("what did we decide last month?", f"{FEB} 2026"),
        ("LAST MONTH", f"{FEB} 2026"),
        ("this month", f"{MAR} 2026"),
        ("the month before last", f"{JAN} 2026"),
        ("this year", "2026"),
        ("last year", "2025"),
        ("the year before last", "2024"),
        # N units ago
        ("a day ago", f"2 {MAR} 2026"),
        ("two days ago", f"1 {MAR} 2026"),
        ("3 days ago", f"28 {FEB} 2026"),
        ("a couple of days ago", f"1 {MAR} 2026"),
        ("a week ago", f"{FEB} 2026 {MAR}"),
        ("2 weeks ago", f"{FEB} 2026"),
        ("three weeks ago", f"{FEB} 2026"),
        ("a month ago", f"{FEB} 2026"),
        ("2 months ago", f"{JAN} 2026"),
        ("three months ago", f"{DEC} 2025"),
        ("twelve months ago", f"{MAR} 2025"),
        ("a year ago", "2025"),
        ("5 years ago", "2021"),
        # last <month>: the latest one before the current month
        ("last May", f"{MAY} 2025"),
        ("last March", f"{MAR} 2025"),
        ("last February", f"{FEB} 2026"),
        ("last December", f"{DEC} 2025"),
        # last <weekday>: the latest one before today
        ("last Monday", f"2 {MAR} 2026"),
        ("last Sunday", f"1 {MAR} 2026"),
        ("last Tuesday", f"24 {FEB} 2026"),
        ("last Wednesday", f"25 {FEB} 2026"),
        # several expressions: their words in order, each once
        ("yesterday and last week", f"2 {MAR} 2026 {FEB}"),
        ("last year and this month", f"2025 {MAR} 2026"),
    ],
)
def test_english_relative_expressions(query, expected):
    assert relative_terms(query, NOW) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # days
        ("ماذا فعلنا اليوم؟", f"3 {MAR} 2026"),
        ("أمس", f"2 {MAR} 2026"),
        ("البارحة", f"2 {MAR} 2026"),
        ("ماذا حدث بالأمس", f"2 {MAR} 2026"),
        ("أول أمس", f"1 {MAR} 2026"),
        ("أول من أمس", f"1 {MAR} 2026"),
        # weeks
        ("هذا الأسبوع", f"{MAR} 2026"),
        ("الأسبوع الماضي", f"{FEB} 2026 {MAR}"),
        ("الأسبوع الفائت", f"{FEB} 2026 {MAR}"),
        ("نهاية الأسبوع الماضي", f"{FEB} 2026 {MAR}"),
        # months and years
        ("ماذا قررنا الشهر الماضي؟", f"{FEB} 2026"),
        ("الشهر الفائت", f"{FEB} 2026"),
        ("هذا الشهر", f"{MAR} 2026"),
        ("هذه السنة", "2026"),
        ("هذا العام", "2026"),
        ("السنة الماضية", "2025"),
        ("العام الماضي", "2025"),
        ("العام الفائت", "2025"),
        # قبل / منذ N units
        ("قبل يوم", f"2 {MAR} 2026"),
        ("قبل يومين", f"1 {MAR} 2026"),
        ("قبل 3 أيام", f"28 {FEB} 2026"),
        ("قبل ٣ أيام", f"28 {FEB} 2026"),
        ("منذ ثلاثة أيام", f"28 {FEB} 2026"),
        ("قبل أسبوع", f"{FEB} 2026 {MAR}"),
        ("منذ أسبوعين", f"{FEB} 2026"),
        ("قبل 3 أسابيع", f"{FEB} 2026"),
        ("قبل شهر", f"{FEB} 2026"),
        ("قبل شهرين", f"{JAN} 2026"),
        ("قبل 3 أشهر", f"{DEC} 2025"),
        ("منذ ثلاثة شهور", f"{DEC} 2025"),
        ("قبل سنة", "2025"),
        ("قبل عام", "2025"),
        ("قبل سنتين", "2024"),
        ("منذ عامين", "2024"),
        ("قبل ٥ سنوات", "2021"),
        ("قبل خمسة أعوام", "2021"),
        ("قبل عشر سنوات", "2016"),
        # <month> الماضي
        ("في مايو الماضي", f"{MAY} 2025"),
        ("أيار الماضي", f"{MAY} 2025"),
        ("تشرين الأول الماضي", f"{OCT} 2025"),
        ("كانون الثاني الماضي", f"{JAN} 2026"),
        # <weekday> الماضي
        ("الاثنين الماضي", f"2 {MAR} 2026"),
        ("يوم الجمعة الماضية", f"27 {FEB} 2026"),
        # diacritics, tatweel and alef variants fold away
        ("الشَّهْرَ الماضـي", f"{FEB} 2026"),
        ("امس", f"2 {MAR} 2026"),
        ("الاسبوع الماضى", f"{FEB} 2026 {MAR}"),
        # several expressions
        ("أمس والأسبوع الماضي", f"2 {MAR} 2026 {FEB}"),
    ],
)
def test_arabic_relative_expressions(query, expected):
    assert relative_terms(query, NOW) == expected


@pytest.mark.parametrize(
    "query",
    [
        "",
        "what is the database password",
        "ما هي كلمة المرور",
        "the last step of the migration",
        "last week of May",
        "قبل الاجتماع",
        "in May 2023",
        "on 8 May",
        "في مايو ٢٠٢٣",
        "في أيار",
    ],
)
def test_questions_without_relative_expressions_give_nothing(query):
    assert relative_terms(query, NOW) == ""


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("today", f"1 {JAN} 2027"),
        ("yesterday", f"31 {DEC} 2026"),
        ("last month", f"{DEC} 2026"),
        ("الشهر الماضي", f"{DEC} 2026"),
        ("2 months ago", f"{NOV} 2026"),
        ("last year", "2026"),
        ("العام الماضي", "2026"),
        ("this week", f"{DEC} 2026 january يناير 2027"),  # كانون is already there
        ("last week", f"{DEC} 2026"),
        ("this weekend", f"{JAN} 2027"),
        ("last weekend", f"{DEC} 2026"),
        ("last December", f"{DEC} 2026"),
        ("last January", f"{JAN} 2026"),
    ],
)
def test_a_year_boundary_is_crossed(query, expected):
    assert relative_terms(query, NEW_YEAR) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("yesterday", f"29 {FEB} 2028"),
        ("قبل يومين", f"28 {FEB} 2028"),
        ("last month", f"{FEB} 2028"),
        ("a week ago", f"{FEB} 2028"),
    ],
)
def test_a_leap_february_is_crossed(query, expected):
    assert relative_terms(query, LEAP) == expected


def test_a_resolved_day_reads_as_date_terms_gives_it():
    assert relative_terms("yesterday", NOW) == date_terms(NOW - timedelta(days=1))
    assert relative_terms("قبل 3 أيام", NOW) == date_terms(NOW - timedelta(days=3))


def test_now_is_taken_as_its_utc_date():
    assert relative_terms("today", datetime(2026, 3, 3, 1, tzinfo=timezone(timedelta(hours=5)))) == f"2 {MAR} 2026"
    assert relative_terms("today", datetime(2026, 3, 2, 22, tzinfo=timezone(timedelta(hours=-5)))) == f"3 {MAR} 2026"
    assert relative_terms("today", datetime(2026, 3, 3, 23, 59)) == f"3 {MAR} 2026"


def test_a_date_out_of_range_is_skipped():
    assert relative_terms("9999 years ago", NOW) == ""
    assert relative_terms("9999 years ago and yesterday", NOW) == f"2 {MAR} 2026"
