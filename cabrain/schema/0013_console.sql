-- The console browses a namespace's memories newest first, a keyset page at a time
-- (cabrain.store.browse): (valid_at, id) after the last row seen. memories_browse serves every
-- page, with or without history, at the same cost at any depth. A page narrowed to one network,
-- type or source (the capture feed: source_kind claude_code) has an index of its own, so that a
-- filter few or no rows match answers without reading the namespace's other rows. Importance has
-- none: decay rewrites it, and an index on it would take those updates off the heap-only path (a
-- floor on importance reads a bounded window per page instead).
CREATE INDEX memories_browse ON memories (namespace, valid_at DESC, id DESC);
CREATE INDEX memories_browse_network ON memories (namespace, network, valid_at DESC, id DESC);
CREATE INDEX memories_browse_type ON memories (namespace, memory_type, valid_at DESC, id DESC);
CREATE INDEX memories_browse_source ON memories (namespace, source_kind, valid_at DESC, id DESC);

-- A sleep run's page lists the judgments it made, newest runs first.
CREATE INDEX judgments_run ON judgments (run_id, created_at) WHERE run_id IS NOT NULL;
CREATE INDEX sleep_runs_started ON sleep_runs (started_at DESC);
