"""The server as a process over raw stdio: a run in progress while other calls, a cancellation, the
client going away or a signal arrive; the first byte on stdout. (What the tools do under
concurrency and load is tested in process: ``tests/test_server.py``.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from _client import stdio_params
from _procs import sandbox_processes

SLEEPER = "import time\nopen('started', 'w').write('1')\ntime.sleep(60)\n"


def _wait_gone(workspace: Path, limit_s: float = 20.0) -> list[Any]:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        left = sandbox_processes(workspace)
        if not left:
            return []
        time.sleep(0.1)
    return sandbox_processes(workspace)


def test_other_tools_answer_while_a_run_executes(dirs: tuple[Path, Path]) -> None:
    """At the protocol level: a long run is in progress; list and metrics answer before it."""
    workspace, snapshots = dirs
    with _raw_server(workspace, snapshots) as proc:
        _start_sleeper(proc, workspace)
        assert proc.stdin is not None
        assert proc.stdout is not None
        for request_id, tool in ((3, "list_state_snapshots"), (4, "get_sandbox_metrics")):
            call_msg = {"name": tool, "arguments": {}}
            request = {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": call_msg,
            }
            proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        # Both answer before the run (id 2) ends; the server may answer them in either order.
        answered: dict[int, dict[str, Any]] = {}
        for _ in range(2):
            message = json.loads(proc.stdout.readline())
            answered[message["id"]] = message
        assert set(answered) == {3, 4}
        assert answered[4]["result"]["structuredContent"]["active_runs"] == 1
        assert sandbox_processes(workspace), "the long run should still be executing"
        _stop(proc)
    assert _wait_gone(workspace) == []


def test_mcp_cancellation_kills_the_run(dirs: tuple[Path, Path]) -> None:
    workspace, snapshots = dirs
    with _raw_server(workspace, snapshots) as proc:
        _start_sleeper(proc, workspace)
        assert proc.stdin is not None
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
        proc.stdin.write(json.dumps(cancel) + "\n")
        proc.stdin.flush()
        assert _wait_gone(workspace) == []
        # The server is still alive and serving after the cancellation.
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping"}) + "\n")
        proc.stdin.flush()
        assert proc.stdout is not None
        answers = [json.loads(proc.stdout.readline())]
        if answers[0].get("id") == 2:  # a response to the cancelled call is allowed, then ping
            answers.append(json.loads(proc.stdout.readline()))
        assert answers[-1] == {"jsonrpc": "2.0", "id": 9, "result": {}}
        # The call is traced as cancelled, not as a failure of the tool.
        runs: list[dict[str, Any]] = []
        for request_id in range(10, 60):  # the trace is written once the run is reaped
            read = {"uri": "sandbox://logs"}
            request = {"jsonrpc": "2.0", "id": request_id, "method": "resources/read"}
            proc.stdin.write(json.dumps({**request, "params": read}) + "\n")
            proc.stdin.flush()
            reply = json.loads(proc.stdout.readline())
            while reply.get("id") != request_id:  # skip a late answer to the cancelled call
                reply = json.loads(proc.stdout.readline())
            traces = json.loads(reply["result"]["contents"][0]["text"])["traces"]
            runs = [t for t in traces if t["tool"] == "run_sandbox_code"]
            if runs:
                break
            time.sleep(0.1)
        assert [(t["status"], t["level"]) for t in runs] == [("cancelled", "INFO")]
        _stop(proc)


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    finally:
        proc.kill()


def _raw_server(workspace: Path, snapshots: Path) -> subprocess.Popen[str]:
    params = stdio_params(workspace, snapshots)
    return subprocess.Popen(
        [params.command, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _start_sleeper(proc: subprocess.Popen[str], workspace: Path) -> None:
    assert proc.stdin is not None
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "run_sandbox_code",
                "arguments": {"code": SLEEPER, "timeout_sec": 60},
            },
        },
    ]
    assert proc.stdout is not None
    proc.stdin.write(json.dumps(messages[0]) + "\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1
    for message in messages[1:]:
        proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()
    deadline = time.monotonic() + 30
    while not (workspace / "started").exists():
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.05)
    assert sandbox_processes(workspace)


def test_client_going_away_kills_runs_and_exits(dirs: tuple[Path, Path]) -> None:
    workspace, snapshots = dirs
    with _raw_server(workspace, snapshots) as proc:
        _start_sleeper(proc, workspace)
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        assert _wait_gone(workspace) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.slow
def test_signal_kills_runs_and_exits(dirs: tuple[Path, Path], signum: int) -> None:
    workspace, snapshots = dirs
    with _raw_server(workspace, snapshots) as proc:
        _start_sleeper(proc, workspace)
        os.kill(proc.pid, signum)
        assert proc.wait(timeout=30) == 128 + signum
        assert _wait_gone(workspace) == []


def test_first_stdout_byte_is_an_mcp_message(dirs: tuple[Path, Path]) -> None:
    workspace, snapshots = dirs
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcp_secure_sandbox",
            "--workspace",
            str(workspace),
            "--snapshots",
            str(snapshots),
        ],
        input=json.dumps(init) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "SANDBOX_LOG_LEVEL": "DEBUG"},
    )
    assert proc.stdout.startswith('{"'), proc.stdout[:200]
    first = json.loads(proc.stdout.splitlines()[0])
    assert first["id"] == 1
    assert first["result"]["serverInfo"]["name"] == "secure-sandbox"
    assert "serving on stdio" in proc.stderr
