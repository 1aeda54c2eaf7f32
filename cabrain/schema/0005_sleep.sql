-- The sleep cycle (issue: sleep jobs, the Iceberg cold tier, archive recall).
--
-- Sleep steps run offline as Ray tasks, as the cabrain_sleep role where it exists. Everything they
-- change is recorded: distilled and merged memories link to their sources (memory_sources), a
-- demoted memory's identity stays in memory_ids with the batch that carried it to the cold tier
-- (cold_batches), and every run keeps its plan, its steps and its report (sleep_runs, sleep_steps).

-- Where a memory lives. Hot rows are in memories; a demoted memory's row has left memories after
-- its data was committed to the Iceberg table and verified there. Owner and visibility are kept
-- here so a demoted id is still answered with the same scoping as a hot one.
ALTER TABLE memory_ids ADD COLUMN tier text NOT NULL DEFAULT 'hot' CHECK (tier IN ('hot', 'cold'));
ALTER TABLE memory_ids ADD COLUMN cold_batch uuid;
ALTER TABLE memory_ids ADD COLUMN demoted_at timestamptz;
ALTER TABLE memory_ids ADD COLUMN owner_agent_id text;
ALTER TABLE memory_ids ADD COLUMN visibility text;

-- Episodes already distilled by a sleep run, and the last time a row's importance decayed (decay
-- is computed from that moment, so a re-run right after a crash changes nothing).
ALTER TABLE memories ADD COLUMN consolidated_at timestamptz;
ALTER TABLE memories ADD COLUMN decayed_at timestamptz;
CREATE INDEX memories_unconsolidated ON memories (namespace, created_at)
    WHERE consolidated_at IS NULL AND invalid_at IS NULL AND memory_type = 'episodic';

-- Evidence never blurs into inference: a distilled fact links to the episodes it came from, a
-- dedup survivor to the duplicates merged into it, an entity summary to the memories it draws on.
CREATE TABLE memory_sources (
    memory_id  uuid NOT NULL REFERENCES memory_ids (id),
    source_id  uuid NOT NULL REFERENCES memory_ids (id),
    relation   text NOT NULL CHECK (relation IN ('distilled_from', 'merged')),
    run_id     uuid,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (memory_id, source_id, relation),
    CHECK (memory_id <> source_id)
);
CREATE INDEX memory_sources_source ON memory_sources (source_id);

ALTER TABLE entities ADD COLUMN summary_sources uuid[] NOT NULL DEFAULT '{}';
ALTER TABLE entities ADD COLUMN summarized_at timestamptz;

-- The demotion ledger. A batch is planned (its ids fixed), written (committed to Iceberg in one
-- snapshot tagged with the batch id, and verified there), then done (the hot rows removed and
-- memory_ids marked cold, in one transaction). Re-running a batch in any state finishes it
-- without writing its rows twice.
CREATE TABLE cold_batches (
    id          uuid PRIMARY KEY,
    namespace   text NOT NULL REFERENCES namespaces (name),
    month       text NOT NULL,                 -- the memories partition, YYYY-MM
    run_id      uuid,
    state       text NOT NULL CHECK (state IN ('planned', 'written', 'done')),
    memory_ids  uuid[] NOT NULL,
    row_count   integer NOT NULL CHECK (row_count > 0),
    snapshot_id bigint,
    created_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);
CREATE INDEX cold_batches_open ON cold_batches (namespace, month) WHERE state <> 'done';

CREATE TABLE sleep_runs (
    id          uuid PRIMARY KEY,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    status      text NOT NULL CHECK (status IN ('running', 'done', 'partial', 'failed')),
    host        text,
    steps       text[] NOT NULL,
    namespaces  text[] NOT NULL DEFAULT '{}',
    report      jsonb NOT NULL DEFAULT '{}'
);

CREATE TABLE sleep_steps (
    run_id      uuid NOT NULL REFERENCES sleep_runs (id),
    step        text NOT NULL,
    namespace   text NOT NULL,                 -- '' for steps over the whole database (maintain)
    month       text NOT NULL DEFAULT '',      -- '' for steps over a whole namespace
    status      text NOT NULL CHECK (status IN ('running', 'done', 'failed')),
    counts      jsonb NOT NULL DEFAULT '{}',
    changes     jsonb NOT NULL DEFAULT '[]',   -- what changed (ids and reasons), capped per step
    node_id     text,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    error       text,
    PRIMARY KEY (run_id, step, namespace, month)
);

-- Per namespace and step: everything created before `upto` has been through the step (dedup
-- compares only newer memories with the rest).
CREATE TABLE sleep_watermarks (
    namespace text NOT NULL REFERENCES namespaces (name),
    step      text NOT NULL,
    upto      timestamptz NOT NULL,
    PRIMARY KEY (namespace, step)
);

-- Maintenance the sleep role may run on tables it does not own: ANALYZE, and REINDEX of one
-- partition of memories (or memory_chunks), nothing else. SECURITY DEFINER with a fixed search path.
CREATE FUNCTION cabrain_maintain(relation text, action text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF NOT (relation IN ('memories', 'memory_chunks', 'memory_terms', 'bm25_terms', 'entities', 'memory_ids')
            OR EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                       WHERE i.inhparent = 'public.memories'::regclass AND c.relname = relation)) THEN
        RAISE EXCEPTION 'cabrain_maintain: % is not a CaBrain table', relation
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF action = 'analyze' THEN
        EXECUTE format('ANALYZE public.%I', relation);
    ELSIF action = 'reindex' THEN
        EXECUTE format('REINDEX TABLE public.%I', relation);
    ELSE
        RAISE EXCEPTION 'cabrain_maintain: unknown action %', action USING ERRCODE = 'invalid_parameter_value';
    END IF;
END;
$$;
REVOKE EXECUTE ON FUNCTION cabrain_maintain(text, text) FROM PUBLIC;
