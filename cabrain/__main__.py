"""``python -m cabrain`` is the ``cabrain`` command."""

from cabrain.entry import main

raise SystemExit(main())
