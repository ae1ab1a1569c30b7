"""mcp_secure_sandbox."""

from mcp_secure_sandbox.__about__ import __version__

__all__ = ["__version__"]
