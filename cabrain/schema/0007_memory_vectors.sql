-- One HNSW graph for the hot tier's vectors (issue: performance at scale).
--
-- Each monthly partition of memories had its own HNSW index, so every vector search walked 14 or
-- more graphs and merged them. At a million memories that walk was most of a recall and of every
-- write's neighbour search; one graph over the same vectors answers the same probe several times
-- faster (docs/BENCHMARKS.md). The vectors live in memory_vectors, kept in step with memories by a
-- trigger; searches walk its index and join back to memories for scoping and filters.

CREATE TABLE memory_vectors (
    id        uuid PRIMARY KEY REFERENCES memory_ids (id),
    namespace text NOT NULL,
    valid_at  timestamptz NOT NULL,
    embedding vector({{embedding_dim}}) NOT NULL
);

INSERT INTO memory_vectors (id, namespace, valid_at, embedding)
SELECT id, namespace, valid_at, embedding FROM memories WHERE embedding IS NOT NULL;

CREATE INDEX memory_vectors_hnsw ON memory_vectors USING hnsw (embedding vector_cosine_ops);
DROP INDEX IF EXISTS memories_vec;

-- A row's vector follows the row: written with it, replaced with its embedding, gone with it.
CREATE FUNCTION cabrain_sync_memory_vector() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT 1 FROM public.memories m WHERE m.id = OLD.id) THEN
            DELETE FROM public.memory_vectors WHERE id = OLD.id;
        END IF;
        RETURN OLD;
    END IF;
    IF NEW.embedding IS NULL THEN
        DELETE FROM public.memory_vectors WHERE id = NEW.id;
    ELSE
        INSERT INTO public.memory_vectors (id, namespace, valid_at, embedding)
        VALUES (NEW.id, NEW.namespace, NEW.valid_at, NEW.embedding)
        ON CONFLICT (id) DO UPDATE SET embedding = EXCLUDED.embedding
        WHERE memory_vectors.embedding IS DISTINCT FROM EXCLUDED.embedding;
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER memories_vector
    AFTER INSERT OR DELETE OR UPDATE OF embedding ON memories
    FOR EACH ROW EXECUTE FUNCTION cabrain_sync_memory_vector();

-- Rows moved out of the default partition into a new month pass through a table not yet attached
-- (no trigger sees them arrive, the delete trigger sees them leave): their vectors are put back
-- once the month is attached. Same function as in 0006 otherwise.
CREATE OR REPLACE FUNCTION cabrain_ensure_memories_partition(month_start date) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    lo     timestamptz := (date_trunc('month', month_start)::timestamp AT TIME ZONE 'UTC');
    hi     timestamptz := ((date_trunc('month', month_start) + interval '1 month')::timestamp AT TIME ZONE 'UTC');
    part   text := 'memories_p' || to_char(date_trunc('month', month_start), 'YYYYMM');
BEGIN
    IF EXISTS (SELECT 1 FROM pg_inherits i
               JOIN pg_class c ON c.oid = i.inhrelid
               WHERE i.inhparent = 'public.memories'::regclass AND c.relname = part) THEN
        RETURN part;
    END IF;
    -- Serialise with concurrent writers to the default partition while rows move.
    LOCK TABLE public.memories_default IN ACCESS EXCLUSIVE MODE;
    EXECUTE format('CREATE TABLE public.%I (LIKE public.memories INCLUDING DEFAULTS INCLUDING CONSTRAINTS) '
                   'WITH (fillfactor = 85)', part);
    EXECUTE format('INSERT INTO public.%I SELECT * FROM public.memories_default WHERE valid_at >= $1 AND valid_at < $2', part)
        USING lo, hi;
    DELETE FROM public.memories_default WHERE valid_at >= lo AND valid_at < hi;
    EXECUTE format('ALTER TABLE public.memories ATTACH PARTITION public.%I FOR VALUES FROM (%L) TO (%L)', part, lo, hi);
    EXECUTE format('INSERT INTO public.memory_vectors (id, namespace, valid_at, embedding) '
                   'SELECT id, namespace, valid_at, embedding FROM public.%I WHERE embedding IS NOT NULL '
                   'ON CONFLICT (id) DO NOTHING', part);
    RETURN part;
END;
$$;
