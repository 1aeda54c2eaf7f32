"""``python -m cabrain`` is the ``cabrain`` command."""

from cabrain.cli import main

raise SystemExit(main())
