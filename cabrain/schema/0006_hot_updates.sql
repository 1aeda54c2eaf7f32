-- Updates that leave the indexes alone (issue: sleep jobs). Decay lowers importance on most rows
-- every night, and recall bookkeeping bumps access counts and importance all day. Such an update
-- can be a HOT update - a new row version on the same page, no new index entries (above all none
-- in the HNSW graph) - only when no indexed column changes and the page has room.
--
-- 1. memories_sal indexed importance across every namespace; no query reads it (recall orders a
--    namespace's few candidates itself), and it made every importance change rewrite every index.
DROP INDEX IF EXISTS memories_sal;

-- 2. Monthly partitions keep 15% of each page free for those new row versions: existing partitions
--    (their new pages), the default partition, and every partition created from now on.
DO $$
DECLARE
    part text;
BEGIN
    FOR part IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'public.memories'::regclass LOOP
        EXECUTE format('ALTER TABLE public.%I SET (fillfactor = 85)', part);
    END LOOP;
END;
$$;

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
    RETURN part;
END;
$$;
