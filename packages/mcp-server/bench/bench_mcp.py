"""Latency over MCP (issue 19): ``run_sandbox_code("print(1)")`` against a bare interpreter spawn.

Run with the package installed, from the package folder::

    python bench/bench_mcp.py [--calls 200] [--files 200] [--concurrent 50]

Starts the real server on stdio (``python -m mcp_secure_sandbox``, warm execution, default
settings) over a workspace of ``--files`` small files (100 bytes each, in 10 folders), with
``MCP_SECURE_SANDBOX_TIMING=1`` so that it logs its own cost of each request (see
``mcp_secure_sandbox.observability.CallTimer``). One session of the ``mcp`` SDK's client makes
warm-up calls, then ``--calls`` calls interleaved with bare spawns of
``python -I -S -c 'print(1)'``. Prints:

- end-to-end p50 at the client vs the bare spawn's p50 (target <= 0.30x);
- the server's own overhead p50: from the transport handing the request over to the response
  handed back, minus the library's run (target <= 1 ms);
- the library's warm p50 (``Sandbox.run`` in this process, interleaved with bare spawns, over
  a workspace of the same size) vs bare (target <= 0.10x);
- throughput in runs/s with ``--concurrent`` calls at once, and how many failed (target: no
  failure, and no lower than the figure measured before the lean server path).

Always exits 0 unless it crashes (``nox -s bench`` never fails on a missed target).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from mcp_secure_sandbox.observability import TIMING_ENV
from pysandbox import Sandbox

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _client import connect_stdio, stdio_params  # the tests' client bootstrap (tests/_client.py)

OVERHEAD_TARGET_MS = 1.0
E2E_VS_BARE = 0.30
LIBRARY_VS_BARE = 0.10
#: Runs/s with 50 concurrent calls x 3 before the lean server path (2026-12-01, 2 shared
#: cores under a load of 3-4, this benchmark's defaults: 102 and 134 in two runs, the lower
#: kept): the floor the throughput target compares with.
BASELINE_RUNS_PER_S = 102.0
WARMUP = 20
FILE_BYTES = 100
TIMING_LINE = re.compile(
    r"timing id=\S+ method=(\S+) total_ms=(\S+) library_ms=(\S+) overhead_ms=(\S+) run_ms=(\S+)"
)


def describe(samples: list[float]) -> tuple[float, float, float]:
    """Min, p50 and p95 of ``samples``."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return ordered[0], statistics.median(ordered), p95


def line(label: str, samples: list[float]) -> str:
    low, mid, high = describe(samples)
    return f"{label:<44} min {low:7.2f}  p50 {mid:7.2f}  p95 {high:7.2f} ms"


def verdict(ok: bool) -> str:
    return "meets" if ok else "misses"


def fill_workspace(root: Path, files: int) -> None:
    """``files`` files of :data:`FILE_BYTES` bytes in 10 folders under ``root``."""
    for i in range(files):
        folder = root / f"d{i % 10}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{i:04d}.txt").write_bytes(bytes([97 + i % 26]) * FILE_BYTES)


def bare_ms(cwd: Path) -> float:
    """One bare spawn of ``python -I -S -c 'print(1)'``, in ms."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-I", "-S", "-c", "print(1)"], capture_output=True, check=True, cwd=cwd
    )
    return (time.perf_counter() - start) * 1000.0


def run_ok(result: Any) -> bool:
    content = result.structured_content or {}
    return not result.is_error and content.get("status") == "ok" and content.get("stdout") == "1\n"


def timing_lines(log: Path, start: int, end: int) -> list[tuple[str, float, float, float, float]]:
    """The server's timing lines logged between byte offsets ``start`` and ``end``."""
    with log.open("rb") as fh:
        fh.seek(start)
        text = fh.read(end - start).decode("utf-8", "replace")
    found = []
    for match in TIMING_LINE.finditer(text):
        method, total, library, overhead, run = match.groups()
        found.append((method, float(total), float(library), float(overhead), float(run)))
    return found


async def settle(log: Path) -> int:
    """Let the server write its last log lines; return the log's size."""
    await anyio.sleep(0.3)
    return log.stat().st_size


async def over_mcp(args: argparse.Namespace, tmp: Path, log: Path) -> dict[str, Any]:
    workspace = tmp / "workspace"
    workspace.mkdir()
    fill_workspace(workspace, args.files)
    params = stdio_params(workspace, tmp / "snapshots", env={**os.environ, TIMING_ENV: "1"})
    figures: dict[str, Any] = {}
    with log.open("w") as errlog:
        # The initialize handshake, as this benchmark's baseline was measured with.
        async with connect_stdio(params, errlog=errlog, mode="legacy") as session:
            call = {"code": "print(1)"}
            for _ in range(WARMUP):
                bare_ms(workspace)
                result = await session.call_tool("run_sandbox_code", call)
                assert run_ok(result), result
            start = await settle(log)
            bare: list[float] = []
            e2e: list[float] = []
            for _ in range(args.calls):
                bare.append(bare_ms(workspace))
                began = time.perf_counter()
                result = await session.call_tool("run_sandbox_code", call)
                e2e.append((time.perf_counter() - began) * 1000.0)
                assert run_ok(result), result
            end = await settle(log)
            trivial: list[float] = []
            for _ in range(50):
                began = time.perf_counter()
                await session.call_tool("list_state_snapshots", {})
                trivial.append((time.perf_counter() - began) * 1000.0)
            figures.update(bare=bare, e2e=e2e, trivial=trivial)
            figures["timing"] = [t for t in timing_lines(log, start, end) if t[0] == "tools/call"]

            failures = 0
            outcomes: list[str] = []

            async def one() -> None:
                nonlocal failures
                try:
                    result = await session.call_tool("run_sandbox_code", call)
                except Exception as exc:  # a failure to count, with its kind
                    failures += 1
                    outcomes.append(type(exc).__name__)
                    return
                if not run_ok(result):
                    failures += 1
                    outcomes.append(str(result.content)[:120])

            wall = 0.0
            for _ in range(args.rounds):
                began = time.perf_counter()
                async with anyio.create_task_group() as tg:
                    for _ in range(args.concurrent):
                        tg.start_soon(one)
                wall += time.perf_counter() - began
            figures.update(
                throughput=args.rounds * args.concurrent / wall,
                failures=failures,
                failure_kinds=sorted(set(outcomes))[:3],
            )
    return figures


def library_warm(args: argparse.Namespace, tmp: Path) -> tuple[list[float], list[float]]:
    """``Sandbox.run('print(1)')`` (warm) interleaved with bare spawns, same workspace size."""
    workspace = tmp / "library-workspace"
    workspace.mkdir()
    fill_workspace(workspace, args.files)
    sandbox = Sandbox(workspace, require=(), execution="warm")
    try:
        for _ in range(WARMUP):
            assert sandbox.run("print(1)").stdout == "1\n"
        bare: list[float] = []
        warm: list[float] = []
        for _ in range(args.calls):
            bare.append(bare_ms(workspace))
            began = time.perf_counter()
            result = sandbox.run("print(1)")
            warm.append((time.perf_counter() - began) * 1000.0)
            assert result.stdout == "1\n", result
        mode = sandbox.capabilities().execution["mode"]
    finally:
        sandbox.close()
    if mode != "warm":
        print(f"note: the library ran in {mode} mode (no zygote here)")
    return bare, warm


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="mcp-bench-") as name:
        tmp = Path(name)
        figures = anyio.run(over_mcp, args, tmp, tmp / "server.log")
        lib_bare, lib_warm = library_warm(args, tmp)

    print(f"python {sys.version.split()[0]}; workspace: {args.files} files of {FILE_BYTES} B")
    print(f"calls: {args.calls} after {WARMUP} warm-up, one stdio session, each after a bare spawn")
    bare = describe(figures["bare"])[1]
    print(line("bare python -I -S -c 'print(1)'", figures["bare"]))
    print(line("run_sandbox_code('print(1)') end to end", figures["e2e"]))
    e2e = describe(figures["e2e"])[1]
    ratio = e2e / bare
    print(
        f"  end to end p50 / bare p50 {ratio:.2f}x (target <= {E2E_VS_BARE}x: "
        f"{verdict(ratio <= E2E_VS_BARE)})"
    )
    timing = figures["timing"]
    if len(timing) != args.calls:
        print(f"  note: {len(timing)} timing lines for {args.calls} calls")
    if timing:
        print(line("  server: request to response", [t[1] for t in timing]))
        print(line("  server: library (Sandbox.arun)", [t[2] for t in timing]))
        print(line("  server: the run's own duration_ms", [t[4] for t in timing]))
        overhead = [t[3] for t in timing]
        print(line("  server: own overhead", overhead))
        mid = describe(overhead)[1]
        print(
            f"  server overhead p50 {mid:.3f} ms (target <= {OVERHEAD_TARGET_MS:g} ms: "
            f"{verdict(mid <= OVERHEAD_TARGET_MS)})"
        )
        outside = describe(figures["e2e"])[1] - describe([t[1] for t in timing])[1]
        print(f"  outside the server (transport, client) p50 about {outside:.2f} ms")
    print(line("list_state_snapshots end to end", figures["trivial"]))
    lib_b = describe(lib_bare)[1]
    print(line("library: bare spawn", lib_bare))
    print(line("library: Sandbox.run('print(1)') warm", lib_warm))
    ratio = describe(lib_warm)[1] / lib_b
    print(
        f"  library warm p50 / bare p50 {ratio:.2f}x (target <= {LIBRARY_VS_BARE}x: "
        f"{verdict(ratio <= LIBRARY_VS_BARE)})"
    )
    throughput = figures["throughput"]
    floor = (
        f"before: {BASELINE_RUNS_PER_S:.0f} runs/s, "
        f"{verdict(throughput >= BASELINE_RUNS_PER_S and not figures['failures'])}"
        if BASELINE_RUNS_PER_S
        else "no recorded figure"
    )
    print(
        f"{args.concurrent} concurrent calls x {args.rounds}: {throughput:.0f} runs/s, "
        f"{figures['failures']} failed {figures['failure_kinds'] or ''} ({floor})"
    )
    print(
        f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after, "
        f"on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
