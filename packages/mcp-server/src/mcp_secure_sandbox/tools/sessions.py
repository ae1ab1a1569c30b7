"""``create_session``, ``list_sessions``, ``close_session``: pysandbox's ``SessionRegistry``.

A session's id is an opaque handle bound to the caller's principal
(:func:`mcp_secure_sandbox.principals.principal_of`); another principal's id reads exactly
as an unknown one. The error texts are :func:`mcp_secure_sandbox.sessions.error_text`'s.
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from mcp_secure_sandbox import surface
from mcp_secure_sandbox.principals import principal_of
from mcp_secure_sandbox.sessions import error_text, iso, session_view
from mcp_secure_sandbox.tools._tool import state_of, tool
from pysandbox import SESSION_DESCRIPTION_MAX, SandboxError

__all__ = ["TOOLS", "close_session", "create_session", "list_sessions"]

SessionId = Annotated[str, Field(description="From create_session.")]


@tool(
    fill=lambda settings: {"lifetimes": surface.session_limits(settings)},
    annotations=ToolAnnotations(open_world_hint=False),
)
async def create_session(
    ctx: Context,
    description: Annotated[
        str,
        Field(
            max_length=SESSION_DESCRIPTION_MAX,
            description="What it is for.",
        ),
    ] = "",
) -> dict[str, Any]:
    """Start a Python session; run_sandbox_code with its session_id keeps its variables.

    sys.exit() ends it. {lifetimes}. expires_at is ISO 8601 UTC.
    """
    state = state_of(ctx)
    settings = state.settings
    principal = principal_of(ctx)
    try:
        info = await anyio.to_thread.run_sync(
            state.sessions.create,
            principal,
            description,
            limiter=state.admission.limiter("run"),
        )
    except SandboxError as exc:
        raise ToolError(error_text(exc, settings)) from None
    return {
        "session_id": info.session_id,
        "expires_at": iso(info.expires_at),
        "idle_timeout_sec": settings.session_idle_timeout_s,
        "max_lifetime_sec": settings.session_max_lifetime_s,
    }


@tool(annotations=ToolAnnotations(read_only_hint=True))
async def list_sessions(ctx: Context) -> dict[str, Any]:
    """List your sessions: ids, times (ISO 8601 UTC), calls, CPU and memory."""
    state = state_of(ctx)
    infos = await anyio.to_thread.run_sync(
        state.sessions.list, principal_of(ctx), limiter=state.admission.limiter("light")
    )
    return {"sessions": [session_view(info) for info in infos]}


@tool(annotations=ToolAnnotations(destructive_hint=True))
async def close_session(session_id: SessionId, ctx: Context) -> dict[str, Any]:
    """Close one of your sessions (the files it wrote stay)."""
    state = state_of(ctx)
    try:
        await anyio.to_thread.run_sync(
            state.sessions.close,
            session_id,
            principal_of(ctx),
            limiter=state.admission.limiter("light"),
        )
    except SandboxError as exc:
        raise ToolError(error_text(exc, state.settings)) from None
    return {"closed": True}


TOOLS = (create_session, list_sessions, close_session)
"""The tools of this module, in the order they are listed."""
