-- Retrieval support: exact-duplicate detection and the BM25 keyword index (issue: retain/recall).
--
-- BM25 is computed by CaBrain's own Arabic/English tokenizer (cabrain/search/tokenizer.py) over an
-- inverted index kept in PostgreSQL, so it runs on any PostgreSQL >= 15 (no extension needed):
--
--   score(D, Q) = sum over terms t of Q:  idf(t) * tf(t,D) * (k1 + 1) / (tf(t,D) + k1 * (1 - b + b * |D| / avgdl))
--   idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
--
-- per namespace (N documents, avgdl mean length in tokens). memory_terms holds one posting per
-- (memory, term) with its term frequency and the document length; `impact` is the posting's BM25
-- tf part at write time, which orders each term's postings so a query reads the strongest ones
-- first (the final score is recomputed exactly with the current avgdl).

-- Entities are matched on a normalised key (cabrain.search.tokenizer.normalize: case, Arabic
-- letter variants and diacritics folded), so "Redis", "redis" and "ريديس"/"رِيدِيس" each meet their kin.
ALTER TABLE entities ADD COLUMN key text;
UPDATE entities SET key = lower(name);
ALTER TABLE entities ALTER COLUMN key SET NOT NULL;
CREATE UNIQUE INDEX entities_key ON entities (namespace, key);

-- Memories ever stored per namespace (kept by every insert; recall uses it to choose between an
-- exact scan and the HNSW index).
ALTER TABLE namespaces ADD COLUMN memory_count bigint NOT NULL DEFAULT 0;

ALTER TABLE memories ADD COLUMN content_hash bytea;   -- sha256 of the content, for exact duplicates
CREATE INDEX memories_content_hash ON memories (namespace, content_hash);

CREATE TABLE memory_terms (
    namespace text NOT NULL,
    term      text NOT NULL,
    memory_id uuid NOT NULL REFERENCES memory_ids (id),
    valid_at  timestamptz NOT NULL,
    tf        smallint NOT NULL CHECK (tf > 0),
    doc_len   integer NOT NULL CHECK (doc_len > 0),
    impact    real NOT NULL,
    PRIMARY KEY (memory_id, term)
);
CREATE INDEX memory_terms_lookup ON memory_terms (namespace, term, impact DESC)
    INCLUDE (memory_id, valid_at, tf, doc_len);

-- Document frequency per term and namespace (updated in the retain transaction, terms in sorted
-- order so concurrent writers never deadlock).
CREATE TABLE bm25_terms (
    namespace text NOT NULL,
    term      text NOT NULL,
    df        integer NOT NULL CHECK (df >= 0),
    PRIMARY KEY (namespace, term)
);

CREATE TABLE bm25_namespaces (
    namespace text PRIMARY KEY REFERENCES namespaces (name),
    doc_count bigint NOT NULL DEFAULT 0,
    total_len bigint NOT NULL DEFAULT 0
);
