"""Who may read and write what, as SQL. Every query that touches memories goes through these.

Rules (SPEC F5):

- an agent acts only while it exists and is not disabled;
- ``private`` memories are readable by their owner agent only (not even by admins);
- ``team`` memories are readable by the namespace's owner, agents with a read grant on the
  namespace, and admins;
- ``global`` memories are readable by every agent;
- writing into a namespace needs its ownership, an *accepted* write grant, or admin; changing an
  existing memory (forget, reconsolidate, supersede) needs to be able to read it and to write its
  namespace. A grant is an offer until its grantee accepts it: it reads at once, writes only then;
- capture injects memories only from namespaces the agent owns or holds an accepted grant on
  (``INJECTABLE``): not from every namespace it could read (an admin's, a global memory's).
"""

from __future__ import annotations

# Fragments below use fixed parameter positions: $1 namespace, $2 agent id.
ACCESS_CTE = """
access AS (
    SELECT
        EXISTS (SELECT 1 FROM agents a WHERE a.id = $2 AND a.disabled_at IS NULL) AS agent_ok,
        EXISTS (SELECT 1 FROM agents a WHERE a.id = $2 AND a.disabled_at IS NULL AND a.is_admin)
        OR EXISTS (SELECT 1 FROM namespaces n WHERE n.name = $1 AND n.owner_agent_id = $2)
        OR EXISTS (SELECT 1 FROM namespace_grants g
                   WHERE g.namespace = $1 AND g.agent_id = $2 AND g.can_read) AS team_ok
)
"""

# The read predicate for rows of memories aliased ``m`` (needs ACCESS_CTE).
READABLE = """
(SELECT agent_ok FROM access)
AND (m.visibility = 'global'
     OR m.owner_agent_id = $2
     OR (m.visibility = 'team' AND (SELECT team_ok FROM access)))
"""


def readable_id(column: str) -> str:
    """The predicate "``column`` is the id of a memory of namespace $1 that agent $2 may read", hot or
    demoted (a demoted memory keeps its owner and visibility on ``memory_ids``). Needs ACCESS_CTE."""
    return f"""EXISTS (
    SELECT 1 FROM memory_ids ri LEFT JOIN memories rm ON rm.id = ri.id AND rm.valid_at = ri.valid_at
    WHERE ri.id = {column} AND ri.namespace = $1 AND (SELECT agent_ok FROM access)
      AND (coalesce(rm.visibility, ri.visibility) = 'global'
           OR coalesce(rm.owner_agent_id, ri.owner_agent_id) = $2
           OR (coalesce(rm.visibility, ri.visibility) = 'team' AND (SELECT team_ok FROM access))))"""


# Recall filters: $3 include_invalid, $4 networks, $5 memory types, $6 source kinds,
# $7 valid_from, $8 valid_to (NULL = no filter).
RECALL_FILTER = f"""
m.namespace = $1 AND m.tier = 'hot'
AND ($3::boolean OR m.invalid_at IS NULL)
AND ($4::text[] IS NULL OR m.network = ANY($4::text[]))
AND ($5::text[] IS NULL OR m.memory_type = ANY($5::text[]))
AND ($6::text[] IS NULL OR m.source_kind = ANY($6::text[]))
AND ($7::timestamptz IS NULL OR m.valid_at >= $7::timestamptz)
AND ($8::timestamptz IS NULL OR m.valid_at < $8::timestamptz)
AND {READABLE}
"""

# $1 namespace, $2 agent: (namespace exists, agent active, may write).
WRITE_ACCESS = """
SELECT
    EXISTS (SELECT 1 FROM namespaces WHERE name = $1) AS namespace_exists,
    EXISTS (SELECT 1 FROM agents WHERE id = $2 AND disabled_at IS NULL) AS agent_ok,
    EXISTS (SELECT 1 FROM agents a WHERE a.id = $2 AND a.disabled_at IS NULL AND a.is_admin)
    OR EXISTS (SELECT 1 FROM namespaces n WHERE n.name = $1 AND n.owner_agent_id = $2
               AND EXISTS (SELECT 1 FROM agents a WHERE a.id = $2 AND a.disabled_at IS NULL))
    OR EXISTS (SELECT 1 FROM namespace_grants g JOIN agents a ON a.id = g.agent_id
               WHERE g.namespace = $1 AND g.agent_id = $2 AND g.can_write AND g.accepted_at IS NOT NULL
                 AND a.disabled_at IS NULL)
    AS can_write,
    EXISTS (SELECT 1 FROM namespace_grants g
            WHERE g.namespace = $1 AND g.agent_id = $2 AND g.can_write AND g.accepted_at IS NULL) AS write_offered,
    EXISTS (SELECT 1 FROM agents a WHERE a.id = $2 AND a.disabled_at IS NULL AND a.is_admin)
    OR EXISTS (SELECT 1 FROM namespaces n WHERE n.name = $1 AND n.owner_agent_id = $2)
    OR EXISTS (SELECT 1 FROM namespace_grants g
               WHERE g.namespace = $1 AND g.agent_id = $2 AND g.can_read) AS can_read
"""

# $1 namespace, $2 agent: may capture put this namespace's memories into the agent's context?
INJECTABLE = """
SELECT n.owner_agent_id = $2
       OR EXISTS (SELECT 1 FROM namespace_grants g
                  WHERE g.namespace = $1 AND g.agent_id = $2 AND g.can_read AND g.accepted_at IS NOT NULL)
FROM namespaces n
WHERE n.name = $1 AND EXISTS (SELECT 1 FROM agents a WHERE a.id = $2 AND a.disabled_at IS NULL)
"""
