"""SQL over ``namespaces`` and ``namespace_grants``: creating namespaces, offering, accepting and
revoking grants, listing them. Who may do each is :mod:`cabrain.store.access`'s answer; the
functions here check it first. Functions take a connection; :class:`cabrain.brain.Brain` owns the
transactions."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from cabrain import namespaces
from cabrain.errors import AccessDenied, AlreadyExists, InputError, NotFound
from cabrain.fixes import Fix
from cabrain.store import access
from cabrain.store import memories as sql

CREATE_NAMESPACE = """
INSERT INTO namespaces (name, owner_agent_id) VALUES ($1, $2)
ON CONFLICT (name) DO NOTHING
RETURNING name
"""
NAMESPACE_OWNER = "SELECT owner_agent_id FROM namespaces WHERE name = $1"
NAMESPACE_EXISTS = "SELECT 1 FROM namespaces WHERE name = $1"
AGENT_EXISTS = "SELECT EXISTS (SELECT 1 FROM agents WHERE id = $1)"
# Writers of one namespace take turns (retain's decisions, unarchive, revert), until their commit.
NAMESPACE_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended($1, 4242))"
# A grant is an offer until its grantee accepts it; widening an accepted grant makes it an offer again.
UPSERT_GRANT = """
INSERT INTO namespace_grants (agent_id, namespace, can_read, can_write, granted_by)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (agent_id, namespace) DO UPDATE
SET can_read = EXCLUDED.can_read, can_write = EXCLUDED.can_write,
    granted_by = EXCLUDED.granted_by, granted_at = now(),
    accepted_at = CASE WHEN (EXCLUDED.can_write AND NOT namespace_grants.can_write)
                         OR (EXCLUDED.can_read AND NOT namespace_grants.can_read)
                       THEN NULL ELSE namespace_grants.accepted_at END
RETURNING accepted_at IS NOT NULL AS accepted
"""
DELETE_GRANT = "DELETE FROM namespace_grants WHERE agent_id = $1 AND namespace = $2"
ACCEPT_GRANT = """
UPDATE namespace_grants SET accepted_at = coalesce(accepted_at, now())
WHERE agent_id = $1 AND namespace = $2
RETURNING can_read, can_write, accepted_at
"""
LIST_NAMESPACES = """
SELECT n.name, n.owner_agent_id, n.created_at,
       CASE WHEN n.owner_agent_id = $1 OR adm.is_admin THEN n.memory_count END AS memory_count,
       n.owner_agent_id = $1 OR adm.is_admin OR coalesce(g.can_read, false) AS can_read,
       n.owner_agent_id = $1 OR adm.is_admin OR coalesce(g.can_write AND g.accepted_at IS NOT NULL, false) AS can_write,
       CASE WHEN g.agent_id IS NOT NULL AND n.owner_agent_id IS DISTINCT FROM $1
            THEN jsonb_build_object('can_read', g.can_read, 'can_write', g.can_write, 'granted_by', g.granted_by,
                                    'accepted', g.accepted_at IS NOT NULL) END AS grant
FROM namespaces n
CROSS JOIN (SELECT coalesce(bool_or(is_admin AND disabled_at IS NULL), false) AS is_admin
            FROM agents WHERE id = $1) adm
LEFT JOIN namespace_grants g ON g.namespace = n.name AND g.agent_id = $1
WHERE n.owner_agent_id = $1 OR g.agent_id IS NOT NULL OR adm.is_admin
ORDER BY n.name
"""
LIST_GRANTS = """
SELECT agent_id, namespace, can_read, can_write, granted_by, granted_at, accepted_at
FROM namespace_grants WHERE namespace = $1 ORDER BY agent_id
"""


async def lock(conn: asyncpg.Connection, namespace: str) -> None:
    """Hold ``namespace``'s writer lock until the transaction ends."""
    await conn.execute(NAMESPACE_LOCK, namespace)


async def exists(conn: asyncpg.Connection, namespace: str) -> bool:
    return await conn.fetchval(NAMESPACE_EXISTS, namespace) is not None


async def owner(conn: asyncpg.Connection, namespace: str) -> str | None:
    return await conn.fetchval(NAMESPACE_OWNER, namespace)


async def create(conn: asyncpg.Connection, agent: str, name: str) -> bool:
    """Create a namespace owned by ``agent``; True if made now, False if ``agent`` already owns it
    (idempotent). One owned by another agent is :class:`AlreadyExists`; a personal name
    (``@other/...``) of another agent is :class:`AccessDenied`."""
    if not namespaces.is_valid(name):
        raise InputError(f"namespace {name!r} is not valid", hint=namespaces.HINT)
    owner_of_name = namespaces.personal_owner(name)
    if owner_of_name is not None and owner_of_name != agent:
        raise AccessDenied(
            f"namespace {name!r} is personal to agent {owner_of_name!r}: only that agent can create it",
            hint=f"your own personal namespaces start with '@{agent}/'",
        )
    await access.require_active(conn, agent)
    if await conn.fetchval(CREATE_NAMESPACE, name, agent) is not None:
        return True
    if await owner(conn, name) != agent:
        raise AlreadyExists(
            f"namespace {name!r} already exists and belongs to another agent",
            hint="choose another name (your personal ones start with '@" + agent + "/'), or ask its owner for a grant",
        )
    return False


async def share(
    conn: asyncpg.Connection, agent: str, namespace: str, grantee: str, *, can_read: bool, can_write: bool
) -> bool:
    """Offer ``grantee`` a grant on ``namespace``; whether it is accepted (see :meth:`Brain.share`)."""
    (await access.caller(conn, agent, namespace)).require_owner()
    if not await conn.fetchval(AGENT_EXISTS, grantee):
        raise NotFound(f"agent {grantee!r} does not exist")
    accepted = await conn.fetchval(UPSERT_GRANT, grantee, namespace, can_read, can_write, agent)
    metadata = {"grantee": grantee, "can_read": can_read, "can_write": can_write, "accepted": accepted}
    await sql.insert_events(conn, [{"namespace": namespace, "op": "share", "agent_id": agent, "metadata": metadata}])
    return bool(accepted)


async def accept(conn: asyncpg.Connection, agent: str, namespace: str) -> dict[str, Any]:
    await access.require_active(conn, agent)
    row = await conn.fetchrow(ACCEPT_GRANT, agent, namespace)
    if row is None:
        raise NotFound(
            f"agent {agent!r} holds no grant on namespace {namespace!r}",
            fix=Fix("offer_grant", {"namespace": namespace, "agent": agent}),
        )
    metadata = {"can_read": row["can_read"], "can_write": row["can_write"]}
    await sql.insert_events(
        conn, [{"namespace": namespace, "op": "accept_grant", "agent_id": agent, "metadata": metadata}]
    )
    return {"namespace": namespace, "agent": agent, **dict(row)}


async def decline(conn: asyncpg.Connection, agent: str, namespace: str) -> bool:
    await access.require_active(conn, agent)
    status = await conn.execute(DELETE_GRANT, agent, namespace)
    if status.endswith(" 1"):
        await sql.insert_events(conn, [{"namespace": namespace, "op": "decline_grant", "agent_id": agent}])
    return status.endswith(" 1")


async def revoke(conn: asyncpg.Connection, agent: str, namespace: str, grantee: str) -> bool:
    (await access.caller(conn, agent, namespace)).require_owner()
    status = await conn.execute(DELETE_GRANT, grantee, namespace)
    await sql.insert_events(
        conn, [{"namespace": namespace, "op": "revoke", "agent_id": agent, "metadata": {"grantee": grantee}}]
    )
    return status.endswith(" 1")


async def of_agent(conn: asyncpg.Connection, agent: str) -> list[dict[str, Any]]:
    """Namespaces ``agent`` owns or holds a grant on (every namespace for an admin)."""
    await access.require_active(conn, agent)
    rows = [dict(r) for r in await conn.fetch(LIST_NAMESPACES, agent)]
    for row in rows:  # the grant offered to the agent, if any
        if isinstance(row["grant"], str):
            row["grant"] = json.loads(row["grant"])
    return rows


async def grants(conn: asyncpg.Connection, agent: str, namespace: str) -> list[dict[str, Any]]:
    """The grants on ``namespace`` (its owner and admins only)."""
    (await access.caller(conn, agent, namespace)).require_owner()
    return [dict(r) for r in await conn.fetch(LIST_GRANTS, namespace)]
