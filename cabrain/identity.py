"""API keys: who a request acts as.

A key is ``cbk_`` + 43 url-safe characters (256 random bits). Only its SHA-256 digest is stored,
with its first characters (``key_prefix``) so listings can tell keys apart; the key itself is
shown once, when it is made. A key acts as one agent; revoking it, or disabling the agent, stops
it. Admin agents (``agents.is_admin``) manage agents, keys and any namespace's grants.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import asyncpg

from cabrain.errors import AlreadyExists, InputError, NotFound, Unauthenticated
from cabrain.fixes import Fix
from cabrain.paths import write_private
from cabrain.store import identity as sql
from cabrain.store import namespaces as namespace_sql

KEY_PREFIX = "cbk_"
SHOWN_CHARS = 12  # "cbk_" + 8: enough to tell keys apart in a listing, useless for guessing

AGENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")


@dataclass(frozen=True)
class Principal:
    """The agent a request acts as."""

    agent_id: str
    is_admin: bool
    key_id: uuid.UUID


@dataclass(frozen=True)
class NewKey:
    id: uuid.UUID
    agent_id: str
    key: str  # shown once; never stored
    prefix: str
    created_at: datetime


@dataclass(frozen=True)
class KeyInfo:
    id: uuid.UUID
    agent_id: str
    prefix: str
    label: str | None
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


@dataclass(frozen=True)
class AgentInfo:
    id: str
    display_name: str | None
    is_admin: bool
    created_at: datetime
    disabled_at: datetime | None
    active_keys: int
    role: str = "member"  # cabrain.policy: member, live or reader


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def looks_like_key(key: str) -> bool:
    return isinstance(key, str) and key.startswith(KEY_PREFIX) and 20 <= len(key) <= 200 and key.isascii()


async def create_agent(
    conn: asyncpg.Connection,
    agent_id: str,
    *,
    display_name: str | None = None,
    is_admin: bool = False,
    exist_ok: bool = True,
) -> str:
    """Register an agent (idempotent unless ``exist_ok`` is False)."""
    if not isinstance(agent_id, str) or not AGENT_RE.fullmatch(agent_id):
        raise InputError(
            f"agent id {agent_id!r} is not valid",
            hint="1-128 characters: letters, digits and . _ @ - (starting with a letter or digit)",
        )
    if not exist_ok and await conn.fetchval(namespace_sql.AGENT_EXISTS, agent_id):
        raise AlreadyExists(
            f"agent {agent_id!r} already exists",
            fix=Fix("create_key", {"agent": agent_id}),
        )
    await conn.fetchrow(sql.UPSERT_AGENT, agent_id, display_name, is_admin)
    return agent_id


async def create_key(conn: asyncpg.Connection, agent_id: str, *, label: str | None = None) -> NewKey:
    """Make a key for an existing, active agent; the returned ``key`` is the only copy."""
    row = await conn.fetchrow(sql.AGENT_ROW, agent_id)
    if row is None:
        raise NotFound(
            f"agent {agent_id!r} does not exist",
            fix=Fix("create_agent", {"agent": agent_id}),
        )
    if row["disabled_at"] is not None:
        raise InputError(f"agent {agent_id!r} is disabled; it cannot get new keys")
    if label is not None and len(label) > 200:
        raise InputError("a key label is at most 200 characters")
    key = generate_key()
    made = await conn.fetchrow(sql.INSERT_KEY, agent_id, key[:SHOWN_CHARS], hash_key(key), label)
    return NewKey(made["id"], agent_id, key, key[:SHOWN_CHARS], made["created_at"])


async def authenticate(conn: asyncpg.Connection, key: str | None) -> Principal:
    """The agent behind ``key``; :class:`Unauthenticated` for a missing, unknown or revoked key."""
    if not key:
        raise Unauthenticated(
            "this request carries no API key",
            fix=Fix("send_key"),
        )
    if not looks_like_key(key):
        raise Unauthenticated(
            "the API key is malformed",
            hint="keys start with 'cbk_'; check for a truncated copy",
        )
    row = await conn.fetchrow(sql.AUTHENTICATE, hash_key(key))
    if row is None:
        raise Unauthenticated(
            "the API key is unknown or revoked, or its agent is disabled",
            fix=Fix("new_key"),
        )
    await conn.execute(sql.TOUCH_KEY, row["key_id"])
    return Principal(row["agent_id"], row["is_admin"], row["key_id"])


async def revoke_key(conn: asyncpg.Connection, key_id: uuid.UUID, *, agent_id: str | None = None) -> bool:
    """Revoke a key (of ``agent_id`` when given), and end its console sessions; False when there was
    no such active key."""
    async with conn.transaction():
        revoked = await conn.fetchval(sql.REVOKE_KEY, key_id, agent_id) is not None
        if revoked:
            await conn.execute(sql.END_KEY_SESSIONS, key_id)
    return revoked


def session_hash(session_id: str) -> bytes:
    return hashlib.sha256(b"cabrain-console-session:" + session_id.encode("utf-8", "replace")).digest()


async def open_session(
    conn: asyncpg.Connection, principal: Principal, now: datetime, ttl_s: int, *, replaces: str | None = None
) -> str:
    """A new console session of ``principal``'s key (its id, for the cookie; only its digest is
    kept), ending ``replaces`` (the one the browser held) and the expired ones."""
    session_id = secrets.token_urlsafe(32)
    async with conn.transaction():
        if replaces:
            await conn.execute(sql.END_SESSION, session_hash(replaces))
        await conn.execute(sql.END_EXPIRED_SESSIONS, now)
        await conn.execute(
            sql.OPEN_SESSION,
            session_hash(session_id),
            principal.key_id,
            principal.agent_id,
            now,
            now + timedelta(seconds=ttl_s),
        )
    return session_id


async def session(conn: asyncpg.Connection, session_id: str | None, now: datetime) -> Principal:
    """The agent of a live console session; :class:`Unauthenticated` for none, an unknown, ended or
    expired one, or one whose key was revoked or agent disabled."""
    row = await conn.fetchrow(sql.SESSION, session_hash(session_id), now) if session_id else None
    if row is None:
        raise Unauthenticated("the console session has ended (or never began)", hint="sign in again")
    return Principal(row["agent_id"], row["is_admin"], row["key_id"])


async def close_session(conn: asyncpg.Connection, session_id: str) -> bool:
    return await conn.fetchval(sql.CLOSE_SESSION, session_hash(session_id)) is not None


async def list_agents(conn: asyncpg.Connection) -> list[AgentInfo]:
    return [AgentInfo(**dict(r)) for r in await conn.fetch(sql.LIST_AGENTS)]


async def list_keys(conn: asyncpg.Connection, agent_id: str) -> list[KeyInfo]:
    if await conn.fetchrow(sql.AGENT_ROW, agent_id) is None:
        raise NotFound(f"agent {agent_id!r} does not exist")
    return [
        KeyInfo(
            r["id"],
            r["agent_id"],
            r["key_prefix"],
            r["label"],
            r["created_at"],
            r["last_used_at"],
            r["revoked_at"],
        )
        for r in await conn.fetch(sql.LIST_KEYS, agent_id)
    ]


async def disable_agent(conn: asyncpg.Connection, agent_id: str) -> bool:
    """Disable an agent (its keys stop working; its memories stay). False if already disabled."""
    if await conn.fetchrow(sql.AGENT_ROW, agent_id) is None:
        raise NotFound(f"agent {agent_id!r} does not exist")
    return await conn.fetchval(sql.DISABLE_AGENT, agent_id) is not None


async def set_role(conn: asyncpg.Connection, agent_id: str, role: str) -> None:
    """Give an agent a role (:mod:`cabrain.policy`): member, live or reader."""
    if role not in ("member", "live", "reader"):
        raise InputError(f"unknown role {role!r}", hint="member, live or reader")
    if await conn.fetchval(sql.SET_ROLE, agent_id, role) is None:
        raise NotFound(f"agent {agent_id!r} does not exist")


def admin_key_path(home: Path) -> Path:
    return home / "admin.key"


BOOTSTRAP_SETTING = "admin_bootstrapped_at"


@dataclass(frozen=True)
class AdminBootstrap:
    """What ``cabrain up`` found or did about the first admin key."""

    path: Path  # where the first run wrote its key
    made_now: bool  # this run was the first: an admin agent and its key were made
    active: bool  # some admin agent has a key that works


async def ensure_admin_key(conn: asyncpg.Connection, home: Path, *, agent_id: str = "admin") -> AdminBootstrap:
    """First run only: create the ``admin`` agent and a key, written to ``home/admin.key`` (mode 0600).

    The bootstrap happens once per database (recorded in ``cabrain_settings``). After it, admin
    agents and keys are the operator's: one that was disabled or revoked stays so, however often
    ``cabrain up`` runs; a database that already had an admin before the record existed counts as
    bootstrapped. The operator makes another admin with ``cabrain agents create NAME --admin``.
    """
    path = admin_key_path(home)
    async with conn.transaction():
        claimed = await conn.fetchval(sql.CLAIM_BOOTSTRAP, BOOTSTRAP_SETTING) is not None
        if claimed and not await conn.fetchval(sql.ANY_ADMIN):
            if await conn.fetchval(namespace_sql.AGENT_EXISTS, agent_id):
                raise AlreadyExists(
                    f"the first admin cannot be made: an agent named {agent_id!r} exists and is not an admin",
                    hint="make an admin yourself: cabrain agents create NAME --admin",
                )
            await create_agent(conn, agent_id, display_name="CaBrain administrator", is_admin=True, exist_ok=False)
            new = await create_key(conn, agent_id, label="created by cabrain up")
            write_private(path, new.key + "\n")
            return AdminBootstrap(path, True, True)
    return AdminBootstrap(path, False, await conn.fetchval(sql.ACTIVE_ADMIN_KEYS) > 0)
