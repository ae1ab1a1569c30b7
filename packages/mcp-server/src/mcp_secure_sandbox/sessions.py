"""Sessions over MCP: the registry the server holds, the fixed error texts, the sweep.

The library does the work (:class:`pysandbox.SessionRegistry`: handles bound to principals,
limits, lifetimes); this module is the one home of what MCP adds: the texts of the contract's
tool errors (:func:`error_text`), how a session is shown (:func:`session_view`, times in
ISO 8601 UTC), the sweep that closes expired sessions (:func:`sweep_forever`, a task of the
server's lifespan), and the request's context for ``sandbox://sessions``, a static resource the
SDK gives no :class:`~mcp.server.mcpserver.Context` (:class:`RequestContext`).
"""

from __future__ import annotations

import contextvars
import logging
from datetime import datetime, timezone
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer

from mcp_secure_sandbox._declare import size_words
from mcp_secure_sandbox.settings import Settings
from pysandbox import (
    Sandbox,
    SandboxError,
    SessionBudgetExceeded,
    SessionInfo,
    SessionRegistry,
    SessionsNeedWarmMode,
    TooManySessions,
    UnknownSession,
)

__all__ = [
    "SWEEP_EVERY_S",
    "RequestContext",
    "error_text",
    "iso",
    "registry_for",
    "request_context",
    "session_view",
    "sweep_forever",
]

log = logging.getLogger("mcp_secure_sandbox")

#: Most seconds between two sweeps of expired sessions (less for a shorter idle time-out).
SWEEP_EVERY_S = 5.0


def registry_for(sandbox: Sandbox, settings: Settings) -> SessionRegistry:
    """The server's session registry over ``sandbox``, with the settings' limits.

    Args:
        sandbox: The server's sandbox (sessions need its warm mode).
        settings: ``max_sessions``, ``max_sessions_per_principal``,
            ``sessions_memory_budget_bytes``, ``session_idle_timeout_s``,
            ``session_max_lifetime_s``.

    Returns:
        The registry (no session open yet).
    """
    return SessionRegistry(
        sandbox,
        max_sessions=settings.max_sessions,
        max_per_principal=settings.max_sessions_per_principal,
        memory_budget_bytes=settings.sessions_memory_budget_bytes,
        idle_timeout_s=settings.session_idle_timeout_s,
        max_lifetime_s=settings.session_max_lifetime_s,
    )


def error_text(exc: SandboxError, settings: Settings) -> str:
    """The tool error of a session call the registry refused: the contract's fixed texts.

    Args:
        exc: :class:`~pysandbox.UnknownSession`, :class:`~pysandbox.TooManySessions`,
            :class:`~pysandbox.SessionBudgetExceeded`, :class:`~pysandbox.SessionsNeedWarmMode`,
            or another library error (its own message).
        settings: The settings in force (the budget as a person reads it).

    Returns:
        ``"unknown session S (it may have been closed or expired): create_session starts a
        new one"``, ``"the server holds its maximum of N sessions (M of them yours):
        close_session one; list_sessions shows them"``, ``"the sessions memory budget (B) is
        in use: close_session one"``, or the spawn-mode refusal naming ``--execution``.
    """
    if isinstance(exc, UnknownSession):
        return f"{exc}: create_session starts a new one"  # the library's text, then the remedy
    if isinstance(exc, TooManySessions):
        limit = exc.limit if exc.total >= exc.limit else exc.per_principal
        return (
            f"the server holds its maximum of {limit} sessions ({exc.yours} of them yours): "
            "close_session one; list_sessions shows them"
        )
    if isinstance(exc, SessionBudgetExceeded):
        budget = size_words(settings.sessions_memory_budget_bytes)
        return f"the sessions memory budget ({budget}) is in use: close_session one"
    if isinstance(exc, SessionsNeedWarmMode):
        return (
            "sessions need the server's warm execution (--execution warm, SANDBOX_EXECUTION), "
            f"but it runs in spawn mode: {exc.reason}. run_sandbox_code without session_id "
            "still runs one-shot code"
        )
    return str(exc)


def iso(seconds: float) -> str:
    """Epoch ``seconds`` as ISO 8601 UTC with milliseconds (``2026-12-07T22:10:41.123+00:00``)."""
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds")


def session_view(info: SessionInfo) -> dict[str, Any]:
    """One session as ``list_sessions`` and ``sandbox://sessions`` show it to its principal.

    Returns:
        ``session_id``, ``description``, ``created_at``, ``last_used_at``, ``expires_at``
        (ISO 8601 UTC), ``calls``, ``cpu_time_ms`` and ``rss_bytes``.
    """
    return {
        "session_id": info.session_id,
        "description": info.description,
        "created_at": iso(info.created_at),
        "last_used_at": iso(info.last_used_at),
        "expires_at": iso(info.expires_at),
        "calls": info.calls,
        "cpu_time_ms": info.cpu_time_ms,
        "rss_bytes": info.rss_bytes,
    }


async def sweep_forever(registry: SessionRegistry, limiter: anyio.CapacityLimiter) -> None:
    """Close expired sessions every few seconds until cancelled (a task of the lifespan).

    The period is :data:`SWEEP_EVERY_S`, or a tenth of the idle time-out when that is
    shorter (at least 50 ms). Each sweep runs in a thread on ``limiter`` (it kills and reaps).
    """
    period = max(0.05, min(SWEEP_EVERY_S, registry.idle_timeout_s / 10))
    while True:
        await anyio.sleep(period)
        try:
            closed = await anyio.to_thread.run_sync(registry.sweep, limiter=limiter)
        except Exception:  # a failed sweep must not stop the server
            # The lifespan's task group would end the server with it; the next sweep retries.
            log.exception("sessions: a sweep failed; the next one retries")
            continue
        if closed:
            log.info("sessions: %d expired session(s) closed", closed)


#: The context of the request being served, for handlers the SDK gives none.
_request: contextvars.ContextVar[Context | None] = contextvars.ContextVar(
    "mcp_secure_sandbox_request", default=None
)


def request_context() -> Context:
    """The :class:`Context` of the request being served (set by :class:`RequestContext`).

    Raises:
        RuntimeError: Called outside a request the middleware saw.
    """
    ctx = _request.get()
    if ctx is None:
        raise RuntimeError("no request is being served")
    return ctx


class RequestContext:
    """Server middleware that makes each ``resources/read``'s context readable.

    The SDK injects no :class:`Context` into a static resource's function, but the
    principal of ``sandbox://sessions`` comes from it (``principal_of(ctx)``): this sets it
    for the handler (:func:`request_context`).

    Args:
        app: The server (the context's ``mcp_server``).
    """

    def __init__(self, app: MCPServer[Any]) -> None:
        self._app = app

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Serve the request with its context set (``resources/read`` only)."""
        if ctx.method != "resources/read":
            return await call_next(ctx)
        token = _request.set(Context(request_context=ctx, mcp_server=self._app))
        try:
            return await call_next(ctx)
        finally:
            _request.reset(token)
