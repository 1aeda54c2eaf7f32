-- The console browses a namespace's memories newest first, a keyset page at a time
-- (cabrain.store.browse): (valid_at, id) after the last row seen. This index serves every page,
-- with or without history, at the same cost at any depth.
CREATE INDEX memories_browse ON memories (namespace, valid_at DESC, id DESC);
