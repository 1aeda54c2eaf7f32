"""A CaBrain export is read whole before anything of it is written (cabrain.portable.checks.whole):
cut anywhere, a character changed anywhere before its end record, or an end record that does not
add up, and it is refused with one InputError; an export from before the digest still reads."""

from __future__ import annotations

import io
import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cabrain.errors import InputError
from cabrain.portable.checks import whole
from cabrain.portable.export import FORMAT, Digest
from cabrain.progress import Lines

WHEN = "2025-03-01T09:00:00+00:00"


def _memory(n: int, content: str) -> dict[str, Any]:
    return {
        "type": "memory",
        "id": f"9a1e2c1e-5c7e-4a39-9a6e-2f3b1d1f{n:04d}",
        "namespace": "proj",
        "content": content,
        "owner_agent_id": "alice",
        "visibility": "team",
        "network": "fact",
        "memory_type": "semantic",
        "importance": 0.5,
        "valid_at": WHEN,
        "created_at": WHEN,
        "metadata": {"thread": "chat-1"},
    }


def _lines(*extra: dict[str, Any]) -> list[str]:
    records: list[dict[str, Any]] = [
        {"type": "cabrain-export", "format": FORMAT, "namespaces": ["proj"], "exported_at": WHEN},
        {"type": "agent", "id": "alice", "created_at": WHEN, "role": "member", "caps": {}},
        {"type": "namespace", "name": "proj", "owner_agent_id": "alice", "created_at": WHEN, "metadata": {}},
        _memory(1, "Ahmed leads the payments team in Riyadh."),
        _memory(2, "فاطمة مسؤولة عن فريق التصميم في جدة."),
        _memory(3, "The staging database listens on port 5434."),
        *extra,
    ]
    return [json.dumps(r, ensure_ascii=False) for r in records]


def _export(lines: list[str], *, digest: bool = True, counts: dict[str, Any] | None = None) -> str:
    """``lines`` with the end record CaBrain writes after them (``digest`` False: as before the digest)."""
    made = Digest()
    for line in lines:
        made.add(line)
    end: dict[str, Any] = {"type": "end", "counts": counts or Counter(json.loads(x)["type"] for x in lines)}
    if digest:
        end["sha256"] = made.hexdigest()
    return "".join(f"{line}\n" for line in [*lines, json.dumps(end)])


EXPORT = _export(_lines())
END = EXPORT.rindex("\n", 0, -1) + 1  # where the end record's line starts


def test_a_whole_export_reads_with_its_counts() -> None:
    read = whole(io.StringIO(EXPORT), "brain.jsonl")
    assert read.namespaces == ["proj"] and read.counts == {"agent": 1, "namespace": 1, "memory": 3}
    assert whole(EXPORT.replace("\n", "\r\n").splitlines(), "brain.jsonl").digest == read.digest  # CRLF on the way


def test_an_export_from_before_the_digest_still_reads() -> None:
    assert whole(io.StringIO(_export(_lines(), digest=False)), "old.jsonl").counts["memory"] == 3


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (EXPORT[: EXPORT.index("Riyadh")], "ends in the middle of line 4: the export was cut short"),
        (EXPORT[:END], "ends before its end record: the export was cut short"),
        ("".join(EXPORT.splitlines(keepends=True)[:4]), "ends before its end record"),
        (EXPORT[:END] + EXPORT[END:].replace('"memory": 3', '"memory": 4'), "its end record says 1 agent, 4 memory"),
        (EXPORT.replace("Riyadh", "Jeddah"), "a line was changed or lost"),
        (_export(_lines(_memory(4, "x")), counts={"agent": 1, "namespace": 1, "memory": 3}), "holds 1 agent, 4"),
        (EXPORT.replace(EXPORT.splitlines(keepends=True)[5], "", 1).replace('"memory": 3', '"memory": 2'), "lost"),
        (EXPORT + EXPORT.splitlines(keepends=True)[3], "records after its end record"),
    ],
    ids=["mid-line", "before-end", "after-a-line", "end-counts", "text", "a-line-more", "a-line-less", "after-end"],
)
def test_a_cut_or_changed_export_is_refused_with_one_clear_error(text: str, says: str) -> None:
    with pytest.raises(InputError, match=says) as refused:
        whole(io.StringIO(text), "brain.jsonl")
    assert "nothing of it was written" in refused.value.message and refused.value.hint


@settings(max_examples=300, deadline=None)
@given(cut=st.integers(min_value=0, max_value=len(EXPORT) - 2))
def test_an_export_cut_anywhere_is_refused(cut: int) -> None:
    with pytest.raises(InputError):
        whole(io.StringIO(EXPORT[:cut]), "brain.jsonl")


def test_only_the_last_newline_may_go() -> None:
    assert whole(io.StringIO(EXPORT[:-1]), "brain.jsonl").counts["memory"] == 3


@settings(max_examples=300, deadline=None)
@given(at=st.integers(min_value=0, max_value=END - 1), new=st.characters())
def test_an_export_with_any_character_changed_before_its_end_record_is_refused(at: int, new: str) -> None:
    assume(new != EXPORT[at])
    with pytest.raises(InputError):
        whole(io.StringIO(EXPORT[:at] + new + EXPORT[at + 1 :]), "brain.jsonl")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(counts=JSON, sha=JSON)
def test_any_end_record_is_read_or_refused_never_crashes(counts: Any, sha: Any) -> None:
    lines = _lines()
    end = json.dumps({"type": "end", "counts": counts, "sha256": sha})
    try:
        whole(io.StringIO("".join(f"{line}\n" for line in [*lines, end])), "brain.jsonl")
    except InputError:
        return
    assert counts == {"agent": 1, "namespace": 1, "memory": 3} and sha is None


FIELDS = ["id", "namespace", "content", "owner_agent_id", "visibility", "network", "memory_type", "importance"]


@settings(max_examples=200, deadline=None)
@given(changes=st.dictionaries(st.sampled_from([*FIELDS, "valid_at", "metadata", "superseded_by"]), JSON))
def test_a_memory_of_any_shape_is_read_or_refused_never_crashes(changes: dict[str, Any]) -> None:
    text = _export(_lines(_memory(4, "The deploy freeze starts on Friday.") | changes))
    try:
        read = whole(io.StringIO(text), "brain.jsonl")
    except InputError:
        return
    assert read.counts["memory"] == 4


def test_reading_says_how_far_it_is_with_its_rate() -> None:
    said: list[str] = []
    ticks = iter(range(10_000))
    many = _export(_lines(*(_memory(n, f"note {n}") for n in range(4, 600))))
    whole(io.StringIO(many), "brain.jsonl", Lines(said.append, every_s=1.0, clock=lambda: float(next(ticks))))
    assert said and all(line.startswith("checking the export: ") and "records (" in line for line in said)
    assert said[-1].startswith("checking the export: 603 records") and "in all" in said[-1]  # every line
