"""Workflow learning's iterations as a Ray job:

    ray job submit --working-dir . -- python -m cabrain.jobs.workflow_learn [--namespace NS ...] [--limit N]

Connects to the cluster it was submitted to (or ``CABRAIN_RAY_ADDRESS``, or a local Ray) and fans
the new frontier references out over every node, one Ray task each; progress goes to stdout
(``ray job logs``), the report to stdout at the end (``--json`` for JSON). Exit status: 0 done,
1 some runs failed, 2 bad arguments or settings. ``cabrain workflows learn`` runs the same.
With ``--every SECONDS`` it is a long-running job that learns on that schedule until stopped
(``ray job stop``).
"""

from __future__ import annotations

import sys

from cabrain.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    return cli_main(["workflows", "learn", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
