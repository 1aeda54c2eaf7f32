"""A person's corrections of memories (correct, restore) and the audit of judgments per namespace."""

from __future__ import annotations

from cabrain.serve.routing import router

routes = router(tags=["corrections"])
