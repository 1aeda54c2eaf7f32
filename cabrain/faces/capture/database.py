"""Capture without a service (the embedded default): an event's memories are retained, and its
context recalled, straight on the database through the :class:`~cabrain.brain.Brain`. Not on the
hook's standard-library path: :func:`cabrain.faces.capture.hook.run` imports this module only when
``CABRAIN_API_URL`` is unset.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from cabrain.brain import Brain
from cabrain.faces.capture.config import CaptureConfig
from cabrain.faces.capture.events import WITHHELD, context_text, hook_output, plan
from cabrain.faces.capture.project import capture_target, target_label
from cabrain.settings import load_settings
from cabrain.types import RecallQuery, to_json
from cabrain.write.inbox import item_from_json


async def handle_on_database(config: CaptureConfig, event: dict[str, Any]) -> dict[str, Any] | None:
    target = capture_target(event.get("cwd") or os.getcwd(), config.namespace)
    todo = plan(event, target_label(target), visibility=config.visibility)
    async with await Brain.open(load_settings()) as brain:
        agent = (await brain.authenticate(config.api_key)).agent_id if config.api_key else config.agent
        if not config.api_key:
            await brain.create_agent(agent)
        namespace, injectable = await brain.capture_namespace(agent, **target)
        if todo.memories:
            await brain.retain(agent, [item_from_json(m, namespace) for m in todo.memories], decide=todo.decide)
        if not todo.context_query:
            return None
        if not injectable:
            print(f"cabrain capture: {WITHHELD.format(namespace)}", file=sys.stderr)
            return None
        query = RecallQuery(todo.context_query, namespace, k=config.context_k, expand=False, context=tuple(todo.turns))
        result = await brain.recall(agent, query)
        return hook_output(event.get("hook_event_name", ""), context_text(namespace, to_json(result)["hits"]))


def run_on_database(config: CaptureConfig, event: dict[str, Any]) -> dict[str, Any] | None:
    """:func:`handle_on_database` in its own event loop."""
    return asyncio.run(handle_on_database(config, event))
