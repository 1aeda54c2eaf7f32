"""A scripted model server for workflow-learning tests: OpenAI-compatible ``/v1/chat/completions``
and Anthropic's ``/v1/messages``, playing frontier, local and judge models by model name.

Run: python -m tests.fakes.llm_server --port PORT.

Tasks ("Task:\\n<description>") are answered by their kind:

- **invoice** ("Extract the invoice ... as JSON"): the right JSON is computed from the text's
  numbers. Every model answers it well;
- **risk** ("Write a risk note ..."): the frontier model writes a note naming the project and its
  numbers; every ``local-*`` model answers "I cannot tell." - badly, whatever the chain.

Models: ``frontier-*`` (right answers), ``local-*`` (as above), ``judge-*`` (rates a candidate
against a reference: 96 when they agree after normalising, 70 when every number agrees, else 5),
``down-*`` (500, always), ``flaky-*`` (503 for the first 2 calls per model, then answers as a
frontier model), ``slow-*`` (answers after 3 s). Usage counts words.

Control: POST /_mode {"model": NAME, "mode": "broken" | "drift" | "sloppy" | "leaky" | "ok"} - a broken model
answers "Sorry, no JSON today." to everything, a drifting one answers invoices with well-formed JSON
and a wrong total, a sloppy one answers them in its own form unless the request holds it to a JSON
Schema (``response_format``) its right answer fits, a leaky one adds a line quoting a GitHub token
(``LEAK``) to each answer; GET /_log - every request (model, system, user, schema) in order;
POST /_reset - clears the log, the modes and the flaky counters.
"""

import argparse
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.fakes import send_json

STATE: dict = {"log": [], "modes": {}, "flaky": {}}
LEAK = "ghp_" + "Zq7" * 12  # what a leaky model says (a GitHub token's form)
LOCK = threading.Lock()


def task_of(user: str) -> str:
    match = re.search(r"Task:\n(.*?)(?:\n\n|$)", user, re.S)
    return match.group(1) if match else user


def right_answer(task: str) -> str:
    numbers = re.findall(r"\d+(?:\.\d+)?", task)
    if task.startswith("Extract the invoice"):
        invoice, total = numbers[0], numbers[1]
        currency = (re.findall(r"\b[A-Z]{3}\b", task) or ["USD"])[-1]
        return json.dumps({"invoice": int(invoice), "total": float(total), "currency": currency})
    if task.startswith("Write a risk note"):
        project = re.search(r"project (\w+)", task).group(1)
        return f"Project {project} carries moderate risk: its budget of {numbers[0]} leaves {numbers[1]} days of slack."
    return "Done."


def norm(text: str) -> str:
    text = text.strip()
    try:
        return json.dumps(json.loads(text), sort_keys=True)
    except ValueError:
        return " ".join(text.casefold().split())


def judge(user: str) -> str:
    reference = re.search(r"Reference answer:\n(.*?)\n\nCandidate answer:\n", user, re.S).group(1)
    candidate = user.split("Candidate answer:\n", 1)[1]
    if norm(reference) == norm(candidate):
        score = 96
    elif set(re.findall(r"\d+", reference)) <= set(re.findall(r"\d+", candidate)):
        score = 70
    else:
        score = 5
    return json.dumps({"score": score, "reason": "scripted"})


def conforms(value, schema: dict) -> bool:
    """Whether ``value`` fits the (small) JSON Schema a constrained request sent: object keys, types."""
    kind = schema.get("type")
    if kind == "object":
        return (
            isinstance(value, dict)
            and set(schema.get("required", [])) <= set(value)
            and (schema.get("additionalProperties", True) or set(value) <= set(schema.get("properties", {})))
        )
    return isinstance(value, {"string": str, "number": (int, float), "integer": int}.get(kind, object))


def answer(model: str, system: str, user: str, schema: dict | None = None) -> tuple[int, str]:
    """(status, text) for one request (held to ``schema`` when it carried one)."""
    with LOCK:
        STATE["log"].append({"model": model, "system": system, "user": user, "schema": schema})
        mode = STATE["modes"].get(model, "ok")
        if model.startswith("flaky-"):
            STATE["flaky"][model] = STATE["flaky"].get(model, 0) + 1
            if STATE["flaky"][model] <= 2:
                return 503, "overloaded"
    if model.startswith("down-"):
        return 500, "the model crashed"
    if model.startswith("slow-"):
        time.sleep(3)
    if mode == "broken":
        return 200, "Sorry, no JSON today."
    if model.startswith("judge-"):
        return 200, judge(user)
    if system.startswith("You plan"):
        return 200, "1. Read the task.\n2. Answer it."
    task = task_of(user)
    if model.startswith("local-") and task.startswith("Write a risk note"):
        return 200, "I cannot tell."
    if mode == "drift" and task.startswith("Extract the invoice"):  # well-formed, and wrong
        wrong = json.loads(right_answer(task))
        return 200, json.dumps({**wrong, "total": round(wrong["total"] * 3 + 7, 2)})
    if mode == "sloppy" and task.startswith("Extract the invoice"):
        right = json.loads(right_answer(task))
        if schema is not None and conforms(right, schema):  # held to the form, it gets it right
            return 200, json.dumps(right)
        return 200, "Sure! " + json.dumps(
            {"invoice_no": str(right["invoice"]), "amount": f"{right['currency']} {right['total']}"}
        )
    if mode == "leaky":
        return 200, f"{right_answer(task)}\n(fetched with GITHUB_TOKEN={LEAK})"
    return 200, right_answer(task)


class Handler(BaseHTTPRequestHandler):
    def _body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")

    def do_GET(self):
        if self.path == "/_log":
            with LOCK:
                send_json(self, STATE["log"])
        else:
            send_json(self, {"error": "not found"}, 404)

    def do_POST(self):
        body = self._body()
        if self.path == "/_mode":
            with LOCK:
                STATE["modes"][body["model"]] = body["mode"]
            send_json(self, {"ok": True})
            return
        if self.path == "/_reset":
            with LOCK:
                STATE.update(log=[], modes={}, flaky={})
            send_json(self, {"ok": True})
            return
        if self.path == "/v1/chat/completions":
            messages = {m["role"]: m["content"] for m in body["messages"]}
            system, user = messages.get("system", ""), messages.get("user", "")
        elif self.path == "/v1/messages":
            if self.headers.get("x-api-key") != "test-key":
                send_json(self, {"type": "error", "error": {"type": "authentication_error"}}, 401)
                return
            system, user = body.get("system", ""), body["messages"][-1]["content"]
        else:
            send_json(self, {"error": "not found"}, 404)
            return
        shape = (body.get("response_format") or {}).get("json_schema", {}).get("schema")
        status, text = answer(body["model"], system, user, shape)
        if status != 200:
            send_json(self, {"error": text}, status)
            return
        tokens_in, tokens_out = len((system + " " + user).split()), len(text.split())
        if self.path == "/v1/messages":
            send_json(
                self,
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
                },
            )
        else:
            send_json(
                self,
                {
                    "choices": [{"message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out},
                },
            )

    def log_message(self, *args):
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
