"""``cabrain capture [--flush]``: one Claude Code hook event from stdin, handled through the service
(``CABRAIN_API_URL``) or, without one, straight on the database. Standard library only up to the
point where the database path is taken, so a hook on the service path costs a Python start-up and
one or two loopback requests.
"""

from __future__ import annotations

import json
import os
import sys

from cabrain.faces.capture.config import CaptureConfig, CaptureError
from cabrain.faces.capture.events import context_text, hook_output, plan
from cabrain.faces.capture.project import capture_target, target_label
from cabrain.faces.capture.transport import ServiceDown, enqueue_locally, flush_queue, send

TYPE_CHECKING = False  # typing itself costs the hook a few milliseconds to import
if TYPE_CHECKING:
    from typing import Any


def handle_via_service(config: CaptureConfig, event: dict[str, Any]) -> dict[str, Any] | None:
    target = capture_target(event.get("cwd") or os.getcwd(), config.namespace)
    todo = plan(event, target_label(target), visibility=config.visibility)
    context, sent = "", False
    try:
        if os.path.exists(config.queue_path) and os.path.getsize(config.queue_path):
            flush_queue(config)
        if todo.memories or todo.context_query:
            answer = send(config, target, todo.memories, todo.decide, todo.context_query, todo.turns)
            sent = True
            context = context_text(answer.get("namespace") or target_label(target), answer.get("hits") or [])
    except ServiceDown as exc:
        queued = bool(todo.memories) and not sent
        if queued:
            enqueue_locally(config, target, todo.memories, todo.decide)
        note = "; the memories are queued locally (cabrain capture --flush)" if queued else ""
        print(f"cabrain capture: the service is unreachable ({exc}){note}", file=sys.stderr)
    return hook_output(event.get("hook_event_name", ""), context)


def run(stdin: str, config: CaptureConfig) -> dict[str, Any] | None:
    """Handle one hook event; the JSON to print for Claude Code (or None)."""
    try:
        event = json.loads(stdin)
    except ValueError as exc:
        raise CaptureError(f"the hook event on stdin is not JSON: {exc}") from None
    if not isinstance(event, dict) or "hook_event_name" not in event:
        raise CaptureError("the hook event has no hook_event_name (is this a Claude Code hook?)")
    if config.api_url:
        return handle_via_service(config, event)
    # The database path needs the whole stack (asyncpg, the Brain): imported only when it is taken,
    # so that the service path stays standard library only.
    from cabrain.faces.capture.database import run_on_database

    return run_on_database(config, event)


def main(argv: list[str]) -> int:
    """``cabrain capture [--flush]``; exit 0 unless the event itself is unusable (1: Claude Code
    shows the message and goes on). Never 2, which would block Claude Code."""
    try:
        config = CaptureConfig.from_env()
        if "--flush" in argv:
            if not config.api_url:
                print("cabrain capture --flush: CABRAIN_API_URL is not set; nothing is queued without a service")
                return 0
            sent, left = flush_queue(config)
            print(f"sent {sent} queued batch(es); {left} left" + (" (the service is unreachable)" if left else ""))
            return 0 if not left else 1
        output = run(sys.stdin.read(), config)
    except CaptureError as exc:
        print(f"cabrain capture: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - a hook must never break the session; say what happened
        print(f"cabrain capture: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if output is not None:
        print(json.dumps(output, ensure_ascii=False))
    return 0
