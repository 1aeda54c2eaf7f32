-- Passage vectors for long memories (issue: retain/recall).
--
-- A memory longer than CABRAIN_CHUNK_MIN_CHARS is also embedded passage by passage (runs of whole
-- sentences of about CABRAIN_CHUNK_CHARS characters). A question usually targets one passage of a
-- long text, and its vector matches that passage better than the whole; recall scores a memory
-- by its own vector plus its best passage (cabrain/search/vector.py).

CREATE TABLE memory_chunks (
    memory_id uuid NOT NULL REFERENCES memory_ids (id),
    chunk_no  smallint NOT NULL CHECK (chunk_no >= 0),
    namespace text NOT NULL,
    valid_at  timestamptz NOT NULL,
    content   text NOT NULL,
    embedding vector({{embedding_dim}}) NOT NULL,
    PRIMARY KEY (memory_id, chunk_no)
);
CREATE INDEX memory_chunks_vec ON memory_chunks USING hnsw (embedding vector_cosine_ops);
CREATE INDEX memory_chunks_ns ON memory_chunks (namespace);

-- Passages ever stored per namespace (recall's exact-or-HNSW choice, as for memories).
ALTER TABLE namespaces ADD COLUMN chunk_count bigint NOT NULL DEFAULT 0;
