"""``cabrain agents ...`` (agents and their API keys), ``namespaces`` and ``share`` (grants)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from cabrain.cli.common import EXIT_OK, REMOTE_NOTE, Subparsers, acting_as, remote, require_acting
from cabrain.errors import NotFound, UsageError
from cabrain.settings import Settings

T = TypeVar("T")


def _local_db(settings: Settings, work: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``work(conn)`` on the hot tier directly (agents commands without CABRAIN_API_URL)."""
    from cabrain.store import migrations  # lazy, here and below: start-up time (common.py)
    from cabrain.store.db import connect, hot_tier

    async def run(dsn: str) -> T:
        conn = await connect(dsn, timeout=settings.db_connect_timeout_s)
        try:
            await migrations.require_current(conn, settings.schema_dir)
            return await work(conn)
        finally:
            await conn.close()

    with hot_tier(settings) as dsn:
        return asyncio.run(run(dsn))


def _print_new_key(agent_id: str, key: str, key_id: str) -> None:
    print(f"agent : {agent_id}")
    print(f"key id: {key_id}")
    print(f"key   : {key}")
    print("store the key now: it is not shown again (only its SHA-256 digest is kept)", file=sys.stderr)


# --- agents and keys ---------------------------------------------------------------------------------------
def cmd_agents_create(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import identity

    if settings.api_url:
        with remote(settings) as client:
            made = client.create_agent(
                args.name, display_name=args.display_name, is_admin=args.admin, key_label=args.label
            )
        _print_new_key(made["agent_id"], made["key"], made["key_id"])
        return EXIT_OK

    async def work(conn: Any) -> Any:
        async with conn.transaction():
            await identity.create_agent(
                conn, args.name, display_name=args.display_name, is_admin=args.admin, exist_ok=False
            )
            return await identity.create_key(conn, args.name, label=args.label)

    new = _local_db(settings, work)
    _print_new_key(new.agent_id, new.key, str(new.id))
    return EXIT_OK


def cmd_agents_key(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import identity

    if settings.api_url:
        with remote(settings) as client:
            made = client.create_key(args.name, label=args.label)
        _print_new_key(made["agent_id"], made["key"], made["key_id"])
        return EXIT_OK
    new = _local_db(settings, lambda conn: identity.create_key(conn, args.name, label=args.label))
    _print_new_key(new.agent_id, new.key, str(new.id))
    return EXIT_OK


def cmd_agents_list(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import identity

    if settings.api_url:
        with remote(settings) as client:
            agents = client.agents()
    else:
        agents = [a.__dict__ for a in _local_db(settings, identity.list_agents)]
    print(f"{'agent':<32} {'admin':<6} {'role':<7} {'keys':>4}  state")
    for a in agents:
        state = "disabled" if a["disabled_at"] else "active"
        role = a.get("role", "member")
        print(f"{a['id']:<32} {'yes' if a['is_admin'] else 'no':<6} {role:<7} {a['active_keys']:>4}  {state}")
    return EXIT_OK


def cmd_agents_role(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import identity

    if settings.api_url:
        with remote(settings) as client:
            client.set_role(args.name, args.role)
    else:
        _local_db(settings, lambda conn: identity.set_role(conn, args.name, args.role))
    print(f"agent {args.name} has role {args.role}")
    return EXIT_OK


def cmd_agents_keys(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import identity

    if settings.api_url:
        with remote(settings) as client:
            keys = client.keys(args.name)
    else:
        keys = [k.__dict__ for k in _local_db(settings, lambda conn: identity.list_keys(conn, args.name))]
    for k in keys:
        state = f"revoked {k['revoked_at']}" if k["revoked_at"] else "active"
        print(f"{k['id']}  {k['prefix']}...  {k['label'] or '-'}  {state}")
    return EXIT_OK


def cmd_agents_revoke(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import identity

    try:
        key_id = uuid.UUID(args.key_id)
    except ValueError:
        raise UsageError(f"{args.key_id!r} is not a key id (see: cabrain agents keys {args.name})") from None
    if settings.api_url:
        with remote(settings) as client:
            client.revoke_key(args.name, key_id)
    elif not _local_db(settings, lambda conn: identity.revoke_key(conn, key_id, agent_id=args.name)):
        raise NotFound(f"agent {args.name!r} has no active key {key_id}")
    print(f"revoked key {key_id} of {args.name}")
    return EXIT_OK


def cmd_agents_disable(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain import identity

    if settings.api_url:
        with remote(settings) as client:
            client.disable_agent(args.name)
    else:
        _local_db(settings, lambda conn: identity.disable_agent(conn, args.name))
    print(f"disabled {args.name}: its keys no longer work; its memories stay")
    return EXIT_OK


def add_agents(sub: Subparsers) -> None:
    agents = sub.add_parser(
        "agents",
        help="manage agents and their API keys",
        description="Agents and API keys. With CABRAIN_API_URL (and an admin CABRAIN_API_KEY) through the API; "
        "otherwise directly on the hot tier.",
    )
    agents_sub = agents.add_subparsers(dest="agents_command", metavar="ACTION", required=True)
    a_create = agents_sub.add_parser(
        "create",
        help="create an agent and print its first key (shown once)",
        description="Create an agent and print its first key (shown once).",
    )
    a_create.add_argument("name")
    a_create.add_argument("--admin", action="store_true", help="the agent manages agents, keys and grants")
    a_create.add_argument("--display-name", default=None)
    a_create.add_argument("--label", default=None, help="label of the key")
    a_create.set_defaults(func=cmd_agents_create)
    a_key = agents_sub.add_parser(
        "key",
        help="make another key for an agent (shown once)",
        description="Make another key for an agent (shown once).",
    )
    a_key.add_argument("name")
    a_key.add_argument("--label", default=None)
    a_key.set_defaults(func=cmd_agents_key)
    a_list = agents_sub.add_parser("list", help="list agents", description="List agents.")
    a_list.set_defaults(func=cmd_agents_list)
    a_keys = agents_sub.add_parser(
        "keys",
        help="list an agent's keys (ids and prefixes, never the keys)",
        description="List an agent's keys (ids and prefixes, never the keys).",
    )
    a_keys.add_argument("name")
    a_keys.set_defaults(func=cmd_agents_keys)
    a_revoke = agents_sub.add_parser(
        "revoke", help="revoke one of an agent's keys", description="Revoke one of an agent's keys."
    )
    a_revoke.add_argument("name")
    a_revoke.add_argument("key_id")
    a_revoke.set_defaults(func=cmd_agents_revoke)
    a_disable = agents_sub.add_parser(
        "disable",
        help="disable an agent (keys stop working, memories stay)",
        description="Disable an agent (keys stop working, memories stay).",
    )
    a_disable.add_argument("name")
    a_disable.set_defaults(func=cmd_agents_disable)
    a_role = agents_sub.add_parser(
        "role",
        help="give an agent a role: member, live (recall and file issues only) or reader",
        description="Give an agent a role. The server enforces it on every surface: member (what its grants "
        "allow), live (recall and file issues; forget, share and corrections wait for a person) or reader.",
    )
    a_role.add_argument("name")
    a_role.add_argument("role", choices=["member", "live", "reader"])
    a_role.set_defaults(func=cmd_agents_role)


# --- namespaces and grants ---------------------------------------------------------------------------------
def cmd_namespaces(settings: Settings, args: argparse.Namespace) -> int:
    answer: Any
    if not settings.api_url:
        answer = _namespaces_here(settings, args)
    else:
        with remote(settings) as client:
            if args.create:
                answer = client.create_namespace(args.create)
            elif args.accept:
                answer = client.accept_grant(args.accept)
            elif args.decline:
                answer = client.decline_grant(args.decline)
            else:
                answer = client.namespaces()
    if args.create:
        print(f"namespace {args.create} {'created' if answer else 'already yours'}")
    elif args.accept:
        what = "read and write" if answer["can_write"] else "read"
        print(f"accepted: you may {what} {args.accept}'s team memories, and capture may use them")
    elif args.decline:
        print(f"{'declined' if answer else 'you held no grant on'} {args.decline}")
    else:
        for ns in answer:
            access = "rw" if ns["can_write"] else "r"
            grant = ns.get("grant")
            pending = ""
            if grant and not grant["accepted"]:
                offered = "read and write" if grant["can_write"] else "read"
                pending = (
                    f"  (offered {offered} by {grant['granted_by']}; accept: cabrain namespaces --accept {ns['name']})"
                )
            print(f"{ns['name']:<40} {access:<3} owner {ns['owner_agent_id']}{pending}")
    return EXIT_OK


def _namespaces_here(settings: Settings, args: argparse.Namespace) -> Any:
    """``cabrain namespaces`` without a service: the same operations on the hot tier, as ``--as AGENT``
    (the operator, who owns the database, acting for it; by default the first admin)."""
    from cabrain.brain import Brain

    agent = args.as_agent

    async def run() -> Any:
        brain = await Brain.open(settings)
        try:
            await require_acting(brain.engine, agent)
            if args.create:
                return await brain.create_namespace(agent, args.create)
            if args.accept:
                return await brain.accept_grant(agent, args.accept)
            if args.decline:
                return await brain.decline_grant(agent, args.decline)
            return await brain.namespaces(agent)
        finally:
            await brain.close()

    return asyncio.run(run())


def cmd_share(settings: Settings, args: argparse.Namespace) -> int:
    with remote(settings) as client:
        if args.revoke:
            removed = client.revoke(args.namespace, args.agent)
            print(f"{'revoked' if removed else 'no grant for'} {args.agent} on {args.namespace}")
        else:
            accepted = client.share(args.namespace, args.agent, can_write=args.write)
            print(
                f"{args.agent} may now read {args.namespace}'s team memories"
                + (
                    ""
                    if accepted
                    else f"; it writes, and its capture uses them, once it accepts "
                    f"(cabrain namespaces --accept {args.namespace}, with its key)"
                )
            )
    return EXIT_OK


def add_namespaces(sub: Subparsers) -> None:
    namespaces = sub.add_parser(
        "namespaces",
        help="list or create namespaces; accept or decline grants",
        description="List your namespaces (and grants offered to you), create one, or accept or decline a "
        "grant. With CABRAIN_API_URL set, as the agent of CABRAIN_API_KEY; otherwise on the hot tier, as --as AGENT.",
        parents=[acting_as()],
    )
    namespaces_action = namespaces.add_mutually_exclusive_group()
    namespaces_action.add_argument("--create", metavar="NAME", default=None, help="create a namespace you own")
    namespaces_action.add_argument(
        "--accept",
        metavar="NAME",
        default=None,
        help="accept the grant you were offered on NAME (writing, and capture, need it)",
    )
    namespaces_action.add_argument(
        "--decline", metavar="NAME", default=None, help="decline (or give up) your grant on NAME"
    )
    namespaces.set_defaults(func=cmd_namespaces)


def add_share(sub: Subparsers) -> None:
    share = sub.add_parser(
        "share",
        help="grant (or revoke) an agent access to a namespace",
        description="Share a namespace's team memories." + REMOTE_NOTE,
    )
    share.add_argument("namespace")
    share.add_argument("agent")
    share.add_argument("--write", action="store_true", help="also allow writing")
    share.add_argument("--revoke", action="store_true", help="remove the grant instead")
    share.set_defaults(func=cmd_share)
