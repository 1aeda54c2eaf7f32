-- CaBrain core data model (SPEC §3), on PostgreSQL >= 15 + pgvector >= 0.8.
--
-- Template variables (filled in by `cabrain migrate`, validated as integers):
--   {{embedding_dim}}  dimension of the configured embedding model, fixed when this file is applied.
--
-- memories is range-partitioned by valid_at (monthly, created by cabrain_ensure_memories_partition
-- below; no pg_partman) with a DEFAULT partition, so a write never fails for lack of a partition.
-- PostgreSQL makes a partitioned table's unique keys include the partition key, so the global
-- identity of a memory lives in memory_ids (id -> valid_at, namespace): it keeps ids unique across
-- partitions, is the target of every foreign key (superseded_by, memory_entities), and lets a
-- lookup by id find its partition. Rows are never deleted from it, not even on demotion.

CREATE EXTENSION IF NOT EXISTS vector;

-- Settings the schema was created with (embedding dimension and model).
CREATE TABLE cabrain_settings (
    key        text PRIMARY KEY,
    value      text NOT NULL,
    set_at     timestamptz NOT NULL DEFAULT now()
);

-- Agents: every call acts as one. API keys are stored as SHA-256 digests of 256-bit random keys.
CREATE TABLE agents (
    id           text PRIMARY KEY
                 CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$'),
    display_name text,
    is_admin     boolean NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now(),
    disabled_at  timestamptz,
    metadata     jsonb NOT NULL DEFAULT '{}'
);

CREATE TABLE agent_keys (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    agent_id     text NOT NULL REFERENCES agents (id),
    key_prefix   text NOT NULL,                 -- first characters, shown in listings
    key_hash     bytea NOT NULL UNIQUE,         -- sha256(key)
    label        text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX agent_keys_agent ON agent_keys (agent_id);

CREATE TABLE namespaces (
    name           text PRIMARY KEY
                   CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,199}$'),
    owner_agent_id text REFERENCES agents (id),
    created_at     timestamptz NOT NULL DEFAULT now(),
    metadata       jsonb NOT NULL DEFAULT '{}'
);

-- Namespace access grants (the claim/share model).
CREATE TABLE namespace_grants (
    agent_id   text NOT NULL REFERENCES agents (id),
    namespace  text NOT NULL REFERENCES namespaces (name),
    can_read   boolean NOT NULL DEFAULT true,
    can_write  boolean NOT NULL DEFAULT true,
    granted_by text REFERENCES agents (id),
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, namespace)
);
CREATE INDEX namespace_grants_namespace ON namespace_grants (namespace);

-- Global identity of every memory ever written (hot or demoted).
CREATE TABLE memory_ids (
    id        uuid PRIMARY KEY,
    valid_at  timestamptz NOT NULL,
    namespace text NOT NULL REFERENCES namespaces (name)
);

CREATE TABLE memories (
    id               uuid NOT NULL DEFAULT gen_random_uuid(),

    -- scoping (F5): every read and write is filtered by these
    namespace        text NOT NULL REFERENCES namespaces (name),
    owner_agent_id   text REFERENCES agents (id),
    visibility       text NOT NULL DEFAULT 'private'
                     CHECK (visibility IN ('private', 'team', 'global')),

    -- brain-map classification
    network          text NOT NULL DEFAULT 'experience'
                     CHECK (network IN ('fact', 'experience', 'observation', 'belief')),
    memory_type      text NOT NULL DEFAULT 'episodic'
                     CHECK (memory_type IN ('episodic', 'semantic', 'procedural', 'working')),
    content          text NOT NULL CHECK (content <> ''),
    source_kind      text,                      -- claude_code | coder_run | whatsapp | chat | manual ...
    source_ref       text,                      -- session / thread / run id (provenance)

    -- retrieval
    embedding        vector({{embedding_dim}}),

    -- amygdala (salience)
    importance       real NOT NULL DEFAULT 0.5 CHECK (importance >= 0 AND importance <= 1),
    access_count     integer NOT NULL DEFAULT 0 CHECK (access_count >= 0),
    last_accessed_at timestamptz,

    -- temporal / reconsolidation (never hard-delete)
    created_at       timestamptz NOT NULL DEFAULT now(),   -- when CaBrain stored it
    valid_at         timestamptz NOT NULL DEFAULT now(),   -- when it became true (partition key)
    invalid_at       timestamptz,                          -- set on forget / reconsolidation
    superseded_by    uuid REFERENCES memory_ids (id),      -- the replacement, when reconsolidated

    -- tiering
    tier             text NOT NULL DEFAULT 'hot' CHECK (tier IN ('hot', 'cold')),

    metadata         jsonb NOT NULL DEFAULT '{}',

    PRIMARY KEY (id, valid_at),
    FOREIGN KEY (id) REFERENCES memory_ids (id),
    CHECK (superseded_by IS NULL OR superseded_by <> id)
) PARTITION BY RANGE (valid_at);

CREATE TABLE memories_default PARTITION OF memories DEFAULT;

-- Hybrid retrieval and scoping indexes (created on every partition).
CREATE INDEX memories_vec ON memories USING hnsw (embedding vector_cosine_ops);
CREATE INDEX memories_ns ON memories (namespace, tier) WHERE invalid_at IS NULL;
CREATE INDEX memories_sal ON memories (importance DESC, last_accessed_at);
CREATE INDEX memories_superseded ON memories (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE INDEX memories_source ON memories (namespace, source_kind, source_ref);

-- Register every new memory in memory_ids (before the row itself, which references it), and keep
-- a memory's identity immutable: a correction is a new version, never an edit of id/time/namespace.
CREATE FUNCTION cabrain_register_memory() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO memory_ids (id, valid_at, namespace) VALUES (NEW.id, NEW.valid_at, NEW.namespace);
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

CREATE TRIGGER memories_register
    BEFORE INSERT OR UPDATE OF id, valid_at, namespace ON memories
    FOR EACH ROW EXECUTE FUNCTION cabrain_register_memory();

-- Create (idempotently) the monthly partition holding month_start, moving any rows of that month
-- out of the default partition first. SECURITY DEFINER so the cabrain_sleep role can call it.
CREATE FUNCTION cabrain_ensure_memories_partition(month_start date) RETURNS text
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
    EXECUTE format('CREATE TABLE public.%I (LIKE public.memories INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part);
    EXECUTE format('INSERT INTO public.%I SELECT * FROM public.memories_default WHERE valid_at >= $1 AND valid_at < $2', part)
        USING lo, hi;
    DELETE FROM public.memories_default WHERE valid_at >= lo AND valid_at < hi;
    EXECUTE format('ALTER TABLE public.memories ATTACH PARTITION public.%I FOR VALUES FROM (%L) TO (%L)', part, lo, hi);
    RETURN part;
END;
$$;

CREATE TABLE entities (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    namespace  text NOT NULL REFERENCES namespaces (name),
    name       text NOT NULL CHECK (name <> ''),
    kind       text,                              -- person | project | tool | place | concept ...
    summary    text,                              -- the consolidated "what we know about X"
    embedding  vector({{embedding_dim}}),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    metadata   jsonb NOT NULL DEFAULT '{}',
    UNIQUE (namespace, name)
);
CREATE INDEX entities_vec ON entities USING hnsw (embedding vector_cosine_ops);

CREATE TABLE memory_entities (
    memory_id uuid NOT NULL REFERENCES memory_ids (id),
    entity_id uuid NOT NULL REFERENCES entities (id),
    PRIMARY KEY (memory_id, entity_id)
);
CREATE INDEX memory_entities_entity ON memory_entities (entity_id);

-- Append-only telemetry: retain | recall | reflect | forget | reconsolidate | demote | ...
CREATE TABLE memory_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ts         timestamptz NOT NULL DEFAULT now(),
    namespace  text,
    op         text NOT NULL CHECK (op <> ''),
    memory_id  uuid,
    agent_id   text,
    latency_ms integer,
    metadata   jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX memory_events_ns_ts ON memory_events (namespace, ts);
CREATE INDEX memory_events_memory ON memory_events (memory_id) WHERE memory_id IS NOT NULL;
