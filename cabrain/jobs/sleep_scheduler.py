"""The sleep cycle on a schedule, as a long-running Ray job:

    ray job submit --working-dir . -- python -m cabrain.jobs.sleep_scheduler [--at 03:00 | --every 3600]

Runs one cycle daily at ``--at`` (default ``CABRAIN_SLEEP_AT``, 03:00 UTC) or every ``--every``
seconds, on the cluster it was submitted to, until the job is stopped (``ray job stop``). Each run
is the same as ``python -m cabrain.jobs.sleep_cycle``; the report of every run is kept in ``sleep_runs``.
The options of ``cabrain sleep`` (``--namespace``, ``--steps``) apply to every run.
"""

from __future__ import annotations

import sys

from cabrain.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    return cli_main(["sleep", "--schedule", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
