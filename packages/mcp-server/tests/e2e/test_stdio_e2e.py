"""The real server process, driven over stdio by the MCP SDK client."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mcp import Client

from _client import over_stdio
from _paths import PACKAGE_DIR

EXAMPLES = PACKAGE_DIR / "examples"


def test_run_script_that_reads_a_workspace_file(dirs: tuple[Path, Path]) -> None:
    workspace, snapshots = dirs
    (workspace / "numbers.csv").write_text("n\n3\n4\n5\n", encoding="utf-8")
    code = (
        "import csv\n"
        "with open('numbers.csv', newline='') as f:\n"
        "    values = [int(r['n']) for r in csv.DictReader(f)]\n"
        "print('sum', sum(values), 'count', len(values))\n"
    )

    async def scenario(s: Client) -> dict[str, object]:
        names = {t.name for t in (await s.list_tools()).tools}
        assert "run_sandbox_code" in names
        result = await s.call_tool("run_sandbox_code", {"code": code, "timeout_sec": 20})
        assert not result.is_error, result.content
        assert result.structured_content is not None
        return dict(result.structured_content)

    out = over_stdio(workspace, snapshots, scenario, mode="legacy")
    assert out["status"] == "ok"
    assert out["stdout"] == "sum 12 count 3\n"
    assert out["exit_code"] == 0
    assert snapshots.is_dir()


def test_timeout_above_maximum_is_an_argument_error(dirs: tuple[Path, Path]) -> None:
    workspace, snapshots = dirs

    async def scenario(s: Client) -> tuple[bool, str]:
        result = await s.call_tool("run_sandbox_code", {"code": "print(1)", "timeout_sec": 10_000})
        text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
        return bool(result.is_error), str(text)

    is_error, text = over_stdio(workspace, snapshots, scenario, mode="legacy")
    assert is_error
    assert "timeout_sec" in text
    assert "at most 60" in text


def test_script_error_is_a_normal_result(dirs: tuple[Path, Path]) -> None:
    workspace, snapshots = dirs

    async def scenario(s: Client) -> dict[str, object]:
        result = await s.call_tool("run_sandbox_code", {"code": "1/0"})
        assert not result.is_error
        assert result.structured_content is not None
        return dict(result.structured_content)

    out = over_stdio(workspace, snapshots, scenario)  # the SDK's default mode
    assert out["status"] == "error"
    assert "ZeroDivisionError" in str(out["stderr"])


def test_demo_prints_the_summary(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "demo.py"), "--workspace", str(tmp_path / "ws")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "tools: " in proc.stdout
    assert "run_sandbox_code" in proc.stdout
    # What it sends comes before each answer: the tool, then its arguments as sent.
    lines = proc.stdout.splitlines()
    write = lines.index("-> tools/call write_workspace_file")
    assert lines[write + 1] == '   path: "sales.csv"'
    assert lines[write + 3] == "   | region,units,unit_price"
    run = lines.index("-> tools/call run_sandbox_code")
    assert write < lines.index("<- write_workspace_file answered") < run
    assert lines[run + 1 : run + 3] == ["   code:", "   | import csv"]
    assert "   timeout_sec: 10" in lines[run:]
    assert run < lines.index("<- run_sandbox_code answered") < lines.index("structured result:")
    assert proc.stdout.endswith("4 rows\neast: 12.50\nnorth: 37.50\nsouth: 28.00\n")
    assert (tmp_path / "ws" / "sales.csv").is_file()


def test_a_session_over_stdio_keeps_state_and_leaves_no_process(dirs: tuple[Path, Path]) -> None:
    """The real server: x = 42 then print(x + 1) in a session; none of its processes after."""
    from _procs import sandbox_processes

    workspace, snapshots = dirs

    async def scenario(s: Client) -> tuple[dict[str, object], dict[str, object], int]:
        created = await s.call_tool("create_session", {"description": "stdio"})
        assert created.structured_content is not None, created.content
        sid = created.structured_content["session_id"]
        await s.call_tool("run_sandbox_code", {"code": "x = 42", "session_id": sid})
        second = await s.call_tool(
            "run_sandbox_code", {"code": "print(x + 1)\nx", "session_id": sid}
        )
        assert second.structured_content is not None, second.content
        await s.call_tool("create_session", {})  # left open: the shutdown closes it
        during = len(sandbox_processes(workspace))
        listed = await s.call_tool("list_sessions", {})
        assert listed.structured_content is not None
        return dict(second.structured_content), dict(listed.structured_content), during

    out, listed, during = over_stdio(workspace, snapshots, scenario)  # the SDK's default mode
    assert out["stdout"] == "43\n" and out["result"] == {"type": "builtins.int", "text": "42"}
    assert out["session_id"] is not None and out["session_ended"] is False
    assert len(listed["sessions"]) == 2  # type: ignore[arg-type]
    assert during >= 2  # the two sessions' processes, found by marker and working directory
    assert sandbox_processes(workspace) == []
