"""Honest errors, in process: each names what was wrong and what to do."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from _client import call, call_error, in_process

MISSING_ID = "00000000-0000-4000-8000-000000000000"
utf8_error = "the bytes are not valid utf-8 (the value shows them as \\xNN)"


def test_errors_name_the_cause_and_the_remedy(
    dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)  # the server's log, as its stderr would show it

    async def scenario(s: Client) -> None:
        await call(s, "write_workspace_file", path="bad.json", content='{"a": 1,}')
        text = await call_error(
            s, "validate_json_data", schema_name_or_dict=True, data_path="bad.json"
        )
        assert text.startswith("Error executing tool validate_json_data: data_path bad.json is")
        assert "not valid JSON" in text and "data_json" not in text
        # A missing file is named in words, with where to look, for every path argument.
        for tool_name, arguments in (
            ("validate_csv_data", {"csv_path": "missing.csv"}),
            ("validate_csv_data", {"csv_path": "sub/missing.csv"}),
            ("validate_json_data", {"schema_name_or_dict": True, "data_path": "missing.json"}),
        ):
            text = await call_error(s, tool_name, **arguments)
            assert "no such file in the workspace (list_workspace_files" in text, text
            assert "Errno" not in text and "/" + "tmp" not in text, text
        # The limit that stopped a run, and how to raise it.
        run = await call(s, "run_sandbox_code", code="while True: pass")
        assert run["status"] == "timeout"
        assert run["detail"] == (
            "stopped after 1 s, the default; pass timeout_sec up to 3 for a longer run"
        )
        # An unknown snapshot id points to list_state_snapshots, as a tool and as a resource.
        text = await call_error(s, "restore_state_snapshot", snapshot_id=MISSING_ID)
        assert "list_state_snapshots" in text
        with pytest.raises(MCPError, match="list_state_snapshots"):
            await s.read_resource(f"sandbox://snapshots/{MISSING_ID}")
        # CSV: a constrained column absent from the header says exactly that.
        report = await call(
            s, "validate_csv_data", csv_content="a,b\n1,2\n", type_constraints={"c": "integer"}
        )
        assert report["errors"][0]["message"] == (
            "column 'c' has constraints but is not in the header (the header has: a, b)"
        )
        # A ;-separated file read with the default delimiter suggests the option.
        report = await call(
            s, "validate_csv_data", csv_content="a;b\n1;2\n", required_headers=["a", "b"]
        )
        # Each error says what is missing and the header seen; the hint is said once.
        assert [e["message"] for e in report["errors"]] == [
            "required column 'a' is missing (the header has: a;b)",
            "required column 'b' is missing (the header has: a;b)",
        ]
        assert report["warnings"] == [
            "the header was read as the single column 'a;b' with the default delimiter \",\"; "
            'if the file is semicolon-separated, give the delimiter ";" (or sniff it)'
        ]
        report = await call(
            s, "validate_csv_data", csv_content="a\tb\n1\t2\n", required_headers=["b"]
        )
        assert report["errors"][0]["message"] == (
            "required column 'b' is missing (the header has: a\tb)"
        )
        assert report["warnings"][0].endswith('give the delimiter "\\t" (or sniff it)')
        # A Latin-1 file read as UTF-8: the errors name the encoding, the warning the argument.
        (dirs[0] / "latin.csv").write_bytes("city,n\nZürich,1\nMálaga,x\n".encode("latin-1"))
        report = await call(
            s, "validate_csv_data", csv_path="latin.csv", type_constraints={"n": "integer"}
        )
        assert [(e["code"], e["row"], e["value"], e["message"]) for e in report["errors"]] == [
            ("encoding-error", 2, "Z\\xfcrich", utf8_error),
            ("encoding-error", 3, "M\\xe1laga", utf8_error),
        ]
        assert report["warnings"] == [
            "the file was read as utf-8 and some bytes are not valid utf-8; if it is in another "
            'encoding, give the encoding (for example "latin-1" or "cp1252")'
        ]
        for name in ("latin-1", "ISO-8859-1", "cp1252"):
            report = await call(
                s,
                "validate_csv_data",
                csv_path="latin.csv",
                encoding=name,
                type_constraints={"n": "integer"},
            )
            assert [(e["code"], e["row"]) for e in report["errors"]] == [("type-error", 3)]
            assert report["warnings"] == [], name
        # A bad encoding is an argument error naming it and what to give.
        for name, expected in (
            ("nope", "encoding 'nope': unknown encoding; give one Python knows, such as"),
            ("zlib_codec", "encoding 'zlib_codec': zlib is not a text encoding"),
            ("rot13", "encoding 'rot13': rot-13 is not a text encoding"),
            ("base64", "encoding 'base64': base64 is not a text encoding"),
            ("../../os", "encoding '../../os': unknown encoding (a name has ASCII letters"),
        ):
            text = await call_error(s, "validate_csv_data", csv_path="latin.csv", encoding=name)
            assert text.startswith(f"Error executing tool validate_csv_data: {expected}"), text
            assert text.endswith('such as "utf-8", "latin-1" or "cp1252"'), text
        text = await call_error(s, "validate_csv_data", csv_path="latin.csv", encoding="x" * 10_240)
        assert text.startswith(
            "Error executing tool validate_csv_data: argument encoding: expected string (at most "
            '64 characters), got string "xxxx'
        ), text
        assert len(text) < 300, text
        text = await call_error(s, "validate_csv_data", csv_content="a\n", encoding="latin-1")
        assert text == (
            "Error executing tool validate_csv_data: encoding applies to csv_path only: "
            "csv_content is text already (drop encoding, or write the bytes to a file and give "
            "csv_path)"
        )
        # Valid, but nothing was checked: the report says so instead of a silent "valid".
        report = await call(s, "validate_csv_data", csv_content="a;b\n1;2\n")
        assert report["valid"] is True
        assert report["warnings"][0].startswith("no rules were given")
        assert "semicolon-separated" in report["warnings"][1]
        # The diagnosis prompt diagnoses text that does not parse.
        prompt = await s.get_prompt(
            "diagnose_validation_error", {"data_json": "{not json", "schema": "user"}
        )
        body = prompt.messages[0].content.text  # type: ignore[union-attr]
        assert "does not parse" in body and "{not json" in body
        # Prompt arguments are described.
        prompts = {p.name: p for p in (await s.list_prompts()).prompts}
        for p in prompts.values():
            assert all(a.description for a in p.arguments or []), p.name
        # A bad prompts/get is an invalid-params error, logged as one line.
        with pytest.raises(MCPError) as info:
            await s.get_prompt("diagnose_validation_error", {"data_json": "{}"})
        assert info.value.code == -32602
        assert "schema" in str(info.value)
        with pytest.raises(MCPError, match="no schema is registered as 'nope'"):
            await s.get_prompt("diagnose_validation_error", {"data_json": "{}", "schema": "nope"})

    in_process(*dirs, scenario, "--default-timeout", "1", "--max-timeout", "3")
    text = caplog.text
    assert "Traceback" not in text
    assert "prompt 'diagnose_validation_error'" in text
