-- Memory integrity (issue: distinct facts are never superseded, files never vanish, every judgment
-- is measured and reversible).
--
-- 1. Pinned memories: memory-tool files and memories flagged `important`. A pinned memory is never
--    demoted while it is current, and decays no lower than CABRAIN_SLEEP_DECAY_PINNED_FLOOR. Files
--    written before this migration are pinned now (flags given before it were not stored).
ALTER TABLE memories ADD COLUMN pinned boolean NOT NULL DEFAULT false;
UPDATE memories SET pinned = true WHERE source_kind = 'memory_file' AND invalid_at IS NULL;

-- 2. Judgments: every automatic supersession, invalidation and merge (on write, in dedup, in
--    reconsolidation), every correction, and every revert of one, with its reason, its inputs and
--    the exact state before and after of each memory it changed. A revert applies a judgment's
--    `before` states (only where the memories are still as it left them) and is recorded as a
--    judgment of its own, so a revert can be reverted too.
CREATE TABLE judgments (
    id          uuid PRIMARY KEY,
    namespace   text NOT NULL REFERENCES namespaces (name),
    kind        text NOT NULL CHECK (kind IN ('supersede', 'invalidate', 'merge', 'revert')),
    origin      text NOT NULL CHECK (origin IN ('write', 'correction', 'dedup', 'reconsolidate', 'revert')),
    agent_id    text REFERENCES agents (id),       -- who wrote or reverted; NULL for sleep
    run_id      uuid,                              -- the sleep run
    reason      text NOT NULL,
    inputs      jsonb NOT NULL DEFAULT '{}',       -- what the judgment was made on (texts, similarity, ...)
    changes     jsonb NOT NULL,                    -- [{memory_id, valid_at, before: {...}, after: {...}}]
    links       jsonb NOT NULL DEFAULT '[]',       -- memory_sources rows it added (or, reverted, removed)
    memory_ids  uuid[] NOT NULL,                   -- every memory it changed or is about (for lookups)
    reverts     uuid REFERENCES judgments (id),
    reverted_by uuid REFERENCES judgments (id),
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX judgments_memory ON judgments USING gin (memory_ids);
CREATE INDEX judgments_namespace ON judgments (namespace, created_at DESC);

-- 3. Archived memories come back. A demoted memory's identity keeps its source_kind (unknown for
--    those demoted before this migration: filled in from the cold tier the first time it is
--    looked for), so a pinned memory that left before pins existed (a memory-tool file) can be
--    found and brought back to the hot tier with its own id: re-inserting a cold id re-registers
--    it in memory_ids instead of failing.
ALTER TABLE memory_ids ADD COLUMN source_kind text;
CREATE INDEX memory_ids_cold ON memory_ids (namespace, source_kind) WHERE tier = 'cold';

CREATE OR REPLACE FUNCTION cabrain_register_memory() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO memory_ids (id, valid_at, namespace) VALUES (NEW.id, NEW.valid_at, NEW.namespace)
        ON CONFLICT (id) DO NOTHING;
        IF NOT FOUND THEN  -- only an archived memory coming back, with its own identity
            UPDATE memory_ids SET tier = 'hot', cold_batch = NULL, demoted_at = NULL
            WHERE id = NEW.id AND tier = 'cold' AND valid_at = NEW.valid_at AND namespace = NEW.namespace
              AND forgotten_at IS NULL;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'memory % exists already', NEW.id USING ERRCODE = 'unique_violation';
            END IF;
        END IF;
    ELSIF NEW.id IS DISTINCT FROM OLD.id
       OR NEW.valid_at IS DISTINCT FROM OLD.valid_at
       OR NEW.namespace IS DISTINCT FROM OLD.namespace THEN
        RAISE EXCEPTION 'a memory''s id, valid_at and namespace cannot change (memory %)', OLD.id
            USING ERRCODE = 'integrity_constraint_violation',
                  HINT = 'write a new version and supersede the old one instead';
    END IF;
    RETURN NEW;
END;
$$;

-- 4. Recall returns the summaries of the entities its hits mention: a new summary moves the
--    namespace's cache generation, as a changed memory does.
CREATE TRIGGER entities_cache AFTER UPDATE OF summary, summary_sources ON entities
    FOR EACH ROW WHEN (OLD.summary IS DISTINCT FROM NEW.summary OR OLD.summary_sources IS DISTINCT FROM NEW.summary_sources)
    EXECUTE FUNCTION cabrain_grant_touched();
