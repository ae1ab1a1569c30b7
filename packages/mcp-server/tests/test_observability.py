from __future__ import annotations

from mcp_secure_sandbox.observability import (
    TRACE_CAPACITY,
    Metrics,
    TraceLog,
    percentile,
    process_metrics,
)


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 95) == 95.0
    assert percentile(values, 100) == 100.0
    assert percentile([], 50) == 0.0
    assert percentile([7.0], 95) == 7.0


def test_trace_log_is_a_bounded_ring() -> None:
    log = TraceLog()
    for i in range(TRACE_CAPACITY + 25):
        log.add(tool="t", message=f"m{i}", duration_ms=1.23456, status="ok")
    entries = log.entries()
    assert len(entries) == TRACE_CAPACITY
    assert entries[0]["message"] == "m25"
    assert entries[-1]["message"] == f"m{TRACE_CAPACITY + 24}"
    assert entries[-1]["duration_ms"] == 1.235
    assert set(entries[0]) == {"timestamp", "level", "tool", "message", "duration_ms", "status"}


def test_metrics_counts_calls_errors_and_runs() -> None:
    metrics = Metrics()
    for ms in (10.0, 20.0, 30.0, 40.0):
        metrics.record_call("run_sandbox_code", ms, error=False)
    metrics.record_call("run_sandbox_code", 50.0, error=True)
    metrics.record_run("ok", 1000)
    metrics.record_run("timeout", 5000)
    metrics.record_run("ok", 2000)
    snap = metrics.snapshot()
    tool = snap["tools"]["run_sandbox_code"]
    assert tool == {"calls": 5, "errors": 1, "p50_ms": 30.0, "p95_ms": 50.0, "max_ms": 50.0}
    assert snap["runs_by_status"] == {"ok": 2, "timeout": 1}
    assert snap["peak_child_memory_bytes"] == 5000


def test_process_metrics_reports_this_process() -> None:
    import os

    data = process_metrics()
    assert data["process"]["pid"] == os.getpid()
    assert data["process"]["rss_bytes"] > 1024 * 1024
    assert data["process"]["threads"] >= 1
    assert data["host"]["memory_total_bytes"] >= data["host"]["memory_available_bytes"] > 0
    assert len(data["host"]["load_average"]) == 3
