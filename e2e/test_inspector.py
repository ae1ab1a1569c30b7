"""End to end with a client nobody on the team wrote: the MCP Inspector CLI (pinned, npm ci)."""

from __future__ import annotations

from conftest import Inspect


def test_tools_list_has_run_sandbox_code(inspect: Inspect) -> None:
    tools = {t["name"]: t for t in inspect("tools/list")["tools"]}
    run = tools["run_sandbox_code"]
    assert run["inputSchema"]["required"] == ["code"]
    assert "outputSchema" in run
    assert run["annotations"]["readOnlyHint"] is False
    assert run["annotations"]["openWorldHint"] is False


def test_run_code_returns_structured_result(inspect: Inspect) -> None:
    out = inspect(
        "tools/call",
        "--tool-name",
        "run_sandbox_code",
        "--tool-arg",
        "code=print(sum(range(10)))",
        "--tool-arg",
        "timeout_sec=20",
    )
    assert out["isError"] is False
    assert out["structuredContent"]["status"] == "ok"
    assert out["structuredContent"]["stdout"] == "45\n"


def test_run_code_rejected_import_is_a_result_not_an_error(inspect: Inspect) -> None:
    out = inspect(
        "tools/call",
        "--tool-name",
        "run_sandbox_code",
        "--tool-arg",
        "code=import socket",
    )
    assert out["isError"] is False
    assert out["structuredContent"]["status"] == "rejected"
    assert out["structuredContent"]["violations"]
