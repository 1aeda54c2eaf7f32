"""``cabrain overview``: what the brain holds and did, at a glance, against a running API."""

from __future__ import annotations

import argparse
import json
from typing import Any

from cabrain.cli.common import EXIT_OK, REMOTE_NOTE, Subparsers, json_flag, namespace_option, remote
from cabrain.settings import Settings


def render(found: dict[str, Any]) -> list[str]:
    """The overview as lines of text."""
    from cabrain.overview import size  # lazy: start-up time

    totals = found["totals"]
    states = totals["by_state"]
    lines = [
        f"{totals['memories']:,} memories: {states.get('current', 0):,} current, "
        f"{states.get('superseded', 0):,} superseded, {states.get('forgotten', 0):,} forgotten, "
        f"{states.get('archived', 0):,} archived",
        f"  ({found['excluded']})",
        "",
        f"{'namespace':<32} {'current':>9} {'superseded':>10} {'forgotten':>9} {'archived':>9}",
    ]
    for ns in found["namespaces"]:
        hidden = f"  (+{ns['private_of_others']:,} private of others)" if ns["private_of_others"] else ""
        lines.append(
            f"{ns['name']:<32} {ns['current']:>9,} {ns['superseded']:>10,} {ns['forgotten']:>9,} {ns['archived']:>9,}{hidden}"
        )
    if totals["by_type"]:
        lines += ["", "current by type:   " + ", ".join(f"{k} {v:,}" for k, v in totals["by_type"].items())]
    if totals["by_source"]:
        lines.append("current by source: " + ", ".join(f"{k} {v:,}" for k, v in totals["by_source"].items()))
    lines += ["", f"{'day (UTC)':<12} {'retained':>9} {'recalled':>9} {'judged':>7} {'slept':>6}"]
    for d in found["days"]:
        start = str(d["start"])[:10]
        lines.append(f"{start:<12} {d['retained']:>9,} {d['recalled']:>9,} {d['judged']:>7,} {d['slept']:>6,}")
    last_day = {k: sum(h[k] for h in found["hours"]) for k in ("retained", "recalled", "judged", "slept")}
    lines.append("last 24 hours: " + ", ".join(f"{k} {v:,}" for k, v in last_day.items()))
    storage = found["storage"]
    if storage["hot_bytes"] is not None:
        lines += ["", f"storage: hot tier {size(storage['hot_bytes'])}, cold tier {size(storage['cold_bytes'])}"]
    if storage["cold_note"]:
        lines.append(f"  ({storage['cold_note']})")
    lines += ["", f"pending actions: {found['pending_actions']}"]
    for run in found["last_runs"]:
        lines.append(f"sleep run {run['id']}  {str(run['started_at'])[:16]}  {run['status']}")
    return lines


def cmd_overview(settings: Settings, args: argparse.Namespace) -> int:
    with remote(settings) as client:
        found = client.overview(namespace=args.namespace, runs=args.runs)
    if args.json:
        print(json.dumps(found, ensure_ascii=False, indent=2, default=str))
        return EXIT_OK
    print("\n".join(render(found)))
    return EXIT_OK


def add_overview(sub: Subparsers) -> None:
    overview = sub.add_parser(
        "overview",
        help="what the brain holds and did: counts, the last day and week, storage",
        description="Memories per namespace, state, type and source (counted as they change, never by a "
        "scan; other agents' private memories are never counted), what was retained, recalled, judged "
        "and slept per day over the last week and over the last 24 hours, the newest sleep runs, "
        "pending actions and, for admins, the size of the hot and cold tiers." + REMOTE_NOTE,
        parents=[json_flag("print it as JSON"), namespace_option(required=False)],
    )
    overview.add_argument("--runs", type=int, default=5, help="how many of the newest sleep runs (0-50, default 5)")
    overview.set_defaults(func=cmd_overview)
