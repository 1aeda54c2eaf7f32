"""The overview page: what the brain holds and did, at a glance (counts kept as memories change, never a scan)."""

from __future__ import annotations

from cabrain.serve.console.routing import router

routes = router()
