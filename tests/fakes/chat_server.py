"""A scripted OpenAI-compatible chat server for tests (it stands in for a hosted or local LLM).

Run: python -m tests.fakes.chat_server --port PORT. Answers /v1/chat/completions by rules on the
NEW memory's text, so tests know what "the model" will say:

- contains "retract"  -> INVALIDATE 1      - contains "same as" -> NOOP 1
- contains "revise"   -> UPDATE 1          - contains "garbage" -> not JSON at all
- contains "out of range" -> UPDATE 99     - otherwise -> ADD
Entity requests return every word that starts with "Proj" or "مشروع".
A conversation's turns ("You turn a conversation's turns"): for each numbered "[Speaker, date] text"
turn, one fact "<Speaker> says: <text>" with I / my / me replaced by the speaker, citing it; a turn
with "garbage" makes the whole answer not JSON, "firstperson" keeps the "I", "badturn" cites turn 99,
"hello" yields no fact.
A sitting's summary ("You write the summary"): "Scripted: <speakers> talked. <facts joined>", not
JSON if a fact contains "garbage".
Sleep requests: distilling returns one fact, "Distilled: <first episode>", citing every episode
(not JSON if an episode contains "garbage", citing episode 99 if one contains "badsource"); an
entity summary is "Scripted summary of <entity>."; two statements that both mention "office"
contradict each other, nothing else does. The live agent's triage: a message that says "broken",
"breaks", "error" or "fails" is a problem report, titled by its first line.
Every request is appended, as JSON, to the file named by --log.
"""

import argparse
import json
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.fakes import send_json


def turn_facts(user: str) -> str:
    turns = re.findall(r"^(\d+)\. \[([^,\]]+), [^\]]+\] (.*)$", user, re.M)
    if any("garbage" in text for _, _, text in turns):
        return "Here are the facts, more or less."
    facts = []
    for number, speaker, text in turns:
        if "hello" in text.lower():
            continue
        said = (
            text if "firstperson" in text else re.sub(r"\b(?:I|me)\b", speaker, re.sub(r"\bmy\b", f"{speaker}'s", text))
        )
        facts.append({"text": f"{speaker} says: {said}", "turn": 99 if "badturn" in text else int(number)})
    return json.dumps({"facts": facts})


def answer(system: str, user: str) -> str:
    if system.startswith("You turn a conversation's turns"):
        return turn_facts(user)
    if system.startswith("You write the summary"):
        lines = user.splitlines()
        speakers = lines[0].removeprefix("Speakers: ").replace(", ", " and ")
        facts = [line.split(". ", 1)[1] for line in lines[2:] if ". " in line]
        if any("garbage" in f for f in facts):
            return "A fine summary, more or less."
        return json.dumps({"summary": f"Scripted: {speakers} talked. {' '.join(facts)}"})
    if system.startswith("You distill"):
        episodes = [line.split(". ", 1)[1] for line in user.splitlines() if ". " in line]
        if any("garbage" in e for e in episodes):
            return "Here are some facts, more or less."
        sources = [99] if any("badsource" in e for e in episodes) else list(range(1, len(episodes) + 1))
        return json.dumps({"facts": [{"text": f"Distilled: {episodes[0]}", "sources": sources}]})
    if system.startswith("Summarise"):
        entity = user.splitlines()[0].removeprefix("Entity: ")
        return json.dumps({"summary": f"Scripted summary of {entity}."})
    if system.startswith("Two statements"):
        both = user.count("office") >= 2
        return json.dumps({"contradiction": both, "reason": "scripted: the office moved" if both else "unrelated"})
    if system.startswith("A message from a team chat"):  # the live agent's triage
        report = any(w in user.lower() for w in ("broken", "breaks", "error", "fails"))
        return json.dumps({"issue": report, "title": user.strip().splitlines()[0][:80]})
    if system.startswith("Extract"):
        words = [w.strip(".,") for w in user.split()]
        return json.dumps({"entities": [w for w in words if w.startswith(("Proj", "مشروع"))]})
    new = user.split("\n", 1)[0]
    if "garbage" in new:
        return "I think you should probably add it, friend."
    for cue, decision, target in (
        ("retract", "INVALIDATE", 1),
        ("same as", "NOOP", 1),
        ("out of range", "UPDATE", 99),
        ("revise", "UPDATE", 1),
    ):
        if cue in new:
            return json.dumps({"decision": decision, "target": target, "reason": f"scripted: {cue}"})
    return json.dumps({"decision": "ADD", "target": None, "reason": "scripted: new"})


class Handler(BaseHTTPRequestHandler):
    log_path = None

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        messages = {m["role"]: m["content"] for m in body["messages"]}
        if self.log_path:
            with open(self.log_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(body, ensure_ascii=False) + "\n")
        content = answer(messages["system"], messages["user"])
        send_json(self, {"choices": [{"message": {"role": "assistant", "content": content}}]})

    def log_message(self, *args):
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log")
    args = parser.parse_args()
    Handler.log_path = args.log
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
