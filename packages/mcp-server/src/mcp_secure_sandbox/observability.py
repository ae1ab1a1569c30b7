"""What the server knows about itself: a bounded trace log and per-tool metrics.

Both live in memory only and are bounded, so a long-lived server cannot grow without limit: the
trace log keeps the last :data:`TRACE_CAPACITY` entries, and each tool keeps the last
:data:`LATENCY_WINDOW` latencies for its percentiles.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import psutil
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse
from typing_extensions import Self

if TYPE_CHECKING:  # the SDK's stream protocols (a private module of it), for annotations only
    from mcp.shared._stream_protocols import ReadStream, WriteStream

__all__ = [
    "LATENCY_WINDOW",
    "TIMING_ENV",
    "TRACE_CAPACITY",
    "CallTimer",
    "LoopLag",
    "Metrics",
    "ToolStats",
    "TraceLog",
    "percentile",
    "process_metrics",
]

TRACE_CAPACITY = 100
LATENCY_WINDOW = 1000
TIMING_ENV = "MCP_SECURE_SANDBOX_TIMING"
"""Environment variable that turns on :class:`CallTimer` (``1``); off by default."""

_timing_log = logging.getLogger("mcp_secure_sandbox.timing")


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
    """Per-tool call statistics and sandbox-run outcomes of one server process (thread-safe).

    Calls and errors are also counted per principal (:meth:`principal_calls`), which a caller
    is shown for itself only.
    """

    def __init__(self) -> None:
        self._tools: dict[str, ToolStats] = {}
        # the principals are the tokens file's (bounded by its size), "default" and "-"
        self._principals: dict[str, Counter[str]] = {}
        self._runs: Counter[str] = Counter()
        self._peak_child_memory = 0
        self._lock = threading.Lock()
        self.started = time.monotonic()

    def record_call(
        self, tool: str, duration_ms: float, *, error: bool, principal: str | None = None
    ) -> None:
        """Count one call of ``tool`` that took ``duration_ms``; ``error`` for a tool error.

        ``principal``: whose call it was (counted for :meth:`principal_calls` too).
        """
        with self._lock:
            stats = self._tools.setdefault(tool, ToolStats())
            stats.calls += 1
            stats.errors += int(error)
            stats.latencies_ms.append(duration_ms)
            if principal is not None:
                counts = self._principals.setdefault(principal, Counter())
                counts["calls"] += 1
                counts["errors"] += int(error)

    def principal_calls(self, principal: str) -> dict[str, Any]:
        """``{principal, calls, errors}``: the calls of ``principal`` so far (zeros if none)."""
        with self._lock:
            counts = self._principals.get(principal, Counter())
            return {"principal": principal, "calls": counts["calls"], "errors": counts["errors"]}

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


class LoopLag:
    """How late the server's event loop wakes from a short sleep: its stalls, measured.

    Work that blocks the loop (a synchronous encoding of a large answer, a lock held across
    an await, threads holding the GIL) delays every request, metrics included; this makes
    such stalls visible in ``get_sandbox_metrics`` (``process.event_loop_lag_ms``). Only
    :meth:`run` touches the window, on the loop's thread.

    Args:
        tick_s: The sleep measured, in seconds.
        window: How many of the last ticks the percentiles cover.
    """

    def __init__(self, tick_s: float = 0.05, window: int = 200) -> None:
        self.tick_s = tick_s
        #: Ticks measured since the start.
        self.ticks = 0
        self._lags_ms: deque[float] = deque(maxlen=window)

    async def run(self) -> None:
        """Measure until cancelled (a task of the server's lifespan)."""
        while True:
            started = time.perf_counter()
            await anyio.sleep(self.tick_s)
            self._lags_ms.append(max(0.0, (time.perf_counter() - started - self.tick_s) * 1000))
            self.ticks += 1

    def summary(self) -> dict[str, float]:
        """``{p50, p99, max}`` of the lag over the window, in ms (zeros before the first tick)."""
        lags = list(self._lags_ms)
        return {
            "p50": round(percentile(lags, 50), 3),
            "p99": round(percentile(lags, 99), 3),
            "max": round(max(lags, default=0.0), 3),
        }


_process: psutil.Process | None = None
_process_lock = threading.Lock()


def _this_process() -> psutil.Process:
    """This process's :class:`psutil.Process`, one object per pid.

    ``cpu_percent(interval=None)`` compares with the previous call on the same object: a new
    object each time would always report 0.0. A fork (a new pid) gets its own.
    """
    global _process  # noqa: PLW0603 - one cached handle per process
    if _process is None or _process.pid != os.getpid():
        _process = psutil.Process(os.getpid())
    return _process


def process_metrics() -> dict[str, Any]:
    """Return server-process and host figures from psutil.

    Returns:
        ``{"process": {rss_bytes, cpu_percent, threads, open_files, pid},
        "host": {memory_total_bytes, memory_available_bytes, memory_percent, load_average,
        cpu_count}}``. ``cpu_percent`` is measured since the previous call (0.0 on the first),
        over all the process's threads, in percent of one CPU.
    """
    with _process_lock:  # the cached object's oneshot cache and CPU baseline are not shared
        proc = _this_process()
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


class CallTimer:
    """Opt-in timing of the server's own cost of each request (the latency benchmark's figure).

    On when :data:`TIMING_ENV` is ``1`` (:meth:`from_environment`); the server then serves
    stdio through :meth:`wrap`, which notes when the transport hands a request over and when
    the response is handed back, and ``run_sandbox_code`` notes how long the library's run
    took (:meth:`library`) with the run's own ``duration_ms`` (``run_ms``). Each answered
    request is logged as one line on the ``mcp_secure_sandbox.timing`` logger (INFO, whatever
    ``--log-level`` says)::

        timing id=7 method=tools/call total_ms=5.112 library_ms=4.400 overhead_ms=0.712 run_ms=3.1

    ``overhead_ms`` is ``total_ms - library_ms``: the server's own cost (the SDK's dispatch,
    the middleware, the tool's admission, gate and instrumentation, shaping the result). The
    transport's JSON parsing and its write to stdout are outside it (the client sees them).
    Off, nothing of this runs: the server serves stdio as the SDK does.
    """

    def __init__(self) -> None:
        self._read: dict[str, tuple[float, str]] = {}
        self._library: dict[str, tuple[float, float]] = {}

    @classmethod
    def from_environment(cls) -> CallTimer | None:
        """A timer when :data:`TIMING_ENV` is ``1``, else ``None``."""
        if os.environ.get(TIMING_ENV) != "1":
            return None
        _timing_log.setLevel(logging.INFO)
        return cls()

    def library(self, request_id: str, seconds: float, child_ms: float) -> None:
        """Note the library's wall-clock ``seconds`` for ``request_id``, and ``child_ms``.

        ``child_ms`` is the run's own ``duration_ms`` as the library reports it.
        """
        self._library[request_id] = (seconds, child_ms)

    def received(self, message: SessionMessage | Exception) -> None:
        """Note the arrival of ``message`` (a request starts its clock)."""
        if isinstance(message, SessionMessage):
            inner = message.message
            if isinstance(inner, JSONRPCRequest):
                self._read[str(inner.id)] = (time.perf_counter(), inner.method)

    def sent(self, message: SessionMessage) -> None:
        """Note the departure of ``message``; a response ends its request's clock (logged)."""
        inner = message.message
        if not isinstance(inner, JSONRPCResponse | JSONRPCError):
            return
        now = time.perf_counter()
        key = str(inner.id)
        started = self._read.pop(key, None)
        library_s, child_ms = self._library.pop(key, (0.0, 0.0))
        if started is None:
            return
        total_ms = (now - started[0]) * 1000
        library_ms = library_s * 1000
        _timing_log.info(
            "timing id=%s method=%s total_ms=%.3f library_ms=%.3f overhead_ms=%.3f run_ms=%.3f",
            key,
            started[1],
            total_ms,
            library_ms,
            total_ms - library_ms,
            child_ms,
        )

    async def serve_stdio(self, app: MCPServer[Any]) -> None:
        """Serve ``app`` on stdio as ``app.run("stdio")`` does, through :meth:`wrap`."""
        lowlevel = app._lowlevel_server  # what MCPServer.run_stdio_async serves
        async with stdio_server() as (read_stream, write_stream):
            timed_read, timed_write = self.wrap(read_stream, write_stream)
            await lowlevel.run(timed_read, timed_write, lowlevel.create_initialization_options())

    def wrap(
        self,
        read_stream: ReadStream[SessionMessage | Exception],
        write_stream: WriteStream[SessionMessage],
    ) -> tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]:
        """The transport's streams, timed: pass these to the server instead."""
        return _TimedRead(read_stream, self), _TimedWrite(write_stream, self)


class _Delegating:
    """Closing and the context-manager protocol, passed to the wrapped stream ``_inner``."""

    _inner: Any

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        result: bool | None = await self._inner.__aexit__(exc_type, exc_val, exc_tb)
        return result


class _TimedRead(_Delegating):
    """A read stream that tells a :class:`CallTimer` of each message it yields."""

    _inner: ReadStream[SessionMessage | Exception]

    def __init__(self, inner: ReadStream[SessionMessage | Exception], timer: CallTimer) -> None:
        self._inner = inner
        self._timer = timer

    @property
    def last_context(self) -> object:
        """The sender's context of the last message (the SDK reads it)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        message = await self._inner.receive()
        self._timer.received(message)
        return message

    def __aiter__(self) -> _TimedRead:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        message = await self._inner.__anext__()
        self._timer.received(message)
        return message


class _TimedWrite(_Delegating):
    """A write stream that tells a :class:`CallTimer` of each message it sends."""

    _inner: WriteStream[SessionMessage]

    def __init__(self, inner: WriteStream[SessionMessage], timer: CallTimer) -> None:
        self._inner = inner
        self._timer = timer

    async def send(self, item: SessionMessage, /) -> None:
        self._timer.sent(item)
        await self._inner.send(item)
