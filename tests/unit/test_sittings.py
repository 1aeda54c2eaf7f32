"""The deterministic distiller of turns (cabrain.sleep.sittings): third person, times resolved, one
claim per fact, no facts from questions, greetings or praise of the listener."""

from datetime import datetime

from cabrain.sleep.sittings import resolve_times, sitting_summary, turn_facts

SAID = datetime(2023, 5, 8, 13, 56)


def test_the_speaker_is_resolved_and_the_verb_agrees() -> None:
    assert turn_facts("Caroline: I went to a LGBTQ support group yesterday.", "Caroline", SAID) == [
        "Caroline went to a LGBTQ support group on 7 May 2023."
    ]
    assert turn_facts("Nate: I love playing Xenoblade with my brother.", "Nate", SAID) == [
        "Nate loves playing Xenoblade with Nate's brother."
    ]
    assert turn_facts("My sister and I go hiking every Sunday with our dog Max.", "John", SAID) == [
        "John's sister and John go hiking every Sunday with John's dog Max."
    ]
    assert turn_facts("I'm swamped with the kids & work.", "Melanie", SAID) == [
        "Melanie is swamped with the kids & work."
    ]


def test_one_claim_per_sentence_and_no_questions_greetings_or_praise() -> None:
    facts = turn_facts(
        "Melanie: Hey Caroline! Good to see you! I painted that lake sunrise last year. What's new with you? "
        "You are so brave. Thanks!",
        "Melanie",
        SAID,
    )
    assert facts == ["Melanie painted that lake sunrise in 2022."]
    assert turn_facts("Caroline: Wow, that's great! How was it?", "Caroline", SAID) == []


def test_relative_times_become_dates() -> None:
    assert resolve_times("we met last month", SAID) == "we met in April 2023"
    assert resolve_times("the trip is next month", datetime(2023, 12, 3)) == "the trip is in January 2024"
    assert resolve_times("I started two weeks ago", SAID) == "I started around 24 April 2023"
    assert resolve_times("I moved here 3 years ago", SAID) == "I moved here in 2020"
    assert resolve_times("tomorrow we fly", SAID) == "on 9 May 2023 we fly"


def test_an_arabic_first_person_statement_names_its_speaker() -> None:
    assert turn_facts("أنا أعمل في شركة أرامكو منذ خمس سنوات", "Omar", SAID) == [
        "Omar: أنا أعمل في شركة أرامكو منذ خمس سنوات"
    ]


def test_a_turn_is_one_fact_when_it_claims_enough() -> None:
    from cabrain.sleep.sittings import turn_fact

    said = "Caroline: I went to a LGBTQ support group yesterday. It was so powerful. How are you?"
    assert turn_fact(said, "Caroline", SAID, 3) == "Caroline went to a LGBTQ support group on 7 May 2023."
    assert turn_fact("Melanie: Thanks! I'm good.", "Melanie", SAID, 3) is None
    assert turn_fact(said, "Caroline", SAID, 50) is None  # too little for that bar


def test_a_short_claim_with_the_speaker_as_subject_needs_fewer_words() -> None:
    from cabrain.sleep.sittings import turn_fact

    own = "Nate: Wow, I've always liked turtles since I was a boy, so I know all about them!"
    assert turn_fact(own, "Nate", SAID, 12) is None
    assert turn_fact(own, "Nate", SAID, 12, 4) == (
        "Nate has always liked turtles since Nate was a boy, so Nate knows all about them!"
    )
    remark = "Nate: Being around people who love turtles as much as I do creates a special bond."
    assert turn_fact(remark, "Nate", SAID, 12, 4) is None  # mentions the speaker, not about them: the higher bar
    assert turn_facts("Gina: I felt free and I spent the night dancing.", "Gina", SAID) == [
        "Gina felt free and Gina spent the night dancing."
    ]  # a past tense ending in t takes no s


def test_times_across_a_month_end_and_a_year_boundary() -> None:
    new_year = datetime(2024, 1, 1, 9, 0)
    assert resolve_times("yesterday", new_year) == "on 31 December 2023"
    assert resolve_times("last month", new_year) == "in December 2023"
    assert resolve_times("last year", new_year) == "in 2023"
    month_end = datetime(2024, 1, 31, 22, 0)
    assert resolve_times("tomorrow", month_end) == "on 1 February 2024"
    assert resolve_times("next month", month_end) == "in February 2024"


def test_a_sittings_summary_says_who_talked_and_when_then_its_richest_facts_in_order() -> None:
    facts = [
        "Caroline went to a LGBTQ support group on 7 May 2023 and the stories there inspired Caroline.",
        "Melanie likes tea.",
        "Melanie ran a charity race for mental health on 7 May 2023 with her whole family cheering",
        "Caroline wants to study counseling and work in mental health to support people like her.",
    ]
    text = sitting_summary(["Caroline", "Melanie"], SAID, SAID, facts, 3)
    assert text.startswith("Caroline and Melanie talked on 8 May 2023. Caroline went to a LGBTQ support group")
    assert "likes tea" not in text  # the thinnest is left out, the others keep the order they were said in
    assert text.index("charity race") < text.index("counseling") and text.endswith("like her.")
    assert "cheering." in text  # each fact ends as a sentence
    later = datetime(2023, 5, 9, 9, 0)
    assert sitting_summary(["A", "B", "C"], SAID, later, facts[:1], 3).startswith(
        "A, B and C talked from 8 May 2023 to 9 May 2023."
    )
    arabic = sitting_summary(["سارة", "علي"], SAID, SAID, ["سارة: أنا أعمل مهندسة في شركة كبيرة في الرياض."], 3)
    assert arabic.startswith("تحدّث سارة و علي في 8 مايو 2023.") and "الرياض" in arabic
