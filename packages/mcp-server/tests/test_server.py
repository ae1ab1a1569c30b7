"""The server's calls under concurrency, in process with the SDK's ``mcp.Client``: runs execute at
once up to the cap (pysandbox's), long runs report progress, fifty concurrent runs all return,
and calls wait their turn instead of failing (new-user trial: four parallel runs on two slots,
two failed "busy, retry" after 1 s; a snapshot or a csv_path validation during a run failed the
same way). In process with the SDK's ``mcp.Client``; each run the test holds is blocked on a
file the test creates, so the queued calls are provably waiting (no clock decides anything)."""

from __future__ import annotations

import functools
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from _client import call, in_process
from _procs import sandbox_processes
from mcp_secure_sandbox.server import create_server
from mcp_secure_sandbox.settings import Settings, prepare_directories

#: A run that waits for the test's go file, then writes its mark and prints it.
HELD = (
    "import pathlib, time\n"
    "while not pathlib.Path('go').exists():\n"
    "    time.sleep(0.005)\n"
    "pathlib.Path('{name}.done').write_text('x')\n"
    "print('{name}')"
)


def _settings(tmp_path: Path, **overrides: Any) -> Settings:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return prepare_directories(
        Settings(workspace=workspace, snapshots=tmp_path / "snaps", **overrides)
    )


async def _until(condition: Callable[[], bool]) -> None:
    """Wait until the server reaches a state (a guard against a hang, not a measurement)."""
    with anyio.fail_after(60):
        while not condition():
            await anyio.sleep(0.005)


async def _run(client: Client, name: str, out: dict[str, Any], **kw: Any) -> None:
    result = await client.call_tool(
        "run_sandbox_code", {"code": HELD.format(name=name), "timeout_sec": 60}, **kw
    )
    out[name] = result


def _text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def test_four_parallel_runs_on_two_slots_all_complete_and_the_waiters_hear_their_place(
    tmp_path: Path,
) -> None:
    settings = _settings(tmp_path, max_concurrent_runs=2)
    app, state = create_server(settings)
    results: dict[str, Any] = {}
    messages: list[str] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        messages.append(f"{value:.3f} {message}")

    async def main() -> None:
        async with Client(app) as client, anyio.create_task_group() as tg:
            for name in ("r0", "r1", "r2", "r3"):
                tg.start_soon(
                    functools.partial(_run, progress_callback=progress), client, name, results
                )
            await _until(lambda: state.admission.in_use()["run"] == 2)
            await _until(lambda: state.admission.queued == 2)
            status = await client.read_resource("sandbox://status")
            assert json.loads(status.contents[0].text)["queued_calls"] == 2  # type: ignore[union-attr]
            assert not any(settings.workspace.glob("*.done"))
            (settings.workspace / "go").write_text("")

    anyio.run(main)
    assert sorted(results) == ["r0", "r1", "r2", "r3"]
    for name, result in results.items():
        assert not result.is_error, _text(result)
        assert result.structured_content["status"] == "ok"
        assert result.structured_content["stdout"] == f"{name}\n"
    # The two queued runs were told their place (one had the other ahead of it); how their
    # places moved is test_concurrency's (both slots may be freed at once here).
    assert "0.000 waiting for its turn: 1 call queued ahead (queue of 32)" in messages
    assert "0.000 waiting for its turn: 0 calls queued ahead (queue of 32)" in messages
    assert (state.admission.in_use()["run"], state.admission.queued) == (0, 0)


def test_a_snapshot_and_a_csv_path_validation_during_a_run_wait_for_it_then_succeed(
    tmp_path: Path,
) -> None:
    settings = _settings(tmp_path)
    (settings.workspace / "data.csv").write_text("id,age\n1,30\n")
    app, state = create_server(settings)
    results: dict[str, Any] = {}

    async def snapshot(client: Client) -> None:
        results["snapshot"] = await client.call_tool("create_state_snapshot", {})

    async def validate(client: Client) -> None:
        results["csv"] = await client.call_tool(
            "validate_csv_data", {"csv_path": "data.csv", "type_constraints": {"age": "integer"}}
        )

    async def main() -> None:
        async with Client(app) as client, anyio.create_task_group() as tg:
            tg.start_soon(_run, client, "run", results)
            await _until(lambda: state.gate.active_runs == 1)
            tg.start_soon(snapshot, client)
            tg.start_soon(validate, client)
            await _until(lambda: state.admission.queued == 2)  # both wait for the workspace
            assert "snapshot" not in results and "csv" not in results
            (settings.workspace / "go").write_text("")

    anyio.run(main)
    for name in ("run", "snapshot", "csv"):
        assert not results[name].is_error, _text(results[name])
    assert results["run"].structured_content["stdout"] == "run\n"
    # Taken after the run ended: its mark is in the snapshot (data.csv, go, run.done).
    assert results["snapshot"].structured_content["file_count"] == 3
    assert results["csv"].structured_content["valid"] is True


def test_a_full_queue_answers_busy_at_once_and_the_queued_run_still_runs(tmp_path: Path) -> None:
    settings = _settings(tmp_path, max_concurrent_runs=1, queue_length=1)
    app, state = create_server(settings)
    results: dict[str, Any] = {}

    async def main() -> None:
        async with Client(app) as client, anyio.create_task_group() as tg:
            tg.start_soon(_run, client, "first", results)
            await _until(lambda: state.admission.in_use()["run"] == 1)
            tg.start_soon(_run, client, "queued", results)
            await _until(lambda: state.admission.queued == 1)
            # The go file does not exist: only the full queue can answer this call now.
            await _run(client, "refused", results)
            (settings.workspace / "go").write_text("")

    anyio.run(main)
    assert results["refused"].is_error
    assert _text(results["refused"]) == (
        "Error executing tool run_sandbox_code: busy, retry: 1 call is queued ahead (queue "
        "full at 1); run_sandbox_code was not queued; call again in a few seconds"
    )
    assert not (settings.workspace / "refused.done").exists()
    for name in ("first", "queued"):
        assert results[name].structured_content["stdout"] == f"{name}\n"


def test_a_cancelled_queued_call_leaves_the_queue_and_never_runs(tmp_path: Path) -> None:
    settings = _settings(tmp_path, max_concurrent_runs=1)
    app, state = create_server(settings)
    results: dict[str, Any] = {}

    async def main() -> None:
        async with Client(app) as client:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_run, client, "first", results)
                await _until(lambda: state.admission.in_use()["run"] == 1)
                with anyio.CancelScope() as scope:
                    async with anyio.create_task_group() as inner:
                        inner.start_soon(_run, client, "cancelled", results)
                        await _until(lambda: state.admission.queued == 1)
                        scope.cancel()  # the client cancels the queued call
                await _until(lambda: state.admission.queued == 0)  # its place is freed
                (settings.workspace / "go").write_text("")
            # FIFO: had the cancelled call stayed queued, it would have run before this one.
            await _run(client, "after", results)

    anyio.run(main)
    assert "cancelled" not in results
    assert not (settings.workspace / "cancelled.done").exists()
    assert results["first"].structured_content["stdout"] == "first\n"
    assert results["after"].structured_content["stdout"] == "after\n"
    assert state.admission.in_use()["run"] == 0


def test_a_run_waits_by_its_own_time_out_and_other_calls_by_the_admission_wait(
    tmp_path: Path,
) -> None:
    """With a 1 ms --admission-wait, a queued run still gets its turn (its bound is its
    timeout_sec + 5 s), while a snapshot sent during the run is told busy, naming its bound."""
    settings = _settings(tmp_path, max_concurrent_runs=1, admission_wait_s=0.001)
    app, state = create_server(settings)
    results: dict[str, Any] = {}

    async def main() -> None:
        async with Client(app) as client, anyio.create_task_group() as tg:
            tg.start_soon(_run, client, "first", results)
            await _until(lambda: state.admission.in_use()["run"] == 1)
            tg.start_soon(_run, client, "queued", results)
            await _until(lambda: state.admission.queued == 1)
            results["snapshot"] = await client.call_tool("create_state_snapshot", {})
            assert state.admission.queued == 1  # the run is still waiting
            (settings.workspace / "go").write_text("")

    anyio.run(main)
    for name in ("first", "queued"):
        assert results[name].structured_content["stdout"] == f"{name}\n"
    assert results["snapshot"].is_error
    assert _text(results["snapshot"]) == (
        "Error executing tool create_state_snapshot: busy, retry: create_state_snapshot waited "
        "0.001 s for the workspace (runs in progress or another snapshot operation hold it), "
        "its bound (the server's --admission-wait, 0.001 s); 0 calls are still queued ahead of "
        "it (queue full at 32); call again in a few seconds"
    )
    assert state.run_wait_s(10.0) == 15.0


_RENDEZVOUS = """
import time
open("{me}", "w").close()
while True:
    try:
        open("{other}").close()
        break
    except FileNotFoundError:
        time.sleep(0.01)
print("met")
"""


def test_runs_execute_at_once_up_to_the_cap(dirs: tuple[Path, Path]) -> None:
    """Two runs that each wait for the other's file: both end only if they overlap."""

    async def scenario(s: Client) -> list[dict[str, Any]]:
        outs: list[dict[str, Any]] = []

        async def one(me: str, other: str) -> None:
            code = _RENDEZVOUS.format(me=me, other=other)
            outs.append(await call(s, "run_sandbox_code", code=code, timeout_sec=30))

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "a", "b")
            tg.start_soon(one, "b", "a")
        return outs

    outs = in_process(*dirs, scenario, "--max-concurrent-runs", "2")
    assert [(o["status"], o["stdout"]) for o in outs] == [("ok", "met\n"), ("ok", "met\n")]


_COUNT_RUNNING = """
import time
def running():
    try:
        return int(open("running").read() or 0)
    except FileNotFoundError:
        return 0
open("running", "w").write(str(running() + 1))
time.sleep(0.5)
seen = running()
open("running", "w").write(str(seen - 1))
print(seen)
"""


@pytest.mark.slow
def test_the_cap_is_pysandboxs(dirs: tuple[Path, Path]) -> None:
    """--max-concurrent-runs 1 reaches pysandbox: two runs never execute at the same time."""

    async def scenario(s: Client) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        outs: list[dict[str, Any]] = []

        async def one() -> None:
            outs.append(await call(s, "run_sandbox_code", code=_COUNT_RUNNING, timeout_sec=30))

        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
        return outs, await call(s, "get_sandbox_metrics")

    outs, metrics = in_process(*dirs, scenario, "--max-concurrent-runs", "1")
    assert [(o["status"], o["stdout"]) for o in outs] == [("ok", "1\n"), ("ok", "1\n")]
    assert metrics["max_concurrent_runs"] == 1
    assert metrics["active_runs"] == 0


@pytest.mark.slow
def test_progress_is_reported_for_long_runs(dirs: tuple[Path, Path]) -> None:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async def scenario(s: Client) -> dict[str, Any]:
        result = await s.call_tool(
            "run_sandbox_code",
            {"code": "import time\ntime.sleep(5)\nprint('ok')", "timeout_sec": 20},
            progress_callback=on_progress,
        )
        return dict(result.structured_content or {})

    out = in_process(*dirs, scenario)
    assert out["status"] == "ok"
    assert seen, "no progress notification for a 5-second run"
    assert all(total == 20 for _, total in seen)
    assert all(0 < progress <= 20 for progress, _ in seen)


@pytest.mark.slow
def test_load_fifty_concurrent_runs(dirs: tuple[Path, Path]) -> None:
    """50 concurrent runs over one session while metrics are polled: every call returns."""
    workspace, _ = dirs
    latencies: list[float] = []
    statuses: list[str] = []
    polls: list[float] = []

    async def scenario(s: Client) -> dict[str, Any]:
        done = anyio.Event()

        async def one(i: int) -> None:
            started = time.perf_counter()
            out = await call(
                s, "run_sandbox_code", code=f"print(sum(range({i} * 1000)))", timeout_sec=60
            )
            latencies.append((time.perf_counter() - started) * 1000)
            statuses.append(out["status"])

        async def poll() -> None:
            while not done.is_set():
                started = time.perf_counter()
                await call(s, "get_sandbox_metrics")
                polls.append((time.perf_counter() - started) * 1000)
                await anyio.sleep(0.2)

        async with anyio.create_task_group() as outer:
            outer.start_soon(poll)
            async with anyio.create_task_group() as tg:
                for i in range(50):
                    tg.start_soon(one, i)
            done.set()
        return await call(s, "get_sandbox_metrics")

    # Every run must be admitted: 50 runs queue for the run slots (one per CPU), each for up to
    # its timeout_sec + 5 s (65 s); the default queue of 32 would answer the last ones "busy"
    # at once (test_concurrency tests that), so this server's queue holds them all.
    metrics = in_process(*dirs, scenario, "--queue-length", "50")
    assert statuses == ["ok"] * 50
    assert metrics["runs_by_status"] == {"ok": 50}
    assert metrics["tools"]["run_sandbox_code"]["calls"] == 50
    assert polls, "metrics were never answered during the load"
    assert sandbox_processes(workspace) == []
    p50, p95 = statistics.median(latencies), statistics.quantiles(latencies, n=20)[18]
    poll_p50 = statistics.median(polls)
    print(
        f"\nload: 50 runs, 0 failures, p50 {p50:.0f} ms, p95 {p95:.0f} ms; metrics polls "
        f"{len(polls)}, p50 {poll_p50:.1f} ms, max {max(polls):.1f} ms",
        file=sys.stderr,
    )
