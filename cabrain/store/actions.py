"""SQL of pending actions (table ``pending_actions``, schema 0015): :mod:`cabrain.actions`; and who
may decide one (``agents``, ``namespaces``). A memory's namespace is
:data:`cabrain.store.access.NAMESPACE_OF`; a channel's approvers, :data:`cabrain.store.channels.FOR_APPROVAL`."""

from __future__ import annotations

# --- pending actions ------------------------------------------------------------------------------
INSERT = """
INSERT INTO pending_actions (id, agent_id, op, namespace, args, policy, requested_at, expires_at)
VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8)
"""
BY_PREFIX = "SELECT id FROM pending_actions WHERE status = 'pending' AND id::text LIKE $1 || '%' LIMIT 2"
EXPIRE = "UPDATE pending_actions SET status = 'expired' WHERE status = 'pending' AND expires_at <= $1"
LIST = """
SELECT a.* FROM pending_actions a
WHERE ($1::text IS NULL OR a.status = $1)
  AND ($2::boolean OR a.agent_id = $3
       OR a.namespace IN (SELECT name FROM namespaces WHERE owner_agent_id = $3))
ORDER BY a.requested_at DESC LIMIT $4
"""
ONE = "SELECT * FROM pending_actions WHERE id = $1"
CLAIM = """
UPDATE pending_actions SET status = $2, decided_by = $3, decided_at = $4
WHERE id = $1 AND status = 'pending' AND expires_at > $4 RETURNING *
"""
FINISH = "UPDATE pending_actions SET status = $2, result = $3::jsonb, error = $4 WHERE id = $1"

# --- who decides: an agent, whether it is active, an admin, the owner of the action's namespace ----
PERSON = """
SELECT a.is_admin, a.role, a.disabled_at IS NULL AS active,
       EXISTS (SELECT 1 FROM namespaces n WHERE n.name = $2 AND n.owner_agent_id = a.id) AS owner
FROM agents a WHERE a.id = $1
"""
