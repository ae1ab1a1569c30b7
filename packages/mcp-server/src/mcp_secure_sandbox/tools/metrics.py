"""``get_sandbox_metrics``: resource usage and statistics (observability)."""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations

from mcp_secure_sandbox._schemas import MetricsOutput
from mcp_secure_sandbox.observability import process_metrics
from mcp_secure_sandbox.principals import principal_of
from mcp_secure_sandbox.sessions import session_view
from mcp_secure_sandbox.tools._tool import state_of, tool

__all__ = ["TOOLS", "get_sandbox_metrics"]


@tool(
    annotations=ToolAnnotations(
        title="Server and sandbox metrics", read_only_hint=True, open_world_hint=False
    ),
)
async def get_sandbox_metrics(ctx: Context) -> MetricsOutput:
    """Report server and host resource usage and per-tool stats.

    event_loop_lag_ms: how late the event loop wakes; latencies in ms; active_runs: running
    or queued; sessions, caller: yours; snapshot_store.saving is false (with error) while the
    s3:// store is down.
    """
    state = state_of(ctx)
    figures = await anyio.to_thread.run_sync(
        process_metrics, limiter=state.admission.limiter("metrics")
    )
    mine = await anyio.to_thread.run_sync(
        state.sessions.list, principal_of(ctx), limiter=state.admission.limiter("metrics")
    )
    counters = state.metrics.snapshot()
    return {
        "process": {**figures["process"], "event_loop_lag_ms": state.loop_lag.summary()},
        "host": figures["host"],
        "uptime_s": round(state.metrics.uptime_s(), 3),
        "tools": counters["tools"],
        "runs_by_status": counters["runs_by_status"],
        "peak_child_memory_bytes": counters["peak_child_memory_bytes"],
        "sessions": [session_view(info) for info in mine],
        "active_runs": state.gate.active_runs,
        "max_concurrent_runs": state.sandbox.max_concurrent_runs,
        "snapshot_store": {
            "backend": state.store.backend,
            "saving": state.store_error is None and state.store.served_elsewhere is None,
            "error": state.store_error or state.store.served_elsewhere,
        },
        "caller": state.metrics.principal_calls(principal_of(ctx)),
    }


TOOLS = (get_sandbox_metrics,)
"""The tools of this module, in the order they are listed."""
