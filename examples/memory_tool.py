"""Claude's memory tool with its files in CaBrain.

    export ANTHROPIC_API_KEY=...                       # your Anthropic key
    export CABRAIN_API_URL=http://127.0.0.1:8000       # a running `cabrain up` (leave unset: the embedded database)
    export CABRAIN_API_KEY=cbk_...                     # the agent Claude acts as (cabrain agents create claude)
    .venv/bin/python examples/memory_tool.py --model claude-sonnet-4-5 --namespace my-project \
        "Remember that our staging deploys happen on Tuesdays, then tell me what you know about deploys."

Every file Claude writes under /memories becomes a memory in the namespace; edits are versions;
`view /memories/.search/<query>` is recall over everything the namespace knows.
"""

from __future__ import annotations

import argparse
import os
import sys

import anthropic

from cabrain.faces.memory_tool import CabrainMemoryTool
from cabrain.settings import load_settings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("prompt")
    parser.add_argument("--model", default=os.environ.get("ANTHROPIC_MODEL"), help="Claude model (or ANTHROPIC_MODEL)")
    parser.add_argument("--namespace", required=True, help="the CaBrain namespace the files live in")
    args = parser.parse_args()
    if not args.model:
        parser.error("give --model or set ANTHROPIC_MODEL")
    settings = load_settings()
    if settings.api_key is None:
        parser.error("set CABRAIN_API_KEY to the key of the agent Claude acts as")
    key = settings.api_key.get_secret_value()
    if settings.api_url:
        tool = CabrainMemoryTool.connect(settings.api_url, key, args.namespace)
    else:
        tool = CabrainMemoryTool.on_database(settings, key, args.namespace)
    with tool:
        runner = anthropic.Anthropic().beta.messages.tool_runner(
            model=args.model,
            max_tokens=2048,
            tools=[tool],
            messages=[{"role": "user", "content": args.prompt}],
        )
        for message in runner:
            for block in message.content:
                if block.type == "text":
                    print(block.text)
                elif block.type == "tool_use":
                    print(f"[memory {block.input.get('command')} {block.input.get('path', '')}]", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
