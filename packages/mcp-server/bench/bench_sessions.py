"""Sessions over MCP (issue 28): ``x += 1`` in a session against a trivial call and a bare spawn.

Run with the package installed, from the package folder::

    python bench/bench_sessions.py [--calls 200] [--creates 20]

Starts the real server on stdio (``python -m mcp_secure_sandbox``, warm execution, default
settings but ``--ready-children 0``, so that every sandbox process the benchmark finds is a
session's). One client session of the ``mcp`` SDK, in the same run:

- ``run_sandbox_code("x += 1", session_id)`` p50, interleaved with ``list_sessions`` (a trivial
  tool call on the same server) and bare spawns of ``python -I -S -c pass``; prints the
  difference to ``list_sessions`` (target <= 1.5 ms) and the ratio to the bare spawn (target
  <= 0.40x). The session call includes the astguard check, the resume and the confirmed stop,
  the workspace measurement and the result;
- ``create_session`` p50 (each closed again; target <= 10 ms, default profile);
- an idle session's USS (unique set size, psutil; goal <= 8 MiB, default profile), after one
  call;
- that no session process is left after ``close_session`` and after the server's shutdown.

Always exits 0 unless it crashes (``nox -s bench`` never fails on a missed target); the whole
benchmark stays well under 60 s with the defaults.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
from mcp import ClientSession, StdioServerParameters, stdio_client

MARKER = "PYSANDBOX_RUN"
WARMUP = 20
VS_TRIVIAL_MS = 1.5
VS_BARE = 0.40
CREATE_TARGET_MS = 10.0
USS_GOAL_MIB = 8.0


def session_processes(workspace: Path) -> list[psutil.Process]:
    """Processes with pysandbox's run marker working in ``workspace`` (the sessions here)."""
    real = os.path.realpath(workspace)
    found = []
    for proc in psutil.process_iter():
        try:
            if MARKER in proc.environ() and os.path.realpath(proc.cwd()) == real:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def bare_ms(cwd: Path) -> float:
    """One bare spawn of ``python -I -S -c pass``, in ms."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True, cwd=cwd)
    return (time.perf_counter() - start) * 1000.0


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


def verdict(ok: bool) -> str:
    return "meets" if ok else "misses"


async def timed(session: ClientSession, tool: str, args: dict[str, Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = await session.call_tool(tool, args)
    return (time.perf_counter() - start) * 1000.0, result


async def measure(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    workspace = tmp / "workspace"
    workspace.mkdir()
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "mcp_secure_sandbox",
            "--workspace",
            str(workspace),
            "--snapshots",
            str(tmp / "snapshots"),
            "--ready-children",
            "0",
            "--log-level",
            "WARNING",
        ],
    )
    out: dict[str, Any] = {"call": [], "trivial": [], "bare": [], "create": [], "failed": 0}
    with (tmp / "server.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            for i in range(WARMUP + args.creates):
                ms, created = await timed(session, "create_session", {})
                sid = created.structured_content["session_id"]
                await session.call_tool("close_session", {"session_id": sid})
                if i >= WARMUP:
                    out["create"].append(ms)
            created = await session.call_tool("create_session", {"description": "bench"})
            sid = created.structured_content["session_id"]
            await session.call_tool("run_sandbox_code", {"code": "x = 0", "session_id": sid})
            call = {"code": "x += 1", "session_id": sid}
            for i in range(WARMUP + args.calls):
                ms_call, result = await timed(session, "run_sandbox_code", call)
                ms_trivial, _ = await timed(session, "list_sessions", {})
                content = result.structured_content or {}
                if result.is_error or content.get("status") != "ok":
                    out["failed"] += 1
                if i >= WARMUP:
                    out["call"].append(ms_call)
                    out["trivial"].append(ms_trivial)
                    if i % 4 == 0:
                        out["bare"].append(bare_ms(workspace))
            final = await session.call_tool("run_sandbox_code", {"code": "x", "session_id": sid})
            out["x"] = (final.structured_content or {}).get("result")
            (proc,) = session_processes(workspace)
            out["uss"] = proc.memory_full_info().uss
            await session.call_tool("close_session", {"session_id": sid})
            out["after_close"] = len(session_processes(workspace))
            for _ in range(2):  # left open: the shutdown closes them
                await session.call_tool("create_session", {})
            out["open_at_shutdown"] = len(session_processes(workspace))
    out["after_shutdown"] = len(session_processes(workspace))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--creates", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        out = anyio.run(measure, args, Path(name))
    call, trivial, bare = p50(out["call"]), p50(out["trivial"]), p50(out["bare"])
    create = p50(out["create"])
    uss_mib = out["uss"] / 2**20
    print(f"x += 1 in a session over MCP stdio     p50 {call:7.2f} ms ({len(out['call'])} calls)")
    print(f"list_sessions (trivial) same server     p50 {trivial:7.2f} ms")
    print(f"bare python -I -S -c pass               p50 {bare:7.2f} ms")
    print(
        f"session call - trivial call             {call - trivial:7.2f} ms "
        f"(target <= {VS_TRIVIAL_MS} ms: {verdict(call - trivial <= VS_TRIVIAL_MS)})"
    )
    print(
        f"session call / bare spawn               {call / bare:7.2f}x "
        f"(target <= {VS_BARE}x: {verdict(call / bare <= VS_BARE)})"
    )
    print(
        f"create_session                          p50 {create:7.2f} ms "
        f"(target <= {CREATE_TARGET_MS} ms: {verdict(create <= CREATE_TARGET_MS)})"
    )
    print(
        f"idle session USS                        {uss_mib:7.2f} MiB "
        f"(goal <= {USS_GOAL_MIB} MiB: {verdict(uss_mib <= USS_GOAL_MIB)})"
    )
    print(f"x after the calls: {out['x']}; failed calls: {out['failed']}")
    print(
        f"session processes: {out['after_close']} after close_session, "
        f"{out['open_at_shutdown']} open at shutdown, {out['after_shutdown']} after it"
    )


if __name__ == "__main__":
    main()
