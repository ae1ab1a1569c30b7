"""Load session (issue 15): 50 concurrent callers against one real server for 60 s.

Callers mix schema bombs (F06), large exports read in chunks (F07), restores over hostile trees
(F08, F08b) and ordinary runs, while a poller reads get_sandbox_metrics every 100 ms. The server
speaks streamable HTTP with a bearer token, and the poller is a process of its own with its own
client session and HTTP connection: each answer is its own HTTP response, so the poll does not
queue behind megabytes of export chunks on one pipe (as it does over stdio, where it measures
the pipe), nor behind the 50 callers' work on this process's event loop. Prints, per kind of
call, how many answered within their wait bound + deadline + 2 s, how many were told "busy"
within their wait bound + 2 s (at once when the admission queue is full; a run's bound is its
timeout_sec + 5 s, any other call's --admission-wait), and how many did neither; the metrics
latency p50/p99; the peak RSS of the server with its workers and zygote (and with the runs'
processes); and whether any process was left.
To tell the server's stalls from this client's, it also prints both event loops' lag (how late
a short sleep wakes; the server's from ``get_sandbox_metrics``) and the server's CPU.
Exits 1 when a target is missed (each call answered in time or busy in time, metrics p99 under
250 ms, server + workers + zygote RSS under 900 MiB, no process left).

    python load/load_session.py [--seconds 60] [--callers 50] [--transport stdio]

``--transport stdio`` puts every caller and the poller on one stdio session, for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil
from mcp import Client

from mcp_secure_sandbox.concurrency import RUN_WAIT_GRACE_S
from mcp_secure_sandbox.settings import Settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _client import (  # the tests' client bootstrap (tests/_client.py)
    connect_stdio,
    over_http,
    server_argv,
    stdio_params,
)

HERE = Path(__file__).resolve()
REDTEAM = HERE.parents[3] / "redteam" / "findings-2026-12-01"
GRACE_S = 2.0
WORKER_DEADLINE_S = 10.0
RUN_TIMEOUT_S = 5.0
#: Deadlines of the other kinds: a snapshot operation or a chunk read has no time-out of its
#: own; it is bounded by the store's size and entry caps. 30 s is what a client would wait.
OTHER_DEADLINE_S = 30.0
HOSTILE = (
    "import pathlib, secrets\np = pathlib.Path('h' + secrets.token_hex(4))\n"
    "p.mkdir(mode=0o700)\nq = p\nfor i in range(300):\n    q = q / 'a'\n    q.mkdir()\n"
    "(q / 'f').write_text('x')\nd = p / 'locked'\nd.mkdir()\n(d / 'f').write_text('y')\n"
    "d.chmod(0o300)\nprint('hostile')"
)
BIG = (
    "import random\nr = random.Random(3)\n"
    "with open('big.bin', 'wb') as fh:\n    for _ in range(24):\n"
    "        fh.write(r.randbytes(1 << 20))\nprint('ok')"
)


class Stats:
    """What the callers and the poller saw."""

    def __init__(self) -> None:
        self.outcomes: dict[str, Counter[str]] = defaultdict(Counter)
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.late: list[str] = []
        self.metrics_ms: list[float] = []
        self.client_lag_ms: list[float] = []
        self.server_lag: dict[str, float] = {}
        self.server_cpu: list[float] = []
        self.server_view: dict[str, Any] = {}
        self.peak_rss = 0
        self.peak_rss_with_runs = 0

    def record(self, kind: str, deadline: float, started: float, error: str | None) -> None:
        """Classify one call: answered in time, busy in time, or neither."""
        elapsed = time.monotonic() - started
        self.latency[kind].append(elapsed)
        wait = _wait_bound(kind)
        if error is not None and "busy, retry" in error:
            outcome = "busy" if elapsed <= wait + GRACE_S else "busy-late"
        elif elapsed <= wait + deadline + GRACE_S:
            outcome = "answered" if error is None else "answered-error"
        else:
            outcome = "late"
        self.outcomes[kind][outcome] += 1
        if outcome in ("late", "busy-late"):
            self.late.append(f"{kind} {elapsed:.1f}s {error or ''}"[:200])


def _wait_bound(kind: str) -> float:
    """How long a call of ``kind`` may wait in the server's admission queue, in seconds."""
    if kind in ("run", "hostile run"):
        return RUN_TIMEOUT_S + RUN_WAIT_GRACE_S
    for flag in reversed(SERVER_FLAGS):
        if flag.startswith("--admission-wait="):
            return float(flag.split("=", 1)[1])
    return float(Settings.__dataclass_fields__["admission_wait_s"].default)


async def timed(  # noqa: PLR0917 - a script's helper
    s: Client, stats: Stats, kind: str, deadline: float, tool: str, args: dict[str, Any]
) -> Any:
    """Make one tool call and record how it went; return its structured result or None."""
    started = time.monotonic()
    with anyio.fail_after(_wait_bound(kind) + deadline + 60):
        result = await s.call_tool(tool, args)
    error = None
    if result.is_error:
        error = " ".join(getattr(c, "text", "") for c in result.content)
    stats.record(kind, deadline, started, error)
    return None if result.is_error else result.structured_content


async def caller(  # noqa: PLR0917 - a script's helper
    s: Client,
    stats: Stats,
    index: int,
    stop: float,
    ids: dict[str, str],
    bomb: dict[str, Any],
) -> None:
    """Call one kind of tool (by ``index``) in a loop until ``stop``."""
    kind = ("bomb", "export", "restore", "run", "run")[index % 5]
    while time.monotonic() < stop:
        if kind == "bomb":
            await timed(s, stats, "schema bomb", WORKER_DEADLINE_S, "validate_json_data", bomb)
        elif kind == "export":
            out = await timed(
                s,
                stats,
                "export",
                OTHER_DEADLINE_S,
                "export_state_snapshot",
                {"snapshot_id": ids["big"]},
            )
            if out and out.get("chunk_count"):
                for k in (index % out["chunk_count"],):
                    started = time.monotonic()
                    error = None
                    try:
                        await s.read_resource(f"sandbox://exports/{ids['big']}/{k}")
                    except Exception as exc:
                        error = str(exc)
                    stats.record("export chunk", OTHER_DEADLINE_S, started, error)
        elif kind == "restore":
            await timed(
                s,
                stats,
                "hostile run",
                RUN_TIMEOUT_S,
                "run_sandbox_code",
                {"code": HOSTILE, "timeout_sec": RUN_TIMEOUT_S},
            )
            await timed(
                s,
                stats,
                "restore",
                OTHER_DEADLINE_S,
                "restore_state_snapshot",
                {"snapshot_id": ids["big"]},
            )
        else:
            await timed(
                s,
                stats,
                "run",
                RUN_TIMEOUT_S,
                "run_sandbox_code",
                {"code": "print(sum(range(10**5)))", "timeout_sec": RUN_TIMEOUT_S},
            )
        await anyio.sleep(0.05)


async def poller(s: Client, stats: Stats, stop: float, server_pid: list[int]) -> None:
    """Read get_sandbox_metrics every 100 ms; note the server's pid."""
    while time.monotonic() < stop:
        started = time.monotonic()
        result = await s.call_tool("get_sandbox_metrics", {})
        stats.metrics_ms.append((time.monotonic() - started) * 1000)
        if result.structured_content:
            if not server_pid:
                server_pid.append(int(result.structured_content["process"]["pid"]))
            tools = result.structured_content.get("tools") or {}
            stats.server_view = dict(tools.get("get_sandbox_metrics") or {})
            stats.server_cpu.append(float(result.structured_content["process"]["cpu_percent"]))
            lag = result.structured_content["process"].get("event_loop_lag_ms") or {}
            stats.server_lag = {k: max(v, stats.server_lag.get(k, 0.0)) for k, v in lag.items()}
        await anyio.sleep(0.1)


@dataclass(frozen=True)
class PollTarget:
    """Where the poller process connects: the server's URL and bearer token; its pid."""

    url: str
    token: str
    server_pid: int


async def poll_main(url: str, token: str, seconds: float) -> int:
    """The poller process: poll for ``seconds``, then print what it saw as one JSON line."""
    stats = Stats()
    server_pid: list[int] = []
    timeout = httpx2.Timeout(30, read=300)
    async with over_http(f"{url}/mcp", token, timeout=timeout, mode="legacy") as session:
        await poller(session, stats, time.monotonic() + seconds, server_pid)
    seen = {
        "metrics_ms": stats.metrics_ms,
        "server_pid": server_pid,
        "server_view": stats.server_view,
        "server_cpu": stats.server_cpu,
        "server_lag": stats.server_lag,
    }
    print(json.dumps(seen), flush=True)
    return 0


async def poll_in_process(
    target: PollTarget, stats: Stats, seconds: float, server_pid: list[int]
) -> None:
    """Run :func:`poll_main` in a process of its own; merge what it saw into ``stats``."""
    argv = [sys.executable, __file__, "--poll", target.url, "--seconds", str(seconds)]
    done = await anyio.run_process(argv, input=target.token.encode(), check=True)
    seen = json.loads(done.stdout.decode().strip().splitlines()[-1])
    stats.metrics_ms.extend(seen["metrics_ms"])
    if seen["server_pid"] and not server_pid:
        server_pid.extend(seen["server_pid"])
    stats.server_view = seen["server_view"]
    stats.server_cpu.extend(seen["server_cpu"])
    stats.server_lag = seen["server_lag"]


def _tree_rss(pid: int) -> tuple[int, int]:
    """(RSS of server + workers + zygote, RSS with the runs' processes too), in bytes."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0, 0
    core = total = 0
    for p in procs:
        try:
            rss = p.memory_info().rss
            run = "PYSANDBOX_RUN" in p.environ()
        except psutil.Error:
            continue
        total += rss
        if not run:
            core += rss
    return core, total


async def sampler(stats: Stats, stop: float, server_pid: list[int]) -> None:
    """Sample the server tree's RSS every 500 ms."""
    while time.monotonic() < stop:
        if server_pid:
            core, total = await anyio.to_thread.run_sync(_tree_rss, server_pid[0])
            stats.peak_rss = max(stats.peak_rss, core)
            stats.peak_rss_with_runs = max(stats.peak_rss_with_runs, total)
        await anyio.sleep(0.5)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: More server flags (``--server-flag=--admission-wait=1``), for comparisons.
SERVER_FLAGS: list[str] = []


def _server_flags() -> list[str]:
    return ["--log-level", "WARNING", *SERVER_FLAGS]


def _server_args(ws: Path, snaps: Path) -> list[str]:
    return ["-m", "mcp_secure_sandbox", *server_argv(ws, snaps, *_server_flags())]


@asynccontextmanager
async def stdio_sessions(base: Path, ws: Path, snaps: Path) -> AsyncIterator[tuple[Client, Client]]:
    """One server over stdio; the callers and the poller share its only session."""
    params = stdio_params(
        ws,
        snaps,
        *_server_flags(),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(base)},
    )
    async with connect_stdio(params, mode="legacy") as s:
        yield s, s


@asynccontextmanager
async def http_sessions(
    base: Path, ws: Path, snaps: Path
) -> AsyncIterator[tuple[Client, PollTarget]]:
    """One server over streamable HTTP with a token.

    Yields the callers' session and the poller's target (the poller is a process of its own).
    """
    token = secrets.token_hex(24)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(base),
        "SANDBOX_HTTP_TOKEN": token,
    }
    cmd = [sys.executable, *_server_args(ws, snaps), "--transport", "streamable-http"]
    proc = subprocess.Popen([*cmd, "--port", str(port)], env=env, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        async with httpx2.AsyncClient(timeout=1) as probe:
            while True:
                try:
                    if (await probe.get(f"{url}/healthz")).status_code == 200:
                        break
                except httpx2.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the HTTP server did not come up")
                await anyio.sleep(0.2)
        timeout = httpx2.Timeout(30, read=300)
        limits = httpx2.Limits(max_connections=200, max_keepalive_connections=200)
        async with over_http(
            f"{url}/mcp", token, timeout=timeout, mode="legacy", limits=limits
        ) as calls:
            yield calls, PollTarget(url, token, proc.pid)
    finally:
        proc.terminate()
        try:
            await anyio.to_thread.run_sync(proc.wait, 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def loop_lag(stats: Stats, stop: float) -> None:
    """How late this client's own event loop wakes from a 50 ms sleep (its own stalls)."""
    while time.monotonic() < stop:
        started = time.monotonic()
        await anyio.sleep(0.05)
        stats.client_lag_ms.append((time.monotonic() - started - 0.05) * 1000)


async def main(seconds: float, callers: int, transport: str) -> int:
    """Run the session; return the exit status (1 when a target is missed)."""
    base = Path(tempfile.mkdtemp(prefix="ssb-load-"))
    ws, snaps = base / "workspace", base / "snapshots"
    ws.mkdir()
    bomb = json.loads((REDTEAM / "F06_json_schema_exponential.json").read_text())
    stats = Stats()
    server_pid: list[int] = []
    began = time.monotonic()
    sessions: Any = http_sessions if transport == "http" else stdio_sessions
    async with sessions(base, ws, snaps) as (s, poll):
        await s.call_tool("run_sandbox_code", {"code": BIG, "timeout_sec": 60})
        big = await s.call_tool("create_state_snapshot", {"description": "big"})
        if big.structured_content is None:
            raise SystemExit(f"create_state_snapshot failed: {big.content}")
        ids = {"big": str(big.structured_content["id"])}
        stop = time.monotonic() + seconds
        async with anyio.create_task_group() as tg:
            if isinstance(poll, PollTarget):
                server_pid.append(poll.server_pid)  # the sampler reads it from the start
                tg.start_soon(poll_in_process, poll, stats, seconds, server_pid)
            else:
                tg.start_soon(poller, poll, stats, stop, server_pid)
            tg.start_soon(sampler, stats, stop, server_pid)
            tg.start_soon(loop_lag, stats, stop)
            for i in range(callers):
                tg.start_soon(caller, s, stats, i, stop, ids, bomb)
    await anyio.sleep(2)
    left = []
    pid = server_pid[0] if server_pid else -1
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if (
                p.info["pid"] == pid
                or ("mcp_secure_sandbox._worker" in cmd and str(ws) in cmd)
                or ("PYSANDBOX_RUN" in p.environ() and os.path.realpath(p.cwd()) == str(ws))
            ):
                left.append(p.info["pid"])
        except psutil.Error:
            continue
    left += [p.pid for p in psutil.Process().children(recursive=True)]
    shutil.rmtree(base, ignore_errors=True)
    total_s = time.monotonic() - began

    failed = False
    print(
        f"load session: {callers} callers for {seconds:g} s over {transport} (whole session "
        f"{total_s:.0f} s); load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}"
    )
    for kind in sorted(stats.outcomes):
        counts = stats.outcomes[kind]
        lat = stats.latency[kind]
        print(
            f"  {kind:14s} {dict(counts)}  p50 {statistics.median(lat):.2f} s  max {max(lat):.2f} s"
        )
        failed |= bool(counts["late"] or counts["busy-late"])
    p50, p99 = _pct(stats.metrics_ms, 0.5), _pct(stats.metrics_ms, 0.99)
    print(
        f"  get_sandbox_metrics: {len(stats.metrics_ms)} polls, p50 {p50:.0f} ms, "
        f"p99 {p99:.0f} ms, max {max(stats.metrics_ms, default=0):.0f} ms (target p99 < 250)"
    )
    lag = stats.client_lag_ms
    print(
        f"  this client's own loop lag (50 ms ticks): p50 {_pct(lag, 0.5):.0f} ms, p99 "
        f"{_pct(lag, 0.99):.0f} ms, max {max(lag, default=0):.0f} ms"
    )
    lag_s = stats.server_lag
    worst = ", ".join(f"{k} {lag_s.get(k, '?')} ms" for k in ("p50", "p99", "max"))
    print(f"  the server's loop lag (50 ms ticks, worst of the polled windows): {worst}")
    times = os.times()
    print(
        f"  this client's CPU: {100 * (times.user + times.system) / total_s:.0f} % of one core "
        "(it shares the machine with the server)"
    )
    cpu = stats.server_cpu[1:]
    print(
        f"  the server process's CPU (all its threads, % of one core): mean "
        f"{statistics.fmean(cpu) if cpu else 0:.0f}, max {max(cpu, default=0):.0f}"
    )
    view = stats.server_view
    print(
        "  get_sandbox_metrics as the server timed it (handler only, without the transport and "
        f"this client's own loop): p50 {view.get('p50_ms', '?')} ms, p95 "
        f"{view.get('p95_ms', '?')} ms, max {view.get('max_ms', '?')} ms"
    )
    mib = 1 << 20
    print(
        f"  peak RSS server + workers + zygote: {stats.peak_rss / mib:.0f} MiB (target < 900); "
        f"with the runs' processes: {stats.peak_rss_with_runs / mib:.0f} MiB"
    )
    print(f"  processes left: {left or 'none'}")
    for line in stats.late[:10]:
        print(f"  late: {line}")
    failed |= p99 >= 250 or stats.peak_rss >= 900 * mib or bool(left)
    print("load session:", "TARGETS MISSED" if failed else "all targets met")
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--callers", type=int, default=50)
    parser.add_argument("--transport", choices=("http", "stdio"), default="http")
    parser.add_argument(
        "--server-flag", action="append", default=[], help="a server flag, e.g. --admission-wait=1"
    )
    parser.add_argument("--poll", metavar="URL", help=argparse.SUPPRESS)  # the poller process
    ns = parser.parse_args()
    if ns.poll:  # the bearer token comes on standard input, never in the argument list
        sys.exit(anyio.run(poll_main, ns.poll, sys.stdin.read().strip(), ns.seconds))
    SERVER_FLAGS.extend(ns.server_flag)
    sys.exit(anyio.run(main, ns.seconds, ns.callers, ns.transport))
