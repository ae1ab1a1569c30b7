"""Every tool, resource and prompt of the server, in process through ``mcp.Client``, with good and
bad arguments; every tool in both connect modes (the ``mode`` fixture)."""

from __future__ import annotations

import base64
import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from _client import Mode, call, call_error, in_process, read_json
from mcp_secure_sandbox.profiles import profile_offer
from pysandbox import PROFILES

EXPECTED_TOOLS = {
    "run_sandbox_code",
    "validate_json_data",
    "validate_csv_data",
    "create_state_snapshot",
    "restore_state_snapshot",
    "list_state_snapshots",
    "delete_state_snapshot",
    "get_sandbox_metrics",
    "diff_state_snapshots",
    "export_state_snapshot",
    "list_workspace_files",
    "read_workspace_file",
    "write_workspace_file",
    "create_session",
    "list_sessions",
    "close_session",
}


def test_lists_every_tool_resource_template_and_prompt(dirs: tuple[Path, Path]) -> None:
    async def scenario(s: Client) -> None:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == EXPECTED_TOOLS
        for tool in tools.values():
            assert tool.description and len(tool.description) > 40, tool.name
            assert tool.description == inspect.cleandoc(tool.description), tool.name
            assert tool.output_schema is not None, tool.name
            assert tool.annotations is not None, tool.name
        assert tools["run_sandbox_code"].annotations.read_only_hint is False  # type: ignore[union-attr]
        assert tools["restore_state_snapshot"].annotations.destructive_hint is True  # type: ignore[union-attr]
        assert tools["validate_json_data"].annotations.read_only_hint is True  # type: ignore[union-attr]
        uris = {str(r.uri) for r in (await s.list_resources()).resources}
        assert uris == {
            "sandbox://status",
            "sandbox://logs",
            "sandbox://schemas",
            "sandbox://sessions",
        }
        templates = {t.uri_template for t in (await s.list_resource_templates()).resource_templates}
        assert templates == {
            "sandbox://schemas/{name}",
            "sandbox://snapshots/{snapshot_id}",
            "sandbox://exports/{snapshot_id}",
            "sandbox://exports/{snapshot_id}/{chunk}",
            "sandbox://workspace/{+path}{?offset,length}",
        }
        prompts = {p.name: p for p in (await s.list_prompts()).prompts}
        assert set(prompts) == {"generate_secure_script", "diagnose_validation_error"}
        assert [a.name for a in prompts["diagnose_validation_error"].arguments or []] == [
            "data_json",
            "schema",
        ]

    in_process(*dirs, scenario)


@pytest.mark.slow
def test_snapshot_lifecycle(dirs: tuple[Path, Path], mode: Mode) -> None:
    workspace, _ = dirs

    async def scenario(s: Client) -> None:
        await call(s, "run_sandbox_code", code="open('a.txt', 'w').write('first')")
        info = await call(s, "create_state_snapshot", description="after first")
        assert info["file_count"] == 1
        assert info["description"] == "after first"
        await call(
            s,
            "run_sandbox_code",
            code="open('a.txt', 'w').write('second')\nopen('b.txt', 'w').write('new')",
        )
        diff = await call(s, "diff_state_snapshots", snapshot_id=info["id"])
        assert diff["added"] == ["b.txt"]
        assert diff["modified"] == ["a.txt"]
        listing = await call(s, "list_state_snapshots")
        assert listing["count"] == 1
        assert listing["snapshots"][0]["id"] == info["id"]
        report = await call(s, "restore_state_snapshot", snapshot_id=info["id"])
        assert report["deleted"] == ["b.txt"]
        assert report["rewritten"] == ["a.txt"]
        out = await call(s, "run_sandbox_code", code="print(open('a.txt').read())")
        assert out["stdout"] == "first\n"
        exported = await call(s, "export_state_snapshot", snapshot_id=info["id"])
        assert exported["record"] is not None
        assert exported["resource_uri"] is None
        assert "first" in json.dumps(exported["record"])
        manifest = await read_json(s, f"sandbox://snapshots/{info['id']}")
        assert "a.txt" in json.dumps(manifest)
        second = await call(s, "create_state_snapshot", description="second")
        diff2 = await call(s, "diff_state_snapshots", snapshot_id=info["id"], other_id=second["id"])
        assert diff2["added"] == diff2["removed"] == diff2["modified"] == []
        deleted = await call(s, "delete_state_snapshot", snapshot_id=info["id"])
        assert deleted == {
            "deleted": info["id"],
            "description": "after first",
            "created_at": info["created_at"],
            "remaining": 1,
        }
        assert "snapshot_id" in await call_error(
            s, "restore_state_snapshot", snapshot_id=info["id"]
        )
        assert "snapshot_id" in await call_error(
            s, "restore_state_snapshot", snapshot_id="../../etc"
        )
        assert "snapshot_id" in await call_error(s, "delete_state_snapshot", snapshot_id="")
        assert "snapshot_id" in await call_error(
            s, "diff_state_snapshots", snapshot_id="not-a-uuid"
        )

    in_process(*dirs, scenario, mode=mode)
    assert (workspace / "a.txt").read_text() == "first"


@pytest.mark.slow
def test_json_validation_sources_and_errors(dirs: tuple[Path, Path], mode: Mode) -> None:
    workspace, _ = dirs
    (workspace / "doc.json").write_text('{"id": 1}', encoding="utf-8")
    schema = {
        "type": "object",
        "required": ["id"],
        "properties": {"id": {"type": "integer", "maximum": 10}},
    }

    async def scenario(s: Client) -> None:
        ok = await call(s, "validate_json_data", data={"id": 3}, schema_name_or_dict=schema)
        assert ok["valid"] is True
        assert ok["draft"].endswith("2020-12")
        bad = await call(s, "validate_json_data", data={"id": 30}, schema_name_or_dict=schema)
        assert bad["valid"] is False
        assert bad["errors"][0]["instance_location"] == "/id"
        assert bad["errors"][0]["keyword"] == "maximum"
        null = await call(s, "validate_json_data", data=None, schema_name_or_dict={"type": "null"})
        assert null["valid"] is True
        from_path = await call(
            s, "validate_json_data", data_path="doc.json", schema_name_or_dict=schema
        )
        assert from_path["valid"] is True
        big = await call(
            s,
            "validate_json_data",
            data_json='{"id": 12345678901234567890123}',
            schema_name_or_dict=schema,
        )
        assert big["valid"] is False
        assert "repeats the key" in await call_error(
            s, "validate_json_data", data_json='{"a":1,"a":2}', schema_name_or_dict=True
        )
        assert "NaN" in await call_error(
            s, "validate_json_data", data_json='{"a": NaN}', schema_name_or_dict=True
        )
        assert "exactly one" in await call_error(
            s, "validate_json_data", data={}, data_json="{}", schema_name_or_dict=True
        )
        assert "exactly one" in await call_error(s, "validate_json_data", schema_name_or_dict=True)
        unknown = await call_error(s, "validate_json_data", data={}, schema_name_or_dict="nope")
        assert "config" in unknown
        assert "schema_name_or_dict" in await call_error(
            s, "validate_json_data", data={}, schema_name_or_dict={"type": 5}
        )
        assert "data_path" in await call_error(
            s, "validate_json_data", data_path="../x.json", schema_name_or_dict=True
        )
        named = await call(s, "validate_json_data", data={}, schema_name_or_dict="config")
        assert named["valid"] is False

    in_process(*dirs, scenario, mode=mode)


@pytest.mark.slow
def test_csv_validation_sources_and_errors(dirs: tuple[Path, Path], mode: Mode) -> None:
    workspace, _ = dirs
    (workspace / "people.csv").write_text("name;age\nann;31\nbob;x\n", encoding="utf-8")

    async def scenario(s: Client) -> None:
        ok = await call(
            s,
            "validate_csv_data",
            csv_content="id,age\n1,30\n",
            required_headers=["id", "age"],
            type_constraints={"age": "integer"},
        )
        assert ok["valid"] is True
        assert ok["row_count"] == 1
        bad = await call(
            s,
            "validate_csv_data",
            csv_content="id,age\n1,x\n",
            required_headers=["id"],
            type_constraints={"age": {"type": "integer", "minimum": 0}},
        )
        assert bad["valid"] is False
        assert bad["errors"][0]["code"] == "type-error"
        assert bad["errors"][0]["row"] == 2
        assert bad["errors"][0]["column"] == "age"
        missing = await call(
            s, "validate_csv_data", csv_content="id\n1\n", required_headers=["id", "email"]
        )
        assert missing["errors"][0]["code"] == "missing-header"
        by_path = await call(
            s,
            "validate_csv_data",
            csv_path="people.csv",
            delimiter=";",
            type_constraints={"age": "integer"},
        )
        assert by_path["row_count"] == 2
        assert [e["row"] for e in by_path["errors"]] == [3]
        assert "exactly one" in await call_error(
            s, "validate_csv_data", csv_content="a\n", csv_path="people.csv"
        )
        assert "integr" in await call_error(
            s, "validate_csv_data", csv_content="a\n1\n", type_constraints={"a": "integr"}
        )
        assert "delimiter" in await call_error(
            s, "validate_csv_data", csv_content="a\n", delimiter="ab"
        )
        assert "csv_path" in await call_error(s, "validate_csv_data", csv_path="/etc/passwd")

    in_process(*dirs, scenario, mode=mode)


@pytest.mark.slow
def test_workspace_file_tools(dirs: tuple[Path, Path], mode: Mode) -> None:
    workspace, _ = dirs
    outside = workspace.parent / "outside.txt"
    outside.write_text("secret", encoding="utf-8")
    (workspace / "link").symlink_to(outside)

    async def scenario(s: Client) -> None:
        written = await call(s, "write_workspace_file", path="data/in.txt", content="héllo")
        assert written == {"path": "data/in.txt", "bytes_written": 6}
        read = await call(s, "read_workspace_file", path="data/in.txt")
        assert read == {
            "path": "data/in.txt",
            "size": 6,
            "offset": 0,
            "length": 6,
            "next_offset": None,
            "encoding": "utf-8",
            "content": "héllo",
        }
        raw = bytes(range(256))
        await call(
            s,
            "write_workspace_file",
            path="bin.dat",
            content=base64.b64encode(raw).decode(),
            encoding="base64",
        )
        read_bin = await call(s, "read_workspace_file", path="bin.dat")
        assert read_bin["encoding"] == "base64"
        assert base64.b64decode(read_bin["content"]) == raw
        listing = await call(s, "list_workspace_files")
        paths = {f["path"]: f["kind"] for f in listing["files"]}
        assert paths["data/in.txt"] == "file"
        assert paths["link"] == "symlink"
        assert listing["file_count"] == 2
        assert "path" in await call_error(s, "read_workspace_file", path="link")
        assert "path" in await call_error(s, "read_workspace_file", path="../outside.txt")
        assert "path" in await call_error(s, "read_workspace_file", path="/etc/passwd")
        assert "path" in await call_error(s, "write_workspace_file", path="link", content="x")
        assert "path" in await call_error(
            s, "write_workspace_file", path="../escape.txt", content="x"
        )
        assert "Base64" in await call_error(
            s, "write_workspace_file", path="x", content="!!", encoding="base64"
        )
        assert await call_error(s, "read_workspace_file", path="missing.txt") == (
            "Error executing tool read_workspace_file: path missing.txt: no such file in the "
            "workspace (list_workspace_files shows what is there)"
        )
        assert await call_error(s, "read_workspace_file", path="data") == (
            "Error executing tool read_workspace_file: path data: is a directory, not a file "
            "(list_workspace_files shows the files in it)"
        )

    in_process(*dirs, scenario, mode=mode)
    assert outside.read_text() == "secret"
    assert not (workspace.parent / "escape.txt").exists()


def test_metrics_status_logs_and_schemas(dirs: tuple[Path, Path], mode: Mode) -> None:
    async def scenario(s: Client) -> None:
        await call(s, "run_sandbox_code", code="print(1)")
        await call(s, "run_sandbox_code", code="1/0")
        await call_error(s, "read_workspace_file", path="missing.txt")
        metrics = await call(s, "get_sandbox_metrics")
        run = metrics["tools"]["run_sandbox_code"]
        assert run["calls"] == 2
        assert run["errors"] == 0
        assert metrics["tools"]["read_workspace_file"]["errors"] == 1
        assert run["p95_ms"] >= run["p50_ms"] > 0
        assert metrics["runs_by_status"] == {"error": 1, "ok": 1}
        assert metrics["peak_child_memory_bytes"] > 0
        assert metrics["process"]["rss_bytes"] > 0
        status = await read_json(s, "sandbox://status")
        assert status["versions"]["mcp-secure-sandbox"]
        # By distribution name: the sandbox library is published as secure-pysandbox.
        assert status["versions"]["secure-pysandbox"]
        assert "pysandbox" not in status["versions"]
        assert status["settings"]["workspace"] == str(dirs[0].resolve())
        assert "json" in status["allowed_modules"]
        assert status["isolation"]["execution"]["requested"] == "warm"
        assert status["isolation"]["execution"]["mode"] == "warm", status["isolation"]["execution"]
        assert status["settings"]["execution"] == "warm"
        assert status["snapshot_count"] == 0
        # The standard library's per-file Landlock rules are counted per directory (346 rules
        # made a 93 KB document; about 19 KB now).
        assert len(json.dumps(status, indent=2, sort_keys=True)) < 32 * 1024
        landlock = status["isolation"]["layers"]["landlock"]["details"]
        if "rules" in landlock:
            assert landlock["rule_count"] >= len(landlock["rules"])
            assert any(r["path"].endswith("/lib-dynload/*") for r in landlock["rules"])
        logs = await read_json(s, "sandbox://logs")
        assert [t["tool"] for t in logs["traces"]] == ["run_sandbox_code"] * 2 + [
            "read_workspace_file",
            "get_sandbox_metrics",
        ]
        assert logs["traces"][2]["level"] == "WARNING"
        schemas = await read_json(s, "sandbox://schemas")
        assert {x["name"] for x in schemas["schemas"]} >= {"config", "user", "dataset"}
        user = await read_json(s, "sandbox://schemas/user")
        assert user["title"]

    in_process(*dirs, scenario, mode=mode)


def test_prompts_use_the_live_policy(dirs: tuple[Path, Path]) -> None:
    async def scenario(s: Client) -> None:
        prompt = await s.get_prompt("generate_secure_script", {"task": "sum a column"})
        text = prompt.messages[0].content.text  # type: ignore[union-attr]
        assert "sum a column" in text
        assert "statistics" in text
        assert "fractions" in text
        diag = await s.get_prompt(
            "diagnose_validation_error",
            {"data_json": '{"id": "x"}', "schema": '{"properties": {"id": {"type": "integer"}}}'},
        )
        dtext = diag.messages[0].content.text  # type: ignore[union-attr]
        assert "/id" in dtext
        assert "type" in dtext
        named = await s.get_prompt(
            "diagnose_validation_error", {"data_json": "{}", "schema": "user"}
        )
        assert "named user" in named.messages[0].content.text  # type: ignore[union-attr]
        # Text that does not parse is diagnosed, not refused.
        broken = await s.get_prompt(
            "diagnose_validation_error", {"data_json": "{oops", "schema": "user"}
        )
        assert "not valid JSON" in broken.messages[0].content.text  # type: ignore[union-attr]

    in_process(*dirs, scenario)


def test_extra_modules_reach_the_prompt(dirs: tuple[Path, Path]) -> None:
    async def scenario(s: Client) -> str:
        prompt = await s.get_prompt("generate_secure_script", {"task": "t"})
        return prompt.messages[0].content.text  # type: ignore[union-attr]

    text = in_process(*dirs, scenario, "--extra-modules", "ipaddress")
    assert "ipaddress" in text


def test_writes_respect_the_workspace_quota_and_file_limit(dirs: tuple[Path, Path]) -> None:
    async def scenario(s: Client) -> None:
        await call(s, "write_workspace_file", path="a.txt", content="x" * 600)
        quota = await call_error(s, "write_workspace_file", path="b.txt", content="y" * 600)
        assert "quota" in quota
        # Replacing a file counts its new size, not both.
        await call(s, "write_workspace_file", path="a.txt", content="z" * 900)
        await call(s, "write_workspace_file", path="c.txt", content="1")
        files = await call_error(s, "write_workspace_file", path="d.txt", content="2")
        assert "limit of 2" in files

    in_process(*dirs, scenario, "--workspace-quota", "1000", "--workspace-max-files", "2")
    assert not (dirs[0] / "b.txt").exists()
    assert not (dirs[0] / "d.txt").exists()


def test_bad_ids_in_resource_uris_are_invalid_params(dirs: tuple[Path, Path]) -> None:
    from mcp.shared.exceptions import MCPError

    async def scenario(s: Client) -> list[int]:
        codes = []
        for uri in (
            "sandbox://snapshots/not-a-uuid",
            "sandbox://schemas/nope",
            "sandbox://exports/00000000-0000-4000-8000-000000000000",
        ):
            with pytest.raises(MCPError) as info:
                await s.read_resource(uri)
            codes.append(info.value.code)
        return codes

    assert in_process(*dirs, scenario) == [-32602, -32602, -32602]


def test_huge_integers_are_refused_with_a_reason(dirs: tuple[Path, Path]) -> None:
    async def scenario(s: Client) -> str:
        return await call_error(
            s, "validate_json_data", data_json="1" * 100_000, schema_name_or_dict=True
        )

    text = in_process(*dirs, scenario)
    assert "digits" in text
    assert "set_int_max_str_digits" not in text


def test_run_arguments_of_the_wrong_type_are_refused(dirs: tuple[Path, Path]) -> None:
    async def scenario(s: Client) -> list[str]:
        return [
            await call_error(s, "run_sandbox_code", code="print(1)", timeout_sec=True),
            await call_error(s, "run_sandbox_code", code="print(1)", timeout_sec=[1]),
            await call_error(s, "run_sandbox_code", code=5),
            await call_error(s, "run_sandbox_code"),
        ]

    errors = in_process(*dirs, scenario)
    assert errors == [
        "Error executing tool run_sandbox_code: argument timeout_sec: expected number (more "
        "than 0, at most 60.0) or null, got boolean true",
        "Error executing tool run_sandbox_code: argument timeout_sec: expected number (more "
        "than 0, at most 60.0) or null, got array [1]",
        "Error executing tool run_sandbox_code: argument code: expected string, got integer 5",
        "Error executing tool run_sandbox_code: missing argument 'code' (run_sandbox_code "
        "takes code, timeout_sec, session_id)",
    ]


@pytest.mark.slow
def test_structured_output_keeps_every_field(dirs: tuple[Path, Path]) -> None:
    """The library results returned as they are keep every key of their ``to_dict()``, fields
    with a default included; the schema the client sees has the same properties."""

    async def scenario(s: Client) -> dict[str, Any]:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        schemas = {name: tool.output_schema or {} for name, tool in tools.items()}
        await call(s, "write_workspace_file", path="a.txt", content="a")
        return {
            "schemas": schemas,
            "snapshot": await call(s, "create_state_snapshot", description="x"),
            "csv": await call(s, "validate_csv_data", csv_content="id\n", required_headers=["n"]),
            "json": await call(
                s, "validate_json_data", schema_name_or_dict={"type": "string"}, data=1
            ),
            "big": await call(s, "run_sandbox_code", code="x = 1\n" * 50_000),
            "pandas": await call(s, "run_sandbox_code", code="import pandas as pd"),
            "files": await call(s, "list_workspace_files"),
        }

    out = in_process(*dirs, scenario)
    snapshot_keys = {
        "id", "created_at", "description", "file_count", "dir_count", "symlink_count",
        "total_bytes", "new_bytes", "skipped",
    }  # fmt: skip
    assert set(out["snapshot"]) == snapshot_keys
    assert set(out["schemas"]["create_state_snapshot"]["properties"]) == snapshot_keys
    assert out["snapshot"]["skipped"] == []
    csv = out["csv"]
    assert set(csv) == {
        "valid", "row_count", "columns", "error_count", "truncated", "delimiter", "errors",
        "warnings", "error_summary",
    }  # fmt: skip
    assert csv["error_summary"] == {"n": {"missing-header": 1}}
    assert csv["delimiter"] == ","
    assert csv["warnings"] == []
    assert csv["errors"][0]["code"] == "missing-header"
    assert set(csv["errors"][0]) == {"code", "message", "row", "column", "column_number", "value"}
    assert set(out["json"]) == {"valid", "draft", "error_count", "truncated", "errors"}
    assert out["json"]["truncated"] is False
    assert set(out["json"]["errors"][0]) == {
        "instance_location", "schema_location", "keyword", "message", "value",
    }  # fmt: skip
    # Code over the source limit is rejected before anything runs, with a complete violation.
    big = out["big"]
    assert big["status"] == "rejected"
    assert set(big["violations"][0]) == {"rule_id", "message", "line", "col", "end_line", "end_col"}
    assert big["violations"][0]["line"] == 1
    # A module the data-science profile allows: the refusal says how to start the server with it.
    assert out["pandas"]["status"] == "rejected"
    # (The install commands are profile_offer's, the checkout's first when run from one:
    # the server and this test import the same installation.)
    assert out["pandas"]["violations"][0]["message"].endswith(
        f"; {profile_offer(PROFILES['datascience'])}"
    )
    assert (
        "start the server with --profile datascience (install: "
        in (out["pandas"]["violations"][0]["message"])
    )
    assert [f["path"] for f in out["files"]["files"]] == ["a.txt"]
    assert set(out["files"]["files"][0]) == {"path", "kind", "size", "mode", "mtime"}
