"""Who may read, write and own what: the one place that answers it, as SQL and as checks.

Rules (SPEC F5):

- an agent acts only while it exists and is not disabled;
- ``private`` memories are readable by their owner agent only (not even by admins);
- ``team`` memories are readable by the namespace's owner, agents with a read grant on the
  namespace, and admins;
- ``global`` memories are readable by every agent;
- writing into a namespace needs its ownership, an *accepted* write grant, or admin; changing an
  existing memory (forget, reconsolidate, supersede, revert) needs to be able to read it and to
  write its namespace. A grant is an offer until its grantee accepts it: it reads at once, writes
  only then;
- sharing a namespace (and listing its grants) needs its ownership or admin;
- capture injects memories only from namespaces the agent owns or holds an accepted grant on
  (``injectable``): not from every namespace it could read (an admin's, a global memory's).

Every query that touches memories includes the fragments below. They name their parameters
(``:namespace``, ``:agent``; the recall filter also ``:include_invalid``, ``:networks``,
``:memory_types``, ``:source_kinds``, ``:valid_from``, ``:valid_to``, ``:as_of``), and the statements that
include them are :class:`cabrain.store.statement.Statement` s, which number the names: no
statement has to know at which position a shared fragment's parameters sit.

The checks (:func:`caller`, then :class:`Access`'s ``require_*``) are what every path calls:
recall, archive recall, retain, forget, revert, unarchive, grants, entities, workflows, capture.
What kind of operation an agent may ask for at all, and whether it must be an admin, is the gate's
(:mod:`cabrain.gate`), decided before the operation runs; these answer *where* and *which rows*.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg

from cabrain.errors import AccessDenied, NotFound
from cabrain.fixes import Fix
from cabrain.store.statement import Statement

ACCESS_CTE = """
access AS (
    SELECT
        EXISTS (SELECT 1 FROM agents a WHERE a.id = :agent AND a.disabled_at IS NULL) AS agent_ok,
        EXISTS (SELECT 1 FROM agents a WHERE a.id = :agent AND a.disabled_at IS NULL AND a.is_admin)
        OR EXISTS (SELECT 1 FROM namespaces n WHERE n.name = :namespace AND n.owner_agent_id = :agent)
        OR EXISTS (SELECT 1 FROM namespace_grants g
                   WHERE g.namespace = :namespace AND g.agent_id = :agent AND g.can_read) AS team_ok
)
"""

# The read predicate for rows of memories aliased ``m`` (needs ACCESS_CTE).
READABLE = """
(SELECT agent_ok FROM access)
AND (m.visibility = 'global'
     OR m.owner_agent_id = :agent
     OR (m.visibility = 'team' AND (SELECT team_ok FROM access)))
"""


def readable_id(column: str) -> str:
    """The predicate "``column`` is the id of a memory of :namespace that :agent may read", hot or
    demoted (a demoted memory keeps its owner and visibility on ``memory_ids``). Needs ACCESS_CTE."""
    return f"""EXISTS (
    SELECT 1 FROM memory_ids ri LEFT JOIN memories rm ON rm.id = ri.id AND rm.valid_at = ri.valid_at
    WHERE ri.id = {column} AND ri.namespace = :namespace AND (SELECT agent_ok FROM access)
      AND (coalesce(rm.visibility, ri.visibility) = 'global'
           OR coalesce(rm.owner_agent_id, ri.owner_agent_id) = :agent
           OR (coalesce(rm.visibility, ri.visibility) = 'team' AND (SELECT team_ok FROM access))))"""


def private_to_others(alias: str, agent: str) -> str:
    """The predicate "the row ``alias`` (a memory or its identity: ``visibility`` and
    ``owner_agent_id``) is another agent's private memory", for ``agent`` (a parameter; NULL: the
    operator, to whom nothing is). For one who may read its namespace whole (its owner, an admin), a
    memory is readable exactly when this is false: what an export for an agent leaves out."""
    return f"({agent}::text IS NOT NULL AND {alias}.visibility = 'private' AND {alias}.owner_agent_id <> {agent}::text)"


def private_id_to_others(column: str, agent: str) -> str:
    """:func:`private_to_others` for the memory whose id is ``column``, hot or demoted (a hot
    memory's owner and visibility are on its row, a demoted one's on its identity)."""
    return f"""EXISTS (
    SELECT 1 FROM memory_ids pi LEFT JOIN memories pm ON pm.id = pi.id AND pm.valid_at = pi.valid_at
    WHERE pi.id = {column} AND {agent}::text IS NOT NULL
      AND coalesce(pm.visibility, pi.visibility) = 'private'
      AND coalesce(pm.owner_agent_id, pi.owner_agent_id) <> {agent}::text)"""


# Recall's filters over hot memories aliased ``m`` (NULL = no filter); needs ACCESS_CTE. With
# ``:as_of``, the brain as it stood then: the versions valid at or before it and not invalidated
# (superseded, forgotten) by then; with ``:include_invalid`` too, every version valid by then. (A
# NULL ``:as_of`` folds away when the statement is planned for its values: the current-only filter
# and its partial index, memories_ns, are what they were. Old versions keep their vectors, passages
# and postings until they are demoted, so every search finds them.)
RECALL_FILTER = f"""
m.namespace = :namespace AND m.tier = 'hot'
AND (:include_invalid::boolean OR m.invalid_at IS NULL OR m.invalid_at > :as_of::timestamptz)
AND (:as_of::timestamptz IS NULL OR m.valid_at <= :as_of::timestamptz)
AND (:networks::text[] IS NULL OR m.network = ANY(:networks::text[]))
AND (:sitting_summaries::boolean OR :networks::text[] IS NOT NULL OR m.network <> 'observation'
     OR NOT m.metadata ? 'sitting')
AND (:memory_types::text[] IS NULL OR m.memory_type = ANY(:memory_types::text[]))
AND (:source_kinds::text[] IS NULL OR m.source_kind = ANY(:source_kinds::text[]))
AND (:valid_from::timestamptz IS NULL OR m.valid_at >= :valid_from::timestamptz)
AND (:valid_to::timestamptz IS NULL OR m.valid_at < :valid_to::timestamptz)
AND {READABLE}
"""

# Everything the checks below need, in one round trip.
CALLER = Statement(
    """
SELECT
    EXISTS (SELECT 1 FROM namespaces WHERE name = :namespace) AS namespace_exists,
    EXISTS (SELECT 1 FROM agents WHERE id = :agent AND disabled_at IS NULL) AS agent_ok,
    EXISTS (SELECT 1 FROM agents WHERE id = :agent AND disabled_at IS NULL AND is_admin) AS is_admin,
    EXISTS (SELECT 1 FROM namespaces WHERE name = :namespace AND owner_agent_id = :agent) AS is_owner,
    EXISTS (SELECT 1 FROM namespace_grants g
            WHERE g.namespace = :namespace AND g.agent_id = :agent AND g.can_read) AS read_grant,
    EXISTS (SELECT 1 FROM namespace_grants g WHERE g.namespace = :namespace AND g.agent_id = :agent
              AND g.can_read AND g.accepted_at IS NOT NULL) AS read_accepted,
    EXISTS (SELECT 1 FROM namespace_grants g WHERE g.namespace = :namespace AND g.agent_id = :agent
              AND g.can_write AND g.accepted_at IS NOT NULL) AS write_accepted,
    EXISTS (SELECT 1 FROM namespace_grants g WHERE g.namespace = :namespace AND g.agent_id = :agent
              AND g.can_write AND g.accepted_at IS NULL) AS write_offered
"""
)

# Every one of the ids is a memory of the namespace the agent may read (hot or archived).
ALL_READABLE = Statement(
    f"""
WITH {ACCESS_CTE}
SELECT coalesce(bool_and({readable_id("x.id")}), false) FROM unnest(:ids::uuid[]) AS x(id)
"""
)
NAMESPACE_OF = "SELECT namespace FROM memory_ids WHERE id = $1"
AGENT_ACTIVE = "SELECT EXISTS (SELECT 1 FROM agents WHERE id = $1 AND disabled_at IS NULL)"
IS_ADMIN = "SELECT EXISTS (SELECT 1 FROM agents WHERE id = $1 AND disabled_at IS NULL AND is_admin)"


@dataclass(frozen=True)
class Access:
    """What ``agent`` may do in ``namespace``, as read in one statement (:func:`caller`)."""

    agent: str
    namespace: str
    namespace_exists: bool
    agent_ok: bool
    is_admin: bool
    is_owner: bool
    read_grant: bool
    read_accepted: bool
    write_accepted: bool
    write_offered: bool

    @property
    def team_ok(self) -> bool:
        """May read the namespace's team memories."""
        return self.agent_ok and (self.is_admin or self.is_owner or self.read_grant)

    @property
    def can_write(self) -> bool:
        return self.agent_ok and (self.is_admin or self.is_owner or self.write_accepted)

    @property
    def injectable(self) -> bool:
        """Capture may put this namespace's memories into the agent's context."""
        return self.agent_ok and self.namespace_exists and (self.is_owner or self.read_accepted)

    def require_agent(self) -> Access:
        if not self.agent_ok:
            raise AccessDenied(f"agent {self.agent!r} is unknown or disabled")
        return self

    def require_namespace(self) -> Access:
        """The agent is active and the namespace exists (what it may read is scoped row by row)."""
        self.require_agent()
        if not self.namespace_exists:
            raise NotFound(f"namespace {self.namespace!r} does not exist")
        return self

    def require_team_read(self) -> Access:
        """The agent may read the namespace itself (its entities); a missing namespace and one it may
        not read are told apart to nobody."""
        self.require_agent()
        if not (self.namespace_exists and self.team_ok):
            raise NotFound(f"namespace {self.namespace!r} does not exist or is not visible to {self.agent!r}")
        return self

    def require_write(self) -> Access:
        self.require_agent()
        if not self.namespace_exists:
            raise NotFound(
                f"namespace {self.namespace!r} does not exist",
                fix=Fix("create_namespace", {"namespace": self.namespace}),
            )
        if not self.can_write:
            if self.write_offered:
                raise AccessDenied(
                    f"agent {self.agent!r} was offered write access to namespace {self.namespace!r} "
                    "but has not accepted it",
                    fix=Fix("accept_grant", {"namespace": self.namespace}),
                )
            raise AccessDenied(
                f"agent {self.agent!r} may not write to namespace {self.namespace!r}",
                hint="ask the namespace's owner for a write grant (and accept it)",
                fix=Fix("request_write", {"namespace": self.namespace, "agent": self.agent}),
            )
        return self

    def require_owner(self) -> Access:
        """The namespace's owner or an admin (sharing, listing grants)."""
        self.require_agent()
        if not self.namespace_exists:
            raise NotFound(f"namespace {self.namespace!r} does not exist")
        if not (self.is_owner or self.is_admin):
            raise AccessDenied(
                f"agent {self.agent!r} may not share namespace {self.namespace!r}",
                hint="only its owner or an admin can grant access",
            )
        return self


async def caller(conn: asyncpg.Connection, agent: str, namespace: str) -> Access:
    """What ``agent`` may do in ``namespace``."""
    row = await conn.fetchrow(CALLER.sql, *CALLER.args(namespace=namespace, agent=agent))
    return Access(agent, namespace, **dict(row))


async def require_writer(conn: asyncpg.Connection, agent: str, namespace: str) -> Access:
    """:class:`AccessDenied` / :class:`NotFound` unless ``agent`` may write ``namespace``."""
    return (await caller(conn, agent, namespace)).require_write()


async def require_active(conn: asyncpg.Connection, agent: str) -> None:
    if not await conn.fetchval(AGENT_ACTIVE, agent):
        raise AccessDenied(f"agent {agent!r} is unknown or disabled")


async def is_admin(conn: asyncpg.Connection, agent: str) -> bool:
    """``agent`` is an active admin."""
    return bool(await conn.fetchval(IS_ADMIN, agent))


async def may_read_all(conn: asyncpg.Connection, agent: str, namespace: str, ids: list[uuid.UUID]) -> bool:
    """Every one of ``ids`` is a memory of ``namespace`` that ``agent`` may read, hot or archived."""
    return bool(await conn.fetchval(ALL_READABLE.sql, *ALL_READABLE.args(namespace=namespace, agent=agent, ids=ids)))


async def require_readable_memory(conn: asyncpg.Connection, agent: str, memory_id: uuid.UUID) -> str:
    """The namespace of ``memory_id``; :class:`NotFound` unless ``agent`` may read it (hot or archived:
    an unknown id and an unreadable one look the same)."""
    namespace = await conn.fetchval(NAMESPACE_OF, memory_id)
    if not (namespace and await may_read_all(conn, agent, namespace, [memory_id])):
        raise NotFound(f"memory {memory_id} does not exist or is not visible to {agent!r}")
    return str(namespace)
