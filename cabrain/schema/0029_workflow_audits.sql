-- Live accuracy of trusted local chains, and their demotion (issue 38; cabrain/workflows/audit.py);
-- chains held to their kind's shape.
--
-- A sampled share of the tasks a trusted local chain answered is sent to the frontier model offline;
-- the local answer is scored against the frontier's, and the score kept here as that chain's live score.
-- A chain whose recent live scores fall below the routing threshold is demoted in its kind of task: the
-- cluster no longer counts it when it picks its best chain. A demotion is a judgment (kind
-- workflow_demote, origin workflow_audit) that a writer of the namespace may revert.
CREATE TABLE workflow_audits (
    task_id         uuid PRIMARY KEY REFERENCES workflow_tasks (id),
    cluster_id      bigint REFERENCES task_clusters (id),
    chain_key       text NOT NULL,
    frontier_run_id uuid REFERENCES frontier_runs (id),  -- the frontier's answer; NULL: it failed (error)
    score           real,
    score_parts     jsonb NOT NULL DEFAULT '{}',
    complete        boolean NOT NULL DEFAULT false,
    error           text,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workflow_audits_chain ON workflow_audits (cluster_id, chain_key, created_at DESC);
-- the locally answered tasks, as the audit looks for those not audited yet
CREATE INDEX workflow_tasks_local ON workflow_tasks (created_at) WHERE route = 'local' AND status = 'done';

-- The chains demoted in a kind of task (their keys), each by a workflow_demote judgment not reverted;
-- and of its best chain, beside its accuracy: its mean time an answer and the mean structural part of
-- its scores (why a kind stays on the frontier: its accuracy, its answers' form, or its latency).
ALTER TABLE task_clusters
    ADD COLUMN demoted text[] NOT NULL DEFAULT '{}',
    ADD COLUMN latency_ms real,
    ADD COLUMN structure real;

-- The decisions on a chain (a demotion, its revert, the revert of that): a new window of live scores
-- starts after each.
CREATE INDEX judgments_workflow ON judgments ((inputs -> 'workflow' ->> 'cluster'), (inputs -> 'workflow' ->> 'chain'),
                                              created_at DESC)
    WHERE inputs ? 'workflow';

-- The audit's frontier calls are recorded as such.
ALTER TABLE llm_calls DROP CONSTRAINT llm_calls_purpose_check;
ALTER TABLE llm_calls ADD CONSTRAINT llm_calls_purpose_check
    CHECK (purpose IN ('frontier', 'local', 'learn', 'judge', 'audit'));

-- Judgments of the new kind and origin; the lists are extended, not rewritten (as 0023 does).
DO $$
DECLARE
    def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'judgments'::regclass AND conname = 'judgments_kind_check';
    ALTER TABLE judgments DROP CONSTRAINT judgments_kind_check;
    EXECUTE 'ALTER TABLE judgments ADD CONSTRAINT judgments_kind_check '
        || replace(def, 'ARRAY[', 'ARRAY[''workflow_demote''::text, ');
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'judgments'::regclass AND conname = 'judgments_origin_check';
    ALTER TABLE judgments DROP CONSTRAINT judgments_origin_check;
    EXECUTE 'ALTER TABLE judgments ADD CONSTRAINT judgments_origin_check '
        || replace(def, 'ARRAY[', 'ARRAY[''workflow_audit''::text, ');
END;
$$;

-- A chain held to the kind's shape (constrained decoding: a JSON Schema from its references).
ALTER TABLE chain_attempts DROP CONSTRAINT chain_attempts_chain_kind_check;
ALTER TABLE chain_attempts ADD CONSTRAINT chain_attempts_chain_kind_check
    CHECK (chain_kind IN ('single', 'constrained', 'strict', 'enhanced', 'self_check', 'decompose', 'plan_verify'));
