-- A sitting's summary (issue 32): sleep writes one memory per conversation sitting (network
-- 'observation', metadata.sitting = the thread), made from the sitting's facts. It links to those
-- facts as 'summarizes': provenance a person can open, but not a fact standing for its turn, so
-- recall never folds a summary and its facts into one answer (cabrain.search.recall.fold).
ALTER TABLE memory_sources DROP CONSTRAINT memory_sources_relation_check;
ALTER TABLE memory_sources ADD CONSTRAINT memory_sources_relation_check
    CHECK (relation IN ('distilled_from', 'merged', 'summarizes'));
