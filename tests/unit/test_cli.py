import argparse

import pytest

from cabrain.cli import build_parser, main
from cabrain.errors import ExtensionMissing
from cabrain.store.db import ServerFacts, check_server


def all_parsers(parser: argparse.ArgumentParser, path=()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from all_parsers(sub, (*path, name))


def test_every_command_has_help_text():
    parsers = list(all_parsers(build_parser()))
    names = {" ".join(path) for path, _ in parsers}
    assert {"migrate", "doctor", "db", "db status", "db stop", "db shell"} <= names
    for path, parser in parsers:
        assert parser.description, f"cabrain {' '.join(path)} has no description"


@pytest.mark.parametrize("argv", [["--help"], ["migrate", "--help"], ["doctor", "--help"], ["db", "stop", "--help"]])
def test_help_exits_zero_and_describes_the_command(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 0
    assert "usage: cabrain" in capsys.readouterr().out


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "migrate" in capsys.readouterr().out


def test_unknown_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2


def facts(version_num=180006, version="18.6", available="0.8.6", installed=None):
    return ServerFacts(version_num, version, available, installed, "cabrain", "cabrain")


def test_server_check_accepts_postgres_15_plus_with_pgvector_0_8():
    check_server(facts())
    check_server(facts(150004, "15.4", "0.8.0"))


@pytest.mark.parametrize(
    ("server", "message"),
    [
        (facts(140010, "14.10"), "PostgreSQL 14.10 is too old"),
        (facts(available=None), "pgvector extension is not installed"),
        (facts(available="0.7.4"), "pgvector 0.7.4 is too old"),
        (facts(available="0.9.0", installed="0.7.0"), "pgvector 0.7.0 is too old"),
    ],
)
def test_server_check_explains_what_is_missing(server, message):
    with pytest.raises(ExtensionMissing) as info:
        check_server(server)
    assert message in str(info.value)
    assert info.value.hint


def test_misspelled_variables_are_reported_with_the_closest_name(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("CABRAIN_HOME", str(tmp_path))
    monkeypatch.setenv("CABRAIN_RECAL_MAX_K", "20")
    monkeypatch.setenv("CABRAIN_API_HOTS", "0.0.0.0")
    assert main(["recall", "x", "-n", "proj"]) == 2  # fails for want of CABRAIN_API_URL, after the warning
    err = capsys.readouterr().err
    assert "CABRAIN_RECAL_MAX_K is not a CaBrain setting (did you mean CABRAIN_RECALL_MAX_K?)" in err
    assert "CABRAIN_API_HOTS is not a CaBrain setting (did you mean CABRAIN_API_HOST?)" in err


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"CABRAIN_SOURCE_WEIGHTS": "{manual: 0.8"}, "CABRAIN_SOURCE_WEIGHTS is not valid JSON"),
        (
            {"CABRAIN_DB_POOL_MIN": "20", "CABRAIN_DB_POOL_MAX": "5"},
            "CABRAIN_DB_POOL_MIN (20) is above CABRAIN_DB_POOL_MAX (5)",
        ),
    ],
)
def test_bad_settings_are_one_clear_line_and_exit_2(monkeypatch, capsys, tmp_path, variables, message):
    monkeypatch.setenv("CABRAIN_HOME", str(tmp_path))
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert main(["doctor"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_the_live_commands_refuse_bad_arguments_before_calling_anything(capsys):
    assert main(["usage", "cap", "scout", "recall"]) == 2  # neither a number nor --clear
    assert "give a number per day, or --clear" in capsys.readouterr().err
    assert main(["notify", "subscribe", "--subscriber", "n", "--kind", "stale", "--quiet-hours", "late"]) == 2
    assert "--quiet-hours takes START-END" in capsys.readouterr().err
    assert main(["notify", "add", "x", "--kind", "slack", "--secret-env", "T", "--options", "[1]"]) == 2
    assert "must be a JSON object" in capsys.readouterr().err
