"""The ``openenv`` adapter: an OpenEnv server, text actions or its MCP tools (:mod:`.env`)."""
