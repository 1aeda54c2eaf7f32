-- Archive recall's vector index over the cold tier (issue 37; cabrain.store.cold_index).
--
-- Per namespace, the centroids of a k-means over its cold rows' embeddings. The `maintain` sleep step
-- builds them and writes the namespace's cold rows again, each with its nearest centroid (`cluster`)
-- and sorted by it, into the Iceberg table cabrain.memory_index; archive recall then reads only the
-- row groups of the clusters nearest the query. snapshot_id is the snapshot of cabrain.memories the
-- copy was made from and files the namespace's data files in it: rows in files not among them (rows
-- demoted since, files a purge rewrote) are always read from cabrain.memories as well, so a row is
-- never missed however old the index is.
CREATE TABLE cold_indexes (
    namespace    text PRIMARY KEY REFERENCES namespaces (name),
    snapshot_id  bigint NOT NULL,
    dim          integer NOT NULL CHECK (dim > 0),
    clusters     integer NOT NULL CHECK (clusters > 0),
    centroids    bytea NOT NULL,       -- clusters x dim little-endian float32, each of unit length
    files        text[] NOT NULL,
    indexed_rows bigint NOT NULL,
    built_at     timestamptz NOT NULL
);

-- A hybrid archive query's words pick clusters too: each word of the namespace's indexed rows (as the
-- cold tier tokenized them), in how many rows it occurs (df) and in which clusters. Archive recall reads
-- the clusters that hold the query's rarest words besides those nearest its vector; the rows read are
-- ranked as the scan ranks them. Made and dropped with the namespace's index.
CREATE TABLE cold_index_terms (
    namespace text NOT NULL REFERENCES cold_indexes (namespace) ON DELETE CASCADE,
    term      text NOT NULL,
    df        integer NOT NULL CHECK (df > 0),
    clusters  integer[] NOT NULL,
    PRIMARY KEY (namespace, term)
);
