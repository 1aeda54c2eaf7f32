"""``python -m cabrain.cli`` is the ``cabrain`` command (without the fast path for ``capture``)."""

from cabrain.cli import main

raise SystemExit(main())
