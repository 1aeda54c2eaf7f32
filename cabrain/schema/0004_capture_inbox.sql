-- Capture inbox: Claude Code hook events handed to the service, stored durably in one INSERT so the
-- hook returns at once; ingress replicas retain them in the background (FOR UPDATE SKIP LOCKED, so
-- any number of replicas share the work). Rows are marked processed, never the memories' only copy.
CREATE TABLE capture_inbox (
    id           bigserial PRIMARY KEY,
    agent_id     text NOT NULL REFERENCES agents (id),
    namespace    text NOT NULL REFERENCES namespaces (name),
    items        jsonb NOT NULL,                -- MemoryInput JSON forms, already redacted by the hook
    decide       boolean NOT NULL DEFAULT true, -- compare with neighbours (false: episodic logs, stored as they are)
    created_at   timestamptz NOT NULL DEFAULT now(),
    claimed_at   timestamptz,
    attempts     integer NOT NULL DEFAULT 0,
    processed_at timestamptz,
    last_error   text
);
CREATE INDEX capture_inbox_pending ON capture_inbox (id) WHERE processed_at IS NULL;
