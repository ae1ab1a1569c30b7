"""mcp-secure-sandbox: an MCP server for running untrusted Python, validating data, snapshots.

It runs untrusted Python safely, validates JSON and CSV data, and snapshots and restores its
workspace. Start it with ``mcp-secure-sandbox`` (or ``python -m mcp_secure_sandbox``); embed it
with :func:`create_server`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_secure_sandbox.__about__ import __version__
from mcp_secure_sandbox.settings import ConfigError, Settings

if TYPE_CHECKING:
    from mcp_secure_sandbox.server import create_server

__all__ = ["ConfigError", "Settings", "__version__", "create_server"]


def __getattr__(name: str) -> Any:
    # The server pulls in the MCP SDK and the four libraries; importing it lazily keeps
    # `mcp-secure-sandbox --help` and configuration errors fast.
    if name == "create_server":
        from mcp_secure_sandbox.server import create_server

        return create_server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
