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
