"""The deterministic distiller of turns (cabrain.sleep.sittings): third person, times resolved, one
claim per fact, no facts from questions, greetings or praise of the listener."""

from datetime import datetime

from cabrain.sleep.sittings import resolve_times, turn_facts

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


def test_times_across_a_month_end_and_a_year_boundary() -> None:
    new_year = datetime(2024, 1, 1, 9, 0)
    assert resolve_times("yesterday", new_year) == "on 31 December 2023"
    assert resolve_times("last month", new_year) == "in December 2023"
    assert resolve_times("last year", new_year) == "in 2023"
    month_end = datetime(2024, 1, 31, 22, 0)
    assert resolve_times("tomorrow", month_end) == "on 1 February 2024"
    assert resolve_times("next month", month_end) == "in February 2024"
