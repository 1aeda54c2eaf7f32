"""``cabrain eval`` end to end on a tiny hand-made set whose answers are known."""

import json

import pytest

from cabrain.store.db import connect
from tests.conftest import cli_env, run_cli, start_fake

CORPUS = [
    {"id": "c1", "namespace": "a", "text": "The Nile flows north through Egypt into the Mediterranean Sea."},
    {"id": "c2", "namespace": "a", "text": "Mount Kilimanjaro is the highest mountain in Africa."},
    {
        "id": "c3",
        "namespace": "b",
        "text": "يقع برج خليفة في مدينة دبي وهو أطول مبنى في العالم.",
        "time": "2024-05-01T10:00:00Z",
    },
    {"id": "c4", "namespace": "b", "text": "تأسست جامعة القاهرة عام ١٩٠٨.", "time": "2024-05-02"},
]
QUERIES = [
    {
        "id": "q1",
        "namespace": "a",
        "query": "Which river flows north through Egypt?",
        "gold": ["c1"],
        "category": "geo",
    },
    {"id": "q2", "namespace": "a", "query": "highest mountain in Africa", "gold": ["c2"], "category": "geo"},
    {"id": "q3", "namespace": "b", "query": "في أي مدينة يقع برج خليفة؟", "gold": ["c3"], "category": "ar"},
    {"id": "q4", "namespace": "b", "query": "متى تأسست جامعة القاهرة؟", "gold": ["c4", "c3"], "category": "ar"},
]


def write_set(folder):
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in CORPUS) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in QUERIES) + "\n")


async def test_eval_reports_every_mode_with_known_answers_and_cleans_up(tmp_path, pg_server, home):
    write_set(tmp_path / "tiny")
    out = tmp_path / "results.json"
    env = cli_env(database_url=pg_server.dsn(), home=str(home))
    result = run_cli(
        "eval", str(tmp_path), "--k", "1,2", "--mode", "vector,bm25", "--mode", "hybrid", "--json", str(out), env=env
    )
    assert result.returncode == 0, result.stderr
    assert "tiny" in result.stdout and "hybrid" in result.stdout
    assert "all@2" in result.stdout and "category" in result.stdout and " geo " in result.stdout
    assert "loaded 4/4" in result.stderr
    data = json.loads(out.read_text())
    [tiny] = data["sets"]
    assert (tiny["memories"], tiny["queries"]) == (4, 4)
    for mode in ("vector", "bm25", "hybrid"):
        overall = tiny["modes"][mode]["overall"]
        assert overall["recall_any@1"] == 1.0, mode
        # q4 has two gold ids and its namespace only two memories: k=2 finds both by vector; BM25
        # returns only memories sharing a word with the query, and c3 shares none.
        assert overall["recall_all@1"] == (1 + 1 + 1 + 0.5) / 4, mode
        assert overall["recall_all@2"] == (0.875 if mode == "bm25" else 1.0), mode
        assert overall["mrr"] == 1.0
        assert set(tiny["modes"][mode]["by_category"]) == {"ar", "geo"}
        assert tiny["modes"][mode]["by_namespace"]["a"]["recall_any@1"] == 1.0
        assert tiny["modes"][mode]["latency_ms"]["p95"] > 0
    assert "p50" in tiny["modes"]["vector"]["embed_ms"] and tiny["modes"]["bm25"]["embed_ms"] == {}
    conn = await connect(pg_server.dsn("postgres"))
    try:
        left = await conn.fetchval("SELECT count(*) FROM pg_database WHERE datname LIKE 'cabrain_eval_%'")
    finally:
        await conn.close()
    assert left == 0, "the scratch database is dropped"


def test_eval_asks_each_question_as_the_latest_turn_of_a_dialogue(tmp_path, pg_server, home):
    folder = tmp_path / "chat"
    folder.mkdir()
    turns = [
        ("Caroline", "I'm researching adoption agencies for my future family.", "2023-05-08T13:56:00"),
        ("Melanie", "I painted a lake sunrise last year.", "2023-05-08T13:58:00"),
        ("Melanie", "We went camping at the beach with the kids.", "2023-05-12T19:02:00"),
    ]
    corpus = [
        {"id": f"t{i}", "namespace": "c", "text": f"{who}: {text}", "speaker": who, "time": at}
        for i, (who, text, at) in enumerate(turns)
    ]
    queries = [
        {"id": "q1", "namespace": "c", "query": "Which agencies is Caroline researching?", "gold": ["t0"]},
        {"id": "q2", "namespace": "c", "query": "What did Melanie paint?", "gold": ["t1"]},
    ]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(r) for r in corpus) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(r) for r in queries) + "\n")
    out = tmp_path / "dialogue.json"
    env = cli_env(database_url=pg_server.dsn(), home=str(home))
    args = ("eval", str(folder), "--mode", "hybrid", "--k", "1", "--json", str(out))
    result = run_cli(*args, "--dialogue", "filler,referent", "--dialogue", "followup", env=env)
    assert result.returncode == 0, result.stderr
    assert "hybrid [referent]" in result.stdout and "hybrid [followup]" in result.stdout
    modes = json.loads(out.read_text())["sets"][0]["modes"]
    assert set(modes) == {"hybrid", "hybrid [filler]", "hybrid [referent]", "hybrid [followup]"}
    assert modes["hybrid"]["overall"]["recall_any@1"] == 1.0
    assert modes["hybrid [filler]"]["overall"]["recall_any@1"] == 1.0
    bad = run_cli(*args, "--dialogue", "smalltalk", env=env)
    assert bad.returncode == 2 and "--dialogue: unknown shape(s) smalltalk" in bad.stderr


def test_eval_rejects_bad_arguments_clearly(tmp_path, home, pg_server):
    write_set(tmp_path / "tiny")
    env = cli_env(database_url=pg_server.dsn(), home=str(home))
    bad_mode = run_cli("eval", str(tmp_path), "--mode", "magic", env=env)
    assert bad_mode.returncode == 2 and "unknown mode(s) magic" in bad_mode.stderr  # a usage error
    bad_k = run_cli("eval", str(tmp_path), "--k", "1,x", env=env)
    assert bad_k.returncode == 2 and "--k must be comma-separated integers" in bad_k.stderr
    big_k = run_cli("eval", str(tmp_path), "--k", "0", env=env)
    assert big_k.returncode == 2 and "every k must be between 1 and" in big_k.stderr
    empty = run_cli("eval", str(tmp_path / "tiny" / "corpus.jsonl"), env=env)
    assert empty.returncode == 1 and "holds no evaluation set" in empty.stderr
    blank = tmp_path / "broken" / "blank"
    blank.mkdir(parents=True)
    (blank / "corpus.jsonl").write_text("")
    (blank / "queries.jsonl").write_text("")
    nothing = run_cli("eval", str(blank), env=env)
    assert nothing.returncode == 1 and "corpus.jsonl is empty" in nothing.stderr and "Traceback" not in nothing.stderr
    latin = tmp_path / "broken" / "latin"
    latin.mkdir()
    (latin / "corpus.jsonl").write_bytes('{"id": "a", "namespace": "n", "text": "caf\xe9"}\n'.encode("latin-1"))
    (latin / "queries.jsonl").write_text('{"id": "q", "namespace": "n", "query": "x", "gold": ["a"]}\n')
    binary = run_cli("eval", str(latin), env=env)
    assert binary.returncode == 1 and "is not UTF-8 text (line 1)" in binary.stderr and "Traceback" not in binary.stderr
    no_reranker = run_cli("eval", str(tmp_path), "--mode", "hybrid+rerank", env=env)
    assert no_reranker.returncode == 1 and "needs a reranker" in no_reranker.stderr


@pytest.mark.subprocess
def test_bench_recall_runs_small_and_reports_every_mode(tmp_path, pg_server, home):
    out = tmp_path / "bench.json"
    env = cli_env(database_url=pg_server.dsn(), home=str(home))
    result = run_cli(
        "bench", "recall", "--memories", "300", "--queries", "5", "--real-vectors", "50", "--json", str(out), env=env
    )
    assert result.returncode == 0, result.stderr
    assert "loaded memories 300/300" in result.stderr
    data = json.loads(out.read_text())
    assert data["memories"] == 300 and data["real_vectors"] == 50
    assert {"hybrid", "vector", "bm25", "hybrid (without query embedding)"} <= set(data["recall_ms"])
    assert data["recall_ms"]["hybrid"]["p95"] > 0 and data["embed_query_ms"]["p50"] > 0
    # the floor: each index probed bare on the same database, and hybrid recall's ratio over it
    assert data["floor_ms"]["hnsw"]["p50"] > 0 and data["floor_ms"]["bm25"]["p50"] > 0
    floor = data["embed_query_ms"]["p50"] + data["floor_ms"]["hnsw"]["p50"] + data["floor_ms"]["bm25"]["p50"]
    assert abs(data["overhead"]["floor_p50_ms"] - floor) < 0.01
    assert abs(data["overhead"]["ratio_p50"] - data["recall_ms"]["hybrid"]["p50"] / floor) <= 0.006
    assert "over the floor" in result.stdout
    bad = run_cli("bench", "recall", "--memories", "0", env=env)
    assert bad.returncode == 2 and "at least 1" in bad.stderr  # a usage error


@pytest.mark.subprocess
def test_eval_measures_hybrid_rerank_through_the_configured_reranker(tmp_path, pg_server, home):
    """The command docs/EVAL.md gives for a real cross-encoder, here against the TEI-style server:
    the same recall path a user's service runs (``Brain.recall`` with ``rerank``)."""
    write_set(tmp_path / "tiny")
    out = tmp_path / "rerank.json"
    proc, port = start_fake("rerank_server")
    try:
        env = cli_env(
            database_url=pg_server.dsn(),
            home=str(home),
            reranker_provider="http",
            reranker_url=f"http://127.0.0.1:{port}",
        )
        result = run_cli("eval", str(tmp_path), "--mode", "hybrid,hybrid+rerank", "--json", str(out), env=env)
    finally:
        proc.terminate()
        proc.wait(10)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert data["reranker"] == "http"
    reranked = data["sets"][0]["modes"]["hybrid+rerank"]
    assert reranked["overall"]["recall_any@1"] == 1.0
    assert reranked["latency_ms"]["p50"] > 0


CHAT = [
    # Melanie's turn reads like a revision of Caroline's (same words, a new number, "now"): another speaker
    {
        "id": "t1",
        "namespace": "c",
        "text": "Caroline: The pottery class meets on Monday at 5 pm.",
        "speaker": "Caroline",
    },
    {
        "id": "t2",
        "namespace": "c",
        "text": "Melanie: The pottery class now meets on Monday at 6 pm.",
        "speaker": "Melanie",
    },
    {"id": "t3", "namespace": "c", "text": "Caroline: Thanks so much!", "speaker": "Caroline"},
    {"id": "t4", "namespace": "c", "text": "Melanie: Thanks so much!", "speaker": "Melanie"},
    {"id": "t5", "namespace": "c", "text": "Caroline: Thanks so much!", "speaker": "Caroline"},
    # Caroline corrects herself, explicitly
    {
        "id": "t6",
        "namespace": "c",
        "text": "Caroline: Actually, the pottery class meets on Monday at 7 pm.",
        "speaker": "Caroline",
    },
]
CHAT_QUERIES = [{"id": "q1", "namespace": "c", "query": "when does the pottery class meet", "gold": ["t2"]}]


def test_decisions_on_a_conversation_take_out_only_a_speakers_own_explicit_revision(tmp_path, pg_server, home):
    folder = tmp_path / "chat"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(r) for r in CHAT) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(r) for r in CHAT_QUERIES) + "\n")
    env = cli_env(database_url=pg_server.dsn(), home=str(home))
    out = tmp_path / "decisions.json"
    result = run_cli("eval", "decisions", str(folder), "--json", str(out), env=env)
    assert result.returncode == 0, result.stderr
    [chat] = json.loads(out.read_text())["sets"]
    assert chat["turns"] == 6
    assert chat["counts"] == {"superseded/same": 1}, chat  # t6 revises t1; nothing else is taken out
    assert chat["by_other_speaker"] == 0
    [example] = chat["examples"]["superseded/same"]
    assert (example["taken_out"], example["by"]) == ("t1", "t6")
    assert "taken out" in result.stdout and "superseded/same" in result.stdout

    recall = tmp_path / "recall.json"
    loaded = run_cli("eval", str(folder), "--decide", "--mode", "hybrid", "--k", "2", "--json", str(recall), env=env)
    assert loaded.returncode == 0, loaded.stderr
    [decided] = json.loads(recall.read_text())["sets"]
    assert decided["decide"] is True and decided["decisions"]["taken out"] == 1
    assert decided["decisions"]["ADD"] == 5 and decided["decisions"]["UPDATE"] == 1
    assert "loaded through the write decisions" in loaded.stdout
    assert decided["modes"]["hybrid"]["overall"]["recall_any@2"] == 1.0  # Melanie's turn is still there


def test_eval_facts_refuses_bad_arguments_before_touching_a_database(tmp_path, home) -> None:
    env = cli_env(home=str(home))
    missing = run_cli("eval", "facts", env=env)
    assert missing.returncode == 2 and "needs a facts set" in missing.stderr
    mixed = run_cli("eval", "facts", str(tmp_path), "--mode", "bm25", env=env)
    assert mixed.returncode == 2 and "takes --corpus and --threshold only" in mixed.stderr
    unnamed = tmp_path / "annotations"
    unnamed.mkdir()
    which = run_cli("eval", "facts", str(unnamed), env=env)
    assert which.returncode != 0 and "--corpus" in which.stderr  # whose conversations: said, nothing run
    stray = run_cli("eval", str(tmp_path), "--corpus", str(unnamed), env=env)
    assert stray.returncode == 2 and "cabrain eval facts SET" in stray.stderr


@pytest.mark.subprocess
def test_bench_counts_times_each_write_with_the_kept_counts_on_and_off(tmp_path, pg_server, home):
    """`cabrain bench counts`: retain (batched, single), forget and recall, each timed with the
    triggers that keep the overview's and the entities' counts on and off; a usage error for an odd
    number of rounds."""
    out = tmp_path / "counts.json"
    env = cli_env(database_url=pg_server.dsn(), home=str(home))
    result = run_cli("bench", "counts", "--batch", "4", "--rounds", "2", "--json", str(out), env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert set(data["writes"]) == {"retain_batched", "retain_single", "forget", "recall"}
    for write in data["writes"].values():
        assert write["ms_each_counted"] > 0 and write["ms_each_uncounted"] > 0 and write["operations"] > 0
        assert write["added_ms"] == pytest.approx(write["ms_each_counted"] - write["ms_each_uncounted"], abs=0.002)
    assert "retain batched:" in result.stdout and "without (" in result.stdout
    odd = run_cli("bench", "counts", "--rounds", "3", env=env)
    assert odd.returncode == 2 and "even number" in odd.stderr


async def test_the_counts_bench_texts_name_entities_retain_links(brain):
    """The counts bench's texts name places and tools as people write them, so its retains keep the
    entities' mention counters too (the triggers it times)."""
    import random

    from cabrain.bench.counts import named_text
    from cabrain.types import MemoryInput

    text = named_text(random.Random(3))
    [kept] = await brain.retain("alice", [MemoryInput(text, "proj")])
    assert len(kept.entities) >= 2, (text, kept.entities)


def test_bench_archive_times_the_scan_beside_the_index_at_each_size(tmp_path, pg_server, home):
    """`cabrain bench archive` at a tiny scale: two sizes of synthetic cold rows, each indexed as
    maintain indexes them (the build's time and memory said), archive recall timed scanning every
    row for the first queries and through the index for all, with the index's recall@k against the
    scan; a usage error for a size of 0."""
    out = tmp_path / "archive.json"
    env = cli_env(database_url=pg_server.dsn(), home=str(home))
    args = ["bench", "archive", "--rows", "1200,2000", "--queries", "3", "--exact-queries", "2", "--probes", "4"]
    result = run_cli(*args, "--real-vectors", "8", "--json", str(out), env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert data["probes"] == 4 and set(data["sizes"]) == {"1200", "2000"}
    for size, entry in data["sizes"].items():
        assert entry["clusters"] == round(int(size) ** 0.5)
        assert entry["index_build_s"] > 0 and entry["index_build_memory_mib"]["peak_mib"] > 0
        for mode in ("hybrid", "vector"):
            measured = entry["modes"][mode]
            assert measured["exact_queries"] == 2 and measured["exact_rows_read"] == int(size)
            assert 0 < measured["approximate_rows_read"] < int(size)  # 4 of ~40 clusters read
            assert 0 <= measured["recall_at_k"] <= 1 and measured["approximate_ms"]["p50"] > 0
            assert {"embed_ms", "scan_ms", "fetch_ms", "total_ms"} <= set(measured["approximate_parts_ms"])
            # timed again after warming the index's probed columns: what it read, less than the copy
            assert measured["warm_ms"]["p50"] > 0 and measured["warmed"]["mib"] > 0
            assert {"scan_ms", "total_ms"} <= set(measured["warm_parts_ms"])
        assert entry["modes"]["vector"]["recall_at_k"] >= 0.5
    assert data["code_bits"] == 16 and "ranked by 16-bit codes" in result.stdout
    assert "archive recall, 3 queries per mode" in result.stdout and "build MiB" in result.stdout
    assert "warm p50" in result.stdout and "warmed MiB" in result.stdout
    bad = run_cli("bench", "archive", "--rows", "0", env=env)
    assert bad.returncode == 2 and "--rows" in bad.stderr
    bad = run_cli("bench", "archive", "--exact-queries", "0", env=env)
    assert bad.returncode == 2 and "--exact-queries" in bad.stderr


def test_bench_archive_on_a_question_set_reports_recall_and_gold_hits(tmp_path, pg_server, home):
    """`cabrain bench archive --corpus DIR`: a question -> passage set's passages, really embedded,
    demoted and indexed; each question asked scanning and through the index: the index's recall@k
    against the scan and both's hit@k on the gold passages. A folder that is not such a set: exit 2."""
    topics = ["volcano", "violin", "glacier", "satellite", "orchard", "lighthouse", "submarine", "desert"]
    folder = tmp_path / "set"
    folder.mkdir()
    passages, questions = [], []
    for t, topic in enumerate(topics):
        for n in range(5):
            passages.append(
                {"id": f"p{t}-{n}", "text": f"Notes on the {topic}, part {n}: the {topic} team met on day {n}."}
            )
        questions.append({"query": f"what about the {topic}", "gold": [f"p{t}-0", f"p{t}-1", f"p{t}-2"]})
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(p) for p in passages) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in questions) + "\n")
    out = tmp_path / "corpus.json"
    env = cli_env(database_url=pg_server.dsn(), home=str(home))
    result = run_cli(
        "bench", "archive", "--corpus", str(folder), "--probes", "2", "--json", str(out), env=env, timeout=600
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert data["rows"] == 40 and data["queries"] == 8 and data["probes"] == 2 and data["clusters"] == 6
    for mode in ("hybrid", "vector"):
        measured = data["modes"][mode]
        assert 0 <= measured["recall_at_k"] <= 1 and 0 < measured["rows_read_share"] < 1
        assert measured["exact_hit_at_k"] > 0.5  # each question's topic word is in its gold passages
    assert data["modes"]["hybrid"]["index_hit_at_k"] > 0.5  # the word's postings find them
    assert "recall@10 vs scan" in result.stdout
    bad = run_cli("bench", "archive", "--corpus", str(tmp_path / "missing"), env=env)
    assert bad.returncode == 2 and "corpus.jsonl" in bad.stderr
