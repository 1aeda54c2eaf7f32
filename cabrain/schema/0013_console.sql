-- The console browses a namespace's memories newest first, a keyset page at a time
-- (cabrain.store.browse): (valid_at, id) after the last row seen. This index serves every page,
-- with or without history, at the same cost at any depth.
CREATE INDEX memories_browse ON memories (namespace, valid_at DESC, id DESC);

-- A sleep run's page lists the judgments it made, newest runs first.
CREATE INDEX judgments_run ON judgments (run_id, created_at) WHERE run_id IS NOT NULL;
CREATE INDEX sleep_runs_started ON sleep_runs (started_at DESC);
