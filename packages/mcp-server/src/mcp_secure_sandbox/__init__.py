"""mcp-secure-sandbox: an MCP server for running untrusted Python, validating data, snapshots.

It runs untrusted Python safely, validates JSON and CSV data, and snapshots and restores its
workspace.

Start it with ``mcp-secure-sandbox`` (or ``python -m mcp_secure_sandbox``); embed it with
:func:`create_server`.
"""

from mcp_secure_sandbox.__about__ import __version__
from mcp_secure_sandbox.server import create_server
from mcp_secure_sandbox.settings import ConfigError, Settings

__all__ = ["ConfigError", "Settings", "__version__", "create_server"]
