"""What ``cabrain up`` and the remote-only commands tell a person: the real port, the lines to export,
and a ``cabrain`` that a shell finds (tests/integration/test_first_hour.py runs them for real)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cabrain import identity, service
from cabrain.cli.common import FIRST_ADMIN, acting_as
from cabrain.settings import load_settings
from tests.conftest import cli_env, run_cli

HERE = Path(sys.executable).parent  # the folder of this installation's `cabrain`


def _admin(tmp_path: Path, *, active: bool = True) -> identity.AdminBootstrap:
    key = tmp_path / "admin.key"
    key.write_text("cbk_example\n")
    return identity.AdminBootstrap(key, made_now=active, active=active)


def test_up_prints_the_real_port_and_the_admin_keys_export_lines(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path, api_port=8121)
    text = service.usage(settings, _admin(tmp_path))
    assert "  export CABRAIN_API_URL=http://127.0.0.1:8121\n" in text
    assert f"  export CABRAIN_API_KEY=$(cat {tmp_path / 'admin.key'})\n" in text
    assert "8000" not in text
    # an admin key that no longer works is not offered; the admin line says how to make one
    stale = service.usage(settings, _admin(tmp_path, active=False))
    assert "CABRAIN_API_KEY=" not in stale and "cabrain agents create NAME --admin" in stale


def test_up_on_all_addresses_points_the_shell_at_loopback(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path, api_host="0.0.0.0", api_port=8122)
    assert service.exports(settings, _admin(tmp_path))[0] == "export CABRAIN_API_URL=http://127.0.0.1:8122"


@pytest.mark.skipif(not (HERE / "cabrain").is_file(), reason="no cabrain script beside this Python")
def test_the_examples_call_a_cabrain_the_shell_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings(home=tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # a fresh shell after scripts/run: no .venv/bin
    assert service.cabrain_command() == str(HERE / "cabrain")
    text = service.usage(settings, _admin(tmp_path))
    assert f'  export PATH="{HERE}:$PATH"  # cabrain is {HERE / "cabrain"}\n' in text
    assert f"\n  {HERE / 'cabrain'} agents create my-agent" in text
    monkeypatch.setenv("PATH", f"{HERE}:/usr/bin:/bin")  # PATH finds this very cabrain: its name will do
    assert service.cabrain_command() == "cabrain"
    text = service.usage(settings, _admin(tmp_path))
    assert "export PATH=" not in text and "\n  cabrain agents create my-agent" in text


def test_a_remote_only_command_without_a_url_names_the_configured_port_and_key(tmp_path: Path) -> None:
    result = run_cli("recall", "which vector store?", "-n", "notes", env=cli_env(home=str(tmp_path), api_port="8121"))
    assert result.returncode == 2
    assert "CABRAIN_API_URL is not set" in result.stderr
    assert (
        f"export CABRAIN_API_URL=http://127.0.0.1:8121 CABRAIN_API_KEY=$(cat {tmp_path / 'admin.key'})" in result.stderr
    )
    assert "8000" not in result.stderr


def test_commands_without_a_service_act_as_the_first_admin_by_default() -> None:
    parser = acting_as()
    assert parser.parse_args([]).as_agent == FIRST_ADMIN == "admin"
    assert parser.parse_args(["--as", "ops"]).as_agent == "ops"
