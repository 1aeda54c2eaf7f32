"""Pending actions: an operation a role holds (:mod:`cabrain.policy`) until a person approves it.

A held call is stored with the Brain method and arguments that run it again (the gate,
:mod:`cabrain.gate`, holds it), then answered with a 403 naming the policy and the action. A
*person* with authority over what the action touches decides it, never the agent that asked:

- an admin, or an agent of role ``member`` that owns the action's namespace (:class:`Person`: from
  the API, the CLI, the console);
- one of a chat channel's configured approvers (:class:`ChatApprover`: the live agent reads
  "approve <id>"), only for an action on the namespace that channel serves, and only on a platform
  that vouches for who sent the message (Slack, WhatsApp, Talk; not a generic webhook, whose sender
  names itself).
Approved, the method runs as the agent that asked, with the approval letting the held operation
through once (:data:`cabrain.policy.APPROVED`); its result or error is kept on the action. An
action nobody decided on expires after ``action_ttl_s``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from cabrain.errors import AccessDenied, CabrainError, ConflictError, InputError, NotFound
from cabrain.policy import APPROVED, Op, Role, held
from cabrain.redact import redact_deep
from cabrain.store import access
from cabrain.store import actions as actions_sql
from cabrain.store import channels as channel_sql
from cabrain.store import notify as notify_sql
from cabrain.types import to_json

if TYPE_CHECKING:
    from cabrain.engine import Engine

# Platforms whose signed payloads name the sender as the platform knows it: their users may approve.
VERIFIED_SENDERS = frozenset({"slack", "whatsapp", "talk"})

# What a held call asks for, in words, by the method it runs. The kind (``op``) is the policy that
# held it, which groups several methods: accepting a grant is held under ``share``, but what a person
# approves is an acceptance. A method not named here is its name in words.
LABELS = {
    "reconsolidate": "correct",
    "revert": "revert a judgment",
    "revert_run": "revert a sleep run",
    "revoke": "revoke a grant",
    "accept_grant": "accept grant",
    "decline_grant": "decline grant",
}


def label(method: str) -> str:
    """The held call of ``method`` in words (``accept_grant``: "accept grant")."""
    return LABELS.get(method, method.replace("_", " "))


def memory_of(args: dict[str, Any]) -> uuid.UUID | None:
    """The memory a held call's arguments name (``memory_id``, or a kept call's ``old_id``), if any."""
    memory = args.get("memory_id") or args.get("old_id")
    return uuid.UUID(str(memory)) if memory and _is_uuid(memory) else None


@dataclass(frozen=True)
class Person:
    """An agent deciding, by its own key (the API, the CLI, the console)."""

    agent: str

    @property
    def name(self) -> str:
        return self.agent


@dataclass(frozen=True)
class ChatApprover:
    """A message's sender on a channel, as its platform's signature vouches for it."""

    channel: str
    sender: str  # the platform's user id

    @property
    def name(self) -> str:
        return f"channel:{self.channel}:{self.sender}"


async def hold(
    engine: Engine, agent: str, role: Role, op: Op, namespace: str | None, method: str, args: dict[str, Any]
) -> Exception:
    """Store the held call and return the error that tells the caller so."""
    action_id = uuid.uuid4()
    now = engine.clock()
    if engine.settings.redact_secrets:  # what waits for a person is stored text too
        args = cast(dict[str, Any], redact_deep(args))
    memory = memory_of(args)  # not a memory id: the method will say so when it runs
    async with engine.pool.acquire() as conn:
        if namespace is None and memory is not None:
            namespace = await conn.fetchval(access.NAMESPACE_OF, memory)
        error = held(agent, role, op, action_id, what=label(method))
        await conn.execute(
            actions_sql.INSERT,
            action_id,
            agent,
            op.value,
            namespace,
            json.dumps({"method": method, "args": args}),
            error.policy,
            now,
            now + timedelta(seconds=engine.settings.action_ttl_s),
        )
        if namespace is not None:  # its namespace's people may subscribe to hear of it (action_pending)
            await notify_sql.insert_event(
                conn,
                "action_pending",
                namespace,
                f"action:{action_id}",
                now=now,
                importance=1.0,
                body=(
                    f"{agent} asks to {label(method)} ({error.policy}). A person approves or denies it on the "
                    f"console's Actions page, or: cabrain actions approve {action_id}"
                ),
                memory_ids=[memory] if memory is not None else [],
                data={"action": str(action_id), "agent": agent, "op": op.value},
            )
    return error


# Parameters an operation renamed since an action holding a call to it may have been kept (issue 33:
# Brain.reconsolidate took old_id and corrected_content): a kept call runs with the new names.
RENAMED_ARGS = {"reconsolidate": {"old_id": "memory_id", "corrected_content": "content"}}


def _is_uuid(value: Any) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


async def pending_by_prefix(engine: Engine, prefix: str) -> list[uuid.UUID]:
    """The pending actions whose id starts with ``prefix`` (at most two: enough to tell it is ambiguous)."""
    async with engine.pool.acquire() as conn:
        return [r["id"] for r in await conn.fetch(actions_sql.BY_PREFIX, prefix.lower())]


def _out(row: Any) -> dict[str, Any]:
    out = dict(row)
    out["args"] = json.loads(out["args"]) if isinstance(out["args"], str) else out["args"]
    out["label"] = label(str(out["args"].get("method") or out["op"]))
    if isinstance(out.get("result"), str):
        out["result"] = json.loads(out["result"])
    return out


async def listing(engine: Engine, person: str, *, status: str | None = "pending", limit: int = 100) -> list[dict]:
    """The actions ``person`` may see: its own requests and those on namespaces it owns (all: an admin)."""
    if status not in (None, "pending", "approved", "denied", "expired", "done", "failed"):
        raise InputError(f"unknown status {status!r}", hint="pending, done, failed, denied or expired")
    async with engine.pool.acquire() as conn:
        await conn.execute(actions_sql.EXPIRE, engine.clock())
        profile = await engine.governor.profile(person)
        is_admin = bool(profile and profile["is_admin"])
        return [_out(r) for r in await conn.fetch(actions_sql.LIST, status, is_admin, person, limit)]


async def _may_decide(engine: Engine, who: Person | ChatApprover, action: dict[str, Any]) -> None:
    if isinstance(who, ChatApprover):
        await _chat_may_decide(engine, who, action)
        return
    person = who.agent
    if person == action["agent_id"]:
        raise AccessDenied("an agent cannot approve or deny its own held action", hint="a person decides it")
    async with engine.pool.acquire() as conn:
        found = await conn.fetchrow(actions_sql.PERSON, person, action["namespace"])
    if found is None or not found["active"]:
        raise AccessDenied(f"agent {person!r} may not decide actions")
    if not found["is_admin"] and not (found["owner"] and found["role"] == Role.MEMBER.value):
        raise AccessDenied(
            f"agent {person!r} may not decide this action: an admin, or a member that owns namespace "
            f"{action['namespace']!r}, decides it"
        )


async def _chat_may_decide(engine: Engine, who: ChatApprover, action: dict[str, Any]) -> None:
    """The channel exists, vouches for its senders, lists this one as an approver, and serves the
    action's namespace (read from the database, never from the caller)."""
    async with engine.pool.acquire() as conn:
        channel = await conn.fetchrow(channel_sql.FOR_APPROVAL, who.channel)
    if channel is None:
        raise AccessDenied(f"channel {who.channel!r} does not exist")
    options = json.loads(channel["options"]) if isinstance(channel["options"], str) else channel["options"]
    if channel["kind"] not in VERIFIED_SENDERS:
        raise AccessDenied(
            f"a {channel['kind']} channel cannot approve actions: its messages name their own sender",
            hint="approve it in the console, the API or the CLI (cabrain actions approve ID)",
        )
    if who.sender not in (options or {}).get("approvers", []):
        raise AccessDenied(f"{who.sender!r} is not one of channel {who.channel!r}'s approvers")
    if action["namespace"] is None or action["namespace"] != channel["namespace"]:
        raise AccessDenied(
            f"channel {who.channel!r} serves namespace {channel['namespace']!r}: it cannot decide an action on "
            f"{action['namespace']!r}",
            hint="an admin or the namespace's owner decides it (console, API or CLI)",
        )


async def decide(brain: Any, who: Person | ChatApprover, action_id: uuid.UUID, *, approve: bool) -> dict[str, Any]:
    """Approve (and run, as a method of ``brain``, a :class:`cabrain.brain.Brain`) or deny a pending
    action; what it became."""
    engine = brain.engine
    async with engine.pool.acquire() as conn:
        row = await conn.fetchrow(actions_sql.ONE, action_id)
    if row is None:
        raise NotFound(f"no pending action {action_id}")
    await _may_decide(engine, who, dict(row))
    method = getattr(type(brain), str(_out(row)["args"].get("method")), None)
    if approve and not getattr(getattr(method, "__operation__", None), "held", False):
        raise ConflictError(f"action {action_id} names no operation a role holds", hint="deny it")
    async with engine.pool.acquire() as conn:
        claimed = await conn.fetchrow(
            actions_sql.CLAIM, action_id, "approved" if approve else "denied", who.name, engine.clock()
        )
    if claimed is None:
        raise ConflictError(f"action {action_id} is {row['status']} already, or expired")
    action = _out(claimed)
    if not approve:
        return action
    call = action["args"]
    token = APPROVED.set((action_id, action["agent_id"], Op(action["op"])))
    try:
        args = {RENAMED_ARGS.get(call["method"], {}).get(k, k): v for k, v in call["args"].items()}
        result = await getattr(brain, call["method"])(action["agent_id"], **args)
        status, out, error = "done", to_json(result), None
    except CabrainError as exc:
        status, out, error = "failed", None, str(exc)
    finally:
        APPROVED.reset(token)
    async with engine.pool.acquire() as conn:
        await conn.execute(actions_sql.FINISH, action_id, status, json.dumps(out) if out is not None else None, error)
    return {**action, "status": status, "result": out, "error": error}


__all__ = ["ChatApprover", "Person", "decide", "hold", "label", "listing", "memory_of", "pending_by_prefix"]
