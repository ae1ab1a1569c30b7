"""``get_sandbox_metrics``: how the server, the host and the sandbox runs are doing."""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations

from mcp_secure_sandbox._schemas import MetricsOutput
from mcp_secure_sandbox.observability import process_metrics
from mcp_secure_sandbox.tools._tool import state_of, tool

__all__ = ["TOOLS", "get_sandbox_metrics"]


@tool(
    annotations=ToolAnnotations(
        title="Server and sandbox metrics", read_only_hint=True, open_world_hint=False
    ),
)
async def get_sandbox_metrics(ctx: Context) -> MetricsOutput:
    """Report resource usage of the server and host, and statistics of every tool.

    Returns the server process (rss_bytes, cpu_percent, threads, open_files, pid,
    event_loop_lag_ms: how late its event loop wakes, in ms), the host (memory, load
    average, CPUs), uptime_s, per tool the calls, errors and latency percentiles in ms, runs
    by status, the largest peak memory of a run, the runs in progress (executing or waiting)
    and the concurrency cap; snapshot_store says whether the workspace is being saved
    (saving false and the error while an s3:// store is unreachable).
    """
    state = state_of(ctx)
    figures = await anyio.to_thread.run_sync(
        process_metrics, limiter=state.admission.limiter("metrics")
    )
    counters = state.metrics.snapshot()
    return {
        "process": {**figures["process"], "event_loop_lag_ms": state.loop_lag.summary()},
        "host": figures["host"],
        "uptime_s": round(state.metrics.uptime_s(), 3),
        "tools": counters["tools"],
        "runs_by_status": counters["runs_by_status"],
        "peak_child_memory_bytes": counters["peak_child_memory_bytes"],
        "active_runs": state.gate.active_runs,
        "max_concurrent_runs": state.sandbox.max_concurrent_runs,
        "snapshot_store": {
            "backend": state.store.backend,
            "saving": state.store_error is None and state.store.served_elsewhere is None,
            "error": state.store_error or state.store.served_elsewhere,
        },
    }


TOOLS = (get_sandbox_metrics,)
"""The tools of this module, in the order they are listed."""
