"""Strict, described arguments in process: unknown names, one-line type errors, strings stay."""

from __future__ import annotations

import json
from pathlib import Path

from mcp import Client

from _client import call, call_error, in_process
from mcp_secure_sandbox.arguments import check_arguments, describe_schema


def test_check_arguments_names_the_problem_in_one_line() -> None:
    schema = {
        "type": "object",
        "properties": {
            "code": {"type": "string"},
            "timeout_sec": {"anyOf": [{"type": "number", "maximum": 60}, {"type": "null"}]},
            "headers": {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]
            },
        },
        "required": ["code"],
    }
    assert check_arguments("t", schema, {"code": "x"}) is None
    assert check_arguments("t", schema, {"code": "x", "timeout": 5}) == (
        "t: unknown argument 'timeout'; did you mean 'timeout_sec'? (t takes code, timeout_sec, "
        "headers)"
    )
    assert check_arguments("t", schema, {"code": "x", "zzz": 5}) == (
        "t: unknown argument 'zzz' (t takes code, timeout_sec, headers)"
    )
    assert check_arguments("t", schema, {"code": "x", "timeout_sec": "10"}) == (
        't: argument timeout_sec: expected number (at most 60) or null, got string "10"'
    )
    assert check_arguments("t", schema, {"code": "x", "headers": '["a"]'}) == (
        't: argument headers: expected array of string or null, got string "[\\"a\\"]" '
        "(a string holding JSON: pass the value itself, not JSON text)"
    )
    assert describe_schema({"enum": ["utf-8", "base64"]}) == 'one of "utf-8", "base64"'
    assert describe_schema({}) == "any JSON value"


def test_strict_described_arguments(dirs: tuple[Path, Path]) -> None:
    async def scenario(s: Client) -> None:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        for tool in tools.values():
            for name, prop in tool.input_schema.get("properties", {}).items():
                assert prop.get("description"), f"{tool.name}.{name} has no description"
        timeout = tools["run_sandbox_code"].input_schema["properties"]["timeout_sec"]
        assert timeout["anyOf"][0]["maximum"] == 30
        assert "at most 30" in timeout["description"]
        # A misspelled argument is refused, not ignored.
        text = await call_error(s, "run_sandbox_code", code="print(1)", timeout=5)
        assert text == (
            "Error executing tool run_sandbox_code: unknown argument 'timeout'; did you mean "
            "'timeout_sec'? (run_sandbox_code takes code, timeout_sec, session_id)"
        )
        # An unknown tool is named with the closest one and the list, whatever the spelling.
        names = ", ".join(sorted(tools))
        for called, close in (
            ("run_code", "run_sandbox_code"),
            ("validate_json", "validate_json_data"),
            ("Run_Sandbox_Code", "run_sandbox_code"),
            ("zzz", None),
            ("x" * 100, None),
            ("", None),
        ):
            text = await call_error(s, called, code="print(1)")
            quoted = json.dumps(called)
            shown = quoted if len(quoted) <= 60 else quoted[:57] + "..."
            hint = f"; did you mean {close!r}?" if close else ""
            assert text == (
                f"Error executing tool {shown}: unknown tool{hint} (the tools are: {names})"
            ), called
        text = await call_error(s, "run_sandbox_code", code="print(1)", timeout_sec=100)
        assert text == (
            "Error executing tool run_sandbox_code: argument timeout_sec: expected number (more "
            "than 0, at most 30.0) or null, got integer 100"
        )
        assert "pydantic" not in text and "http" not in text
        # A string `data` is a string; JSON-looking text gets a hint toward data_json.
        report = await call(
            s, "validate_json_data", schema_name_or_dict={"type": "object"}, data='{"a": 1}'
        )
        assert report["valid"] is False
        assert report["errors"][0]["message"].endswith("did you mean data_json?)")
        assert (
            await call(s, "validate_json_data", schema_name_or_dict={"type": "string"}, data="{}")
        )["valid"] is True
        # The same rule for schemas: a string is a name, JSON text in it is refused with a reason.
        text = await call_error(
            s, "validate_json_data", schema_name_or_dict='{"type": "object"}', data={}
        )
        assert "holds JSON text: pass the schema as an object" in text
        text = await call_error(s, "validate_json_data", schema_name_or_dict="{not json", data={})
        assert "does not parse" in text and "pass the schema as an object" in text
        assert "unknown schema" not in text
        text = await call_error(s, "validate_json_data", schema_name_or_dict="usr", data={})
        assert "no schema is registered as 'usr'" in text and "user" in text
        # Strings for lists are refused with the JSON hint rather than silently parsed.
        text = await call_error(
            s, "validate_csv_data", csv_content="a\n1\n", required_headers='["a"]'
        )
        assert "argument required_headers: expected array of string or null" in text
        assert "not JSON text" in text

    in_process(*dirs, scenario, "--max-timeout", "30")
