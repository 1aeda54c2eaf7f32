-- An entity's newest mentions without reading all of them (issue 36: the entity page and its graph at
-- a million memories). A link carries the time of the memory it names (memory_entities.valid_at, the
-- memory's identity time, which never changes), so the entity's links are read newest first from one
-- index (cabrain.store.entities.LINKED) and a page reads about as many links as it shows, where before
-- every mention of a much-mentioned entity was joined and sorted (0.7 s for 100,000 mentions).
-- Whoever inserts a link may leave the time out: it is taken from the memory's identity.
ALTER TABLE memory_entities ADD COLUMN valid_at timestamptz;
UPDATE memory_entities me SET valid_at = i.valid_at FROM memory_ids i WHERE i.id = me.memory_id;
ALTER TABLE memory_entities ALTER COLUMN valid_at SET NOT NULL;

CREATE FUNCTION cabrain_link_valid_at() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
    IF NEW.valid_at IS NULL THEN
        SELECT i.valid_at INTO NEW.valid_at FROM memory_ids i WHERE i.id = NEW.memory_id;
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER memory_entities_valid_at BEFORE INSERT ON memory_entities
    FOR EACH ROW EXECUTE FUNCTION cabrain_link_valid_at();

-- The entity's links by time (newest first: read backwards); it serves every lookup by entity too.
CREATE INDEX memory_entities_by_time ON memory_entities (entity_id, valid_at, memory_id);
DROP INDEX memory_entities_entity;

-- The mention counts of new and removed links are kept once per statement (0023 kept them once per
-- link): a retain's batch links its memories in one statement, whose links are counted per entity and
-- added with one update of each entity's row (rewritten once per link before), the rows locked in id
-- order (concurrent writers never deadlock on them).
DROP TRIGGER entity_mentions_links ON memory_entities;
DROP FUNCTION entity_mentions_of_link();
CREATE FUNCTION entity_mentions_of_links() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    sign integer := CASE WHEN TG_OP = 'DELETE' THEN -1 ELSE 1 END;
    shared jsonb;
    private jsonb;
BEGIN
    IF TG_OP = 'DELETE' THEN
        SELECT jsonb_agg(c) FILTER (WHERE c.visibility <> 'private'), jsonb_agg(c) FILTER (WHERE c.visibility = 'private')
        INTO shared, private
        FROM (SELECT l.entity_id, r.visibility, r.owner_agent_id, count(*) AS n
              FROM removed l
              JOIN memory_ids i ON i.id = l.memory_id
              JOIN memories r ON r.id = i.id AND r.valid_at = i.valid_at
              WHERE r.tier = 'hot' AND r.invalid_at IS NULL
              GROUP BY 1, 2, 3) c;
    ELSE
        SELECT jsonb_agg(c) FILTER (WHERE c.visibility <> 'private'), jsonb_agg(c) FILTER (WHERE c.visibility = 'private')
        INTO shared, private
        FROM (SELECT l.entity_id, r.visibility, r.owner_agent_id, count(*) AS n
              FROM added l
              JOIN memory_ids i ON i.id = l.memory_id
              JOIN memories r ON r.id = i.id AND r.valid_at = i.valid_at
              WHERE r.tier = 'hot' AND r.invalid_at IS NULL
              GROUP BY 1, 2, 3) c;
    END IF;
    IF shared IS NOT NULL THEN
        PERFORM 1 FROM entities e
        WHERE e.id IN (SELECT (x ->> 'entity_id')::uuid FROM jsonb_array_elements(shared) AS x)
        ORDER BY e.id FOR UPDATE;
        UPDATE entities e SET mentions = e.mentions + sign * s.n
        FROM (SELECT (x ->> 'entity_id')::uuid AS id, sum((x ->> 'n')::bigint) AS n
              FROM jsonb_array_elements(shared) AS x GROUP BY 1) s
        WHERE e.id = s.id;
    END IF;
    IF private IS NOT NULL THEN
        INSERT INTO entity_private_mentions AS p (entity_id, owner_agent_id, n)
        SELECT (x ->> 'entity_id')::uuid, x ->> 'owner_agent_id', sign * sum((x ->> 'n')::bigint)
        FROM jsonb_array_elements(private) AS x
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (entity_id, owner_agent_id) DO UPDATE SET n = p.n + excluded.n;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER entity_mentions_links_in AFTER INSERT ON memory_entities
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION entity_mentions_of_links();
CREATE TRIGGER entity_mentions_links_out AFTER DELETE ON memory_entities
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION entity_mentions_of_links();
