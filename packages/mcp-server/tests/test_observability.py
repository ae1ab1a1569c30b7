from __future__ import annotations

import logging

import anyio
import pytest
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

from mcp_secure_sandbox.observability import (
    TIMING_ENV,
    TRACE_CAPACITY,
    CallTimer,
    LoopLag,
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


def test_metrics_count_each_principals_calls_apart() -> None:
    metrics = Metrics()
    metrics.record_call("a", 1.0, error=False, principal="alice")
    metrics.record_call("b", 1.0, error=True, principal="alice")
    metrics.record_call("a", 1.0, error=False, principal="bob")
    metrics.record_call("a", 1.0, error=False)  # no principal known: counted per tool only
    assert metrics.principal_calls("alice") == {"principal": "alice", "calls": 2, "errors": 1}
    assert metrics.principal_calls("bob") == {"principal": "bob", "calls": 1, "errors": 0}
    assert metrics.principal_calls("carol") == {"principal": "carol", "calls": 0, "errors": 0}
    assert metrics.snapshot()["tools"]["a"]["calls"] == 3
    assert "alice" not in repr(metrics.snapshot())


def test_process_metrics_reports_this_process() -> None:
    import os

    data = process_metrics()
    assert data["process"]["pid"] == os.getpid()
    assert data["process"]["rss_bytes"] > 1024 * 1024
    assert data["process"]["threads"] >= 1
    assert data["host"]["memory_total_bytes"] >= data["host"]["memory_available_bytes"] > 0
    assert len(data["host"]["load_average"]) == 3


def test_process_metrics_cpu_percent_measures_since_the_previous_call() -> None:
    import time

    process_metrics()
    began = time.process_time()
    while time.process_time() - began < 0.2:  # 200 ms of this process's CPU, however long
        sum(range(1000))
    assert process_metrics()["process"]["cpu_percent"] > 0


def test_loop_lag_sees_a_blocked_loop() -> None:
    import time

    lag = LoopLag(tick_s=0.001, window=3)
    assert lag.summary() == {"p50": 0.0, "p99": 0.0, "max": 0.0}

    async def scenario() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lag.run)
            while lag.ticks < 3:
                await anyio.sleep(0.001)
            before = lag.ticks  # the ticker is sleeping now
            time.sleep(0.04)  # blocks the loop: the tick in progress wakes >= 39 ms late
            while lag.ticks == before:
                await anyio.sleep(0.001)
            tg.cancel_scope.cancel()

    anyio.run(scenario)
    summary = lag.summary()
    assert summary["max"] >= 39.0
    assert 0 <= summary["p50"] <= summary["p99"] <= summary["max"]
    assert lag.ticks > 3


def test_call_timer_is_off_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIMING_ENV, raising=False)
    assert CallTimer.from_environment() is None
    monkeypatch.setenv(TIMING_ENV, "yes")
    assert CallTimer.from_environment() is None
    monkeypatch.setenv(TIMING_ENV, "1")
    assert isinstance(CallTimer.from_environment(), CallTimer)


def test_call_timer_logs_each_answered_request(caplog: pytest.LogCaptureFixture) -> None:
    timer = CallTimer()
    request = JSONRPCRequest(jsonrpc="2.0", id=7, method="tools/call", params={"name": "x"})
    other = JSONRPCRequest(jsonrpc="2.0", id=8, method="ping")
    note = JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized")

    async def scenario() -> list[SessionMessage | Exception]:
        to_server, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](5)
        to_client, from_server = anyio.create_memory_object_stream[SessionMessage](5)
        read, write = timer.wrap(from_client, to_client)
        for message in (request, note, other):
            await to_server.send(SessionMessage(message))
        received = [await read.receive() for _ in range(3)]
        timer.library("7", 0.002, 1.5)
        await write.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=7, result={})))
        await write.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=99, result={})))
        await write.send(SessionMessage(note))
        for stream in (to_server, from_client, to_client, from_server):
            await stream.aclose()
        return received

    with caplog.at_level(logging.INFO, logger="mcp_secure_sandbox.timing"):
        received = anyio.run(scenario)
    assert [getattr(m, "message", None) for m in received] == [request, note, other]
    lines = [r.getMessage() for r in caplog.records if r.name == "mcp_secure_sandbox.timing"]
    assert len(lines) == 1, lines
    fields = dict(part.split("=") for part in lines[0].split()[1:])
    assert fields["id"] == "7"
    assert fields["method"] == "tools/call"
    assert fields["library_ms"] == "2.000"
    assert fields["run_ms"] == "1.500"
    total, overhead = float(fields["total_ms"]), float(fields["overhead_ms"])
    assert abs(total - 2.0 - overhead) < 0.002
