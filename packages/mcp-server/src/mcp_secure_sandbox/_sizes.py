"""Sizes the settings and the response budget share, in a module that imports nothing.

The validation and diff workers import :mod:`mcp_secure_sandbox.settings` (through the
package) under a small address-space budget: the settings' bounds come from here, not from
:mod:`mcp_secure_sandbox.budget`, which pulls in the MCP SDK. :mod:`~mcp_secure_sandbox.budget`
re-exports them.
"""

from __future__ import annotations

__all__ = [
    "MAX_WRITE_BYTES",
    "RESPONSE_BUDGET_BYTES",
    "STREAM_EXCERPT_MAX_BYTES",
    "STREAM_EXCERPT_MIN_BYTES",
]

RESPONSE_BUDGET_BYTES = 512 * 1024
"""Largest encoded JSON-RPC message the server sends as one answer, in bytes."""
STREAM_EXCERPT_MIN_BYTES = 1024
"""Smallest ``--stream-excerpt``, in bytes (room for a head, a tail and the cut marker)."""
STREAM_EXCERPT_MAX_BYTES = RESPONSE_BUDGET_BYTES // 4
"""Largest ``--stream-excerpt``, in bytes: two streams, each carried twice, fit the budget."""
MAX_WRITE_BYTES = 8 * 1024 * 1024
"""Largest decoded content one ``write_workspace_file`` call takes, in bytes; the HTTP
transport's default body limit is derived from it (as Base64, plus an envelope)."""
