"""The MCP tools, one module per family; each module has ``register(app, state)``."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

from mcp_secure_sandbox.state import ServerState
from mcp_secure_sandbox.tools import metrics, sandbox, sessions, snapshots, validation, workspace

__all__ = ["register_all"]


def register_all(app: MCPServer[Any], state: ServerState) -> None:
    """Register every tool of the server on ``app``."""
    for module in (sandbox, sessions, validation, snapshots, workspace, metrics):
        module.register(app, state)
