"""The ``mcp`` env: any MCP server as a tool environment (:mod:`.env`, over :mod:`.connection`)."""
