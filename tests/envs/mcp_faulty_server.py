"""An MCP server that misbehaves on request, for the mcp env's bad-input tests: a tool that exits the process, one
that never answers, one that fails with a ToolError, one with another exception. ``--no-start`` exits before
serving, writing to stderr; ``--slow-start`` serves only after 30 s."""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("faulty")


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@server.tool()
def crash() -> str:
    """Exit the server process."""
    os._exit(3)


@server.tool()
def hang() -> str:
    """Never answer (sleeps far longer than any test's timeout)."""
    time.sleep(600)
    return "late"


@server.tool()
def fail() -> str:
    """Fail as a tool does."""
    raise ToolError("this tool always fails")


@server.tool()
def broken() -> str:
    """Fail with an exception that is not a ToolError (the SDK hides its message)."""
    raise ValueError("internal detail the policy never sees")


if __name__ == "__main__":
    if "--no-start" in sys.argv:
        print("faulty server: refusing to start (missing API key)", file=sys.stderr)
        sys.exit(2)
    if "--slow-start" in sys.argv:  # starts serving after any test's start_timeout
        time.sleep(30)
    server.run()
