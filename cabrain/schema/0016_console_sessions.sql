-- Console sign-ins (issue 31, finding 10): the browser's cookie holds a random session id, never
-- the API key. Only the id's sha256 is kept; a session lasts until expires_at, its sign-out, or its
-- key's revocation (the row goes with the key; a revoked key or a disabled agent is also refused at
-- every lookup). Each sign-in makes a new one and ends the one the browser held.
CREATE TABLE console_sessions (
    id_hash     bytea PRIMARY KEY,                                   -- sha256(session id)
    key_id      uuid NOT NULL REFERENCES agent_keys (id) ON DELETE CASCADE,
    agent_id    text NOT NULL REFERENCES agents (id),
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL CHECK (expires_at > created_at)
);
CREATE INDEX console_sessions_key ON console_sessions (key_id);
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);
