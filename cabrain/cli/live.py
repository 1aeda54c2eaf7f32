"""``cabrain channels``, ``cabrain notify``, ``cabrain actions``, ``cabrain usage`` and ``cabrain
issues``: live channels, pushes, held actions, usage and caps, against the running service
(``CABRAIN_API_URL``, as the agent of ``CABRAIN_API_KEY``): channels and notifiers live in the
service, which receives and sends for them."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from cabrain.cli.common import EXIT_OK, REMOTE_NOTE, Subparsers, json_flag, namespace_option, remote
from cabrain.errors import UsageError
from cabrain.settings import Settings

if TYPE_CHECKING:
    from cabrain.client import Client

T = TypeVar("T")


def _json_arg(text: str | None, what: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        raise UsageError(f"{what} is not JSON: {text!r}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{what} must be a JSON object")
    return value


def _pairs(items: list[str] | None, what: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} takes KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def _show(args: argparse.Namespace, value: Any, lines: list[str]) -> int:
    if getattr(args, "json", False):
        print(json.dumps(value, ensure_ascii=False, indent=2, default=str))
    else:
        print("\n".join(lines) if lines else "(none)")
    return EXIT_OK


def _call(settings: Settings, call: Callable[[Client], T]) -> T:
    """``call`` on the client of the running service, as the agent of CABRAIN_API_KEY."""
    with remote(settings) as client:
        return call(client)


# --- channels ---------------------------------------------------------------------------------------
def cmd_channels_add(settings: Settings, args: argparse.Namespace) -> int:
    body = {
        "name": args.name,
        "kind": args.kind,
        "namespace": args.namespace,
        "visibility": args.visibility,
        "agent": args.agent,
        "secret_env": args.secret_env,
        "verify_token_env": args.verify_token_env,
        "notifier": args.notifier,
        "live_agent": args.live_agent,
        "tracker": args.tracker,
        "options": _pairs(args.option, "--option"),
    }
    made = _call(settings, lambda client: client.add_channel(body))
    print(f"channel {made['name']} ({made['kind']}) -> {made['namespace']}: the platform delivers to")
    print(f"  {settings.api_url}/v1/channels/{made['name']}/events")
    return EXIT_OK


def cmd_channels_list(settings: Settings, args: argparse.Namespace) -> int:
    found = _call(settings, lambda client: client.channels())
    lines = [
        f"{c['name']:<20} {c['kind']:<9} -> {c['namespace']} as {c['agent_id']}"
        + (f", live agent {c['live_agent']} filing in {c['tracker']}" if c["live_agent"] else "")
        for c in found
    ]
    return _show(args, found, lines)


def cmd_channels_remove(settings: Settings, args: argparse.Namespace) -> int:
    gone = _call(settings, lambda client: client.remove_channel(args.name))
    print(f"channel {args.name} {'removed' if gone else 'was not there'}")
    return EXIT_OK


# --- notifiers, subscriptions, the outbox -----------------------------------------------------------
def cmd_notify_add(settings: Settings, args: argparse.Namespace) -> int:
    config = {**_json_arg(args.options, "--options"), **_pairs(args.set, "--set")}
    made = _call(settings, lambda client: client.add_notifier(args.name, args.kind, config, args.secret_env))
    print(f"notifier {made['name']} ({made['kind']}), its secret read from ${made['secret_env']}")
    return EXIT_OK


def cmd_notify_list(settings: Settings, args: argparse.Namespace) -> int:
    found = _call(settings, lambda client: client.notifiers())
    return _show(args, found, [f"{n['name']:<20} {n['kind']:<9} ${n['secret_env']}" for n in found])


def cmd_notify_remove(settings: Settings, args: argparse.Namespace) -> int:
    gone = _call(settings, lambda client: client.remove_notifier(args.name))
    print(f"notifier {args.name} {'removed' if gone else 'was not there'}")
    return EXIT_OK


def cmd_subscribe(settings: Settings, args: argparse.Namespace) -> int:
    quiet_start = quiet_end = None
    if args.quiet_hours:
        quiet_start, sep, quiet_end = args.quiet_hours.partition("-")
        if not sep:
            raise UsageError("--quiet-hours takes START-END, e.g. 22:00-07:00")
    target = _json_arg(args.target, "--target")
    made = _call(
        settings,
        lambda client: client.subscribe(
            subscriber=args.subscriber,
            kinds=args.kind,
            namespace=args.namespace,
            notifier=args.notifier,
            target=target,
            min_importance=args.min_importance,
            max_per_hour=args.max_per_hour,
            quiet_start=quiet_start,
            quiet_end=quiet_end,
            timezone=args.tz,
        ),
    )
    print(f"subscription {made['id']}: {', '.join(made['kinds'])} -> {made['subscriber']}")
    return EXIT_OK


def cmd_subscriptions(settings: Settings, args: argparse.Namespace) -> int:
    found = _call(settings, lambda client: client.subscriptions(everyone=args.all))
    lines = [
        f"{s['id']}  {s['subscriber']:<16} {','.join(s['kinds']):<24} {s['namespace'] or '*':<16} "
        f"{s['notifier'] or 'stream'}{'  (disabled: ' + s['disabled_reason'] + ')' if s['disabled_at'] else ''}"
        for s in found
    ]
    return _show(args, found, lines)


def cmd_unsubscribe(settings: Settings, args: argparse.Namespace) -> int:
    gone = _call(settings, lambda client: client.unsubscribe(args.id))
    print(f"subscription {args.id} {'stopped' if gone else 'was stopped already'}")
    return EXIT_OK


def cmd_outbox(settings: Settings, args: argparse.Namespace) -> int:
    found = _call(settings, lambda client: client.outbox(status=args.status))
    lines = [
        f"{p['id']}  {p['kind']:<14} {p['status']:<10} {p['subscriber'] or p['destination']:<20} "
        f"{p['reason'] or p['last_error'] or ''}"
        for p in found
    ]
    return _show(args, found, lines)


def cmd_release(settings: Settings, args: argparse.Namespace) -> int:
    done = _call(settings, lambda client: client.release(args.id))
    print(f"push {args.id} {'released: it goes out now' if done else 'is not suppressed or failed'}")
    return EXIT_OK


# --- held actions -----------------------------------------------------------------------------------
def cmd_actions(settings: Settings, args: argparse.Namespace) -> int:
    found = _call(settings, lambda client: client.pending_actions(status=args.status))
    lines = [
        f"{a['id']}  {a['status']:<8} {a['agent_id']:<16} {a.get('label') or a['op']:<14} {a['namespace'] or '-':<16} "
        f"{json.dumps(a['args'].get('args', {}), ensure_ascii=False)[:80]}"
        for a in found
    ]
    return _show(args, found, lines)


def cmd_decide(settings: Settings, args: argparse.Namespace) -> int:
    done = _call(settings, lambda client: client.decide_action(args.id, approve=args.actions_command == "approve"))
    print(f"action {done['id']}: {done['status']}" + (f" ({done['error']})" if done.get("error") else ""))
    return EXIT_OK


# --- usage and caps ---------------------------------------------------------------------------------
def cmd_usage(settings: Settings, args: argparse.Namespace) -> int:
    found = _call(
        settings,
        lambda client: client.usage(since=args.since, until=args.until, agent_id=args.agent, namespace=args.namespace),
    )
    lines = [f"{'day':<10} {'agent':<20} {'namespace':<20} {'kind':<12} {'calls':>8} {'units':>10} {'cost $':>9}"]
    lines += [
        f"{r['day']:<10} {r['agent_id']:<20} {r['namespace'] or '-':<20} {r['op']:<12} {r['calls']:>8} "
        f"{r['units']:>10} {r['cost_usd']:>9.4f}"
        for r in found["rows"]
    ]
    return _show(args, found, lines)


def cmd_cap(settings: Settings, args: argparse.Namespace) -> int:
    if args.clear == (args.per_day is not None):
        raise UsageError("give a number per day, or --clear")
    caps = _call(settings, lambda client: client.set_cap(args.agent, args.op, None if args.clear else args.per_day))
    print(f"{args.agent}: " + (", ".join(f"{c['op']} {c['per_day']}/day" for c in caps) or "no caps"))
    return EXIT_OK


def cmd_file_issue(settings: Settings, args: argparse.Namespace) -> int:
    description = sys.stdin.read() if args.description == "-" else args.description
    filed = _call(
        settings,
        lambda client: client.file_issue(args.tracker, args.title, description, labels=args.label or [], key=args.key),
    )
    print(f"filed {filed['url']}")
    return EXIT_OK


def add_live(sub: Subparsers) -> None:
    channels = sub.add_parser(
        "channels", help="chat channels that retain what is said (service)", description=REMOTE_NOTE
    )
    csub = channels.add_subparsers(dest="channels_command", metavar="COMMAND", required=True)
    add = csub.add_parser(
        "add", parents=[namespace_option()], help="add a channel (admin)", description="Add a chat channel (admin)."
    )
    add.add_argument("name")
    add.add_argument("--kind", required=True, choices=["slack", "whatsapp", "talk", "webhook"])
    add.add_argument("--secret-env", required=True, help="the variable holding the platform's signing secret")
    add.add_argument("--verify-token-env", help="whatsapp: the variable holding the verify token")
    add.add_argument("--visibility", default="team", choices=["private", "team", "global"])
    add.add_argument("--agent", help="retain as this agent (default: you)")
    add.add_argument("--notifier", help="replies reach the channel's threads through this notifier")
    add.add_argument("--live-agent", help="an agent of role live that answers the channel")
    add.add_argument("--tracker", help="a gitlab or vikunja connector the live agent files issues in")
    add.add_argument("--option", action="append", metavar="KEY=VALUE", help="file_issues, prefix, labels, approvers")
    add.set_defaults(func=cmd_channels_add)
    ls = csub.add_parser(
        "list", parents=[json_flag()], help="list channels (admin)", description="List channels (admin)."
    )
    ls.set_defaults(func=cmd_channels_list)
    rm = csub.add_parser(
        "remove",
        help="remove a channel (admin); what it stored stays",
        description="Remove a channel (admin); what it stored stays.",
    )
    rm.add_argument("name")
    rm.set_defaults(func=cmd_channels_remove)

    notify = sub.add_parser(
        "notify", help="pushes: notifiers, subscriptions, the outbox (service)", description=REMOTE_NOTE
    )
    nsub = notify.add_subparsers(dest="notify_command", metavar="COMMAND", required=True)
    nadd = nsub.add_parser("add", help="add a notifier (admin)", description="Add a notifier (admin).")
    nadd.add_argument("name")
    nadd.add_argument("--kind", required=True, choices=["slack", "whatsapp", "talk", "webpush", "webhook"])
    nadd.add_argument("--secret-env", required=True, help="the variable holding its token or secret")
    nadd.add_argument("--options", help="its options as a JSON object")
    nadd.add_argument("--set", action="append", metavar="KEY=VALUE", help="one option (repeatable)")
    nadd.set_defaults(func=cmd_notify_add)
    nls = nsub.add_parser("list", parents=[json_flag()], help="list notifiers", description="List notifiers.")
    nls.set_defaults(func=cmd_notify_list)
    nrm = nsub.add_parser("remove", help="remove a notifier (admin)", description="Remove a notifier (admin).")
    nrm.add_argument("name")
    nrm.set_defaults(func=cmd_notify_remove)
    subscribe = nsub.add_parser(
        "subscribe",
        parents=[namespace_option(required=False)],
        help="subscribe to pushes",
        description="Subscribe to pushes (of one namespace with -n, else of every namespace you read).",
    )
    subscribe.add_argument("--subscriber", required=True, help="who is told")
    subscribe.add_argument(
        "--kind", action="append", required=True, choices=["contradiction", "stale", "pattern", "action_pending"]
    )
    subscribe.add_argument("--notifier", help="how to reach them (default: the event stream only)")
    subscribe.add_argument("--target", help='where, as JSON: {"channel": "C0.."}, {"to": "9665.."}, ...')
    subscribe.add_argument("--min-importance", type=float, default=0.5)
    subscribe.add_argument("--max-per-hour", type=int, default=6)
    subscribe.add_argument("--quiet-hours", metavar="START-END", help="quiet hours, e.g. 22:00-07:00")
    subscribe.add_argument("--tz", default="UTC", help="the subscriber's time zone (IANA name)")
    subscribe.set_defaults(func=cmd_subscribe)
    subs = nsub.add_parser(
        "subscriptions", parents=[json_flag()], help="your subscriptions", description="Your subscriptions."
    )
    subs.add_argument("--all", action="store_true", help="everyone's (admin)")
    subs.set_defaults(func=cmd_subscriptions)
    unsub = nsub.add_parser("unsubscribe", help="stop a subscription", description="Stop a subscription.")
    unsub.add_argument("id")
    unsub.set_defaults(func=cmd_unsubscribe)
    box = nsub.add_parser(
        "outbox",
        parents=[json_flag()],
        help="pushes and the gate's decisions",
        description="Pushes and the gate's decisions.",
    )
    box.add_argument("--status", choices=["pending", "delivered", "failed", "suppressed", "streamed"])
    box.set_defaults(func=cmd_outbox)
    release = nsub.add_parser(
        "release",
        help="send a suppressed or failed push after all",
        description="Send a suppressed or failed push after all.",
    )
    release.add_argument("id")
    release.set_defaults(func=cmd_release)

    actions = sub.add_parser("actions", help="held actions a person decides (service)", description=REMOTE_NOTE)
    asub = actions.add_subparsers(dest="actions_command", metavar="COMMAND", required=True)
    ls = asub.add_parser(
        "list",
        parents=[json_flag()],
        help="actions you may decide or asked for",
        description="Actions you may decide or asked for.",
    )
    ls.add_argument("--status", default="pending", choices=["pending", "done", "failed", "denied", "expired", "all"])
    ls.set_defaults(func=cmd_actions)
    for verb in ("approve", "deny"):
        decide = asub.add_parser(
            verb,
            help=f"{verb} a held action",
            description=f"{verb.title()} a held action: approved, it runs once, as the agent that asked.",
        )
        decide.add_argument("id")
        decide.set_defaults(func=cmd_decide)

    usage = sub.add_parser(
        "usage",
        parents=[json_flag(), namespace_option(required=False)],
        help="usage and spend per agent (service)",
        description="Usage and spend per agent (service).",
    )
    usage.add_argument("--agent")
    usage.add_argument("--since", help="YYYY-MM-DD (default: a week before --until)")
    usage.add_argument("--until", help="YYYY-MM-DD (default: today, UTC)")
    usage.set_defaults(func=cmd_usage)
    usub = usage.add_subparsers(dest="usage_command", metavar="COMMAND")
    cap = usub.add_parser(
        "cap",
        help="cap an agent's calls of a kind per day (admin)",
        description="Cap an agent's calls of a kind per day (admin).",
    )
    cap.add_argument("agent")
    cap.add_argument("op", help="recall, retain, read, file_issue, embed, chat, workflow, ... or * for all")
    cap.add_argument("per_day", type=int, nargs="?")
    cap.add_argument("--clear", action="store_true")
    cap.set_defaults(func=cmd_cap)

    issues = sub.add_parser("issues", help="file issues through a tracker connector (service)", description=REMOTE_NOTE)
    isub = issues.add_subparsers(dest="issues_command", metavar="COMMAND", required=True)
    file = isub.add_parser("file", help="file an issue", description="File an issue.")
    file.add_argument("--tracker", required=True, help="a gitlab or vikunja connector")
    file.add_argument("--title", required=True)
    file.add_argument("--description", default="", help="the text, or - to read it from stdin")
    file.add_argument("--label", action="append")
    file.add_argument("--key", help="the same key again files nothing new")
    file.set_defaults(func=cmd_file_issue)
