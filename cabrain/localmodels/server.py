"""One local model served: llama.cpp's own HTTP server (the ``xllamacpp`` wheel) on loopback,
OpenAI-compatible ``/v1/chat/completions``, greedy decoding, until SIGTERM.

Run: ``python -m cabrain.localmodels.server --model PATH --port PORT [--threads N] [--ctx N]
[--template FILE] [--alias NAME]``, with its API key in ``LOCAL_MODEL_SERVER_KEY`` (every call must
bear it; not on the command line, where other users of the machine would see it). Prints ``READY
<address>`` once it answers, or ``FAILED <why>``. :mod:`cabrain.localmodels.serve` starts and stops it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

KEY_VARIABLE = "LOCAL_MODEL_SERVER_KEY"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cabrain.localmodels.server")
    parser.add_argument("--model", required=True, help="the .gguf file")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--threads", type=int, default=0, help="0: every CPU")
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--template", default=None, help="a chat template (.jinja); default: the GGUF's own")
    parser.add_argument("--alias", default=None, help="the model's name in answers")
    parser.add_argument("--parent", type=int, default=None, help="stop when this process is gone (default: the parent)")
    args = parser.parse_args(argv)
    parent = args.parent or os.getppid()  # now, before loading: the starter may die while the model loads
    key = os.environ.pop(KEY_VARIABLE, "")
    if not key:
        print(f"FAILED no API key in {KEY_VARIABLE}: the server answers only calls that bear one", flush=True)
        return 2
    try:
        import xllamacpp as xlc
    except ImportError:
        print("FAILED xllamacpp is not installed (pip install xllamacpp)", flush=True)
        return 2
    threads = args.threads or os.cpu_count() or 1
    params = xlc.CommonParams()
    params.model.path = args.model
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.n_threads_http = 2
    params.sampling.temp = 0.0
    params.api_keys = [key]
    if args.alias:
        params.model_alias = args.alias
    if args.template:
        params.chat_template = Path(args.template).read_text(encoding="utf-8")
    try:
        server = xlc.Server(params)
    except Exception as exc:  # noqa: BLE001 - said on stdout, where the starter reads it
        print(f"FAILED {exc}", flush=True)
        return 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"READY {server.listening_address}", flush=True)
    while not stop.wait(1.0):
        if os.getppid() != parent:  # whoever started it is gone (killed): so is the reason to serve
            break
    del server  # llama.cpp's server stops with its object
    return 0


if __name__ == "__main__":
    sys.exit(main())
