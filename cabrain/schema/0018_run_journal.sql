-- A sleep run is readable and reversible (issue 32). Besides the merges and supersessions it already
-- journaled, a run records every change it makes as a judgment with its run id:
--   distill   (consolidate): the facts it wrote, each current after and not before;
--   summarize (consolidate): the entity summaries it wrote, before and after (`entities`);
--   decay     (decay):       each memory's importance, before and after;
--   archive   (demote):      the memories it moved to the cold tier (`memory_ids`; texts in `inputs`);
--   alias     (consolidate): a nickname merged into the name it stands for, with the mentions moved.
-- A judgment's `before` / `after` may hold only the fields it changed (decay: importance alone).
-- A run is reverted, per namespace, as one judgment of kind 'revert' that undoes them all (its
-- `inputs.run` names the run) and brings its archived current memories back; that revert is itself
-- revertible as any judgment is.
ALTER TABLE judgments DROP CONSTRAINT judgments_kind_check;
ALTER TABLE judgments ADD CONSTRAINT judgments_kind_check
    CHECK (kind IN ('supersede', 'invalidate', 'merge', 'revert', 'distill', 'summarize', 'decay', 'archive', 'alias'));
ALTER TABLE judgments DROP CONSTRAINT judgments_origin_check;
ALTER TABLE judgments ADD CONSTRAINT judgments_origin_check
    CHECK (origin IN ('write', 'correction', 'dedup', 'reconsolidate', 'revert', 'consolidate', 'decay', 'demote'));
-- entity summaries a judgment changed: [{entity_id, name, before: {summary, summary_sources, summarized_at}, after}],
-- and alias merges: [{entity_id, name, alias_of, long_name, moved, added}]
ALTER TABLE judgments ADD COLUMN entities jsonb NOT NULL DEFAULT '[]';
CREATE INDEX judgments_run_revert ON judgments ((inputs ->> 'run')) WHERE kind = 'revert';
