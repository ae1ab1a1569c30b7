"""Who a request comes from: the principal that session handles are bound to."""

from __future__ import annotations

from mcp.server.mcpserver import Context

__all__ = ["DEFAULT_PRINCIPAL", "principal_of"]

DEFAULT_PRINCIPAL = "default"


def principal_of(ctx: Context) -> str:
    """The principal of the request; stdio has one, `default`."""
    return DEFAULT_PRINCIPAL
