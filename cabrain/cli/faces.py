"""``cabrain mcp``, ``capture`` and ``hooks``: the faces agents use, the MCP server and Claude Code's
capture hooks. (The ``cabrain`` executable runs ``cabrain capture`` without loading this package: see
cabrain/entry.py.)"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from cabrain.cli.common import EXIT_OK, Subparsers
from cabrain.settings import Settings


def cmd_mcp(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.faces.mcp import run_stdio  # lazy, here and below: start-up time (common.py)

    asyncio.run(run_stdio(settings))
    return EXIT_OK


def cmd_capture(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.faces.capture import main as capture

    return capture(["--flush"] if args.flush else [])


def cmd_hooks(settings: Settings, args: argparse.Namespace) -> int:
    from cabrain.faces import hooks

    path = hooks.settings_path(args.scope, Path.cwd())
    if args.hooks_command == "install":
        changed = hooks.install(path, hooks.capture_command(args.command))
        hooks.compile_hook_modules()
        print(f"{'installed' if changed else 'already installed'}: CaBrain capture hooks in {path}")
    else:
        changed = hooks.uninstall(path)
        print(f"{'removed' if changed else 'nothing to remove'}: CaBrain capture hooks in {path}")
    return EXIT_OK


def add_mcp(sub: Subparsers) -> None:
    mcp = sub.add_parser(
        "mcp",
        help="serve the MCP tools over stdio (for Claude Code, Claude Desktop, ...)",
        description="Serve memory_retain, memory_recall, memory_recall_archive, memory_get, memory_forget, "
        "memory_share, memory_reconsolidate, memory_namespaces, memory_create_namespace, memory_entities, "
        "memory_entity and workflow_dispatch over stdio, acting as the agent whose key is CABRAIN_API_KEY: "
        "through the service at CABRAIN_API_URL when set, otherwise straight on the database.",
    )
    mcp.set_defaults(func=cmd_mcp)


def add_capture(sub: Subparsers) -> None:
    capture = sub.add_parser(
        "capture",
        help="handle a Claude Code hook event (JSON on stdin)",
        description="Handle one Claude Code hook event read on stdin (SessionStart, UserPromptSubmit, "
        "PostToolUse, PreCompact, Stop): retain what matters, print context to inject. With CABRAIN_API_URL it "
        "hands memories to the service (queued locally while it is down); otherwise writes to the database.",
    )
    capture.add_argument("--flush", action="store_true", help="send the local queue to the service now")
    capture.set_defaults(func=cmd_capture)


def add_hooks(sub: Subparsers) -> None:
    hooks_parser = sub.add_parser(
        "hooks",
        help="install or remove the capture hooks in Claude Code's settings",
        description="Add (or remove) `cabrain capture` for SessionStart, UserPromptSubmit, PostToolUse, "
        "PreCompact and Stop in Claude Code's settings file, keeping every other hook.",
    )
    hooks_sub = hooks_parser.add_subparsers(dest="hooks_command", metavar="ACTION", required=True)
    for action, text in (("install", "Add the capture hooks."), ("uninstall", "Remove the capture hooks.")):
        h = hooks_sub.add_parser(action, help=text.lower().rstrip("."), description=text)
        scope = h.add_mutually_exclusive_group()
        scope.add_argument(
            "--project",
            dest="scope",
            action="store_const",
            const="project",
            default="project",
            help="this project's .claude/settings.json (default)",
        )
        scope.add_argument(
            "--user", dest="scope", action="store_const", const="user", help="your ~/.claude/settings.json"
        )
        h.add_argument(
            "--command", default=None, help="the hook command (default: this cabrain's absolute path + capture)"
        )
        h.set_defaults(func=cmd_hooks)
