-- Entities looked after by people (issue 36): mention counts kept as memories change, and merges and
-- renames recorded as revertible judgments.
--
-- 1. Mention counts. A count an agent is shown is of the current hot memories it may read that
--    mention the entity, never more: `entities.mentions` counts the non-private ones (every agent that
--    may list a namespace's entities may read its team and global memories), and
--    `entity_private_mentions` the private ones per owner (only the owner reads them). An agent's
--    count is `mentions` plus its own row: two index lookups, whatever the namespace's size.
--    Kept by triggers on the links (memory_entities) and on the memories' validity, tier and
--    visibility.
ALTER TABLE entities ADD COLUMN mentions integer NOT NULL DEFAULT 0;
CREATE INDEX entities_by_mentions ON entities (namespace, mentions DESC, key);
CREATE TABLE entity_private_mentions (
    entity_id      uuid NOT NULL REFERENCES entities (id),
    owner_agent_id text NOT NULL,
    n              integer NOT NULL,
    PRIMARY KEY (entity_id, owner_agent_id)
);

-- Add `delta` to the count `entity` keeps for a memory of this tier, validity, visibility and owner.
-- The database keeps the counts whoever writes the memories (the offline plane's role included, which
-- holds no grant on the counts), so this runs as its owner.
CREATE FUNCTION entity_mentions_add(entity uuid, tier text, invalid_at timestamptz, visibility text,
                                    owner text, delta integer) RETURNS void LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF tier IS DISTINCT FROM 'hot' OR invalid_at IS NOT NULL THEN
        RETURN;
    ELSIF visibility = 'private' THEN
        INSERT INTO entity_private_mentions AS p (entity_id, owner_agent_id, n) VALUES (entity, owner, delta)
        ON CONFLICT (entity_id, owner_agent_id) DO UPDATE SET n = p.n + delta;
    ELSE
        UPDATE entities SET mentions = mentions + delta WHERE id = entity;
    END IF;
END;
$$;

CREATE FUNCTION entity_mentions_of_link() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    link memory_entities;
    m record;
BEGIN
    link := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    SELECT r.tier, r.invalid_at, r.visibility, r.owner_agent_id INTO m
    FROM memory_ids i JOIN memories r ON r.id = i.id AND r.valid_at = i.valid_at WHERE i.id = link.memory_id;
    IF FOUND THEN
        PERFORM entity_mentions_add(link.entity_id, m.tier, m.invalid_at, m.visibility, m.owner_agent_id,
                                    CASE WHEN TG_OP = 'DELETE' THEN -1 ELSE 1 END);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER entity_mentions_links AFTER INSERT OR DELETE ON memory_entities
    FOR EACH ROW EXECUTE FUNCTION entity_mentions_of_link();

-- A memory that changes what it counts as (forgotten, superseded, archived, back again) moves the
-- counts of every entity it mentions.
CREATE FUNCTION entity_mentions_of_memory() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    linked uuid;
BEGIN
    FOR linked IN SELECT entity_id FROM memory_entities
                  WHERE memory_id = CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END LOOP
        IF TG_OP <> 'INSERT' THEN
            PERFORM entity_mentions_add(linked, OLD.tier, OLD.invalid_at, OLD.visibility, OLD.owner_agent_id, -1);
        END IF;
        IF TG_OP <> 'DELETE' THEN
            PERFORM entity_mentions_add(linked, NEW.tier, NEW.invalid_at, NEW.visibility, NEW.owner_agent_id, 1);
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;
CREATE TRIGGER entity_mentions_memories_in AFTER INSERT OR DELETE ON memories
    FOR EACH ROW EXECUTE FUNCTION entity_mentions_of_memory();
CREATE TRIGGER entity_mentions_memories_change AFTER UPDATE OF tier, invalid_at, visibility, owner_agent_id ON memories
    FOR EACH ROW
    WHEN (OLD.tier IS DISTINCT FROM NEW.tier OR (OLD.invalid_at IS NULL) <> (NEW.invalid_at IS NULL)
          OR OLD.visibility IS DISTINCT FROM NEW.visibility OR OLD.owner_agent_id IS DISTINCT FROM NEW.owner_agent_id)
    EXECUTE FUNCTION entity_mentions_of_memory();

UPDATE entities e SET mentions = c.n
FROM (
    SELECT me.entity_id, count(*) AS n
    FROM memory_entities me
    JOIN memory_ids i ON i.id = me.memory_id
    JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
    WHERE m.tier = 'hot' AND m.invalid_at IS NULL AND m.visibility <> 'private'
    GROUP BY me.entity_id
) c
WHERE e.id = c.entity_id;
INSERT INTO entity_private_mentions (entity_id, owner_agent_id, n)
SELECT me.entity_id, m.owner_agent_id, count(*)
FROM memory_entities me
JOIN memory_ids i ON i.id = me.memory_id
JOIN memories m ON m.id = i.id AND m.valid_at = i.valid_at
WHERE m.tier = 'hot' AND m.invalid_at IS NULL AND m.visibility = 'private'
GROUP BY me.entity_id, m.owner_agent_id;

-- 2. Merges and renames by a person are judgments (kind entity_merge / entity_rename, origin person).
--    The lists are extended, not rewritten, so kinds other migrations added stay allowed.
DO $$
DECLARE
    def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'judgments'::regclass AND conname = 'judgments_kind_check';
    ALTER TABLE judgments DROP CONSTRAINT judgments_kind_check;
    EXECUTE 'ALTER TABLE judgments ADD CONSTRAINT judgments_kind_check '
        || replace(def, 'ARRAY[', 'ARRAY[''entity_merge''::text, ''entity_rename''::text, ');
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'judgments'::regclass AND conname = 'judgments_origin_check';
    IF position('''person''' IN def) = 0 THEN
        ALTER TABLE judgments DROP CONSTRAINT judgments_origin_check;
        EXECUTE 'ALTER TABLE judgments ADD CONSTRAINT judgments_origin_check '
            || replace(def, 'ARRAY[', 'ARRAY[''person''::text, ');
    END IF;
END;
$$;
