"""The response budget in process: capped streams, the compact mirror, bounded resource reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from typing_extensions import TypedDict

from _client import call, in_process, read_json
from mcp_secure_sandbox import budget
from mcp_secure_sandbox.settings import Settings
from mcp_secure_sandbox.tools._register import tool
from pysandbox import Limits

MiB = 1024 * 1024


def _size(result: CallToolResult) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


def test_head_tail_keeps_both_ends_within_the_room() -> None:
    text = "A" * 1000 + "é" * 5000 + "Z" * 1000
    kept, cut = budget.head_tail(text, 2000)
    assert len(kept.encode()) <= 2000
    assert kept.startswith("A" * 1000) and kept.endswith("Z" * 600)
    assert cut == len(text.encode()) - len(kept.encode()) + len(budget.cut_marker(cut).encode())
    assert f"{cut:,} bytes cut" in kept
    assert budget.head_tail("short", 2000) == ("short", 0)


def test_fit_streams_shrinks_until_escaped_output_fits() -> None:
    # Control characters escape to six bytes each in JSON, and again in the mirror.
    noisy = "\x01" * (64 * 1024)
    base = {"stdout": noisy, "stderr": noisy, "stdout_truncated": False, "stderr_truncated": True}
    result = budget.fit_streams(base, ("stdout", "stderr"), stream_bytes=64 * 1024)
    assert _size(result) + budget.ENVELOPE_BYTES <= budget.RESPONSE_BUDGET_BYTES
    structured = result.structured_content
    assert structured is not None
    assert structured["stdout_truncated"] is True and structured["stderr_truncated"] is True
    assert "bytes cut" in structured["stdout"]


_CHARS = st.sampled_from(["\x00", "\x1f", '"', "\\", "\U0001f600", "é", "a", "\u2028", "\x7f"])


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(_CHARS, max_size=300).map("".join),
    number=st.floats(allow_nan=False, allow_infinity=False),
    integer=st.integers(),
)
def test_the_quick_size_bound_never_undercounts(text: str, number: float, integer: int) -> None:
    # fit_streams and tool_result skip the exact measure when the bound is within the budget.
    structured = {"stdout": text, "f": number, "i": integer, "l": [text[:5]], "b": True, "z": None}
    result, bound = budget._build(structured)
    assert budget.message_bytes(result) <= bound
    # A run's text (name: value lines and the stream) is bounded alike.
    run, run_bound = budget._build(structured, budget.run_text(structured, ("stdout",)))
    assert budget.message_bytes(run) <= run_bound
    fitted = budget.tool_result(structured, budget=bound)
    assert fitted.structured_content == structured


def test_the_kill_cap_is_large_and_the_settings_follow_pysandbox() -> None:
    assert Limits().output_bytes == 8 * MiB
    assert Settings(workspace=Path("w"), snapshots=Path("s")).output_bytes == Limits().output_bytes


class Shape(TypedDict):
    n: int


def test_output_schema_validation_still_runs_on_built_results() -> None:
    app: MCPServer[Any] = MCPServer("t")

    @tool(app)
    async def wrong() -> Shape:
        """Return a value of the wrong type, to prove the SDK checks the output schema."""
        return {"n": "not a number"}  # type: ignore[typeddict-item]

    @tool(app)
    async def right() -> Shape:
        """Return a value of the right type."""
        return {"n": 3}

    async def main() -> None:
        result = await app.call_tool("right", {})
        assert isinstance(result, CallToolResult)
        assert result.structured_content == {"n": 3}
        assert [c.text for c in result.content] == ['{"n":3}']  # type: ignore[union-attr]
        with pytest.raises(Exception, match="wrong"):
            await app.call_tool("wrong", {})

    anyio.run(main)


def test_five_megabytes_of_output_answer_within_the_budget(dirs: tuple[Path, Path]) -> None:
    code = "print('H' * 100 + 'x' * 5_000_000 + 'TAIL')\nraise ValueError('e' * 200_000 + 'END')"

    async def scenario(s: Client) -> None:
        result = await s.call_tool("run_sandbox_code", {"code": code})
        assert not result.is_error
        size = _size(result)
        print(f"5 MB run: answer of {size:,} bytes")
        assert size + budget.ENVELOPE_BYTES <= budget.RESPONSE_BUDGET_BYTES
        out = result.structured_content
        assert out is not None
        assert out["status"] == "error"  # the exception; the server's cut does not stop the run
        assert "layers" not in out
        assert out["stdout_truncated"] is True and out["stderr_truncated"] is True
        assert out["stdout"].startswith("H" * 100 + "x")
        assert out["stdout"].endswith("xTAIL\n")
        excerpt = Settings(workspace=Path("w"), snapshots=Path("s")).stream_excerpt_bytes
        assert len(out["stdout"].encode()) <= excerpt
        assert out["stderr"].endswith("eEND\n")
        cut = 5_000_105 - len(out["stdout"].encode()) + len(budget.cut_marker(1).encode())
        assert "bytes cut by the server" in out["stdout"]
        assert len(out["stdout"].encode()) > excerpt - 100
        assert cut > 4_900_000
        # The text is the run's fields as lines and each excerpt once (test_surface.py).
        assert len(result.content) == 1
        text = result.content[0].text  # type: ignore[union-attr]
        assert text.count("H" * 100) == 1 and text.count("eEND") == 1
        # Small output is untouched.
        small = await call(s, "run_sandbox_code", code="print('hi')")
        assert small["stdout"] == "hi\n" and small["stdout_truncated"] is False
        # Past the kill cap the run is stopped.
        killed = await call(s, "run_sandbox_code", code="print('y' * 9_000_000)")
        assert killed["status"] == "output_limit"
        assert killed["stdout_truncated"] is True
        status = await read_json(s, "sandbox://status")
        assert status["isolation"]["layers"]

    in_process(*dirs, scenario)


def test_resource_reads_obey_the_budget(dirs: tuple[Path, Path]) -> None:
    async def scenario(s: Client) -> None:
        # A 700 KB workspace file (random, so it does not compress into a small export).
        await call(
            s,
            "run_sandbox_code",
            code="import random\nr = random.Random(1)\n"
            "open('big.txt', 'w').write(''.join(r.choice('abcdef') for _ in range(700_000)))",
        )
        info = await call(s, "create_state_snapshot")
        # Over the budget: served in chunks, each read within it (the F06/F07 regression has more).
        export = await call(s, "export_state_snapshot", snapshot_id=info["id"])
        assert export["record"] is None
        assert export["chunk_count"] == -(-export["size_bytes"] // budget.EXPORT_CHUNK_BYTES) > 1
        with pytest.raises(Exception, match="read it in chunks"):
            await s.read_resource(f"sandbox://exports/{info['id']}")
        # A medium export (over the inline threshold, under the budget) reads whole too.
        await call(s, "run_sandbox_code", code="open('big.txt', 'w').write('m' * 200_000)")
        info = await call(s, "create_state_snapshot")
        linked = await call(s, "export_state_snapshot", snapshot_id=info["id"])
        assert linked["record"] is None
        record = await read_json(s, f"sandbox://exports/{info['id']}")
        assert "m" * 200_000 in json.dumps(record)

    in_process(*dirs, scenario)
