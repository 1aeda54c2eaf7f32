"""Statements of portable exports and imports (:mod:`cabrain.portable`): the export's reads of a
namespace whole (``agents`` with their ``agent_caps``, ``namespaces``, ``namespace_grants``,
``entities``, ``memories`` with ``memory_ids``, ``memory_entities``, ``memory_sources``,
``judgments``, ``pending_actions``), and the import's writes of the same rows as they were, with
the checks before it (who owns the namespaces named) and the other tools' imports' look-up of what
came in before. The rows' own inserts (``memories``, passages) are :mod:`cabrain.store.memories`'."""

from __future__ import annotations

from cabrain.store.access import private_id_to_others, private_to_others


# --- export: one consistent read of the namespaces (cabrain.portable.export) ------------------------
# about how many memories an export writes, for its progress: the hot rows (kept count of on each namespace)
def as_utf8(query: str) -> str:
    """An export query (one JSON text a row) answering its rows as the UTF-8 bytes of the text: the
    export writes and digests them as they come, never decoding and encoding them again."""
    return f"SELECT convert_to(q.line, 'UTF8') FROM ({query}) AS q(line)"


EXPORT_HOT_SIZE = "SELECT coalesce(sum(memory_count), 0)::bigint FROM namespaces WHERE name = ANY($1::text[])"
EXPORT_AGENTS = """
SELECT jsonb_build_object('type', 'agent', 'id', a.id, 'display_name', a.display_name, 'is_admin', a.is_admin,
                          'created_at', a.created_at, 'disabled_at', a.disabled_at, 'role', a.role,
                          'caps', (SELECT coalesce(jsonb_object_agg(c.op, c.per_day), '{}') FROM agent_caps c
                                   WHERE c.agent_id = a.id))::text
FROM agents a
WHERE a.id IN (SELECT owner_agent_id FROM namespaces WHERE name = ANY($1)
               UNION SELECT agent_id FROM namespace_grants WHERE namespace = ANY($1)
               UNION SELECT granted_by FROM namespace_grants WHERE namespace = ANY($1)
               UNION SELECT DISTINCT owner_agent_id FROM memory_ids WHERE namespace = ANY($1)
               UNION SELECT agent_id FROM pending_actions WHERE namespace = ANY($1))
ORDER BY a.id
"""
EXPORT_NAMESPACES = """
SELECT jsonb_build_object('type', 'namespace', 'name', name, 'owner_agent_id', owner_agent_id,
                          'created_at', created_at, 'metadata', metadata)::text
FROM namespaces WHERE name = ANY($1) ORDER BY name
"""
EXPORT_GRANTS = """
SELECT (jsonb_build_object('type', 'grant') || to_jsonb(g))::text
FROM namespace_grants g WHERE namespace = ANY($1) ORDER BY namespace, agent_id
"""
# $2: the agent the export is for (NULL: the operator's, everything)
EXPORT_ENTITIES = f"""
SELECT (jsonb_build_object('type', 'entity') || (to_jsonb(e) - 'mentions')  -- counted again on import
        || CASE WHEN EXISTS (SELECT 1 FROM unnest(e.summary_sources) s(id) WHERE {private_id_to_others("s.id", "$2")})
                THEN jsonb_build_object('summary', NULL, 'summary_sources', '{{}}'::uuid[], 'summarized_at', NULL)
                ELSE '{{}}'::jsonb END)::text
FROM entities e WHERE namespace = ANY($1)
  AND ($2::text IS NULL OR NOT EXISTS (SELECT 1 FROM memory_entities me WHERE me.entity_id = e.id)
       OR EXISTS (SELECT 1 FROM memory_entities me
                  WHERE me.entity_id = e.id AND NOT {private_id_to_others("me.memory_id", "$2")}))
ORDER BY namespace, id
"""
# Every column a memory row has, but its vector (optional), its content hash (recomputed) and its tier
# (said apart): named one by one, because json_build_object over named columns costs a third of
# to_jsonb over the row (which turns the vector into text first). tests/integration/test_portable.py
# holds this list to the table's columns.
MEMORY_COLUMNS = (
    "id", "namespace", "owner_agent_id", "visibility", "network", "memory_type", "content", "source_kind",
    "source_ref", "importance", "access_count", "last_accessed_at", "created_at", "valid_at", "invalid_at",
    "superseded_by", "metadata", "pinned", "thread_turn", "consolidated_at", "decayed_at",
)  # fmt: skip
_PAIRS = ", ".join(f"'{c}', m.{c}" for c in MEMORY_COLUMNS)
# every hot row, oldest first, with what its identity records when it was forgotten (few rows: hashed)
EXPORT_MEMORIES = f"""
SELECT json_build_object('type', 'memory', {_PAIRS}, 'tier', 'hot',
                         'forgotten_at', f.forgotten_at, 'forgotten_by', f.forgotten_by, 'forget_reason', f.forget_reason)::text
FROM memories m
LEFT JOIN (SELECT id, forgotten_at, forgotten_by, forget_reason FROM memory_ids
           WHERE namespace = $1 AND forgotten_at IS NOT NULL) f ON f.id = m.id
WHERE m.namespace = $1 AND NOT {private_to_others("m", "$2")}
ORDER BY m.valid_at, m.id
"""
EXPORT_MEMORIES_WITH_VECTORS = f"""
SELECT json_build_object('type', 'memory', {_PAIRS}, 'tier', 'hot',
                         'forgotten_at', f.forgotten_at, 'forgotten_by', f.forgotten_by, 'forget_reason', f.forget_reason,
                         'embedding', m.embedding::text)::text
FROM memories m
LEFT JOIN (SELECT id, forgotten_at, forgotten_by, forget_reason FROM memory_ids
           WHERE namespace = $1 AND forgotten_at IS NOT NULL) f ON f.id = m.id
WHERE m.namespace = $1 AND NOT {private_to_others("m", "$2")}
ORDER BY m.valid_at, m.id
"""
EXPORT_COLD_IDS = f"""
SELECT id::text, forgotten_at, forgotten_by, forget_reason, purged_at FROM memory_ids i
WHERE namespace = $1 AND tier = 'cold' AND NOT {private_id_to_others("i.id", "$2")}
"""
EXPORT_MENTIONS = f"""
SELECT jsonb_build_object('type', 'mention', 'memory_id', me.memory_id, 'entity_id', me.entity_id)::text
FROM memory_entities me JOIN entities e ON e.id = me.entity_id
WHERE e.namespace = ANY($1) AND NOT {private_id_to_others("me.memory_id", "$2")}
ORDER BY me.memory_id, me.entity_id
"""
EXPORT_LINKS = f"""
SELECT (jsonb_build_object('type', 'link') || to_jsonb(s))::text
FROM memory_sources s JOIN memory_ids i ON i.id = s.memory_id
WHERE i.namespace = ANY($1) AND NOT {private_id_to_others("s.memory_id", "$2")}
  AND NOT {private_id_to_others("s.source_id", "$2")}
ORDER BY s.memory_id, s.source_id, s.relation
"""
EXPORT_JUDGMENTS = f"""
SELECT (jsonb_build_object('type', 'judgment') || to_jsonb(j))::text
FROM judgments j WHERE namespace = ANY($1)
  AND NOT EXISTS (SELECT 1 FROM unnest(j.memory_ids) x(id) WHERE {private_id_to_others("x.id", "$2")})
ORDER BY created_at, id
"""
EXPORT_ACTIONS = """
SELECT (jsonb_build_object('type', 'action') || to_jsonb(p))::text
FROM pending_actions p WHERE namespace = ANY($1) ORDER BY requested_at, id
"""

# --- checking an export before importing it (cabrain.portable.checks) ---------------------------------
OWNERS = "SELECT name, owner_agent_id FROM namespaces WHERE name = ANY($1::text[])"
# every namespace, for the operator's export of everything (cabrain.portable.facade)
ALL_NAMESPACES = "SELECT name FROM namespaces ORDER BY name"

# --- importing a CaBrain export: the rows as they were, skipping what is here (cabrain.portable.restore) -
RESTORE_AGENT = """
INSERT INTO agents (id, display_name, is_admin, created_at, disabled_at, role) VALUES ($1, $2, false, $3, $4, $5)
ON CONFLICT (id) DO NOTHING RETURNING id
"""
RESTORE_CAP = "INSERT INTO agent_caps (agent_id, op, per_day, set_by) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING"
RESTORE_ACTION = """
INSERT INTO pending_actions (id, agent_id, op, namespace, args, policy, status, requested_at, expires_at,
                             decided_by, decided_at, result, error)
SELECT id, agent_id, op, namespace, coalesce(args, '{}'), policy, status, requested_at, expires_at,
       decided_by, decided_at, result, error
FROM jsonb_populate_record(NULL::pending_actions, $1::jsonb)
ON CONFLICT (id) DO NOTHING RETURNING id
"""
RESTORE_NAMESPACE = """
INSERT INTO namespaces (name, owner_agent_id, created_at, metadata) VALUES ($1, $2, $3, $4::jsonb)
ON CONFLICT (name) DO NOTHING RETURNING name
"""
RESTORE_GRANT = """
INSERT INTO namespace_grants (agent_id, namespace, can_read, can_write, granted_by, granted_at, accepted_at)
VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (agent_id, namespace) DO NOTHING RETURNING agent_id
"""
# (its mention count starts at nought: the triggers of migration 0023 count its links as they come back)
RESTORE_ENTITY = """
INSERT INTO entities SELECT * FROM jsonb_populate_record(NULL::entities, $1::jsonb || '{"mentions": 0}')
ON CONFLICT DO NOTHING RETURNING id
"""
ENTITY_BY_KEY = "SELECT id FROM entities WHERE namespace = $1 AND key = $2"
KNOWN_IDS = "SELECT id FROM memory_ids WHERE id = ANY($1::uuid[])"
RESTORE_STATE_COLUMNS = (
    "created_at",
    "invalid_at",
    "access_count",
    "last_accessed_at",
    "consolidated_at",
    "decayed_at",
)
RESTORE_STATE = """
UPDATE memories m SET created_at = s.created_at, invalid_at = s.invalid_at, access_count = s.access_count,
                      last_accessed_at = s.last_accessed_at, consolidated_at = s.consolidated_at,
                      decayed_at = s.decayed_at
FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[], $4::int[], $5::timestamptz[], $6::timestamptz[],
            $7::timestamptz[])
     AS s(id, created_at, invalid_at, access_count, last_accessed_at, consolidated_at, decayed_at)
WHERE m.id = s.id
"""
RESTORE_SUPERSEDED = """
UPDATE memories m SET superseded_by = s.by FROM unnest($1::uuid[], $2::uuid[]) AS s(id, by)
WHERE m.id = s.id AND m.superseded_by IS DISTINCT FROM s.by
"""
RESTORE_FORGOTTEN = """
UPDATE memory_ids i SET forgotten_at = s.at, forgotten_by = s.by, forget_reason = s.why
FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::text[]) AS s(id, at, by, why)
WHERE i.id = s.id AND i.forgotten_at IS NULL
"""
RESTORE_MENTIONS = """
INSERT INTO memory_entities (memory_id, entity_id)
SELECT * FROM unnest($1::uuid[], $2::uuid[]) AS s(m, e) WHERE EXISTS (SELECT 1 FROM memory_ids WHERE id = s.m)
ON CONFLICT DO NOTHING
"""
RESTORE_LINK = """
INSERT INTO memory_sources SELECT * FROM jsonb_populate_record(NULL::memory_sources, $1::jsonb)
ON CONFLICT DO NOTHING
"""
RESTORE_JUDGMENT = """
INSERT INTO judgments SELECT * FROM jsonb_populate_record(NULL::judgments, $1::jsonb)
ON CONFLICT DO NOTHING
"""
RESTORE_REVERTED = "UPDATE judgments SET reverted_by = $2 WHERE id = $1 AND reverted_by IS NULL"

# --- importing another tool's records (cabrain.portable.imports) ---------------------------------------
# what the namespace holds of these records (by their scoped keys), every version, oldest first; an
# agent's private memories are another agent's to see and change only when it is theirs ($4)
HELD = f"""
SELECT id, source_ref, content, metadata->>'import_hash' AS hash, metadata->>'import_group' AS grp,
       invalid_at IS NULL AND tier = 'hot' AS current, invalid_at IS NOT NULL AND superseded_by IS NULL AS forgotten
FROM memories m
WHERE namespace = $1 AND source_kind = $2 AND source_ref = ANY($3::text[])
  AND NOT {private_to_others("m", "$4")}
ORDER BY created_at, id
"""
# the current records of the groups named (a section's bullets), to pair with a group's new ones
HELD_GROUPS = f"""
SELECT id, source_ref, content, metadata->>'import_group' AS grp
FROM memories m
WHERE namespace = $1 AND source_kind = $2 AND metadata->>'import_group' = ANY($3::text[])
  AND invalid_at IS NULL AND tier = 'hot' AND NOT {private_to_others("m", "$4")}
ORDER BY created_at, id
"""
# the current records under the scopes named (the sources re-imported with --mirror)
HELD_UNDER = f"""
SELECT id, source_ref FROM memories m
WHERE namespace = $1 AND source_kind = $2 AND invalid_at IS NULL AND tier = 'hot'
  AND EXISTS (SELECT 1 FROM unnest($3::text[]) AS p(prefix) WHERE starts_with(source_ref, p.prefix))
  AND NOT {private_to_others("m", "$4")}
ORDER BY source_ref
"""
