from cabrain.text.chunking import chunk, sentences


def test_short_texts_are_not_split():
    assert chunk("One short memory.", min_chars=400) == []


def test_long_texts_split_into_whole_sentences_near_the_target_length():
    text = " ".join(f"Sentence number {i} says something about topic {i}." for i in range(40))
    parts = chunk(text, target_chars=250, min_chars=400)
    assert len(parts) > 3
    assert all(p.endswith(".") for p in parts)
    assert all(len(p) <= 250 for p in parts[:-1])
    assert " ".join(parts) == text


def test_arabic_sentences_split_on_arabic_marks_even_without_a_space():
    assert sentences("هذه جملة أولى.وهذه جملة ثانية؟ وهذه ثالثة") == [
        "هذه جملة أولى.",
        "وهذه جملة ثانية؟",
        "وهذه ثالثة",
    ]


def test_a_sentence_far_longer_than_the_target_is_cut_at_word_boundaries():
    text = " ".join(["word"] * 400)
    parts = chunk(text, target_chars=100, min_chars=100)
    assert len(parts) > 10
    assert all(part.split() == ["word"] * len(part.split()) for part in parts)
