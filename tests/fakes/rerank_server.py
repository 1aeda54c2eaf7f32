"""A TEI-style /rerank server for tests (it stands in for a cross-encoder we have no weights for).

Run: python -m tests.fakes.rerank_server --port PORT. Scores each text by the share of the
query's words it contains, so tests know the order a reranker will give.
"""

import argparse
import json
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.fakes import send_json


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        q = words(body["query"])
        scores = [{"index": i, "score": len(q & words(t)) / max(len(q), 1)} for i, t in enumerate(body["texts"])]
        scores.sort(key=lambda s: -s["score"])  # TEI returns them best first, not in input order
        send_json(self, scores)

    def log_message(self, *args):
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    ThreadingHTTPServer.request_queue_size = 256  # the service tests send 100 recalls at once
    ThreadingHTTPServer(("127.0.0.1", parser.parse_args().port), Handler).serve_forever()


if __name__ == "__main__":
    main()
