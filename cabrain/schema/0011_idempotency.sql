-- Idempotent writes: every retain carries a key (the client's Idempotency-Key, or one the service
-- makes for the request before its first attempt). The answer is stored in the same transaction as
-- the memories it wrote, so a retry after a dropped connection - whether the first attempt
-- committed or not - either finds the stored answer and writes nothing, or writes once.
CREATE TABLE retain_requests (
    agent_id   text        NOT NULL,
    key        text        NOT NULL CHECK (length(key) BETWEEN 1 AND 200),
    request    bytea       NOT NULL,  -- sha256 of what was asked: the same key for another request is refused
    results    jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, key)
);
CREATE INDEX retain_requests_created ON retain_requests (created_at);
