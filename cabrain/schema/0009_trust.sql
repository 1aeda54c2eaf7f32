-- Trust (issue: close the host, stop one agent from planting memories in another, recover from
-- every fault by itself).
--
-- 1. Personal namespaces. A name that starts with '@<agent>/' belongs to that agent: nobody else
--    can create it first. Capture binds the names it derives from a project (its git remote) to the
--    capturing agent this way, so another agent cannot squat a project's name and wait for the
--    victim's hooks to write into it and read from it.
ALTER TABLE namespaces DROP CONSTRAINT namespaces_name_check;
ALTER TABLE namespaces ADD CONSTRAINT namespaces_name_check
    CHECK (name ~ '^(@[A-Za-z0-9][A-Za-z0-9._@-]{0,127}/)?[A-Za-z0-9][A-Za-z0-9._:/@-]*$' AND length(name) <= 200);
ALTER TABLE namespaces ADD CONSTRAINT namespaces_personal_owner
    CHECK (left(name, 1) <> '@' OR split_part(substr(name, 2), '/', 1) = owner_agent_id);

-- 2. Consent. A grant is an offer until its grantee accepts it: before that it gives read access
--    (reading is the grantee's own choice) but no write access, and capture never injects memories
--    from it. Grants made before this migration wait for acceptance like new ones.
ALTER TABLE namespace_grants ADD COLUMN accepted_at timestamptz;

-- 3. The L1 cache's validity lives here, not in Redis. Every change that can alter a recall or a
--    get of a namespace moves that namespace's generation to a fresh value of one sequence (so a
--    value never comes back, whatever Redis restores), and agent changes move the global epoch.
--    Cache keys carry both; a cached answer is only read back under the generation it was computed
--    after. (A table of its own: a trigger may not update a row its own statement updates too, as a
--    retain's statement does with the namespace's counters.)
CREATE SEQUENCE cabrain_cache_gen;
CREATE TABLE cache_generations (
    namespace text PRIMARY KEY REFERENCES namespaces (name),
    gen       bigint NOT NULL
);
INSERT INTO cache_generations (namespace, gen) SELECT name, nextval('cabrain_cache_gen') FROM namespaces;

CREATE TABLE cache_epoch (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    gen      bigint NOT NULL DEFAULT nextval('cabrain_cache_gen')
);
INSERT INTO cache_epoch DEFAULT VALUES;

-- Move a namespace's generation once per transaction (later changes in the same transaction commit
-- with it). SECURITY DEFINER: the sleep role changes memories but may not write this table itself.
CREATE FUNCTION cabrain_touch_namespace(ns text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    mark text := 'cabrain.touched_' || md5(ns);
BEGIN
    IF current_setting(mark, true) IS DISTINCT FROM txid_current()::text THEN
        INSERT INTO public.cache_generations (namespace, gen) VALUES (ns, nextval('public.cabrain_cache_gen'))
        ON CONFLICT (namespace) DO UPDATE SET gen = EXCLUDED.gen;
        PERFORM set_config(mark, txid_current()::text, true);
    END IF;
END;
$$;

CREATE FUNCTION cabrain_touch_epoch() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    UPDATE public.cache_epoch SET gen = nextval('public.cabrain_cache_gen');
    RETURN NULL;
END;
$$;

CREATE FUNCTION cabrain_memory_touched() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM public.cabrain_touch_namespace(OLD.namespace);
        RETURN OLD;
    END IF;
    PERFORM public.cabrain_touch_namespace(NEW.namespace);
    RETURN NEW;
END;
$$;

-- Row triggers BEFORE the change (no after-trigger queue for bulk writes); cloned to every partition.
-- Updates that only move bookkeeping (access counts, decay and consolidation marks) leave the cache
-- alone: they change no answer's content, ranking or scope.
CREATE TRIGGER memories_cache_insert BEFORE INSERT ON memories
    FOR EACH ROW EXECUTE FUNCTION cabrain_memory_touched();
CREATE TRIGGER memories_cache_delete BEFORE DELETE ON memories
    FOR EACH ROW EXECUTE FUNCTION cabrain_memory_touched();
CREATE TRIGGER memories_cache_update
    BEFORE UPDATE OF content, visibility, owner_agent_id, invalid_at, superseded_by, network, memory_type,
                     source_kind, source_ref, metadata, tier, importance ON memories
    FOR EACH ROW
    WHEN (OLD.content IS DISTINCT FROM NEW.content OR OLD.visibility IS DISTINCT FROM NEW.visibility
          OR OLD.owner_agent_id IS DISTINCT FROM NEW.owner_agent_id OR OLD.invalid_at IS DISTINCT FROM NEW.invalid_at
          OR OLD.superseded_by IS DISTINCT FROM NEW.superseded_by OR OLD.network IS DISTINCT FROM NEW.network
          OR OLD.memory_type IS DISTINCT FROM NEW.memory_type OR OLD.source_kind IS DISTINCT FROM NEW.source_kind
          OR OLD.source_ref IS DISTINCT FROM NEW.source_ref OR OLD.metadata IS DISTINCT FROM NEW.metadata
          OR OLD.tier IS DISTINCT FROM NEW.tier OR OLD.importance IS DISTINCT FROM NEW.importance)
    EXECUTE FUNCTION cabrain_memory_touched();

-- Who may read a namespace, and what a demoted id answers with.
CREATE FUNCTION cabrain_grant_touched() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    PERFORM public.cabrain_touch_namespace(CASE WHEN TG_OP = 'DELETE' THEN OLD.namespace ELSE NEW.namespace END);
    RETURN NULL;
END;
$$;
CREATE TRIGGER namespace_grants_cache AFTER INSERT OR UPDATE OR DELETE ON namespace_grants
    FOR EACH ROW EXECUTE FUNCTION cabrain_grant_touched();
CREATE TRIGGER memory_ids_cache AFTER UPDATE ON memory_ids
    FOR EACH ROW EXECUTE FUNCTION cabrain_grant_touched();

CREATE FUNCTION cabrain_namespace_touched() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    PERFORM public.cabrain_touch_namespace(NEW.name);
    RETURN NULL;
END;
$$;
CREATE TRIGGER namespaces_cache AFTER INSERT OR UPDATE OF owner_agent_id ON namespaces
    FOR EACH ROW EXECUTE FUNCTION cabrain_namespace_touched();

CREATE TRIGGER agents_cache AFTER UPDATE OF is_admin, disabled_at ON agents
    FOR EACH STATEMENT EXECUTE FUNCTION cabrain_touch_epoch();

-- 4. Forgetting, recorded on the memory's identity (hot or demoted): archive recall leaves forgotten
--    memories out, whether they were forgotten before or after their demotion.
ALTER TABLE memory_ids ADD COLUMN forgotten_at timestamptz;
ALTER TABLE memory_ids ADD COLUMN forgotten_by text;
ALTER TABLE memory_ids ADD COLUMN forget_reason text;
-- ... and, where the operator set CABRAIN_COLD_FORGOTTEN_RETENTION_DAYS, when its text left the cold
-- tier (the identity stays).
ALTER TABLE memory_ids ADD COLUMN purged_at timestamptz;
CREATE INDEX memory_ids_forgotten ON memory_ids (namespace, forgotten_at) WHERE forgotten_at IS NOT NULL AND purged_at IS NULL;

-- 5. Captured raw text is not kept forever: a processed inbox row records the memories it became
--    (so forgetting one removes the raw text it came from); rows are removed once processed, or
--    kept only as long as CABRAIN_CAPTURE_INBOX_RETENTION_S says.
ALTER TABLE capture_inbox ADD COLUMN memory_ids uuid[] NOT NULL DEFAULT '{}';
CREATE INDEX capture_inbox_memories ON capture_inbox USING gin (memory_ids);
CREATE INDEX capture_inbox_processed ON capture_inbox (processed_at) WHERE processed_at IS NOT NULL;
