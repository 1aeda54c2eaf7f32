"""Keyword search: the :class:`KeywordBackend` Protocol and CaBrain's own BM25 over PostgreSQL.

The built-in backend keeps an inverted index in ``memory_terms`` (one posting per memory and
term, with tf and document length), document frequencies in ``bm25_terms`` and namespace totals in
``bm25_namespaces`` (cabrain/schema/0002_retrieval.sql states the formula). A query reads, for each of its
terms, the strongest ``postings_per_term`` postings (by their BM25 tf part), scores the union
exactly with the namespace's current N and avgdl, then looks up only the best ``4 * limit``
candidates to apply the caller's scope and filters, and returns the top ``limit``. When scope
and filters leave fewer than ``limit`` hits, it looks deeper (more candidates, then more postings
per term), so filters cannot starve it.

Another backend (pg_search, vchord_bm25, pg_textsearch where the database has one) implements
the same two methods.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import asyncpg

from cabrain.store.access import ACCESS_CTE, RECALL_FILTER
from cabrain.store.memories import COLUMNS
from cabrain.store.planner import fetch_without
from cabrain.store.statement import Statement
from cabrain.text.dates import date_terms
from cabrain.text.tokenizer import query_terms, term_frequencies


@dataclass(frozen=True)
class IndexedDoc:
    memory_id: uuid.UUID
    namespace: str
    valid_at: datetime
    content: str
    context: str = ""  # words it is also found by: the turns before it in its conversation


@dataclass(frozen=True)
class SearchFilters:
    """The parameters of :data:`cabrain.store.access.RECALL_FILTER` (and its access check)."""

    namespace: str
    agent: str
    include_invalid: bool = False
    networks: list[str] | None = None
    memory_types: list[str] | None = None
    source_kinds: list[str] | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    # the brain as it stood then: versions valid at or before it, not invalidated by then (None: now)
    as_of: datetime | None = None
    # sleep's summaries of sittings (network observation, metadata.sitting) compete too: without it,
    # only when the networks asked for include observation (CABRAIN_RECALL_SITTING_SUMMARIES)
    sitting_summaries: bool = False

    def params(self) -> dict[str, Any]:
        """By name, for a :class:`cabrain.store.statement.Statement` that includes the filter."""
        return {
            "namespace": self.namespace,
            "agent": self.agent,
            "include_invalid": self.include_invalid,
            "networks": self.networks,
            "memory_types": self.memory_types,
            "source_kinds": self.source_kinds,
            "valid_from": self.valid_from,
            "valid_to": self.valid_to,
            "as_of": self.as_of,
            "sitting_summaries": self.sitting_summaries,
        }


@dataclass(frozen=True)
class QueryTerms:
    """A query's terms with their statistics in one namespace (:meth:`KeywordBackend.read_terms`),
    read ahead of the search - recall reads them with its other lookups, before the embedding."""

    query: str
    namespace: str
    # per term: term, qtf (its count in the query, or its weight: a context word weighs less), df
    # (None: unknown to the namespace), doc_count, total_len
    rows: list
    expansion: frozenset[str] = frozenset()  # terms added to the query's own (they score, not count in coverage)
    context: frozenset[str] = frozenset()  # those of them from a dialogue's earlier turns


@dataclass(frozen=True)
class KeywordResult:
    rows: list[asyncpg.Record]  # memory columns + "score", best first
    coverage: float  # share of the query's idf mass found in the namespace vocabulary, [0, 1]


class KeywordBackend(Protocol):
    name: str

    async def index(self, conn: asyncpg.Connection, docs: Sequence[IndexedDoc]) -> None:
        """Index new memories, inside the caller's transaction."""

    async def read_terms(
        self,
        conn: asyncpg.Connection,
        query: str,
        namespace: str,
        *,
        expansion: str = "",
        context: Sequence[tuple[str, float]] = (),
    ) -> QueryTerms:
        """What :meth:`search` needs to know of the query before it searches (cheap); ``expansion``:
        words searched beside the query's own (the dates its relative time words name), which
        score where the namespace knows them and are otherwise ignored; ``context``: more such
        words, each text with the weight its words get (a dialogue's earlier turns)."""

    async def search(
        self,
        conn: asyncpg.Connection,
        query: str,
        filters: SearchFilters,
        limit: int,
        *,
        terms: QueryTerms | None = None,
    ) -> KeywordResult:
        """The best ``limit`` rows; ``terms``: this query's :meth:`read_terms`, when read ahead."""


UPSERT_STATS = """
INSERT INTO bm25_namespaces (namespace, doc_count, total_len) VALUES ($1, $2, $3)
ON CONFLICT (namespace) DO UPDATE
SET doc_count = bm25_namespaces.doc_count + EXCLUDED.doc_count,
    total_len = bm25_namespaces.total_len + EXCLUDED.total_len
RETURNING doc_count, total_len
"""
UPSERT_DF = """
INSERT INTO bm25_terms (namespace, term, df)
SELECT $1, t.term, t.n FROM unnest($2::text[], $3::int[]) AS t(term, n)
ORDER BY t.term
ON CONFLICT (namespace, term) DO UPDATE SET df = bm25_terms.df + EXCLUDED.df
"""
INSERT_POSTINGS = """
INSERT INTO memory_terms (namespace, term, memory_id, valid_at, tf, doc_len, impact)
SELECT * FROM unnest($1::text[], $2::text[], $3::uuid[], $4::timestamptz[], $5::smallint[],
                     $6::int[], $7::real[])
"""
# The query's terms with their document frequencies, and the namespace's statistics, in one trip.
QUERY_TERMS = """
SELECT t.term, t.qtf, s.df, n.doc_count, n.total_len
FROM unnest($1::text[], $2::float8[]) AS t(term, qtf)
LEFT JOIN bm25_terms s ON s.namespace = $3 AND s.term = t.term
LEFT JOIN bm25_namespaces n ON n.namespace = $3
"""
SEARCH = Statement(
    f"""
WITH {ACCESS_CTE},
-- BM25 with the parameters k1, b and avgdl, its per-term constants folded once per query term
-- (w = qtf * idf * (k1 + 1), k = k1 * b / avgdl, c = k1 * (1 - b)) so that each of the thousands
-- of postings read costs w * tf / (tf + k * doc_len + c): the same score, a third less time.
q AS (
    SELECT t.term, t.qtf * t.idf * (:k1::float8 + 1) AS w, :k1::float8 * :b::float8 / :avgdl::float8 AS k,
           :k1::float8 * (1 - :b::float8) AS c
    FROM unnest(:terms::text[], :qtfs::float8[], :idfs::float8[]) AS t(term, qtf, idf)
),
top AS (
    SELECT p.memory_id, p.valid_at, sum(q.w * p.tf / (p.tf + q.k * p.doc_len + q.c)) AS score
    FROM q CROSS JOIN LATERAL (
        SELECT t.memory_id, t.valid_at, t.tf, t.doc_len FROM memory_terms t
        WHERE t.namespace = :namespace AND t.term = q.term
        ORDER BY t.impact DESC LIMIT :budget
    ) p
    GROUP BY p.memory_id, p.valid_at
    ORDER BY score DESC, p.memory_id
    LIMIT :shortlist
)
SELECT {COLUMNS}, c.score
FROM top c JOIN memories m ON m.id = c.memory_id AND m.valid_at = c.valid_at
WHERE {RECALL_FILTER}
ORDER BY c.score DESC, m.id
LIMIT :limit
"""
)


# The shortlist's rows are looked up by their keys (runtime partition pruning on valid_at), never
# by hashing or materialising the namespace: the one plan left whatever the parameters, so it is
# planned once per connection (fetch_without's ``generic``; custom planning cost about 1 ms a call).
LOOKUPS = ("enable_hashjoin", "enable_mergejoin", "enable_material")


def idf(n_docs: float, df: float) -> float:
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))


COUNT_CANDIDATES = """
SELECT count(DISTINCT p.memory_id) FROM unnest($2::text[]) AS q(term)
CROSS JOIN LATERAL (
    SELECT t.memory_id FROM memory_terms t WHERE t.namespace = $1 AND t.term = q.term
    ORDER BY t.impact DESC LIMIT $3
) p
"""


class PostgresBM25:
    """BM25 on PostgreSQL tables maintained by CaBrain (works on any PostgreSQL)."""

    name = "postgres-bm25"

    def __init__(self, *, k1: float = 1.2, b: float = 0.75, postings_per_term: int = 2000, dates: bool = True) -> None:
        self.k1, self.b, self.postings_per_term, self.dates = k1, b, postings_per_term, dates

    def indexed_text(self, doc: IndexedDoc) -> str:
        """What a memory is found by: its content, its context and (``dates``) the words of its date."""
        parts = [doc.content, doc.context, date_terms(doc.valid_at) if self.dates else ""]
        return "\n".join(p for p in parts if p)

    def _impact(self, tf: int, doc_len: int, avgdl: float) -> float:
        return tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * doc_len / avgdl))

    async def index(self, conn: asyncpg.Connection, docs: Sequence[IndexedDoc]) -> None:
        by_namespace: dict[str, list[tuple[IndexedDoc, Counter[str], int]]] = {}
        for doc in docs:
            tfs, length = term_frequencies(self.indexed_text(doc))
            if length:
                by_namespace.setdefault(doc.namespace, []).append((doc, tfs, length))
        for namespace, entries in sorted(by_namespace.items()):
            stats = await conn.fetchrow(UPSERT_STATS, namespace, len(entries), sum(length for _, _, length in entries))
            avgdl = max(stats["total_len"] / max(stats["doc_count"], 1), 1.0)
            df: Counter[str] = Counter()
            cols: list[list] = [[] for _ in range(7)]
            for doc, tfs, length in entries:
                df.update(tfs.keys())
                for term, tf in tfs.items():
                    for col, value in zip(
                        cols,
                        (
                            namespace,
                            term,
                            doc.memory_id,
                            doc.valid_at,
                            min(tf, 32767),
                            length,
                            self._impact(tf, length, avgdl),
                        ),
                        strict=True,
                    ):
                        col.append(value)
            terms = sorted(df)
            await conn.execute(UPSERT_DF, namespace, terms, [df[t] for t in terms])
            await conn.execute(INSERT_POSTINGS, *cols)

    async def _count(self, conn: asyncpg.Connection, known: list, filters: SearchFilters, budget: int) -> int:
        return await conn.fetchval(COUNT_CANDIDATES, filters.namespace, [r["term"] for r in known], budget)

    async def read_terms(
        self,
        conn: asyncpg.Connection,
        query: str,
        namespace: str,
        *,
        expansion: str = "",
        context: Sequence[tuple[str, float]] = (),
    ) -> QueryTerms:
        counts: dict[str, float] = dict(query_terms([query]))
        own = frozenset(counts)
        extra = frozenset(query_terms([expansion])) - own if expansion else frozenset()
        counts.update(dict.fromkeys(extra, 1.0))
        earlier: set[str] = set()
        for text, weight in context:  # the query's own words keep their weight; others take the largest
            for term, n in query_terms([text]).items():
                if term not in own:
                    counts[term] = max(counts.get(term, 0.0), n * weight)
                    earlier.add(term)
        extra |= earlier
        if not counts:
            return QueryTerms(query, namespace, [])
        terms = list(counts)
        rows = await conn.fetch(QUERY_TERMS, terms, [counts[t] for t in terms], namespace)
        return QueryTerms(query, namespace, list(rows), extra, frozenset(earlier))

    async def search(
        self,
        conn: asyncpg.Connection,
        query: str,
        filters: SearchFilters,
        limit: int,
        *,
        terms: QueryTerms | None = None,
    ) -> KeywordResult:
        if terms is None or (terms.query, terms.namespace) != (query, filters.namespace):
            terms = await self.read_terms(conn, query, filters.namespace)
        rows = terms.rows
        if not rows:
            return KeywordResult([], 0.0)
        n_docs = float(rows[0]["doc_count"] or 0)
        if n_docs == 0:
            return KeywordResult([], 0.0)
        avgdl = max(rows[0]["total_len"] / n_docs, 1.0)
        # Terms unknown to the namespace weigh as much as the rarest possible term.
        max_idf = idf(n_docs, 1)
        own = [r for r in rows if r["term"] not in terms.expansion]
        total_mass = sum(r["qtf"] * (idf(n_docs, r["df"]) if r["df"] else max_idf) for r in own)
        known = [r for r in rows if r["df"]]
        if not known:
            return KeywordResult([], 0.0)
        found_mass = sum(r["qtf"] * idf(n_docs, r["df"]) for r in own if r["df"])
        coverage = found_mass / total_mass if total_mass else 0.0
        # Score candidates first, then look up and filter only the best of them; read deeper when
        # scope and filters reject too many (or when a term had more postings than were read).
        budget, shortlist = self.postings_per_term, limit * 4
        while True:
            # Look the shortlist up row by row (LOOKUPS): the planner cannot know it is short.
            result = await fetch_without(
                conn,
                SEARCH.sql,
                SEARCH.args(
                    filters.params(),
                    limit=limit,
                    terms=[r["term"] for r in known],
                    qtfs=[r["qtf"] for r in known],
                    idfs=[idf(n_docs, r["df"]) for r in known],
                    k1=self.k1,
                    b=self.b,
                    avgdl=avgdl,
                    budget=budget,
                    shortlist=shortlist,
                ),
                disable=LOOKUPS,
                generic=True,
            )
            if len(result) >= limit:
                return KeywordResult(list(result), coverage)
            # Short: count the candidates (only now - counting every time costs a millisecond).
            candidates = await self._count(conn, known, filters, budget)
            if candidates > shortlist:
                shortlist *= 8
            elif any(r["df"] > budget for r in known) and budget < n_docs:
                budget *= 8
                shortlist = max(shortlist, limit * 4)
            else:
                return KeywordResult(list(result), coverage)
