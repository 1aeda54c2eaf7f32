-- The overview (issue 36): what the brain holds and did, kept as it changes, never counted by a scan.
--
-- memory_counts: memories per namespace, owner, visibility, tier, type, source and state. Owner and
-- visibility are kept so that a reader is shown only what it may read (cabrain.store.access's rules:
-- another agent's private memories are never counted for it). Hot rows are counted from memories
-- (statement-level triggers with transition tables for inserts and deletes, so a bulk insert costs one
-- upsert per group, and a row-level trigger for the updates that change a row's group: a supersession,
-- a forget, a revert); archived rows from their identity in memory_ids (a demotion deletes the hot row
-- and marks the identity cold; an unarchive marks it hot again). Moving rows between partitions
-- (cabrain_ensure_memories_partition) names the partitions, not memories, so it fires none of them.
--   state: current | superseded | forgotten (hot); archived | forgotten (cold, whose type is in the
--   cold tier: memory_type '').
--
-- activity_hours: what was retained (memories inserted, by created_at), recalled (recall events) and
-- judged (judgments made) per namespace and UTC hour; retained also per owner and visibility.
CREATE TABLE memory_counts (
    namespace      text   NOT NULL,
    owner_agent_id text   NOT NULL,
    visibility     text   NOT NULL,
    tier           text   NOT NULL,
    memory_type    text   NOT NULL,
    source_kind    text   NOT NULL,
    state          text   NOT NULL CHECK (state IN ('current', 'superseded', 'forgotten', 'archived')),
    n              bigint NOT NULL,
    PRIMARY KEY (namespace, owner_agent_id, visibility, tier, memory_type, source_kind, state)
);

CREATE TABLE activity_hours (
    namespace      text        NOT NULL,
    hour           timestamptz NOT NULL,
    kind           text        NOT NULL CHECK (kind IN ('retained', 'recalled', 'judged')),
    owner_agent_id text        NOT NULL DEFAULT '',
    visibility     text        NOT NULL DEFAULT '',
    n              bigint      NOT NULL,
    last_at        timestamptz,  -- retained: when the newest of them was written (the list opens there)
    PRIMARY KEY (namespace, hour, kind, owner_agent_id, visibility)
);
CREATE INDEX activity_hours_hour ON activity_hours (hour DESC, namespace);

-- Browsing narrowed to one speaker or one thread reads only that speaker's or thread's rows.
CREATE INDEX memories_browse_speaker ON memories (namespace, (metadata ->> 'speaker'), valid_at DESC, id DESC)
    WHERE metadata ? 'speaker';
CREATE INDEX memories_browse_thread ON memories (namespace, (metadata ->> 'thread'), valid_at DESC, id DESC)
    WHERE metadata ? 'thread';

CREATE FUNCTION cabrain_memory_state(invalid_at timestamptz, superseded_by uuid) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN invalid_at IS NULL THEN 'current' WHEN superseded_by IS NOT NULL THEN 'superseded' ELSE 'forgotten' END
$$;

-- Add signed counts to memory_counts, in key order (concurrent writers never deadlock on them).
CREATE FUNCTION cabrain_add_counts(deltas jsonb) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    INSERT INTO memory_counts AS c (namespace, owner_agent_id, visibility, tier, memory_type, source_kind, state, n)
    SELECT d.namespace, d.owner_agent_id, d.visibility, d.tier, d.memory_type, d.source_kind, d.state, sum(d.n)
    FROM jsonb_to_recordset(deltas) AS d(namespace text, owner_agent_id text, visibility text, tier text,
                                         memory_type text, source_kind text, state text, n bigint)
    GROUP BY 1, 2, 3, 4, 5, 6, 7
    HAVING sum(d.n) <> 0
    ORDER BY 1, 2, 3, 4, 5, 6, 7
    ON CONFLICT (namespace, owner_agent_id, visibility, tier, memory_type, source_kind, state)
    DO UPDATE SET n = c.n + excluded.n
$$;

CREATE FUNCTION cabrain_count_memories() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF TG_LEVEL = 'ROW' THEN  -- an update that moved a row from one group to another
        PERFORM cabrain_add_counts(jsonb_build_array(
            jsonb_build_object('namespace', OLD.namespace, 'owner_agent_id', coalesce(OLD.owner_agent_id, ''),
                'visibility', OLD.visibility, 'tier', OLD.tier, 'memory_type', OLD.memory_type,
                'source_kind', coalesce(OLD.source_kind, ''),
                'state', cabrain_memory_state(OLD.invalid_at, OLD.superseded_by), 'n', -1),
            jsonb_build_object('namespace', NEW.namespace, 'owner_agent_id', coalesce(NEW.owner_agent_id, ''),
                'visibility', NEW.visibility, 'tier', NEW.tier, 'memory_type', NEW.memory_type,
                'source_kind', coalesce(NEW.source_kind, ''),
                'state', cabrain_memory_state(NEW.invalid_at, NEW.superseded_by), 'n', 1)));
        RETURN NULL;
    ELSIF TG_OP = 'INSERT' THEN
        PERFORM cabrain_add_counts(coalesce(jsonb_agg(g), '[]'))
        FROM (SELECT namespace, coalesce(owner_agent_id, '') AS owner_agent_id, visibility, tier, memory_type,
                     coalesce(source_kind, '') AS source_kind, cabrain_memory_state(invalid_at, superseded_by) AS state,
                     count(*) AS n
              FROM added GROUP BY 1, 2, 3, 4, 5, 6, 7) g;
        INSERT INTO activity_hours AS a (namespace, hour, kind, owner_agent_id, visibility, n, last_at)
        SELECT namespace, date_trunc('hour', created_at, 'UTC'), 'retained', coalesce(owner_agent_id, ''), visibility, count(*),
               max(created_at)
        FROM added GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
        ON CONFLICT (namespace, hour, kind, owner_agent_id, visibility)
        DO UPDATE SET n = a.n + excluded.n, last_at = greatest(a.last_at, excluded.last_at);
    ELSE  -- DELETE: a demotion (memories are never deleted otherwise); the identity counts it cold
        PERFORM cabrain_add_counts(coalesce(jsonb_agg(g), '[]'))
        FROM (SELECT namespace, coalesce(owner_agent_id, '') AS owner_agent_id, visibility, tier, memory_type,
                     coalesce(source_kind, '') AS source_kind, cabrain_memory_state(invalid_at, superseded_by) AS state,
                     -count(*) AS n
              FROM removed GROUP BY 1, 2, 3, 4, 5, 6, 7) g;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER memories_count_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION cabrain_count_memories();
CREATE TRIGGER memories_count_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION cabrain_count_memories();
CREATE TRIGGER memories_count_update AFTER UPDATE ON memories FOR EACH ROW
    WHEN ((OLD.invalid_at IS NULL) IS DISTINCT FROM (NEW.invalid_at IS NULL)
          OR (OLD.superseded_by IS NULL) IS DISTINCT FROM (NEW.superseded_by IS NULL)
          OR OLD.visibility IS DISTINCT FROM NEW.visibility
          OR OLD.owner_agent_id IS DISTINCT FROM NEW.owner_agent_id
          OR OLD.memory_type IS DISTINCT FROM NEW.memory_type
          OR OLD.source_kind IS DISTINCT FROM NEW.source_kind
          OR OLD.tier IS DISTINCT FROM NEW.tier)
    EXECUTE FUNCTION cabrain_count_memories();

-- Archived memories, counted from their identities: a demotion marks them cold, an unarchive hot
-- again, a forget of an archived memory sets forgotten_at.
CREATE FUNCTION cabrain_count_archived() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    PERFORM cabrain_add_counts(coalesce(jsonb_agg(g), '[]'))
    FROM (SELECT namespace, coalesce(owner_agent_id, '') AS owner_agent_id, coalesce(visibility, 'private') AS visibility,
                 'cold' AS tier, '' AS memory_type, coalesce(source_kind, '') AS source_kind,
                 CASE WHEN forgotten_at IS NULL THEN 'archived' ELSE 'forgotten' END AS state, sum(n) AS n
          FROM (SELECT *, -1 AS n FROM before_rows WHERE tier = 'cold'
                UNION ALL SELECT *, 1 AS n FROM after_rows WHERE tier = 'cold') r
          GROUP BY 1, 2, 3, 4, 5, 6, 7) g;
    RETURN NULL;
END;
$$;
CREATE TRIGGER memory_ids_count AFTER UPDATE ON memory_ids
    REFERENCING OLD TABLE AS before_rows NEW TABLE AS after_rows FOR EACH STATEMENT
    EXECUTE FUNCTION cabrain_count_archived();

CREATE FUNCTION cabrain_count_recalls() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    INSERT INTO activity_hours AS a (namespace, hour, kind, n)
    SELECT namespace, date_trunc('hour', ts, 'UTC'), 'recalled', count(*)
    FROM added WHERE op = 'recall' AND namespace IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (namespace, hour, kind, owner_agent_id, visibility) DO UPDATE SET n = a.n + excluded.n;
    RETURN NULL;
END;
$$;
CREATE TRIGGER memory_events_count AFTER INSERT ON memory_events
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION cabrain_count_recalls();

CREATE FUNCTION cabrain_count_judgments() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    INSERT INTO activity_hours AS a (namespace, hour, kind, n)
    SELECT namespace, date_trunc('hour', created_at, 'UTC'), 'judged', count(*)
    FROM added GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (namespace, hour, kind, owner_agent_id, visibility) DO UPDATE SET n = a.n + excluded.n;
    RETURN NULL;
END;
$$;
CREATE TRIGGER judgments_count AFTER INSERT ON judgments
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION cabrain_count_judgments();

-- Backfill, once.
INSERT INTO memory_counts (namespace, owner_agent_id, visibility, tier, memory_type, source_kind, state, n)
SELECT namespace, coalesce(owner_agent_id, ''), visibility, tier, memory_type, coalesce(source_kind, ''),
       cabrain_memory_state(invalid_at, superseded_by), count(*)
FROM memories GROUP BY 1, 2, 3, 4, 5, 6, 7;
INSERT INTO memory_counts (namespace, owner_agent_id, visibility, tier, memory_type, source_kind, state, n)
SELECT namespace, coalesce(owner_agent_id, ''), coalesce(visibility, 'private'), 'cold', '', coalesce(source_kind, ''),
       CASE WHEN forgotten_at IS NULL THEN 'archived' ELSE 'forgotten' END, count(*)
FROM memory_ids WHERE tier = 'cold' GROUP BY 1, 2, 3, 4, 5, 6, 7;
INSERT INTO activity_hours (namespace, hour, kind, owner_agent_id, visibility, n, last_at)
SELECT namespace, date_trunc('hour', created_at, 'UTC'), 'retained', coalesce(owner_agent_id, ''), visibility, count(*),
       max(created_at)
FROM memories WHERE created_at > now() - interval '8 days' GROUP BY 1, 2, 3, 4, 5;
INSERT INTO activity_hours (namespace, hour, kind, n)
SELECT namespace, date_trunc('hour', ts, 'UTC'), 'recalled', count(*)
FROM memory_events WHERE op = 'recall' AND namespace IS NOT NULL AND ts > now() - interval '8 days' GROUP BY 1, 2;
INSERT INTO activity_hours (namespace, hour, kind, n)
SELECT namespace, date_trunc('hour', created_at, 'UTC'), 'judged', count(*)
FROM judgments WHERE created_at > now() - interval '8 days' GROUP BY 1, 2;
