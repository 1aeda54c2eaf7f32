"""The sleep cycle as a Ray job:

    ray job submit --working-dir . -- python -m cabrain.jobs.sleep_cycle [--namespace NS ...] [--steps a,b]

Connects to the cluster it was submitted to (or ``CABRAIN_RAY_ADDRESS``, or a local Ray), plans
the run and fans its steps out over every node; progress goes to stdout (``ray job logs``), the
report to stdout as JSON at the end and into ``sleep_runs``. Exit status: 0 done, 1 partial or
failed, 2 bad arguments or settings. ``cabrain sleep`` runs the same cycle from the command line.
"""

from __future__ import annotations

import sys

from cabrain.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    return cli_main(["sleep", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
