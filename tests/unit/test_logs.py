import json
import logging

from cabrain import logs


def test_logs_are_json_lines_with_their_context_and_quiet_by_default(capsys):
    logs.configure("WARNING")
    log = logging.getLogger("cabrain.test")
    log.info("embedded_pg.start", extra={"data_dir": "/x"})
    log.warning("embedded_pg.stale_pidfile", extra={"pid": 123})
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, "INFO is below the default level"
    record = json.loads(lines[0])
    assert record["event"] == "embedded_pg.stale_pidfile"
    assert record["level"] == "warning"
    assert record["pid"] == 123
    assert record["logger"] == "cabrain.test"


def test_configure_is_idempotent():
    logs.configure("INFO")
    logs.configure("INFO")
    handlers = [h for h in logging.getLogger("cabrain").handlers if isinstance(h.formatter, logs.JsonFormatter)]
    assert len(handlers) == 1
    assert logging.getLogger("cabrain").level == logging.INFO
    logs.configure("WARNING")


def test_a_line_writes_no_secret_from_its_event_its_context_or_its_traceback(capsys):
    token = "ghp_" + "Lk4" * 12
    logs.configure("WARNING")
    log = logging.getLogger("cabrain.test")
    try:
        raise RuntimeError(f"the server answered 401: bad token {token}")
    except RuntimeError as exc:
        log.error(
            "model call failed: %s",
            exc,
            exc_info=True,
            extra={"reply": f"Authorization: Bearer {token}", "tried": [{"key": token}], "pid": 7},
        )
    [line] = capsys.readouterr().err.strip().splitlines()
    record = json.loads(line)
    assert token not in line
    assert "[REDACTED]" in record["event"] and "[REDACTED]" in record["exc"] and "[REDACTED]" in record["reply"]
    assert record["tried"] == [{"key": "[REDACTED]"}] and record["pid"] == 7
    assert "the server answered 401" in record["event"]  # the rest of the story is kept
