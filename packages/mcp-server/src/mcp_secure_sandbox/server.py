"""The MCP server: thin tools, resources and prompts over the four libraries.

A tool function parses its arguments, calls one library function, and shapes the result. Outcomes
of the user's code (an exception, a rejection, a time-out) are normal results the model reads;
only a wrong call (bad arguments) is a tool error, with a message that names the argument.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

from mcp_secure_sandbox import completions, prompts, resources, surface
from mcp_secure_sandbox.__about__ import __version__
from mcp_secure_sandbox.arguments import StrictArguments
from mcp_secure_sandbox.principals import PrincipalContext
from mcp_secure_sandbox.sessions import RequestContext, sweep_forever
from mcp_secure_sandbox.settings import ConfigError, Settings, check_importable_overlap
from mcp_secure_sandbox.state import ServerState
from mcp_secure_sandbox.tools import register_all
from pysandbox import SandboxError
from wsnapshot import SnapshotError

__all__ = ["create_server"]


def create_server(settings: Settings) -> tuple[MCPServer[Any], ServerState]:
    """Build the MCP server for prepared ``settings``.

    Args:
        settings: Settings whose directories exist (see
            :func:`mcp_secure_sandbox.settings.prepare_directories`).

    Returns:
        The :class:`mcp.server.mcpserver.MCPServer` with every tool, resource and prompt
        registered, its instructions from the live settings (:mod:`mcp_secure_sandbox.surface`),
        and the :class:`ServerState` it shares (closed when the server stops).

    Raises:
        ConfigError: A library refused the settings: pysandbox the workspace's location (``/``,
            a home directory, the interpreter, a system directory) or a module name or limit,
            wsnapshot the snapshot store (overlapping the workspace, not a store); or the
            workspace overlaps a directory the server imports from; or a kernel layer that
            ``--require-layers`` names is unavailable (missing layers that are not required
            are logged as warnings). The message is the library's, one line; or the process
            has ``PYSANDBOX_TESTING_KERNEL_ONLY`` set (pysandbox's testing-only mode without the
            Python-level layers).
    """
    if "PYSANDBOX_TESTING_KERNEL_ONLY" in os.environ:
        raise ConfigError(
            "PYSANDBOX_TESTING_KERNEL_ONLY is set: that variable enables a pysandbox mode for "
            "its own tests, without the AST gate and the Python-level guards; unset it to "
            "start the server"
        )
    try:
        state = ServerState(settings)
    except (SandboxError, SnapshotError, ValueError, TypeError) as exc:
        # The libraries validate what the flags feed them; a refusal is a configuration error.
        raise ConfigError(str(exc)) from None
    try:
        check_importable_overlap(settings.workspace)
        state.check_isolation()
    except ConfigError:
        state.close()
        raise

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[ServerState]:
        # The tools are module-level functions: they find the state in the lifespan context.
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(state.loop_lag.run)
                tg.start_soon(sweep_forever, state.sessions, state.admission.limiter("light"))
                yield state
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await state.aclose()

    app: MCPServer[Any] = MCPServer(
        "secure-sandbox",
        title="Secure Python sandbox and data validator",
        version=__version__,
        instructions=surface.instructions(settings),
        lifespan=lifespan,
        log_level=settings.log_level,  # type: ignore[arg-type]
    )
    register_all(app, state)
    resources.register(app, state)
    prompts.register(app, state)
    completions.register(app, state)
    app.middleware.append(PrincipalContext())  # each call's log line names its principal
    app.middleware.append(StrictArguments(app))
    app.middleware.append(RequestContext(app))
    return app, state
