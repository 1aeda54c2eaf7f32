"""The overview of what the brain holds and did: counts, activity, storage."""

from __future__ import annotations

from cabrain.serve.routing import router

routes = router(tags=["overview"])
