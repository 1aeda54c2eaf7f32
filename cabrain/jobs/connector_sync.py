"""Connector syncs as a Ray job:

    ray job submit --working-dir . --runtime-env-json '{"env_vars": {"GITLAB_TOKEN": "..."}}' \
        -- python -m cabrain.jobs.connector_sync NAME [NAME ...] | --due

Connects to the cluster it was submitted to (or ``CABRAIN_RAY_ADDRESS``), syncs each connector as
its own agent and fans a large sync's changed items out as Ray tasks over every node
(:mod:`cabrain.connectors.run`); progress goes to stdout (``ray job logs``), the reports to stdout
as JSON at the end and into ``connector_runs``. Exit status: 0 done, 1 a sync failed, 2 bad
arguments or settings. ``cabrain connectors sync --ray`` runs the same from the command line.
"""

from __future__ import annotations

import sys

from cabrain.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    return cli_main(["connectors", "sync", "--ray", "--json", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
