"""The wheel: built from the checkout, installed (not editable) into a fresh virtual environment
outside it, and run from there: ``cabrain migrate``, ``cabrain doctor``, ``cabrain up``.

The fresh environment gets CaBrain's dependencies from this test environment through a ``.pth``
file that only adds its site-packages to the path; the ``.pth`` files in there (the checkout's
editable install among them) are not run, so ``cabrain`` can only come from the wheel.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from cabrain.store.embedded import EmbeddedPostgres
from tests.conftest import REPO, brings, cli_env, free_port, make_scratch_dir

# What a checkout holds besides its sources; setuptools would not package it, and copying it is slow.
NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", ".mypy_cache", ".ruff_cache", ".pytest_cache", "__pycache__", "build", "dist", "*.egg-info"
)


def _run(cmd: list[str], *, timeout: float = 300, **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
@brings("subprocess")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel, the copy of the checkout it was built from). setuptools writes build/ and
    *.egg-info next to the sources, so it builds a copy; --no-isolation: offline, with this
    environment's setuptools."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    shutil.copytree(REPO, source, ignore=NOT_SOURCES)
    _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(base / "dist"), str(source)])
    (wheel,) = (base / "dist").glob("cabrain-*.whl")
    return wheel, source


@pytest.fixture(scope="module")
@brings("subprocess")
def venv(built: tuple[Path, Path]) -> Iterator[Path]:
    """A fresh virtual environment outside the checkout with the wheel installed in it."""
    root = make_scratch_dir("cabrain-wheel-venv-")
    _run([sys.executable, "-m", "venv", "--without-pip", str(root)])
    python = str(root / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--python", python]  # this environment's pip, installing there
    _run([*pip, "install", "--no-deps", "--no-index", "--quiet", str(built[0])])
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    ours = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (Path(purelib) / "cabrain-test-dependencies.pth").write_text("".join(f"{path}\n" for path in ours))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def outside() -> Iterator[Path]:
    """A working directory outside the checkout (nothing of the checkout on the path)."""
    path = make_scratch_dir("cabrain-wheel-cwd-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def venv_env(venv: Path, **settings: str) -> dict[str, str]:
    env = cli_env(**settings)
    for name in ("PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH", "VIRTUAL_ENV"):
        env.pop(name, None)
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    return env


def test_the_wheel_holds_the_cabrain_package_whole_and_nothing_else(built: tuple[Path, Path]) -> None:
    wheel, source = built
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    dist_info = {top for top in tops if re.fullmatch(r"cabrain-[0-9.]+\.dist-info", top)}
    assert len(dist_info) == 1 and tops == {"cabrain", *dist_info}, tops  # no serve_apps, jobs, schema, tests
    # Every file of the package, code and what it reads at run time: migrations, Serve configs, py.typed.
    package = {
        path.relative_to(source).as_posix()
        for path in (source / "cabrain").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert {name for name in names if name.startswith("cabrain/")} == package
    assert {
        "cabrain/py.typed",
        "cabrain/schema/0001_core.sql",
        "cabrain/serve/config/cpu.yaml",
        "cabrain/serve/console/templates/base.html",
        "cabrain/serve/console/static/console.css",
    } <= package
    entry_points = next(name for name in names if name.endswith(".dist-info/entry_points.txt"))
    assert "cabrain = cabrain.entry:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_fresh_environment_imports_cabrain_from_the_wheel(venv: Path, outside: Path) -> None:
    probe = (
        "import importlib.util, cabrain, cabrain.jobs.sleep_cycle\n"
        "from cabrain.settings import default_schema_dir\n"
        "print(cabrain.__file__); print(default_schema_dir())\n"
        "print(importlib.util.find_spec('serve_apps'), importlib.util.find_spec('jobs'))\n"
    )
    out = _run([str(venv / "bin" / "python"), "-c", probe], cwd=outside, env=venv_env(venv)).stdout.splitlines()
    root = str(venv.resolve())
    assert Path(out[0]).resolve().is_relative_to(root), out
    assert Path(out[1]).resolve().is_relative_to(root) and (Path(out[1]) / "0001_core.sql").is_file(), out
    assert out[2] == "None None", out


@pytest.mark.subprocess
def test_the_wheel_migrates_and_its_doctor_passes(venv: Path, outside: Path, empty_dsn: str, home: Path) -> None:
    cabrain = str(venv / "bin" / "cabrain")
    env = venv_env(venv, database_url=empty_dsn, home=str(home))
    shipped = sorted(p.name for p in (venv / "lib").glob("python3*/site-packages/cabrain/schema/*.sql"))
    assert shipped and shipped[0] == "0001_core.sql"

    migrated = _run([cabrain, "migrate"], cwd=outside, env=env)
    assert f"applied {len(shipped)} migration(s): {', '.join(shipped)}" in migrated.stdout
    again = _run([cabrain, "migrate"], cwd=outside, env=env)
    assert f"schema up to date ({len(shipped)} migrations)" in again.stdout

    doctor = _run([cabrain, "doctor"], cwd=outside, env=env)
    assert "doctor: all checks passed" in doctor.stdout
    assert f"{shipped[-1]} ({len(shipped)} migrations)" in doctor.stdout


def proc_descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _wait_for_line(path: Path, needle: str, proc: subprocess.Popen[bytes], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text()
        if needle in text or proc.poll() is not None:
            break
        time.sleep(0.5)
    assert needle in text, f"`cabrain up` did not print {needle!r}; it printed:\n{text[-3000:]}"
    return text


@pytest.mark.ray
def test_the_wheel_serves_the_api_with_cabrain_up_and_stops_on_ctrl_c(venv: Path, outside: Path) -> None:
    home = make_scratch_dir("cabrain-wheel-up-")
    port = free_port()
    env = venv_env(
        venv, home=str(home), api_port=str(port), ray_num_cpus="2", ray_object_store_bytes=str(100 * 1024**2)
    )
    out, err = home / "up.out", home / "up.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(
            [str(venv / "bin" / "cabrain"), "up"], cwd=outside, env=env, stdout=stdout, stderr=stderr
        )
    server = EmbeddedPostgres(home / "pg")
    try:
        try:
            _wait_for_line(out, "Ctrl-C stops everything", proc, timeout=240)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nstderr:\n{err.read_text()[-3000:]}") from None
        key = (home / "admin.key").read_text().strip()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}) as api:
            assert api.get("/v1/health").status_code == 200
            assert api.get("/v1/ready").json()["ready"] is True
            assert api.get("/v1/whoami").json()["is_admin"] is True
            assert api.post("/v1/namespaces", json={"name": "notes"}).status_code == 201
            written = api.post("/v1/memories", json={"content": "We chose pgvector.", "namespace": "notes"})
            assert written.json()["decision"] == "ADD", written.text
            hits = api.post("/v1/recall", json={"query": "which vector store?", "namespace": "notes"}).json()["hits"]
            assert hits[0]["memory"]["content"] == "We chose pgvector."

        status = _run([str(venv / "bin" / "cabrain"), "db", "status"], cwd=outside, env=env)
        assert "running, pid" in status.stdout
        down = subprocess.run(
            [str(venv / "bin" / "cabrain"), "down"], cwd=outside, env=env, capture_output=True, text=True, timeout=60
        )
        assert down.returncode == 2 and "Ctrl-C" in down.stderr, down.stderr  # a local `up` stops with Ctrl-C

        proc.send_signal(signal.SIGINT)
        assert proc.wait(180) == 0, err.read_text()[-2000:]  # Ctrl-C is how a local `cabrain up` stops
        deadline = time.monotonic() + 30
        while server.status().running and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not server.status().running
    finally:
        if proc.poll() is None:
            left = proc_descendants(proc.pid)
            proc.kill()
            for child in left:  # the local Ray and the database's watchdog of a failed run
                with contextlib.suppress(psutil.NoSuchProcess):
                    child.kill()
        server.stop(force=True)
        stopped = err.read_text()
        shutil.rmtree(home, ignore_errors=True)
    assert stopped.index("stopping the Serve application") < stopped.index("releasing the embedded PostgreSQL")
