"""End to end with a client nobody on the team wrote: the MCP Inspector CLI (pinned, npm ci)."""

from __future__ import annotations

import json

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


def test_every_tool_is_listed_with_an_output_schema(inspect: Inspect) -> None:
    tools = inspect("tools/list")["tools"]
    assert len(tools) == 16
    assert all("outputSchema" in t and t.get("annotations") for t in tools)


def test_validate_csv_through_the_inspector(inspect: Inspect) -> None:
    out = inspect(
        "tools/call",
        "--tool-name",
        "validate_csv_data",
        "--tool-arg",
        "csv_content=id,age\n1,x\n",
        "--tool-arg",
        'type_constraints={"age": "integer"}',
    )
    report = out["structuredContent"]
    assert report["valid"] is False
    assert report["errors"][0]["code"] == "type-error"
    assert report["errors"][0]["row"] == 2


def test_status_resource_and_prompt(inspect: Inspect) -> None:
    status = inspect("resources/read", "--uri", "sandbox://status")
    document = json.loads(status["contents"][0]["text"])
    assert document["isolation"]["layers"]["landlock"]["active"] is True
    assert document["settings"]["workspace"] == str(inspect.workspace)  # type: ignore[attr-defined]
    prompt = inspect(
        "prompts/get",
        "--prompt-name",
        "generate_secure_script",
        "--prompt-args",
        "task=count words",
    )
    assert "count words" in prompt["messages"][0]["content"]["text"]


def test_bad_argument_is_a_tool_error(inspect: Inspect) -> None:
    out = inspect(
        "tools/call", "--tool-name", "restore_state_snapshot", "--tool-arg", "snapshot_id=../../etc"
    )
    assert out["isError"] is True
    assert "snapshot_id" in out["content"][0]["text"]
