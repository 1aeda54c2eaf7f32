"""The faces agents reach CaBrain through: MCP tools, the memory-tool backend, capture hooks."""
