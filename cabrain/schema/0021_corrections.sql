-- A person's corrections and the audit of judgments (issue 36).
--
-- 1. New kinds of judgment, each revertible: 'correction' (a person's edit: a new version that
--    supersedes the old one), 'forget' (a person's forget: the memory leaves recall and its identity
--    records the forget) and 'restore' (a memory forgotten before forgets were judgments, brought
--    back). Their origin (the step that made them) is 'person'.
ALTER TABLE judgments DROP CONSTRAINT judgments_kind_check;
ALTER TABLE judgments ADD CONSTRAINT judgments_kind_check
    CHECK (kind IN ('supersede', 'invalidate', 'merge', 'revert', 'distill', 'summarize', 'decay', 'archive', 'alias',
                    'correction', 'forget', 'restore'));
ALTER TABLE judgments DROP CONSTRAINT judgments_origin_check;
ALTER TABLE judgments ADD CONSTRAINT judgments_origin_check
    CHECK (origin IN ('write', 'correction', 'dedup', 'reconsolidate', 'revert', 'consolidate', 'decay', 'demote',
                      'person'));

-- 2. Who decided a judgment, as the audit filters it: 'write' (the write pipeline on its own),
--    'sleep' (a sleep run's step), 'person' (a caller's correction, forget, restore or revert) or
--    'import' (a re-import revising a record). Derived once, here, from what a judgment already
--    records: the existing rows are backfilled with it, and a new row that does not say is filled
--    in with it by the insert (cabrain/store/judgments.py).
CREATE FUNCTION judgment_decided_by(origin text, run_id uuid, reason text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN run_id IS NOT NULL OR origin IN ('dedup', 'reconsolidate', 'consolidate', 'decay', 'demote') THEN 'sleep'
        WHEN origin = 'write' THEN 'write'
        WHEN origin = 'correction'
             AND reason LIKE 'corrected by the caller: a newer version of the record in the re-imported %' THEN 'import'
        ELSE 'person'
    END
$$;
ALTER TABLE judgments ADD COLUMN decided_by text;
UPDATE judgments SET decided_by = judgment_decided_by(origin, run_id, reason);
ALTER TABLE judgments ALTER COLUMN decided_by SET NOT NULL;
ALTER TABLE judgments ADD CONSTRAINT judgments_decided_by_check
    CHECK (decided_by IN ('write', 'sleep', 'person', 'import'));
-- A row inserted without it (a CaBrain export made before this migration, imported) gets it the same way.
CREATE FUNCTION cabrain_judgment_decided_by() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.decided_by := coalesce(NEW.decided_by, judgment_decided_by(NEW.origin, NEW.run_id, NEW.reason));
    RETURN NEW;
END;
$$;
CREATE TRIGGER judgments_decided_by BEFORE INSERT ON judgments
    FOR EACH ROW EXECUTE FUNCTION cabrain_judgment_decided_by();

-- 3. The audit reads a namespace's judgments newest first, a keyset page at a time (created_at, id),
--    optionally of one kind or one decider: each filter has an index that serves the page in order.
CREATE INDEX judgments_audit ON judgments (namespace, created_at DESC, id DESC);
CREATE INDEX judgments_audit_by ON judgments (namespace, decided_by, created_at DESC, id DESC);
CREATE INDEX judgments_audit_kind ON judgments (namespace, kind, created_at DESC, id DESC);
DROP INDEX judgments_namespace;
