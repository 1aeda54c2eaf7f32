"""A person's corrections against a running API: ``correct`` (a memory's new version), ``unforget``
(a forgotten memory back; ``restore`` is the backup's) and ``audit`` (a namespace's judgments, and
reverting several of them)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cabrain.cli.common import EXIT_FAIL, EXIT_OK, REMOTE_NOTE, Subparsers, json_flag, namespace_option, remote
from cabrain.cli.memories import _timestamp
from cabrain.settings import Settings


def cmd_correct(settings: Settings, args: argparse.Namespace) -> int:
    content = sys.stdin.read() if args.content == "-" else args.content
    with remote(settings) as client:
        result = client.correct(args.memory_id, content, reason=args.reason)
    print(
        f"corrected {args.memory_id}: its new version is {result.memory_id} (the old one superseded, kept); "
        f"cabrain revert {result.memory_id} undoes it"
    )
    return EXIT_OK


def cmd_unforget(settings: Settings, args: argparse.Namespace) -> int:
    with remote(settings) as client:
        done = client.restore(args.memory_id, reason=args.reason)
    if args.json:
        print(json.dumps(done, ensure_ascii=False, indent=2))
        return EXIT_OK
    print(f"restored {args.memory_id}: back in recall; this is judgment {done['id']} (revert it to forget it again)")
    return EXIT_OK


def side(items: list[dict[str, Any]]) -> str:
    """One side of a judgment in a line: its memories' texts (shortened)."""
    texts = [(i["content"] if i["content"] is not None else f"[archived {i['memory_id']}]") for i in items]
    text = " | ".join(t.replace("\n", " ") for t in texts) or "-"
    return text if len(text) <= 100 else text[:99] + "…"


def cmd_audit(settings: Settings, args: argparse.Namespace) -> int:
    with remote(settings) as client:
        if args.revert:
            results = client.revert_judgments(args.revert, reason=args.reason)
        else:
            page = client.audit(
                args.namespace,
                kind=args.kind,
                origin=args.origin,
                since=args.since,
                until=args.until,
                cursor=args.cursor,
                limit=args.limit,
            )
    if args.revert:
        if args.json:
            print(json.dumps(results, ensure_ascii=False, indent=2))
        for r in results:
            if not args.json:
                print(
                    f"{r['id']}: " + (f"reverted (revert {r['revert']})" if r["ok"] else f"NOT reverted: {r['error']}")
                )
        return EXIT_OK if all(r["ok"] for r in results) else EXIT_FAIL
    if args.json:
        print(json.dumps(page, ensure_ascii=False, indent=2))
        return EXIT_OK
    counts = ", ".join(f"{c['decided_by']}/{c['kind']} {c['count']}" for c in page["counts"])
    print(
        f"{page['namespace']}: {counts or 'no judgments'}{' (the newest 1,000 counted)' if page['counts_capped'] else ''}"
    )
    for j in page["judgments"]:
        state = f" (reverted by {j['reverted_by']})" if j["reverted_by"] else ""
        print(f"{j['created_at'][:19]}  {j['id']}  {j['kind']:<10} {j['decided_by']:<6} {j['agent'] or 'sleep'}{state}")
        print(f"    why: {j['reason']}")
        print(f"    before: {side(j['before'])}")
        print(f"    after:  {side(j['after'])}")
    if page["next_cursor"]:
        print(f"more: cabrain audit -n {page['namespace']} --cursor {page['next_cursor']}")
    return EXIT_OK


def add_correct(sub: Subparsers) -> None:
    correct = sub.add_parser(
        "correct",
        help="correct a memory: a new version supersedes it (revertible)",
        description="Correct MEMORY_ID: TEXT becomes its new version (same namespace, visibility and "
        "provenance) and the old one is superseded, never deleted. Recorded as a judgment of kind "
        "correction; cabrain revert undoes it. Needs write access to the namespace." + REMOTE_NOTE,
    )
    correct.add_argument("memory_id")
    correct.add_argument("content", metavar="TEXT", help="the corrected text ('-': read it from stdin)")
    correct.add_argument("--reason", default=None, help="why it is corrected (kept with the judgment)")
    correct.set_defaults(func=cmd_correct)


def add_unforget(sub: Subparsers) -> None:
    unforget = sub.add_parser(
        "unforget",
        help="bring a forgotten memory back to recall (revertible)",
        description="Restore a forgotten memory: its forget is reverted (or, forgotten before forgets were "
        "judgments, it is restored directly), so recall finds it again. Needs write access to the namespace. "
        "(cabrain restore restores a backup.)" + REMOTE_NOTE,
        parents=[json_flag("print the judgment as JSON")],
    )
    unforget.add_argument("memory_id")
    unforget.add_argument("--reason", default=None, help="why it comes back")
    unforget.set_defaults(func=cmd_unforget)


def add_audit(sub: Subparsers) -> None:
    audit = sub.add_parser(
        "audit",
        help="a namespace's judgments (what changed memories, who and why); revert several",
        description="List the judgments of a namespace, newest first, with the texts they took out of and "
        "brought into recall, who made them and why: only those about memories you may read. With "
        "--revert ID..., revert those judgments instead, each as its own revert (exit 1 if any was not)." + REMOTE_NOTE,
        parents=[namespace_option(required=False), json_flag("print the page (or the results) as JSON")],
    )
    audit.add_argument("--kind", default=None, help="only this kind (supersede, correction, forget, merge, ...)")
    audit.add_argument("--origin", default=None, choices=("write", "sleep", "person", "import"), help="who decided")
    audit.add_argument("--from", dest="since", type=_timestamp, default=None, help="made at or after (ISO 8601)")
    audit.add_argument("--to", dest="until", type=_timestamp, default=None, help="made before (ISO 8601)")
    audit.add_argument("--cursor", default=None, help="the next page (printed at the end of a page)")
    audit.add_argument("--limit", type=int, default=50, help="at most this many (1-200, default 50)")
    audit.add_argument("--revert", nargs="+", metavar="JUDGMENT_ID", default=None, help="revert these judgments")
    audit.add_argument("--reason", default=None, help="with --revert: why")
    audit.set_defaults(func=_checked)


def _checked(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.errors import UsageError

    if not args.revert and not args.namespace:
        raise UsageError("give --namespace NS (or --revert JUDGMENT_ID...)")
    return cmd_audit(settings, args)


__all__ = ["add_audit", "add_correct", "add_unforget"]
