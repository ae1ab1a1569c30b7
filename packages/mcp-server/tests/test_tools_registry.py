"""The tool surface is pinned: every tool's published schemas and a sample of its results.

``tools_golden.json`` was generated from the server *before* the tools became module-level
functions with one declarative decorator and the result shapes were derived from the
libraries' dataclasses (issue 26 item 3); the listing (name, title, description, annotations,
inputSchema, outputSchema) and the structured results of a fixed sequence of calls must stay
byte-identical. Values that change from run to run (ids, times, durations, memory figures) are
replaced by their type before comparing (:func:`_steady`).

Regenerate only for an intended change of the surface, and say so in the commit::

    python tests/test_tools_registry.py --write    # from packages/mcp-server, in the nox env
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from mcp_secure_sandbox.server import create_server
from mcp_secure_sandbox.settings import prepare_directories, settings_from_args

GOLDEN = Path(__file__).resolve().parent / "tools_golden.json"

#: Keys whose values differ between two identical sequences of calls.
_VOLATILE = frozenset(
    {
        "created_at",
        "duration_ms",
        "cpu_time_ms",
        "peak_memory_bytes",
        "mtime",
        "mtime_ns",
        "exported_at",
    }
)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _steady(value: Any, key: str = "") -> Any:
    """``value`` with run-to-run values replaced by their type name and UUIDs by ``<uuid>``."""
    if key in _VOLATILE:
        return f"<{type(value).__name__}>"
    if isinstance(value, dict):
        return {k: _steady(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_steady(v) for v in value]
    if isinstance(value, str):
        return _UUID.sub("<uuid>", value)
    return value


def _skeleton(value: Any) -> Any:
    """The keys of ``value`` all the way down, each leaf its type name (figures that vary)."""
    if isinstance(value, dict):
        return {k: _skeleton(v) for k, v in value.items()}
    return type(value).__name__


#: Tools whose results are pinned by their keys only (every figure varies).
_SKELETON_ONLY = frozenset({"get_sandbox_metrics"})


def _calls(snapshot_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The calls after the snapshot ``snapshot_id``, in order: results, then errors, per tool."""
    return [
        ("diff_state_snapshots", {"snapshot_id": snapshot_id}),
        ("export_state_snapshot", {"snapshot_id": snapshot_id}),
        ("list_state_snapshots", {}),
        ("restore_state_snapshot", {"snapshot_id": snapshot_id}),
        ("diff_state_snapshots", {"snapshot_id": snapshot_id, "other_id": snapshot_id}),
        ("delete_state_snapshot", {"snapshot_id": snapshot_id}),
        ("delete_state_snapshot", {"snapshot_id": snapshot_id}),
        ("validate_json_data", {"schema_name_or_dict": {"type": "object"}, "data": 1}),
        (
            "validate_json_data",
            {"schema_name_or_dict": {"type": "object", "required": ["id"]}, "data_json": "{}"},
        ),
        ("validate_json_data", {"schema_name_or_dict": "user", "data_path": "data/doc.json"}),
        ("validate_json_data", {"schema_name_or_dict": "nope", "data": 1}),
        ("validate_json_data", {"schema_name_or_dict": True, "data": 1, "data_json": "1"}),
        (
            "validate_csv_data",
            {"csv_content": "id,age\n1,x\n2,3\n", "type_constraints": {"age": "integer"}},
        ),
        (
            "validate_csv_data",
            {"csv_path": "data/t.csv", "required_headers": ["id", "name"], "delimiter": ";"},
        ),
        ("validate_csv_data", {"csv_content": "a\n", "delimiter": "ab"}),
        ("list_workspace_files", {}),
        ("list_workspace_files", {"offset": 2}),
        ("read_workspace_file", {"path": "notes.txt"}),
        ("read_workspace_file", {"path": "notes.txt", "offset": 3, "length": 4}),
        ("read_workspace_file", {"path": "blob.bin"}),
        ("read_workspace_file", {"path": "missing.txt"}),
        ("write_workspace_file", {"path": "b64.bin", "content": "AAE=", "encoding": "base64"}),
        ("write_workspace_file", {"path": "bad.bin", "content": "!!", "encoding": "base64"}),
        ("run_sandbox_code", {"code": "print(sum(range(10)))"}),
        ("run_sandbox_code", {"code": "import socket"}),
        ("run_sandbox_code", {"code": "raise ValueError('no')"}),
        ("get_sandbox_metrics", {}),
    ]


async def _collect(settings: Any) -> dict[str, Any]:
    app, _state = create_server(settings)
    async with Client(app) as client:
        listing = (await client.list_tools()).tools
        tools = {
            t.name: t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listing
        }
        results: list[dict[str, Any]] = []

        async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            result = await client.call_tool(name, arguments)
            texts = [c.text for c in result.content if c.type == "text"]
            structured = result.structured_content
            shown = _skeleton(structured) if name in _SKELETON_ONLY else structured
            entry = {
                "tool": name,
                "arguments": arguments,
                "is_error": result.is_error,
                "structured": shown,
                "content_types": [c.type for c in result.content],
            }
            if result.is_error or structured is None:
                entry["text"] = texts
            elif texts and name not in _SKELETON_ONLY:
                # The text mirror is the compact JSON of the structured content (run answers
                # are text of their own).
                entry["text_is_json_mirror"] = texts[0] == json.dumps(
                    structured, separators=(",", ":"), ensure_ascii=False
                )
            results.append(_steady(entry))
            return entry

        await call("write_workspace_file", {"path": "notes.txt", "content": "héllo wörld\n"})
        await call("write_workspace_file", {"path": "data/doc.json", "content": '{"name": 1}'})
        await call("write_workspace_file", {"path": "data/t.csv", "content": "id;name\n1;a\n"})
        await call(
            "write_workspace_file", {"path": "blob.bin", "content": "/wA=", "encoding": "base64"}
        )
        created = await client.call_tool("create_state_snapshot", {"description": "golden"})
        results.append(
            _steady({"tool": "create_state_snapshot", "structured": created.structured_content})
        )
        assert created.structured_content is not None
        snapshot_id = created.structured_content["id"]
        await call("write_workspace_file", {"path": "notes.txt", "content": "changed\n"})
        await call("write_workspace_file", {"path": "extra.txt", "content": "x"})
        for name, arguments in _calls(snapshot_id):
            await call(name, arguments)
    return {"tools": dict(sorted(tools.items())), "results": results}


def _observe(tmp_path: Path) -> dict[str, Any]:
    workspace, snapshots = tmp_path / "workspace", tmp_path / "snapshots"
    workspace.mkdir()
    settings = prepare_directories(
        settings_from_args(["--workspace", str(workspace), "--snapshots", str(snapshots)], {})
    )
    return anyio.run(_collect, settings)


def test_the_surface_and_sample_results_match_the_golden_file(tmp_path: Path) -> None:
    observed = _observe(tmp_path)
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert sorted(observed["tools"]) == sorted(golden["tools"])
    for name, published in golden["tools"].items():
        assert observed["tools"][name] == published, name
    assert len(observed["results"]) == len(golden["results"])
    for seen, pinned in zip(observed["results"], golden["results"], strict=True):
        assert seen == pinned, pinned["tool"]
    # Byte-identical, not only equal: the same keys in the same order.
    assert json.dumps(observed, indent=1) == json.dumps(golden, indent=1)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        data = _observe(Path(tmp))
    GOLDEN.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}")
