"""The command line's parser: arguments handed on to psql, Serve configs, and the package's shape."""

import ast
from pathlib import Path

import pytest

from cabrain.cli import build_parser
from cabrain.cli.common import parse_args, read_app_config
from cabrain.errors import UsageError

CLI = Path(__file__).resolve().parents[2] / "cabrain" / "cli"


@pytest.mark.parametrize(
    ("argv", "psql_args"),
    [
        (["db", "shell"], []),
        (["db", "shell", "-c", r"\dt"], ["-c", r"\dt"]),  # as the README shows it
        (["db", "shell", "--", "-c", "select 1"], ["-c", "select 1"]),
        (["db", "shell", "-X", "-c", "select 1", "-A"], ["-X", "-c", "select 1", "-A"]),
        (["db", "shell", "mydb", "-c", "select 1"], ["mydb", "-c", "select 1"]),
        (["db", "shell", "-At", "--", "-c", "x"], ["-At", "-c", "x"]),  # the -- that ends cabrain's options
        (["db", "shell", "--", "-c", "x", "--", "y"], ["-c", "x", "--", "y"]),  # ... and only that one
    ],
)
def test_db_shell_hands_every_argument_to_psql_in_order(argv, psql_args):
    assert parse_args(build_parser(), argv).psql_args == psql_args


@pytest.mark.parametrize("argv", [["db", "status", "-c", "x"], ["migrate", "--bogus"], ["recall", "q", "-n", "p", "x"]])
def test_other_commands_still_refuse_unknown_arguments(argv, capsys):
    with pytest.raises(SystemExit) as info:
        parse_args(build_parser(), argv)
    assert info.value.code == 2
    assert "cabrain: error: unrecognized arguments: " in capsys.readouterr().err


def test_db_shell_help_is_still_help(capsys):
    with pytest.raises(SystemExit) as info:
        parse_args(build_parser(), ["db", "shell", "--help"])
    assert info.value.code == 0
    assert "usage: cabrain db shell" in capsys.readouterr().out


@pytest.mark.parametrize("import_path", ["serve_apps.app:build_app", "cabrain.serve.app:build_app"])
def test_serve_config_application_found_at_either_import_path(tmp_path, import_path):
    config = tmp_path / "serve.yaml"
    config.write_text(
        "applications:\n"
        "  - name: other\n    import_path: elsewhere:app\n    args: {wrong: true}\n"
        f"  - name: cabrain\n    import_path: {import_path}\n    args: {{recall_replicas: 2}}\n"
    )
    assert read_app_config(str(config)) == {"recall_replicas": 2}


def test_serve_config_without_the_application_is_a_usage_error(tmp_path):
    config = tmp_path / "serve.yaml"
    config.write_text("applications:\n  - name: other\n    import_path: elsewhere:app\n")
    with pytest.raises(UsageError) as info:
        read_app_config(str(config))
    assert "no application with import_path serve_apps.app:build_app or cabrain.serve.app:build_app" in str(info.value)


def test_area_modules_import_downward_only():
    """No module of the package imports the package itself (its __init__ imports them all)."""
    for path in CLI.glob("*.py"):
        if path.name in ("__init__.py", "__main__.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "cabrain.cli", f"{path.name} imports from cabrain.cli"
                assert not (node.module == "cabrain" and any(a.name == "cli" for a in node.names)), path.name
            elif isinstance(node, ast.Import):
                assert all(a.name != "cabrain.cli" for a in node.names), f"{path.name} imports cabrain.cli"


def test_shared_flags_are_declared_once():
    """--json, --quiet, --namespace and --config come from the parent parsers in cabrain/cli/common.py."""
    for path in CLI.glob("*.py"):
        if path.name == "common.py":
            continue
        text = path.read_text()
        for flag in ('"--json"', '"--quiet"', '"--namespace"', '"--config"'):
            assert flag not in text, f"{path.name} declares {flag}; use the parent parser in common.py"
