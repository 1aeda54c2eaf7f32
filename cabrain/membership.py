"""The part of the :class:`cabrain.brain.Brain` facade about who is who: agents and their keys,
namespaces and the grants on them, and roles, caps and the pending actions roles hold
(:mod:`cabrain.policy`, :mod:`cabrain.governance`)."""

from __future__ import annotations

import logging
import uuid
from datetime import date, timedelta
from typing import Any

from cabrain import actions, gate, identity, namespaces
from cabrain.clock import utc_today
from cabrain.engine import Engine
from cabrain.errors import AccessDenied, AlreadyExists, InputError, NotFound
from cabrain.gate import Read, operation, system
from cabrain.policy import Op, Role
from cabrain.store import access
from cabrain.store import namespaces as namespace_sql
from cabrain.store import usage as usage_sql

log = logging.getLogger(__name__)

# The kinds of model call made for an agent that a cap may name besides the operations' meters.
MODEL_CALLS = frozenset({"embed", "chat", "workflow"})


def roles() -> list[str]:
    """The roles an agent may be given (:mod:`cabrain.policy`), for the faces that offer them."""
    return [role.value for role in Role]


def cap_kinds() -> frozenset[str]:
    """What a cap may name: what an operation is metered as, or a kind of model call."""
    return gate.meters() | MODEL_CALLS


class Membership:
    engine: Engine

    # --- agents, namespaces, grants ------------------------------------------------------------
    @operation(
        Op.ADMIN,
        operator=True,
        admin=True,
        http="POST /v1/agents",
        client="create_agent",
        cli="agents create",
    )
    async def create_agent(
        self,
        agent_id: str,
        *,
        display_name: str | None = None,
        is_admin: bool = False,
        exist_ok: bool = True,
        agent: str | None = None,
    ) -> str:
        """Register an agent (idempotent unless ``exist_ok`` is False: then an existing id is
        :class:`AlreadyExists`). Its API keys come from :meth:`create_key`. ``agent``: the admin asking
        (None: the operator, on the database)."""
        async with self.engine.pool.acquire() as conn:
            return await identity.create_agent(
                conn, agent_id, display_name=display_name, is_admin=is_admin, exist_ok=exist_ok
            )

    @operation(
        Op.NAMESPACE,
        namespace="name",
        http="POST /v1/namespaces",
        client="create_namespace",
        backend="create_namespace",
        mcp="memory_create_namespace",
        cli="namespaces",
    )
    async def create_namespace(self, agent: str, name: str) -> bool:
        """Create a namespace owned by ``agent``; True if made now, False if ``agent`` already owns
        it (idempotent). One owned by another agent is :class:`AlreadyExists`; a personal name
        (``@other/...``) of another agent is :class:`AccessDenied`."""
        async with self.engine.pool.acquire() as conn:
            return await namespace_sql.create(conn, agent, name)

    @operation(Op.RETAIN, namespace="namespace", meter=None)
    async def capture_namespace(
        self, agent: str, *, namespace: str | None = None, project: str | None = None
    ) -> tuple[str, bool]:
        """Where ``agent``'s captured memories go, and whether capture may inject that namespace's
        memories into the agent's context: ``(name, injectable)``.

        ``project`` (a name capture derived, e.g. from the git remote) is bound to the agent: its
        own namespace of that name if it has one from before, else the personal ``@agent/project``,
        created now, which nobody else can hold. ``namespace`` (one the operator configured) is used
        as it is, created for the agent if missing; its memories are injected only if the agent
        owns it or accepted a grant on it. Writing still needs write access, checked on write.
        """
        if (namespace is None) == (project is None):
            raise InputError("give either namespace or project")
        if project is not None:
            if not namespaces.is_valid(project) or project.startswith("@"):
                raise InputError(f"project {project!r} is not a valid namespace name", hint=namespaces.HINT)
            async with self.engine.pool.acquire() as conn:
                own = await namespace_sql.owner(conn, project) == agent
            namespace = project if own else namespaces.personal(agent, project)
        assert namespace is not None
        try:
            await self.create_namespace(agent, namespace)
        except AlreadyExists:
            pass  # someone else's: writing needs their (accepted) grant, and it is injected only then
        async with self.engine.pool.acquire() as conn:
            return namespace, (await access.caller(conn, agent, namespace)).injectable

    @operation(
        Op.SHARE,
        namespace="namespace",
        reads=Read.NAMESPACE,
        held=True,
        http="POST /v1/grants",
        client="share",
        backend="share",
        mcp="memory_share",
        cli="share",
    )
    async def share(
        self, agent: str, namespace: str, grantee: str, *, can_read: bool = True, can_write: bool = False
    ) -> bool:
        """Offer ``grantee`` read (and optionally write) access to ``namespace``'s team memories.
        Reading works at once; writing, and capture injecting the namespace's memories into the
        grantee's context, only once the grantee accepts (:meth:`accept_grant`). Returns whether the
        grant is accepted (narrowing an accepted grant keeps it accepted)."""
        async with self.engine.pool.acquire() as conn, conn.transaction():
            return await namespace_sql.share(conn, agent, namespace, grantee, can_read=can_read, can_write=can_write)

    @operation(
        Op.SHARE,
        namespace="namespace",
        held=True,
        http="POST /v1/grants/accept",
        client="accept_grant",
        cli="namespaces",
    )
    async def accept_grant(self, agent: str, namespace: str) -> dict[str, Any]:
        """``agent`` accepts the grant it was offered on ``namespace`` (idempotent)."""
        async with self.engine.pool.acquire() as conn, conn.transaction():
            return await namespace_sql.accept(conn, agent, namespace)

    @operation(
        Op.SHARE,
        namespace="namespace",
        held=True,
        http="POST /v1/grants/decline",
        client="decline_grant",
        cli="namespaces",
    )
    async def decline_grant(self, agent: str, namespace: str) -> bool:
        """``agent`` declines (or gives up) its grant on ``namespace``; True if there was one."""
        async with self.engine.pool.acquire() as conn, conn.transaction():
            return await namespace_sql.decline(conn, agent, namespace)

    @operation(
        Op.SHARE,
        namespace="namespace",
        reads=Read.NAMESPACE,
        held=True,
        http="DELETE /v1/grants",
        client="revoke",
        cli="share",
    )
    async def revoke(self, agent: str, namespace: str, grantee: str) -> bool:
        """Remove ``grantee``'s grant on ``namespace``; True if there was one."""
        async with self.engine.pool.acquire() as conn, conn.transaction():
            return await namespace_sql.revoke(conn, agent, namespace, grantee)

    @operation(
        Op.READ,
        reads=Read.OWN,
        http="GET /v1/namespaces",
        client="namespaces",
        backend="namespaces",
        mcp="memory_namespaces",
        cli="namespaces",
    )
    async def namespaces(self, agent: str) -> list[dict[str, Any]]:
        """Namespaces ``agent`` owns or holds a grant on (every namespace for an admin)."""
        async with self.engine.pool.acquire() as conn:
            return await namespace_sql.of_agent(conn, agent)

    @operation(Op.READ, namespace="namespace", reads=Read.NAMESPACE, http="GET /v1/grants", client="grants")
    async def grants(self, agent: str, namespace: str) -> list[dict[str, Any]]:
        """The grants on ``namespace`` (its owner and admins only)."""
        async with self.engine.pool.acquire() as conn:
            return await namespace_sql.grants(conn, agent, namespace)

    # --- identity: API keys ---------------------------------------------------------------------
    @system("authenticates an API key: the caller is not known before it answers")
    async def authenticate(self, key: str | None) -> identity.Principal:
        async with self.engine.pool.acquire() as conn:
            return await identity.authenticate(conn, key)

    @system("signs in to the console with an API key: the caller is not known before it answers")
    async def open_console_session(
        self, key: str | None, *, replaces: str | None = None
    ) -> tuple[str, identity.Principal]:
        """A console session for ``key`` (its id, for the cookie, and its agent), ending ``replaces``."""
        async with self.engine.pool.acquire() as conn:
            principal = await identity.authenticate(conn, key)
            ttl = self.engine.settings.console_session_ttl_s
            return await identity.open_session(conn, principal, self.engine.clock(), ttl, replaces=replaces), principal

    @system("authenticates a console session: the caller is not known before it answers")
    async def console_session(self, session_id: str | None) -> identity.Principal:
        async with self.engine.pool.acquire() as conn:
            return await identity.session(conn, session_id, self.engine.clock())

    @system("ends a console session: holding its id is what signing out needs")
    async def close_console_session(self, session_id: str) -> bool:
        async with self.engine.pool.acquire() as conn:
            return await identity.close_session(conn, session_id)

    @operation(
        Op.ADMIN,
        operator=True,
        admin=True,
        http="POST /v1/agents/{agent_id}/keys",
        client="create_key",
        cli=("agents create", "agents key"),
    )
    async def create_key(self, agent_id: str, *, label: str | None = None, agent: str | None = None) -> identity.NewKey:
        """A new API key for ``agent_id`` (admin); its secret is shown once, only its hash is kept."""
        async with self.engine.pool.acquire() as conn:
            return await identity.create_key(conn, agent_id, label=label)

    @operation(
        Op.ADMIN,
        operator=True,
        admin=True,
        http="DELETE /v1/agents/{agent_id}/keys/{key_id}",
        client="revoke_key",
        cli="agents revoke",
    )
    async def revoke_key(
        self, key_id: uuid.UUID | str, *, agent_id: str | None = None, agent: str | None = None
    ) -> bool:
        """Revoke a key (of ``agent_id``, when given) (admin). True if it was live."""
        async with self.engine.pool.acquire() as conn:
            return await identity.revoke_key(conn, as_uuid(key_id, "key id"), agent_id=agent_id)

    @operation(Op.ADMIN, operator=True, admin=True, http="GET /v1/agents", client="agents", cli="agents list")
    async def agents(self, *, agent: str | None = None) -> list[identity.AgentInfo]:
        """Every agent (admin; ``agent`` None: the operator on the database)."""
        async with self.engine.pool.acquire() as conn:
            return await identity.list_agents(conn)

    @operation(
        Op.ADMIN,
        operator=True,
        admin=True,
        http="GET /v1/agents/{agent_id}/keys",
        client="keys",
        cli="agents keys",
    )
    async def keys(self, agent_id: str, *, agent: str | None = None) -> list[identity.KeyInfo]:
        """An agent's keys, without their secrets (admin)."""
        async with self.engine.pool.acquire() as conn:
            return await identity.list_keys(conn, agent_id)

    @operation(
        Op.ADMIN,
        operator=True,
        admin=True,
        http="POST /v1/agents/{agent_id}/disable",
        client="disable_agent",
        cli="agents disable",
    )
    async def disable_agent(self, agent_id: str, *, agent: str | None = None) -> bool:
        """Disable an agent: its keys stop working, its memories stay (admin). True if it changed."""
        async with self.engine.pool.acquire() as conn:
            changed = await identity.disable_agent(conn, agent_id)
        self.engine.governor.forget_profiles()
        return changed

    # --- roles, held actions, usage and caps ------------------------------------------------------
    @operation(
        Op.ADMIN,
        operator=True,
        admin=True,
        http="PUT /v1/agents/{agent}/role",
        client="set_role",
        cli="agents role",
    )
    async def set_role(self, agent_id: str, role: str, *, agent: str | None = None) -> str:
        """Give ``agent_id`` a role (:mod:`cabrain.policy`)."""
        async with self.engine.pool.acquire() as conn:
            await identity.set_role(conn, agent_id, role)
        self.engine.governor.forget_profiles()
        return role

    @operation(Op.READ, reads=Read.OWN, http="GET /v1/actions", client="pending_actions", cli="actions list")
    async def pending_actions(self, agent: str, *, status: str | None = "pending") -> list[dict[str, Any]]:
        """Held actions ``agent`` may see (its own, and those on namespaces it owns; all for an admin)."""
        return await actions.listing(self.engine, agent, status=status)

    @operation(
        Op.DECIDE,
        http=("POST /v1/actions/{action_id}/approve", "POST /v1/actions/{action_id}/deny"),
        client="decide_action",
        cli=("actions approve", "actions deny"),
    )
    async def decide_action(self, agent: str, action_id: uuid.UUID | str, *, approve: bool) -> dict[str, Any]:
        """A agent (an admin, or a member that owns the action's namespace) approves (the held call
        runs, as the agent that asked) or denies a pending action."""
        return await actions.decide(self, actions.Person(agent), as_uuid(action_id, "action id"), approve=approve)

    @operation(Op.READ, reads=Read.OWN, http="GET /v1/usage", client="usage", cli="usage")
    async def usage(
        self,
        agent: str,
        *,
        since: date | None = None,
        until: date | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """Usage rows by day, agent, namespace and kind, from ``since`` (a week before ``until``) to
        ``until`` (today, UTC), of agent ``agent_id``; an agent sees its own, an admin anyone's (all
        agents' when ``agent_id`` is None)."""
        until = until or utc_today(self.engine.clock)
        since = since or until - timedelta(days=6)
        if until < since:
            raise InputError("the end of the range is before its start")
        if (until - since).days > 366:
            raise InputError("at most 366 days at a time")
        async with self.engine.pool.acquire() as conn:
            admin = await access.is_admin(conn, agent)
        if agent_id is None and not admin:
            agent_id = agent
        if agent_id != agent and not admin:
            raise AccessDenied(f"agent {agent!r} may only see its own usage", hint="use an admin key")
        try:  # what this process counted since its last flush, written first
            await self.engine.governor.flush()
        except Exception as exc:  # noqa: BLE001 - kept for the next flush; the report shows what is written
            log.warning("usage flush before a report failed", extra={"error": str(exc)})
        async with self.engine.pool.acquire() as conn:
            rows = await usage_sql.report(conn, since, until, agent_id, namespace)
        return {"since": since.isoformat(), "until": until.isoformat(), "rows": rows}

    @operation(
        Op.ADMIN,
        operator=True,
        admin=True,
        http=("PUT /v1/agents/{agent}/caps/{op}", "DELETE /v1/agents/{agent}/caps/{op}"),
        client="set_cap",
        cli="usage cap",
    )
    async def set_cap(self, agent: str | None, agent_id: str, op: str, per_day: int | None) -> list[dict[str, Any]]:
        """Set (``per_day``) or clear (None) the daily cap of agent ``agent_id`` on ``op`` (an
        operation, a model call kind, or ``*``), as admin ``agent`` (None: the operator). Returns the
        agent's caps."""
        kinds = cap_kinds()
        if op != "*" and op not in kinds:
            raise InputError(f"unknown kind {op!r} to cap", hint=f"one of *, {', '.join(sorted(kinds))}")
        async with self.engine.pool.acquire() as conn:
            if not await conn.fetchval(namespace_sql.AGENT_EXISTS, agent_id):
                raise NotFound(f"agent {agent_id!r} does not exist")
            if per_day is None:
                await usage_sql.clear_cap(conn, agent_id, op)
            else:
                if per_day < 0:
                    raise InputError("a cap is 0 or more")
                await usage_sql.set_cap(conn, agent_id, op, per_day, agent or "operator")
            found = await usage_sql.caps(conn, agent_id)
        self.engine.governor.forget_profiles()
        return found

    @operation(Op.ADMIN, operator=True, admin=True)
    async def caps(self, agent_id: str, *, agent: str | None = None) -> list[dict[str, Any]]:
        """Agent ``agent_id``'s daily caps (op, per_day, set_by, set_at), as admin ``agent`` (None:
        the operator): what :meth:`set_cap` answers, read without a change (the console's agent page)."""
        async with self.engine.pool.acquire() as conn:
            if not await conn.fetchval(namespace_sql.AGENT_EXISTS, agent_id):
                raise NotFound(f"agent {agent_id!r} does not exist")
            return await usage_sql.caps(conn, agent_id)


def as_uuid(value: uuid.UUID | str, what: str = "memory id") -> uuid.UUID:
    """``value`` as a UUID, or :class:`InputError` naming ``what`` it should have been."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InputError(f"{value!r} is not a {what} (a UUID)") from None
