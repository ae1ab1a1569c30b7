"""The MCP tools, one module per family; each module lists its tools in ``TOOLS``.

A tool is a module-level function declared with :func:`mcp_secure_sandbox.tools._tool.tool`.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

from mcp_secure_sandbox.state import ServerState
from mcp_secure_sandbox.tools import metrics, sandbox, sessions, snapshots, validation, workspace
from mcp_secure_sandbox.tools._tool import register_tools

__all__ = ["TOOLS", "register_all"]

TOOLS = (
    *sandbox.TOOLS,
    *sessions.TOOLS,
    *validation.TOOLS,
    *snapshots.TOOLS,
    *workspace.TOOLS,
    *metrics.TOOLS,
)
"""Every tool of the server, in the order they are listed."""


def register_all(app: MCPServer[Any], state: ServerState) -> None:
    """Register every tool of the server on ``app``, described with ``state``'s settings.

    ``app``'s lifespan must yield ``state`` (the declared tools read it from there).
    """
    register_tools(app, state.settings, TOOLS)
