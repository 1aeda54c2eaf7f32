"""SQL of agents, their API keys and console sessions (tables ``agents``, ``agent_keys``,
``console_sessions``, and the ``cabrain_settings`` row that records the first admin's bootstrap;
schema 0001, 0015, 0016): :mod:`cabrain.identity`. Whether an agent exists is
:data:`cabrain.store.namespaces.AGENT_EXISTS`."""

from __future__ import annotations

# --- agents ---------------------------------------------------------------------------------------
UPSERT_AGENT = """
INSERT INTO agents (id, display_name, is_admin) VALUES ($1, $2, $3)
ON CONFLICT (id) DO UPDATE SET display_name = COALESCE(EXCLUDED.display_name, agents.display_name)
RETURNING id, is_admin
"""
AGENT_ROW = "SELECT id, disabled_at FROM agents WHERE id = $1"
LIST_AGENTS = """
SELECT a.id, a.display_name, a.is_admin, a.created_at, a.disabled_at,
       count(k.id) FILTER (WHERE k.revoked_at IS NULL) AS active_keys, a.role
FROM agents a LEFT JOIN agent_keys k ON k.agent_id = a.id
GROUP BY a.id ORDER BY a.id
"""
DISABLE_AGENT = """
WITH disabled AS (UPDATE agents SET disabled_at = now() WHERE id = $1 AND disabled_at IS NULL RETURNING id),
     ended AS (DELETE FROM console_sessions WHERE agent_id IN (SELECT id FROM disabled))
SELECT id FROM disabled
"""
SET_ROLE = "UPDATE agents SET role = $2 WHERE id = $1 RETURNING id"

# --- keys -----------------------------------------------------------------------------------------
AUTHENTICATE = """
SELECT k.id AS key_id, a.id AS agent_id, a.is_admin
FROM agent_keys k JOIN agents a ON a.id = k.agent_id
WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND a.disabled_at IS NULL
"""
TOUCH_KEY = """
UPDATE agent_keys SET last_used_at = now()
WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
"""
INSERT_KEY = """
INSERT INTO agent_keys (agent_id, key_prefix, key_hash, label) VALUES ($1, $2, $3, $4)
RETURNING id, created_at
"""
REVOKE_KEY = """
UPDATE agent_keys SET revoked_at = now()
WHERE id = $1 AND revoked_at IS NULL AND ($2::text IS NULL OR agent_id = $2)
RETURNING agent_id
"""
LIST_KEYS = """
SELECT id, agent_id, key_prefix, label, created_at, last_used_at, revoked_at
FROM agent_keys WHERE agent_id = $1 ORDER BY created_at
"""

# --- console sessions: the cookie holds a random id, the server its digest (finding 10) ------------
OPEN_SESSION = """
INSERT INTO console_sessions (id_hash, key_id, agent_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)
"""
SESSION = """
SELECT k.id AS key_id, a.id AS agent_id, a.is_admin
FROM console_sessions s JOIN agent_keys k ON k.id = s.key_id JOIN agents a ON a.id = s.agent_id
WHERE s.id_hash = $1 AND s.expires_at > $2 AND k.revoked_at IS NULL AND a.disabled_at IS NULL
"""
END_KEY_SESSIONS = "DELETE FROM console_sessions WHERE key_id = $1"
END_SESSION = "DELETE FROM console_sessions WHERE id_hash = $1"
END_EXPIRED_SESSIONS = "DELETE FROM console_sessions WHERE expires_at <= $1"
CLOSE_SESSION = "DELETE FROM console_sessions WHERE id_hash = $1 RETURNING 1"

# --- the first admin ------------------------------------------------------------------------------
CLAIM_BOOTSTRAP = """
INSERT INTO cabrain_settings (key, value) VALUES ($1, now()::text) ON CONFLICT (key) DO NOTHING RETURNING key
"""
ANY_ADMIN = "SELECT EXISTS (SELECT 1 FROM agents WHERE is_admin)"
ACTIVE_ADMIN_KEYS = """
SELECT count(*) FROM agent_keys k JOIN agents a ON a.id = k.agent_id
WHERE a.is_admin AND a.disabled_at IS NULL AND k.revoked_at IS NULL
"""
