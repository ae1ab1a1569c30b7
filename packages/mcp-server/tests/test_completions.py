"""Completions in process: snapshot ids and schema names, at most 100 with hasMore."""

from __future__ import annotations

from pathlib import Path

from mcp import Client
from mcp.types import PromptReference, ResourceTemplateReference

from _client import call, in_process
from mcp_secure_sandbox.completions import complete


def test_complete_caps_at_one_hundred() -> None:
    many = [f"id-{i:03}" for i in range(150)]
    result = complete(many, "ID-")
    assert len(result.values) == 100 and result.values[0] == "id-000"
    assert result.total == 150 and result.has_more is True
    few = complete(many, "id-14")
    assert few.values == [f"id-14{i}" for i in range(10)]
    assert few.has_more is False


def test_completions_for_templates_and_prompts(dirs: tuple[Path, Path]) -> None:
    async def scenario(s: Client) -> None:
        assert s.server_capabilities.completions is not None
        first = await call(s, "create_state_snapshot", description="one")
        second = await call(s, "create_state_snapshot", description="two")
        ref = ResourceTemplateReference(uri="sandbox://snapshots/{snapshot_id}")
        result = await s.complete(ref, {"name": "snapshot_id", "value": ""})
        assert sorted(result.completion.values) == sorted([first["id"], second["id"]])
        assert result.completion.has_more is False
        prefix = first["id"][:8]
        result = await s.complete(
            ResourceTemplateReference(uri="sandbox://exports/{snapshot_id}"),
            {"name": "snapshot_id", "value": prefix},
        )
        assert first["id"] in result.completion.values
        assert all(v.startswith(prefix) for v in result.completion.values)
        result = await s.complete(
            ResourceTemplateReference(uri="sandbox://schemas/{name}"),
            {"name": "name", "value": "u"},
        )
        assert result.completion.values == ["user"]
        result = await s.complete(
            PromptReference(name="diagnose_validation_error"), {"name": "schema", "value": ""}
        )
        assert {"config", "user", "dataset"} <= set(result.completion.values)
        # Nothing to complete for other arguments: an empty answer, not an error.
        result = await s.complete(
            PromptReference(name="generate_secure_script"), {"name": "task", "value": "x"}
        )
        assert result.completion.values == []

    in_process(*dirs, scenario)
