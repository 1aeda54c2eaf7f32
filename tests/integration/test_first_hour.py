"""The first hour, as a person meets it at the command line: the real ``cabrain`` entry point (the
virtual environment's script) on a fresh ``CABRAIN_HOME``, run as a shell runs it.

- without a service, ``cabrain migrate`` makes the first admin, and the commands that act on the
  hot tier (``import``, ``connectors add``, ``namespaces --create``) work as the operator acting for
  it, or say the one command that fixes what stops them;
- ``cabrain up`` prints the lines that point a shell at it, and its examples run as printed in a
  shell whose ``PATH`` does not know ``cabrain``; ``cabrain doctor`` checks the API it serves;
  Ctrl-C stops it quietly, with exit code 0 (the time it took is printed, docs/BENCHMARKS.md);
- ``cabrain doctor`` reports an API that does not answer as a failed check.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from cabrain.settings import default_schema_dir
from cabrain.store.embedded import EmbeddedPostgres
from tests.conftest import cli_env, free_port, make_scratch_dir, run_cli

# the entry point `pip install` made, as scripts/run leaves it: .venv/bin/cabrain
CABRAIN = Path(sys.executable).parent / "cabrain"


def cabrain(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CABRAIN), *args], env=env, capture_output=True, text=True)


def without_cabrain_on_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with a ``PATH`` that does not find this ``cabrain`` (a fresh shell after scripts/run)."""
    here = CABRAIN.parent.resolve()
    kept = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != here]
    return {**env, "PATH": os.pathsep.join(kept)}


def fix_of(stderr: str) -> str:
    """The command a CLI error's ``fix:`` line names (after its "create it first:" and the like)."""
    [line] = [line for line in stderr.splitlines() if line.strip().startswith("fix:")]
    return line.split("fix:", 1)[1].split(":", 1)[-1].strip()


def run_fix(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run the command a fix names, exactly, with the ``cabrain`` this test runs."""
    words = shlex.split(command)
    assert words[0] == "cabrain", command
    return cabrain(*words[1:], env=env)


@pytest.mark.subprocess
def test_a_fresh_home_without_a_service_works_as_the_operator_or_says_the_one_fix(home: Path) -> None:
    env = cli_env(home=str(home), api_port="8121")
    notes = home / "notes.md"
    notes.write_text("# Decisions\n\n- We chose pgvector for the vectors.\n", encoding="utf-8")
    docs = home / "docs"
    docs.mkdir()
    (docs / "runbook.md").write_text("The backup runs at 02:00.\n", encoding="utf-8")
    try:
        migrated = cabrain("migrate", env=env)
        assert migrated.returncode == 0, migrated.stderr
        shipped = sorted(p.name for p in default_schema_dir().glob("[0-9]*.sql"))
        assert f"applied {len(shipped)} migration(s): {', '.join(shipped)}" in migrated.stdout
        assert f"admin key: {home / 'admin.key'} (created now; keep it safe)" in migrated.stdout
        again = cabrain("migrate", env=env)
        assert f"schema up to date ({len(shipped)} migrations)" in again.stdout
        assert f"admin key: {home / 'admin.key'}\n" in again.stdout  # made once per database

        # the namespace does not exist yet: the error names one command, and that command works here
        missing = cabrain("import", "markdown", str(notes), "-n", "notes", env=env)
        assert missing.returncode == 1 and "namespace 'notes' does not exist" in missing.stderr, missing.stderr
        assert fix_of(missing.stderr) == "cabrain namespaces --create notes"
        created = run_fix(fix_of(missing.stderr), env)
        assert created.returncode == 0, created.stderr
        assert created.stdout.strip() == "namespace notes created"

        imported = cabrain("import", "markdown", str(notes), "-n", "notes", env=env)
        assert imported.returncode == 0, imported.stderr
        assert "1 records read" in imported.stdout and "1 added" in imported.stdout
        added = cabrain("connectors", "add", "runbooks", "folder", "-n", "notes", "--set", f"path={docs}", env=env)
        assert added.returncode == 0, added.stderr
        assert added.stdout.startswith("runbooks") and "-> notes" in added.stdout
        listed = cabrain("namespaces", env=env)
        assert re.search(r"^notes\s+rw\s+owner admin$", listed.stdout, re.M), listed.stdout

        # acting as an agent that is not there says who can act instead
        nobody = cabrain("import", "markdown", str(notes), "-n", "notes", "--as", "nobody", env=env)
        assert nobody.returncode == 1
        assert "cannot act as agent 'nobody': it is unknown" in nobody.stderr
        assert fix_of(nobody.stderr) == "--as admin (cabrain agents list shows them all)"

        # the operator disabled the first admin: the fix makes another and acts as it
        assert cabrain("agents", "disable", "admin", env=env).returncode == 0
        disabled = cabrain("connectors", "add", "more", "folder", "-n", "notes", "--set", f"path={docs}", env=env)
        assert disabled.returncode == 1 and "cannot act as agent 'admin': it is disabled" in disabled.stderr
        assert fix_of(disabled.stderr) == "cabrain agents create NAME --admin, then --as NAME"
        assert cabrain("agents", "create", "ops", "--admin", env=env).returncode == 0
        as_ops = cabrain("namespaces", "--create", "ops-notes", "--as", "ops", env=env)
        assert as_ops.returncode == 0 and as_ops.stdout.strip() == "namespace ops-notes created", as_ops.stderr

        # what needs the service says how to reach it: this home's port and key
        remote_only = cabrain("recall", "which vector store?", "-n", "notes", env=env)
        assert remote_only.returncode == 2
        assert (
            f"export CABRAIN_API_URL=http://127.0.0.1:8121 CABRAIN_API_KEY=$(cat {home / 'admin.key'})"
            in remote_only.stderr
        )
        assert "8000" not in remote_only.stderr
        for result in (migrated, missing, created, imported, added, nobody, disabled, remote_only):
            assert "Traceback" not in result.stderr
    finally:
        cabrain("db", "stop", "--force", env=env)


def test_doctor_reports_an_api_that_does_not_answer(readonly_dsn: str, home: Path) -> None:
    port = free_port()  # nothing listens there
    env = cli_env(database_url=readonly_dsn, home=str(home), api_url=f"http://127.0.0.1:{port}", api_key="cbk_x")
    result = run_cli("doctor", "--json", env=env)
    assert result.returncode == 1
    api = next(c for c in json.loads(result.stdout) if c["name"] == "api")
    assert api["status"] == "FAIL"
    assert api["detail"].startswith(f"no answer from http://127.0.0.1:{port}/v1/health: cannot reach CaBrain")
    assert "cabrain up" in api["hint"]
    text = run_cli("doctor", env=env)
    assert "api" in text.stdout and "doctor: 1 check(s) failed: api" in text.stderr


def test_doctor_without_an_api_configured_says_so_and_passes(readonly_dsn: str, home: Path) -> None:
    result = run_cli("doctor", "--json", env=cli_env(database_url=readonly_dsn, home=str(home)))
    assert result.returncode == 0, result.stderr
    api = next(c for c in json.loads(result.stdout) if c["name"] == "api")
    assert api["status"] == "ok" and api["detail"].startswith("not configured (CABRAIN_API_URL unset)")


# --- cabrain up -------------------------------------------------------------------------------------------
def _wait_for(path: Path, needle: str, proc: subprocess.Popen[bytes], err: Path) -> str:
    """``path``'s text once it holds ``needle`` (bounded by the test's own time limit)."""
    while True:
        text = path.read_text()
        if needle in text:
            return text
        assert proc.poll() is None, f"`cabrain up` ended early:\n{text[-2000:]}\n{err.read_text()[-3000:]}"
        time.sleep(0.5)


def _block(text: str, start: str, end: str) -> list[str]:
    """The lines of ``text`` after the line starting ``start``, up to the next line starting ``end``."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(start)) + 1
    last = next(i for i in range(first, len(lines)) if lines[i].startswith(end))
    return [line.removeprefix("  ") for line in lines[first:last] if line.strip()]


@pytest.mark.ray
def test_cabrain_up_prints_what_a_shell_needs_its_examples_run_as_printed_and_ctrl_c_stops_quietly() -> None:
    home = make_scratch_dir("cabrain-first-hour-")
    port = free_port()
    env = without_cabrain_on_path(
        cli_env(home=str(home), api_port=str(port), ray_num_cpus="2", ray_object_store_bytes=str(100 * 1024**2))
    )
    out, err = home / "up.out", home / "up.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen([str(CABRAIN), "up"], env=env, stdout=stdout, stderr=stderr)
    server = EmbeddedPostgres(home / "pg")
    try:
        text = _wait_for(out, "Ctrl-C stops everything", proc, err)
        url, key_file = f"http://127.0.0.1:{port}", home / "admin.key"
        exports = _block(text, "point your shell at it", "try it:")
        assert exports == [
            f"export CABRAIN_API_URL={url}",
            f"export CABRAIN_API_KEY=$(cat {key_file})",
            f'export PATH="{CABRAIN.parent}:$PATH"  # cabrain is {CABRAIN}',
        ]
        examples = _block(text, "try it:", "Ctrl-C stops everything")
        assert examples[-1].startswith(f"{CABRAIN} agents create my-agent")

        # the lines as printed, in a fresh shell that knows neither cabrain nor CABRAIN_API_*, and whose
        # CABRAIN_HOME has no database: the commands must reach the service through what was exported
        elsewhere = make_scratch_dir("cabrain-shell-")
        shell_env = {k: v for k, v in env.items() if not k.startswith("CABRAIN_API")}
        shell_env["CABRAIN_HOME"] = str(elsewhere)
        script = "\n".join(["set -euo pipefail", *exports, *examples, "cabrain agents list"])
        shell = subprocess.run(["bash", "-c", script], env=shell_env, capture_output=True, text=True)
        assert shell.returncode == 0, shell.stdout + shell.stderr
        assert '"is_admin":true' in shell.stdout.replace(" ", "")
        assert "We chose pgvector." in shell.stdout  # the recall found what the example retained
        assert re.search(r"agent : my-agent$", shell.stdout, re.M), shell.stdout  # after curl's unended line
        assert re.search(r"^my-agent\s+no\s", shell.stdout, re.M), shell.stdout
        assert not (elsewhere / "pg").exists()  # nothing ran on a database of its own

        # doctor checks the API it is pointed at, and the key it is given
        key = key_file.read_text().strip()
        api_env = {**env, "CABRAIN_API_URL": url, "CABRAIN_API_KEY": key}
        checks = {c["name"]: c for c in json.loads(cabrain("doctor", "--json", env=api_env).stdout)}
        assert checks["api"]["status"] == "ok", checks["api"]
        assert checks["api"]["detail"] == f"{url} answers and is ready; the key is 'admin''s (an admin)"
        wrong = cabrain("doctor", "--json", env={**api_env, "CABRAIN_API_KEY": "cbk_not-a-key"})
        assert wrong.returncode == 1
        refused = next(c for c in json.loads(wrong.stdout) if c["name"] == "api")
        assert refused["status"] == "FAIL" and "refused CABRAIN_API_KEY" in refused["detail"], refused

        assert httpx.get(f"{url}/v1/health", timeout=120).status_code == 200
        started = psutil.Process(proc.pid).children(recursive=True)
        began = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code = proc.wait()
        took = time.monotonic() - began
        print(f"`cabrain up` stopped {took:.1f} s after Ctrl-C (exit code {code})")
        said = out.read_text() + err.read_text()
        assert code == 0, said[-3000:]
        for noise in ("graceful_shutdown", "retries remaining", "Traceback", "Error"):
            assert noise not in said, said[-3000:]
        assert re.search(r"^stopped in \d+\.\d s$", err.read_text(), re.M), err.read_text()
        assert not server.status().running
        assert [p.pid for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []
    finally:
        if proc.poll() is None:
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
            proc.kill()
            proc.wait()  # reaped: its lease on the embedded server is gone
        server.stop(force=True)
