"""Roles: what an agent may do, decided by the server, never by a prompt.

Every operation of the core declares its kind (:class:`Op`, :mod:`cabrain.gate`), and the gate asks
:func:`decide` before it runs, whatever surface called it (HTTP, MCP, the CLI through HTTP, the memory tool, capture, the live
agent in the server). Grants still decide *where* an agent may read and write
(:mod:`cabrain.store.access`); the role decides *what kinds* of operation it may ask for at all:

============  ===========================================  ==========================================
role          may                                          needs a person's confirmation
============  ===========================================  ==========================================
``member``    everything its grants allow (the default)    -
``live``      recall and read in its scope, file issues    forget, share and grant changes, corrections
``reader``    recall and read in its scope                 -
============  ===========================================  ==========================================

Anything else is refused: a 403 whose message names the policy (``role live: retain is not
allowed``). An operation that needs confirmation is held as a *pending action*
(:mod:`cabrain.actions`); once a person (an admin, or the namespace's owner who is no live agent,
from the API, the CLI, the console or a chat channel's approvers) approves it, it runs as the agent
that asked. Admins (``agents.is_admin``) are members with the admin routes on top.
"""

from __future__ import annotations

import contextvars
import uuid
from dataclasses import dataclass
from enum import StrEnum

from cabrain.errors import ConfirmationRequired, PolicyDenied
from cabrain.fixes import Fix


class Op(StrEnum):
    """The kinds of operation a policy decides on."""

    RECALL = "recall"  # hot and archive recall
    READ = "read"  # get, list, browse, entities, judgments, the event stream
    RETAIN = "retain"  # retain, capture, memory-tool writes, imports
    FORGET = "forget"
    CORRECT = "correct"  # reconsolidate, revert, unarchive
    SHARE = "share"  # share, revoke, accept or decline a grant
    NAMESPACE = "namespace"  # create a namespace
    FILE_ISSUE = "file_issue"
    SUBSCRIBE = "subscribe"  # subscriptions to pushes
    SYNC = "sync"  # connector syncs
    WORKFLOW = "workflow"  # workflow calls and deployments (they spend model time)
    EXPORT = "export"
    DECIDE = "decide"  # approve or deny a held action (a person's)
    ADMIN = "admin"  # agents, keys, roles, caps, notifiers, channels, connectors, models, backups (admins only)


class Role(StrEnum):
    MEMBER = "member"
    LIVE = "live"
    READER = "reader"


@dataclass(frozen=True)
class Policy:
    role: Role
    allow: frozenset[Op]
    confirm: frozenset[Op]
    summary: str


POLICIES: dict[Role, Policy] = {
    Role.MEMBER: Policy(Role.MEMBER, frozenset(Op), frozenset(), "everything its grants allow"),
    Role.LIVE: Policy(
        Role.LIVE,
        frozenset({Op.RECALL, Op.READ, Op.FILE_ISSUE}),
        frozenset({Op.FORGET, Op.SHARE, Op.CORRECT}),
        "recall and read in its scope and file issues; forget, share and corrections need a person's confirmation",
    ),
    Role.READER: Policy(Role.READER, frozenset({Op.RECALL, Op.READ}), frozenset(), "recall and read in its scope"),
}


class Verdict(StrEnum):
    ALLOW = "allow"
    CONFIRM = "confirm"
    DENY = "deny"


def policy_name(role: Role, op: Op) -> str:
    return f"role {role.value}: {op.value}"


def decide(role: Role | str, op: Op) -> Verdict:
    policy = POLICIES[Role(role)]
    if op in policy.allow:
        return Verdict.ALLOW
    if op in policy.confirm:
        return Verdict.CONFIRM
    return Verdict.DENY


def refuse(agent: str, role: Role | str, op: Op) -> PolicyDenied:
    role = Role(role)
    return PolicyDenied(
        f"policy '{policy_name(role, op)}' refuses: agent {agent!r} has role {role.value!r}, which may "
        f"{POLICIES[role].summary}; {op.value} is not allowed",
        policy=policy_name(role, op),
        hint="ask an admin to give the agent another role (cabrain agents role NAME member), or use another agent",
    )


def held(
    agent: str, role: Role | str, op: Op, action_id: uuid.UUID, *, what: str | None = None
) -> ConfirmationRequired:
    """The answer to a held call; ``what`` names the call in words (an "accept grant" is held under
    the share policy), else its kind."""
    role = Role(role)
    return ConfirmationRequired(
        f"policy '{policy_name(role, op)}' holds this {what or op.value} for a person's confirmation: pending action "
        f"{action_id} (agent {agent!r}, role {role.value!r})",
        policy=policy_name(role, op),
        fix=Fix("approve_action", {"action": str(action_id)}),
    )


# The agent (and namespace) the current task acts for: model calls made on its behalf are metered to
# it (cabrain.usage), and an approved pending action runs under APPROVED, which lets the operation it
# holds through once.
ACTING: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("cabrain_acting", default=None)
APPROVED: contextvars.ContextVar[tuple[uuid.UUID, str, Op] | None] = contextvars.ContextVar(
    "cabrain_approved", default=None
)


__all__ = [
    "ACTING",
    "APPROVED",
    "POLICIES",
    "ConfirmationRequired",
    "Op",
    "Policy",
    "PolicyDenied",
    "Role",
    "Verdict",
    "decide",
    "held",
    "policy_name",
    "refuse",
]
