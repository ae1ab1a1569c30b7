"""The MCP server: thin tool functions over astguard, pysandbox, datavalidate and wsnapshot.

A tool function parses its arguments, calls one library function, and shapes the result. Outcomes
of the user's code (an exception, a rejection, a time-out) are normal results the model reads;
only a wrong call (bad arguments) is a tool error, raised as :class:`ToolError` with a message that
names the argument.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from mcp_secure_sandbox.__about__ import __version__
from mcp_secure_sandbox._schemas import RunOutput
from mcp_secure_sandbox.settings import Settings
from pysandbox import Sandbox

__all__ = ["ServerState", "create_server"]

log = logging.getLogger("mcp_secure_sandbox")

INSTRUCTIONS = """\
Runs Python you write in an isolated sandbox whose current directory is a persistent workspace,
validates JSON and CSV data, and snapshots and restores that workspace. Code may import only the
standard-library modules the policy allows; it cannot reach the network, start processes or touch
files outside the workspace. An exception, rejection or time-out in your code is a normal result
with a status: read stdout, stderr and violations, fix the code and run it again."""


class ServerState:
    """Everything the tools of one server process share.

    Args:
        settings: Prepared settings (directories exist and were validated).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.sandbox = Sandbox(settings.workspace)

    def close(self) -> None:
        """Stop every run still in progress and release the sandbox's resources."""
        self.sandbox.close()

    def timeout_for(self, timeout_sec: float | None) -> float:
        """Return the time-out of a call in seconds, applying the default and the maximum.

        Raises:
            ToolError: ``timeout_sec`` is not a positive number or exceeds the maximum.
        """
        if timeout_sec is None:
            return self.settings.default_timeout_s
        if not timeout_sec > 0:
            raise ToolError(f"timeout_sec must be a positive number of seconds, got {timeout_sec}")
        if timeout_sec > self.settings.max_timeout_s:
            raise ToolError(
                f"timeout_sec {timeout_sec} exceeds the server's maximum of "
                f"{self.settings.max_timeout_s} seconds"
            )
        return float(timeout_sec)


def create_server(settings: Settings) -> MCPServer[Any]:
    """Build the MCP server for prepared ``settings``.

    Args:
        settings: Settings whose directories exist (see
            :func:`mcp_secure_sandbox.settings.prepare_directories`).

    Returns:
        An :class:`mcp.server.mcpserver.MCPServer` with every tool registered; call ``run()``.
    """
    state = ServerState(settings)

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        try:
            yield
        finally:
            state.close()

    app: MCPServer[Any] = MCPServer(
        "secure-sandbox",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        log_level=settings.log_level,  # type: ignore[arg-type]
    )

    @app.tool(
        annotations=ToolAnnotations(
            readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False
        )
    )
    async def run_sandbox_code(code: str, timeout_sec: float | None = None) -> RunOutput:
        """Run a Python script in the sandbox and return its outcome.

        The script runs in a fresh interpreter whose current directory is the workspace, so
        `open("data.csv")` reads a workspace file. Only allowed standard-library modules can be
        imported; the network, other processes and files outside the workspace are unreachable.
        Print what you want to see: stdout and stderr come back (each capped in size).

        Args:
            code: The Python source to run, e.g. `print(sum(range(10)))`.
            timeout_sec: Wall-clock limit in seconds (server default when omitted; above the
                server's maximum the call is refused).

        Returns the status (ok, error, rejected, timeout, memory_limit, output_limit, disk_limit,
        killed), exit code or signal, stdout, stderr, truncation flags, duration and CPU time in
        ms, peak memory in bytes, the checker's violations when rejected, and the isolation
        layers that were active.
        """
        timeout = state.timeout_for(timeout_sec)
        result = await state.sandbox.arun(code, timeout=timeout)
        log.info("run_sandbox_code status=%s duration_ms=%.1f", result.status, result.duration_ms)
        output: RunOutput = result.to_dict()  # type: ignore[assignment]
        return output

    return app
