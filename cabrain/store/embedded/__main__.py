"""``python -m cabrain.store.embedded reap ROOT``: the watchdog process (see :mod:`cabrain.store.embedded`)."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

from cabrain.logs import configure
from cabrain.store.embedded.server import EmbeddedPostgres


def main(argv: list[str] | None = None) -> int:
    """``python -m cabrain.store.embedded reap ROOT``: the watchdog process."""
    parser = argparse.ArgumentParser(prog="python -m cabrain.store.embedded")
    sub = parser.add_subparsers(dest="command", required=True)
    reap = sub.add_parser("reap", help="stop the server once no CaBrain process uses it")
    reap.add_argument("root", type=Path)
    reap.add_argument("--interval", type=float, default=1.0)
    reap.add_argument("--os-user", default="cabrain-pg")
    reap.add_argument("--install-dir", type=Path, default=None)
    reap.add_argument("--shared-buffers", default="auto")
    reap.add_argument("--option", action="append", default=[], help="NAME=VALUE, a server setting")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    configure("WARNING")  # JSON lines into log/reaper.log
    options = dict(option.partition("=")[::2] for option in args.option)
    EmbeddedPostgres(
        args.root,
        os_user=args.os_user,
        reaper_interval_s=args.interval,
        install_dir=args.install_dir,
        shared_buffers=args.shared_buffers,
        server_options=options,
    ).reap_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
