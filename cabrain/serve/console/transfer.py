"""Import and export in the console: upload another tool's memory file (mem0, Letta, claude-mem, Markdown) or a CaBrain export, download an export."""

from __future__ import annotations

from cabrain.serve.console.routing import router

routes = router()
