"""The audit of judgments per namespace: filter by kind, origin and time, both sides' texts, bulk revert behind a confirmation."""

from __future__ import annotations

from cabrain.serve.console.routing import router

routes = router()
