"""``cabrain bench http`` at a tiny scale: recall in process and through a real Serve proxy and
ingress (a local Ray of its own), with the stage table the service's Server-Timing makes."""

import json

import pytest

from tests.conftest import bench_env, run_cli_process

HTTP_STAGES = {"total", "client", "proxy_hop", "app", "before", "auth", "brain", "recall", "embed", "encode", "other"}


@pytest.mark.ray
@pytest.mark.subprocess
def test_bench_http_says_where_each_recalls_time_goes(tmp_path, pg_server, home):
    out = tmp_path / "http.json"
    env = bench_env(pg_server, home)
    args = ["bench", "http", "--memories", "200", "--queries", "8", "--concurrency", "1,2", "--json", str(out)]
    # a process of its own: the benchmark starts its own local Ray (never the service tests' one)
    result = run_cli_process(*args, env=env, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(out.read_text())
    for level in ("1", "2"):
        assert data["http"][level]["errors"] == 0 and data["in_process"][level]["errors"] == 0
        stages = data["http_stages"][level]
        assert set(stages) == HTTP_STAGES, stages
        assert all(stages[name]["p50"] >= 0 for name in HTTP_STAGES)
        # the parts lie inside the whole: the ingress inside the caller's wall time, recall inside the route
        assert stages["app"]["p50"] <= stages["total"]["p50"]
        assert stages["recall"]["p50"] <= stages["brain"]["p50"] + 0.1
        assert stages["embed"]["p50"] > 0 and stages["brain"]["p50"] > 0
        local = data["in_process_stages"][level]
        assert set(local) == {"total", "recall", "embed"} and local["recall"]["p50"] > 0
    assert "where the time goes, concurrency 1" in result.stdout
    assert "Serve's proxy to the ingress and back" in result.stdout
    assert "target HTTP p95 <= in-process p95 + 10 ms (concurrency 1):" in result.stdout
    assert "target HTTP req/s >= 75% of in process (concurrency 2):" in result.stdout
    # its Ray stopped as `cabrain up` stops it: what Ray says of the work it cut short is in its log
    assert "graceful_shutdown" not in result.stdout + result.stderr
