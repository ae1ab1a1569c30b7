"""What the server knows about itself: a bounded trace log and per-tool metrics.

Both live in memory only and are bounded, so a long-lived server cannot grow without limit: the
trace log keeps the last :data:`TRACE_CAPACITY` entries, and each tool keeps the last
:data:`LATENCY_WINDOW` latencies for its percentiles.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import psutil

__all__ = [
    "LATENCY_WINDOW",
    "TRACE_CAPACITY",
    "Metrics",
    "ToolStats",
    "TraceLog",
    "percentile",
    "process_metrics",
]

TRACE_CAPACITY = 100
LATENCY_WINDOW = 1000


def percentile(values: list[float], q: float) -> float:
    """Return the ``q``-th percentile (0-100) of ``values`` by the nearest-rank method.

    Returns 0.0 for an empty list.
    """
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


class TraceLog:
    """A ring buffer of the last :data:`TRACE_CAPACITY` execution traces (thread-safe)."""

    def __init__(self, capacity: int = TRACE_CAPACITY) -> None:
        self._entries: deque[dict[str, Any]] = deque(maxlen=capacity)
        self._lock = threading.Lock()

    def add(
        self,
        *,
        tool: str,
        message: str,
        level: str = "INFO",
        duration_ms: float | None = None,
        status: str | None = None,
    ) -> None:
        """Append one trace: UTC timestamp, level, tool, message, duration (ms) and status."""
        entry = {
            "timestamp": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            "level": level,
            "tool": tool,
            "message": message,
            "duration_ms": None if duration_ms is None else round(duration_ms, 3),
            "status": status,
        }
        with self._lock:
            self._entries.append(entry)

    def entries(self) -> list[dict[str, Any]]:
        """Return the traces, oldest first."""
        with self._lock:
            return list(self._entries)


@dataclass
class ToolStats:
    """Counters of one tool: calls, errors and a window of latencies in milliseconds."""

    calls: int = 0
    errors: int = 0
    latencies_ms: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW))

    def to_dict(self) -> dict[str, Any]:
        """Return calls, errors and p50/p95/max latency in ms as JSON-compatible data."""
        window = list(self.latencies_ms)
        return {
            "calls": self.calls,
            "errors": self.errors,
            "p50_ms": round(percentile(window, 50), 3),
            "p95_ms": round(percentile(window, 95), 3),
            "max_ms": round(max(window, default=0.0), 3),
        }


class Metrics:
    """Per-tool call statistics and sandbox-run outcomes of one server process (thread-safe)."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolStats] = {}
        self._runs: Counter[str] = Counter()
        self._peak_child_memory = 0
        self._lock = threading.Lock()
        self.started = time.monotonic()

    def record_call(self, tool: str, duration_ms: float, *, error: bool) -> None:
        """Count one call of ``tool`` that took ``duration_ms``; ``error`` for a tool error."""
        with self._lock:
            stats = self._tools.setdefault(tool, ToolStats())
            stats.calls += 1
            stats.errors += int(error)
            stats.latencies_ms.append(duration_ms)

    def record_run(self, status: str, peak_memory_bytes: int) -> None:
        """Count one sandbox run by status and keep the largest child peak memory in bytes."""
        with self._lock:
            self._runs[status] += 1
            self._peak_child_memory = max(self._peak_child_memory, peak_memory_bytes)

    def snapshot(self) -> dict[str, Any]:
        """Return the tool statistics, runs by status and peak child memory (bytes)."""
        with self._lock:
            return {
                "tools": {name: s.to_dict() for name, s in sorted(self._tools.items())},
                "runs_by_status": dict(sorted(self._runs.items())),
                "peak_child_memory_bytes": self._peak_child_memory,
            }

    def uptime_s(self) -> float:
        """Seconds since this object was created."""
        return time.monotonic() - self.started


def process_metrics() -> dict[str, Any]:
    """Return server-process and host figures from psutil.

    Returns:
        ``{"process": {rss_bytes, cpu_percent, threads, open_files, pid},
        "host": {memory_total_bytes, memory_available_bytes, memory_percent, load_average,
        cpu_count}}``. ``cpu_percent`` is measured since the previous call (0.0 on the first).
    """
    proc = psutil.Process(os.getpid())
    with proc.oneshot():
        rss = proc.memory_info().rss
        cpu = proc.cpu_percent(interval=None)
        threads = proc.num_threads()
        try:
            open_files = len(proc.open_files())
        except psutil.Error:
            open_files = -1
    memory = psutil.virtual_memory()
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    return {
        "process": {
            "pid": proc.pid,
            "rss_bytes": rss,
            "cpu_percent": cpu,
            "threads": threads,
            "open_files": open_files,
        },
        "host": {
            "memory_total_bytes": memory.total,
            "memory_available_bytes": memory.available,
            "memory_percent": memory.percent,
            "load_average": load,
            "cpu_count": os.cpu_count() or 1,
        },
    }
