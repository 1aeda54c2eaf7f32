-- Connectors (issue 21): each pulls one source (a GitLab project, a WebDAV folder, a Drive folder,
-- a Vikunja instance, a local folder, a chat export) into one namespace, writing as the agent that
-- added it. A connector's config holds no secret: it names the environment variable the sync reads
-- the credential from. Removing a connector keeps its row and every memory it wrote.
CREATE TABLE connectors (
    id            uuid PRIMARY KEY,
    name          text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    kind          text NOT NULL,
    namespace     text NOT NULL REFERENCES namespaces (name),
    visibility    text NOT NULL CHECK (visibility IN ('private', 'team', 'global')),
    agent_id      text NOT NULL REFERENCES agents (id),
    config        jsonb NOT NULL DEFAULT '{}',
    every_s       integer CHECK (every_s IS NULL OR every_s >= 60),  -- on a schedule; NULL: on demand
    status        text NOT NULL DEFAULT 'new' CHECK (status IN ('new', 'ok', 'failed', 'stopped')),
    last_error    text,
    cursor        jsonb NOT NULL DEFAULT '{}',  -- the last complete scan: when, how many items, the run
    last_sync_at  timestamptz,
    next_sync_at  timestamptz,
    created_at    timestamptz NOT NULL,
    removed_at    timestamptz
);
CREATE UNIQUE INDEX connectors_name ON connectors (name) WHERE removed_at IS NULL;
CREATE INDEX connectors_due ON connectors (next_sync_at) WHERE removed_at IS NULL AND every_s IS NOT NULL;

-- One row per item a connector has seen: the version indexed, and which memory holds which part
-- (parts: [{anchor, hash, memory_id, own}], own = the memory was written for this part, rather than
-- an existing memory the write judged a duplicate of it). An item fetched and converted but not yet
-- indexed is 'staged' with its parts' redacted text, so an interrupted sync resumes without fetching
-- it again; an item gone from the source is 'deleted' (its memories forgotten, never erased).
CREATE TABLE connector_items (
    connector_id  uuid NOT NULL REFERENCES connectors (id),
    key           text NOT NULL,
    version       text,                    -- indexed version (NULL until the first is indexed)
    url           text NOT NULL,
    stage         text NOT NULL CHECK (stage IN ('staged', 'indexed', 'deleted')),
    parts         jsonb NOT NULL DEFAULT '[]',
    staged        jsonb,                   -- {version, title, parts: [{anchor, text, ...}]} awaiting indexing
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (connector_id, key)
);
CREATE INDEX connector_items_staged ON connector_items (connector_id, key) WHERE stage = 'staged';

CREATE TABLE connector_runs (
    id            uuid PRIMARY KEY,
    connector_id  uuid NOT NULL REFERENCES connectors (id),
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz,
    status        text NOT NULL CHECK (status IN ('running', 'done', 'failed', 'interrupted')),
    host          text,
    counts        jsonb NOT NULL DEFAULT '{}',
    error         text
);
CREATE INDEX connector_runs_connector ON connector_runs (connector_id, started_at DESC);
