"""Archive recall through the cold tier's vector index (cabrain.store.cold_index), against the scan.

A seeded corpus of a few thousand cold rows, made in the Iceberg format as demotion writes them
(cabrain.bench.archive.cold_rows) and owned, shared and invalidated in every way archive recall
scopes: reading every cluster of the index answers exactly what the scan answers, for every reader;
reading a few clusters reads a fraction of the rows and finds most of the scan's hits; rows demoted
after the index was built, and purged ones, are handled; maintain builds the index and rebuilds it
once enough rows were demoted since."""

from __future__ import annotations

import ctypes
import itertools
import os
import random
import struct
import subprocess
import threading
import uuid
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.expressions import AlwaysTrue

from cabrain.bench.archive import cold_rows, recall_at_k
from cabrain.bench.corpus import synthetic_queries, synthetic_text
from cabrain.progress import Lines
from cabrain.search import archive_index
from cabrain.search.archive import recall_archive
from cabrain.sleep.context import StepContext
from cabrain.sleep.index_cold import build
from cabrain.sleep.maintain import maintain
from cabrain.store import cold_files, cold_index
from cabrain.store.cold import equal
from cabrain.types import ArchiveQuery, RecallMode

NS = "proj"
ID_COLUMNS = ("id", "valid_at", "namespace", "tier", "cold_batch", "demoted_at", "owner_agent_id", "visibility")


class Corpus:
    """Seeded cold rows of namespace ``proj``, appended to the cold tier and marked cold."""

    def __init__(self, brain, seed: int = 11) -> None:
        self.brain = brain
        self.rng = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        self.base: np.ndarray | None = None
        self.forgotten: set[str] = set()
        self.invalid: set[str] = set()
        self.alice_reads: set[str] = set()  # the rows the namespace's owner may read

    async def add(self, n: int, word: str | None = None) -> list[str]:
        """``n`` more rows (each also saying ``word``, when given)."""
        if self.base is None:
            texts = [synthetic_text(self.rng) for _ in range(24)]
            self.base = np.asarray(await self.brain.engine.embed_documents(texts), dtype=np.float32)
        table = cold_rows(self.rng, self.np_rng, self.base, n, 0.02, datetime.now(UTC))
        if word is not None:
            said = {
                "content": [f"{text} {word}" for text in table.column("content").to_pylist()],
                "terms": [f"{terms} {word} " for terms in table.column("terms").to_pylist()],
                "term_count": [count + 1 for count in table.column("term_count").to_pylist()],
            }
            for name, values in said.items():
                at = table.schema.get_field_index(name)
                table = table.set_column(at, table.schema.field(at), pa.array(values, type=table.schema.field(at).type))
        owners = [self.rng.choice(["alice", "bob", "carol"]) for _ in range(n)]
        visibility = [self.rng.choice(["private", "team", "global"]) for _ in range(n)]
        invalid = [datetime.now(UTC) if self.rng.random() < 0.1 else None for _ in range(n)]
        for name, values in (("namespace", [NS] * n), ("owner_agent_id", owners), ("visibility", visibility)):
            table = table.set_column(table.schema.get_field_index(name), table.schema.field(name), pa.array(values))
        index = table.schema.get_field_index("invalid_at")
        table = table.set_column(
            index, table.schema.field(index), pa.array(invalid, type=table.schema.field(index).type)
        )
        ids = table.column("id").to_pylist()
        self.invalid |= {i for i, when in zip(ids, invalid, strict=True) if when is not None}
        self.alice_reads |= {
            i for i, o, v in zip(ids, owners, visibility, strict=True) if v != "private" or o == "alice"
        }
        batch = uuid.UUID(table.column("demote_batch")[0].as_py())
        self.brain.engine.cold_tier().append_batch(batch, table)
        records = [
            (uuid.UUID(i), v, NS, "cold", batch, d, owner, vis)
            for i, v, d, owner, vis in zip(
                ids,
                table.column("valid_at").to_pylist(),
                table.column("demoted_at").to_pylist(),
                owners,
                visibility,
                strict=True,
            )
        ]
        async with self.brain.engine.pool.acquire() as conn:
            await conn.copy_records_to_table("memory_ids", records=records, columns=ID_COLUMNS)
            forgotten = self.rng.sample(ids, n // 50)
            await conn.execute(
                "UPDATE memory_ids SET forgotten_at = now() WHERE id = ANY($1::uuid[])",
                [uuid.UUID(i) for i in forgotten],
            )
        self.forgotten |= set(forgotten)
        return ids


async def _answer(brain, agent: str, query: ArchiveQuery, probes: int) -> list[tuple[str, float]]:
    result = await recall_archive(brain.engine, agent, query, probes=probes)
    return [(str(h.memory.id), round(h.score, 9)) for h in result.hits]


@pytest.fixture
async def corpus(brain) -> Corpus:
    made = Corpus(brain)
    for _ in range(3):
        await made.add(1000)
    return made


async def test_reading_every_cluster_answers_what_the_scan_answers(brain, corpus: Corpus) -> None:
    queries = synthetic_queries(random.Random(3), 3)
    asked = [
        ArchiveQuery(text, NS, k=10, mode=mode, include_invalid=invalid)
        for text in queries
        for mode in (RecallMode.HYBRID, RecallMode.VECTOR)
        for invalid in (True, False)
    ]
    readers = ("alice", "bob", "carol")
    scans = {(agent, i): await _answer(brain, agent, q, probes=0) for agent in readers for i, q in enumerate(asked)}
    # no index yet: the index's default path is the scan
    assert await _answer(brain, "bob", asked[0], probes=8) == scans[("bob", 0)]

    async with brain.engine.pool.acquire() as conn:
        built = await build(conn, brain.engine.cold_tier(), NS)
    assert built is not None and built.rows == 3000
    clusters = len(built.centroids)
    assert clusters == round(3000**0.5)
    for (agent, i), scan in scans.items():
        assert scan, f"{agent} found nothing for {asked[i]}"
        assert await _answer(brain, agent, asked[i], probes=clusters) == scan, (agent, asked[i])
        assert not {memory_id for memory_id, _ in scan} & corpus.forgotten
        if not asked[i].include_invalid:
            assert not {memory_id for memory_id, _ in scan} & corpus.invalid
    # alice owns the namespace: she reads its team rows, bob and carol (no grant) only theirs and global ones
    assert {len(s) for (agent, _), s in scans.items() if agent == "alice"} == {10}


async def test_a_build_in_groups_answers_as_one_in_memory_bound(brain, corpus: Corpus) -> None:
    """A namespace larger than the build's group (here 700 rows of 3,000) is sorted a group of
    clusters at a time: the copy is several files, each sorted by cluster, and reading every
    cluster still answers what the scan answers; the build says how far it is as it goes."""
    cold = brain.engine.cold_tier()
    said: list[str] = []
    async with brain.engine.pool.acquire() as conn:
        built = await build(conn, cold, NS, group_rows=700, progress=Lines(said.append, every_s=0))
    assert built is not None and built.rows == 3000
    assert said and said[-1].startswith(f"cold rows of {NS} clustered: 3,000/3,000 rows"), said
    copy = cold.index_table()
    assert copy is not None
    tasks = list(copy.scan(row_filter=equal("namespace", NS)).plan_files())
    assert len(tasks) >= 4
    spans = []
    for task in tasks:
        clusters = pq.read_table(task.file.file_path.removeprefix("file://"), columns=["cluster"]).column(0)
        values = clusters.to_pylist()
        assert values == sorted(values)
        spans.append((values[0], values[-1]))
    spans.sort()
    assert all(a[1] < b[0] for a, b in itertools.pairwise(spans))  # each group its own clusters
    for mode in (RecallMode.HYBRID, RecallMode.VECTOR):
        query = ArchiveQuery(synthetic_queries(random.Random(4), 1)[0], NS, k=10, mode=mode)
        scan = await _answer(brain, "alice", query, probes=0)
        assert scan and await _answer(brain, "alice", query, probes=len(built.centroids)) == scan


async def test_each_cluster_is_its_own_row_groups_and_a_probe_reads_only_them(brain, corpus: Corpus) -> None:
    """The copy's data files hold each cluster in row groups of its own, so a probe decodes the
    rows of its clusters and no others (the rows without a cluster always)."""
    cold = brain.engine.cold_tier()
    async with brain.engine.pool.acquire() as conn:
        built = await build(conn, cold, NS, group_rows=1000)
    assert built is not None
    copy = cold.index_table()
    assert copy is not None
    everything = copy.scan(row_filter=equal("namespace", NS), selected_fields=("id", "cluster")).to_arrow()
    for task in copy.scan(row_filter=equal("namespace", NS)).plan_files():
        footer = pq.read_metadata(task.file.file_path.removeprefix("file://"))
        at = footer.schema.to_arrow_schema().get_field_index("cluster")
        stats = [footer.row_group(i).column(at).statistics for i in range(footer.num_row_groups)]
        assert all(s.min == s.max for s in stats)
    reader = cold_index.ColdIndex(cold)
    clusters = [0, 3, len(built.centroids) - 1]
    files, probed, rest = reader.parts(NS, clusters, AlwaysTrue(), ["id", "cluster"], [])
    read = pa.Table.from_batches([*probed, *rest])
    wanted = {*clusters, cold_index.UNCLUSTERED}
    expected = {
        i for i, c in zip(everything["id"].to_pylist(), everything["cluster"].to_pylist(), strict=True) if c in wanted
    }
    assert set(read["id"].to_pylist()) == expected and read.num_rows == len(expected)
    assert 1 <= files <= len(list(copy.scan(row_filter=equal("namespace", NS)).plan_files()))


async def test_a_few_clusters_read_a_fraction_and_find_most_hits(brain, corpus: Corpus) -> None:
    async with brain.engine.pool.acquire() as conn:
        built = await build(conn, brain.engine.cold_tier(), NS)
    assert built is not None
    texts = synthetic_queries(random.Random(5), 8)
    recall: dict[RecallMode, float] = {}
    for mode in (RecallMode.VECTOR, RecallMode.HYBRID):
        exact, approximate, read, scanned = [], [], 0, 0
        for text in texts:
            query = ArchiveQuery(text, NS, k=10, mode=mode)
            full = await recall_archive(brain.engine, "alice", query, probes=0)
            probed = await recall_archive(brain.engine, "alice", query, probes=8)
            exact.append([str(h.memory.id) for h in full.hits])
            approximate.append([str(h.memory.id) for h in probed.hits])
            scanned, read = scanned + full.scanned, read + probed.scanned
        recall[mode] = recall_at_k(approximate, exact)
        print(
            f"{mode.value}: recall@10 {recall[mode]:.3f} with 8 of {len(built.centroids)} clusters, rows read {read} of {scanned}"
        )
        assert read < 0.4 * scanned
    # the clusters are chosen by the vector; a hybrid query's keyword list comes from the index's
    # postings (each word's strongest rows), so it is found too, though every cluster holds its words
    assert recall[RecallMode.VECTOR] >= 0.9
    assert recall[RecallMode.HYBRID] >= 0.9


async def test_a_probe_ranks_by_codes_and_reports_its_hits_similarity_from_their_embeddings(
    brain, corpus: Corpus
) -> None:
    """Reading part of the clusters ranks their rows by 8-bit codes (the copy's column ``code``, the
    quantizer in ``cold_indexes``) and reads the hits' whole rows back: the hits and their
    similarities are the embeddings' own, as the scan reports them."""
    cold = brain.engine.cold_tier()
    with cold_index.ColdIndex(cold).table().transaction() as tx:  # a level for the table's codec
        tx.set_properties({"write.parquet.compression-codec": "zstd", "write.parquet.compression-level": "3"})
    async with brain.engine.pool.acquire() as conn:
        built = await build(conn, cold, NS)
        kept = await conn.fetchval("SELECT quantizer FROM cold_indexes WHERE namespace = $1", NS)
    assert built is not None and built.quantized is not None
    dim = built.centroids.shape[1]
    assert kept == built.quantized.astype("<f4").tobytes() and len(kept) == 2 * 4 * dim
    copy = cold.index_table()
    assert copy is not None
    rows = copy.scan(row_filter=equal("namespace", NS), selected_fields=("cluster", "code")).to_arrow()
    for task in copy.scan(row_filter=equal("namespace", NS)).plan_files():
        footer = pq.read_metadata(task.file.file_path.removeprefix("file://"))
        names = footer.schema.to_arrow_schema().names
        codecs = {name: footer.row_group(0).column(names.index(name)).compression for name in ("code", "content")}
        assert codecs == {"code": "UNCOMPRESSED", "content": "ZSTD"}  # the codes are read most: plain
    width = dim * brain.settings.cold_index_code_bits // 8
    assert all(
        (code is not None and len(code) == width) == (cluster >= 0)
        for cluster, code in zip(rows["cluster"].to_pylist(), rows["code"].to_pylist(), strict=True)
    )
    for text in synthetic_queries(random.Random(12), 4):
        for mode in (RecallMode.VECTOR, RecallMode.HYBRID):
            query = ArchiveQuery(text, NS, k=10, mode=mode)
            scan = await recall_archive(brain.engine, "alice", query, probes=0)
            probed = await recall_archive(brain.engine, "alice", query, probes=8)
            assert probed.hits and probed.scanned < scan.scanned
            exact = {h.memory.id: h.breakdown.vector_similarity for h in scan.hits}
            for hit in probed.hits:
                assert hit.memory.content  # the whole row, read back
                if hit.memory.id in exact and hit.breakdown.vector_similarity is not None:
                    assert hit.breakdown.vector_similarity == exact[hit.memory.id], (text, mode)
    # a purge rewrites the copy's files (pyiceberg's own writer): their codes stay, and so does the probe
    gone = [str(h.memory.id) for h in scan.hits[:2]]
    cold.purge(NS, gone)
    after = await recall_archive(brain.engine, "alice", query, probes=8)
    assert after.hits and not {str(h.memory.id) for h in after.hits} & set(gone)


async def test_the_postings_keep_each_readers_scope(brain, corpus: Corpus) -> None:
    """A keyword list from the postings holds only rows the reader may read: never another agent's
    private row, a forgotten one, or (unless asked) an invalidated one; and a purged row leaves the
    postings with the table."""
    cold = brain.engine.cold_tier()
    async with brain.engine.pool.acquire() as conn:
        built = await build(conn, cold, NS)
    assert built is not None and built.postings > 0
    postings = cold.terms_table()
    assert postings is not None
    every = postings.scan(
        row_filter=equal("namespace", NS), selected_fields=("id", "owner_agent_id", "visibility")
    ).to_arrow()
    owners = dict(
        zip(
            every["id"].to_pylist(),
            zip(every["owner_agent_id"].to_pylist(), every["visibility"].to_pylist(), strict=True),
            strict=True,
        )
    )
    texts = synthetic_queries(random.Random(6), 4)
    for agent in ("bob", "carol"):
        for text in texts:
            for invalid in (True, False):
                query = ArchiveQuery(text, NS, k=20, mode=RecallMode.HYBRID, include_invalid=invalid)
                result = await recall_archive(brain.engine, agent, query, probes=4)
                hits = {str(h.memory.id) for h in result.hits}
                assert hits, (agent, text)
                for hit in hits:
                    owner, visibility = owners[hit]
                    assert visibility == "global" or owner == agent, (agent, hit, owner, visibility)
                assert not hits & corpus.forgotten
                if not invalid:
                    assert not hits & corpus.invalid
    gone = sorted(owners)[:5]
    cold.purge(NS, gone)
    left = postings.refresh().scan(row_filter=equal("namespace", NS), selected_fields=("id",)).to_arrow()
    assert not set(left["id"].to_pylist()) & set(gone) and left.num_rows > 0


async def test_a_rare_word_finds_its_rows_far_from_the_querys_vector(brain, corpus: Corpus) -> None:
    marked = set(await corpus.add(8, word="quokkavale"))  # 8 rows of 3008, their vectors anywhere
    async with brain.engine.pool.acquire() as conn:
        built = await build(conn, brain.engine.cold_tier(), NS)
        assert built is not None
        word = await conn.fetchrow(
            "SELECT df, clusters FROM cold_index_terms WHERE namespace = $1 AND term = $2", NS, "quokkavale"
        )
    assert word["df"] == 8 and 1 <= len(word["clusters"]) <= 8
    assert len(word["clusters"]) > 1  # spread: the rows are near different vectors
    # k=20: room for the word's rows beside the vector's list, whatever the fusion makes of statistics
    # over the rows read (a probed read's vector list is all near the query: its scores stay high)
    query = ArchiveQuery("where was quokkavale mentioned", NS, k=20, mode=RecallMode.HYBRID)
    scan = await recall_archive(brain.engine, "alice", query, probes=0)
    found = {str(h.memory.id) for h in scan.hits} & marked
    assert found == (marked & corpus.alice_reads) - corpus.forgotten  # the word's rows lead
    probed = await recall_archive(brain.engine, "alice", query, probes=8)  # of 55 clusters
    assert probed.scanned < 0.5 * scan.scanned
    keyword = {str(h.memory.id) for h in probed.hits if h.breakdown.bm25_rank is not None}
    assert keyword >= found  # its postings: found wherever their vectors are
    # an index built before it kept postings: the word's clusters are read instead
    postings = brain.engine.cold_tier().terms_table()
    assert postings is not None
    postings.delete(equal("namespace", NS))
    older = await recall_archive(brain.engine, "alice", query, probes=8)
    assert older.scanned > probed.scanned  # the word's clusters beside the vector's
    assert {str(h.memory.id) for h in older.hits if h.breakdown.bm25_rank is not None} >= found


async def test_rows_demoted_after_the_build_and_purged_rows(brain, corpus: Corpus) -> None:
    cold = brain.engine.cold_tier()
    async with brain.engine.pool.acquire() as conn:
        built = await build(conn, cold, NS)
    assert built is not None
    clusters = len(built.centroids)
    later = await corpus.add(300)  # demoted after the index: read whole from the cold table
    query = ArchiveQuery(synthetic_queries(random.Random(9), 1)[0], NS, k=20, mode=RecallMode.VECTOR)
    scan = await _answer(brain, "alice", query, probes=0)
    assert await _answer(brain, "alice", query, probes=clusters) == scan
    probed = await recall_archive(brain.engine, "alice", query, probes=1)
    assert probed.scanned >= len(set(later) & corpus.alice_reads)  # every row demoted since the build is read
    # a word of rows demoted since the build only: their keyword list is counted from the rows read
    fresh = set(await corpus.add(6, word="wombatine"))
    wombat = ArchiveQuery("wombatine", NS, k=20, mode=RecallMode.HYBRID)
    expected = (fresh & corpus.alice_reads) - corpus.forgotten - corpus.invalid
    through = await recall_archive(brain.engine, "alice", wombat, probes=1)
    assert expected and {str(h.memory.id) for h in through.hits if h.breakdown.bm25_rank is not None} == expected
    # a row of the index's copy and one demoted since, purged: gone from both, still the scan's answer
    gone = [next(i for i, _ in scan if i not in later), next(i for i in later if i not in corpus.forgotten)]
    cold.purge(NS, gone)
    scan = await _answer(brain, "alice", query, probes=0)
    assert not {memory_id for memory_id, _ in scan} & set(gone)
    assert await _answer(brain, "alice", query, probes=clusters) == scan
    copy = cold.index_table()
    assert copy is not None
    assert copy.scan(row_filter=equal("namespace", NS)).to_arrow().num_rows == 3000 - 1


async def test_maintain_builds_the_index_and_rebuilds_it_when_stale(brain, db_dsn, corpus: Corpus) -> None:
    settings = brain.settings.model_copy(update={"cold_index_min_rows": 2000, "cold_index_stale_ratio": 0.1})

    async def run() -> dict:
        ctx = StepContext(settings, db_dsn, uuid.uuid4())
        try:
            return (await maintain(ctx)).counts
        finally:
            await ctx.close()

    async def indexed() -> int | None:
        async with brain.engine.pool.acquire() as conn:
            row = await conn.fetchrow(cold_index.INDEX_OF, NS)
        return None if row is None else row["indexed_rows"]

    assert (await run()).get("cold_indexes_built") == 1
    assert await indexed() == 3000
    assert "cold_indexes_built" not in await run()  # nothing demoted since
    await corpus.add(200)
    assert "cold_indexes_built" not in await run()  # 200 of 3000: not yet stale
    await corpus.add(200)
    assert (await run()).get("cold_indexes_built") == 1
    assert await indexed() == 3400
    query = ArchiveQuery(synthetic_queries(random.Random(2), 1)[0], NS, k=10)
    found = await brain.recall_archive("alice", query)  # the facade: CABRAIN_COLD_INDEX_PROBES of the 58 clusters
    probes = brain.settings.cold_index_probes
    assert [str(h.memory.id) for h in found.hits] == [i for i, _ in await _answer(brain, "alice", query, probes)]
    assert found.scanned < (await recall_archive(brain.engine, "alice", query, probes=0)).scanned


def _resident(paths: list[str]) -> int:
    """Bytes of these files in the page cache (util-linux's fincore)."""
    out = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", *paths], capture_output=True, text=True, check=True
    )
    return sum(int(line) for line in out.stdout.split())


def _active(paths: list[str], ranges: list[list[tuple[int, int]]]) -> tuple[int, int] | None:
    """(pages of these byte ranges in the page cache, those of them on the kernel's active list), by
    mapping the files and reading each page's flags (/proc/self/pagemap, /proc/kpageflags); None
    where the kernel does not show them (not root, not Linux)."""
    if not (os.access("/proc/kpageflags", os.R_OK) and os.access("/proc/self/pagemap", os.R_OK)):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    page = os.sysconf("SC_PAGE_SIZE")
    resident = active = 0
    with open("/proc/self/pagemap", "rb") as pagemap, open("/proc/kpageflags", "rb") as flags:
        for path, spans in zip(paths, ranges, strict=True):
            size = os.path.getsize(path)
            fd = os.open(path, os.O_RDONLY)
            base = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED: the page cache's own pages
            try:
                n = (size + page - 1) // page
                cached = (ctypes.c_ubyte * n)()
                assert libc.mincore(base, size, cached) == 0
                wanted = {i for start, length in spans for i in range(start // page, (start + length - 1) // page + 1)}
                for i in sorted(i for i in wanted if cached[i] & 1):
                    ctypes.string_at(base + i * page, 1)  # mapped, so that pagemap has its frame
                    pagemap.seek((base // page + i) * 8)
                    frame = struct.unpack("<Q", pagemap.read(8))[0] & ((1 << 55) - 1)
                    flags.seek(frame * 8)
                    resident += 1
                    active += bool(struct.unpack("<Q", flags.read(8))[0] & (1 << 6))  # KPF_ACTIVE
            finally:
                libc.munmap(base, size)
                os.close(fd)
    return resident, active


@pytest.mark.subprocess  # fincore
async def test_warming_reads_the_probed_columns_into_the_page_cache_once(brain, corpus: Corpus) -> None:
    """``warm`` reads the column chunks a probe's first pass reads (ids, codes, the scope's columns)
    of the namespace's copy and not its embeddings or texts, so that the page cache holds them; the
    first archive recall through an index warms it in the background, once per build."""
    cold = brain.engine.cold_tier()
    async with brain.engine.pool.acquire() as conn:
        built = await build(conn, cold, NS)
        assert built is not None
        index = await archive_index.load(conn, NS)
    assert index is not None
    copy = cold.index_table()
    assert copy is not None
    paths = [
        t.file.file_path.removeprefix("file://") for t in copy.scan(row_filter=equal("namespace", NS)).plan_files()
    ]
    footers = [pq.read_metadata(p) for p in paths]
    wanted = sum(length for footer in footers for _, length in cold_files.chunk_ranges(footer))
    skipped = sum(
        footer.row_group(i).column(j).total_compressed_size
        for footer in footers
        for i in range(footer.num_row_groups)
        for j in range(footer.num_columns)
        if footer.row_group(i).column(j).path_in_schema in ("embedding", "content")
    )
    ranges = [cold_files.chunk_ranges(footer) for footer in footers]

    def drop() -> None:  # out of the page cache (written through to the disk first)
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)

    drop()
    for path, spans in zip(paths, ranges, strict=True):  # the same ranges read once: a control
        fd = os.open(path, os.O_RDONLY)
        try:
            for start, length in spans:
                os.pread(fd, length, start)
        finally:
            os.close(fd)
    once = _active(paths, ranges)
    drop()
    before = _resident(paths)
    warmed = archive_index.warm(cold, index)
    assert warmed.files == len(paths) and warmed.bytes == wanted
    assert 0 < warmed.bytes <= sum(os.path.getsize(p) for p in paths) - skipped
    if before == 0:  # a file system whose pages can leave memory (not tmpfs)
        assert _resident(paths) >= warmed.bytes * 0.9
        # read twice, so on the kernel's active list (not the first pages evicted by a read of the
        # whole tier), where pages read once are not
        pages = _active(paths, ranges)
        if pages is not None and once is not None:
            assert once[0] > 0 and pages[0] > 0
            assert pages[1] > once[1], (pages, once)
    # in the background, once per build in this process
    first = archive_index.warm_soon(cold, index)
    assert first is not None
    first.join()
    assert archive_index.warm_soon(cold, index) is None
    # a new build is warmed on the first archive recall through it, in the background
    async with brain.engine.pool.acquire() as conn:
        await build(conn, cold, NS)
        rebuilt = await archive_index.load(conn, NS)
    assert rebuilt is not None and rebuilt.built_at != index.built_at
    query = ArchiveQuery(synthetic_queries(random.Random(3), 1)[0], NS, k=5, mode=RecallMode.VECTOR)
    assert (await recall_archive(brain.engine, "alice", query, probes=4)).hits
    assert archive_index.warm_soon(cold, rebuilt) is None  # the recall started it
    for thread in threading.enumerate():
        if thread.name == f"cabrain-warm-{NS}":
            thread.join()
