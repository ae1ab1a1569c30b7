"""validate_csv_data's max_errors and error_summary, in process (``mcp.Client(server)``).

A CSV of 4,999 bad rows: every error is counted by column and code whatever is listed, up to
1,000 are listed, and a listing that does not fit one answer is cut with a warning saying so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult

from datavalidate import CsvColumn, CsvError, CsvReport
from mcp_secure_sandbox import budget
from mcp_secure_sandbox.server import create_server
from mcp_secure_sandbox.settings import Settings, prepare_directories
from mcp_secure_sandbox.tools.validation import fit_csv_report

#: The rules bad_rows_csv() breaks.
CONSTRAINTS = {"id": {"type": "integer", "unique": True}, "age": {"type": "integer", "minimum": 0}}
#: Its 4,999 errors by column and code.
SUMMARY = {
    "id": {"type-error": 495},
    "age": {"constraint-error": 2999, "type-error": 1500},
    "": {"extra-cell": 5},
}


def bad_rows_csv(rows: int = 4999) -> str:
    """``rows`` rows under ``id,age``, one error each (as datavalidate's tests/_support.py):
    5 extra-cell, 495 id type-error, 1,500 age type-error, 2,999 age constraint-error."""
    lines = ["id,age"]
    for r in range(rows):
        if r % 1000 == 500:
            lines.append(f"{r},5,extra")
        elif r % 10 == 0:
            lines.append(f"x{r},5")
        elif r % 3 == 0:
            lines.append(f"{r},x")
        else:
            lines.append(f"{r},-1")
    return "\n".join(lines) + "\n"


def _in_process(dirs: tuple[Path, Path], scenario: Callable[[Client], Awaitable[None]]) -> None:
    ws, snaps = dirs
    settings = prepare_directories(Settings(workspace=ws, snapshots=snaps, require_layers=()))

    async def main() -> None:
        app, state = create_server(settings)
        try:
            async with Client(app) as client:
                await scenario(client)
        finally:
            await state.aclose()

    anyio.run(main)


def _size(result: CallToolResult) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


async def _report(client: Client, **arguments: Any) -> tuple[dict[str, Any], int]:
    result = await client.call_tool("validate_csv_data", arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content), _size(result)


async def _error(client: Client, **arguments: Any) -> str:
    result = await client.call_tool("validate_csv_data", arguments)
    assert result.is_error, result.structured_content
    return " ".join(getattr(c, "text", "") for c in result.content)


def test_error_summary_and_max_errors_over_4999_bad_rows(dirs: tuple[Path, Path]) -> None:
    text = bad_rows_csv()
    (dirs[0] / "bad.csv").write_text(text)
    sizes: dict[str, int] = {}

    async def scenario(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        tool = tools["validate_csv_data"]
        prop = tool.input_schema["properties"]["max_errors"]
        assert (prop["minimum"], prop["maximum"], prop["default"]) == (0, 1000, 100)
        assert "\n" not in prop["description"] and len(prop["description"]) <= 60
        assert tool.output_schema is not None
        assert "error_summary" in tool.output_schema["properties"]

        default, sizes["100"] = await _report(
            client, csv_content=text, type_constraints=CONSTRAINTS
        )
        assert (default["error_count"], len(default["errors"]), default["truncated"]) == (
            4999,
            100,
            True,
        )
        assert default["error_summary"] == SUMMARY
        assert [e["row"] for e in default["errors"]] == list(range(2, 102))

        most, sizes["1000"] = await _report(
            client, csv_path="bad.csv", type_constraints=CONSTRAINTS, max_errors=1000
        )
        assert (most["error_count"], len(most["errors"])) == (4999, 1000)
        assert [e["row"] for e in most["errors"]] == list(range(2, 1002))
        assert most["error_summary"] == SUMMARY
        assert most["warnings"] == []  # 1,000 ordinary errors fit one answer
        assert sizes["1000"] <= budget.RESPONSE_BUDGET_BYTES

        none, _ = await _report(
            client, csv_content=text, type_constraints=CONSTRAINTS, max_errors=0
        )
        assert none["errors"] == [] and none["error_summary"] == SUMMARY

        for bad in (1001, 5000, -1):
            message = await _error(client, csv_content=text, max_errors=bad)
            assert "max_errors" in message and "1000" in message, message

    _in_process(dirs, scenario)
    # Measured on the way (the report states them): 100 and 1,000 errors of this file.
    assert sizes["100"] < sizes["1000"] < budget.RESPONSE_BUDGET_BYTES, sizes


def test_a_listing_too_large_for_one_answer_is_cut_and_says_so(dirs: tuple[Path, Path]) -> None:
    # 1,000 type errors in a column with a 1,000-character name: ~2 MB listed in full.
    name = "n" * 1000
    text = f"{name}\n" + "x\n" * 1500

    async def scenario(client: Client) -> None:
        result = await client.call_tool(
            "validate_csv_data",
            {"csv_content": text, "type_constraints": {name: "integer"}, "max_errors": 1000},
        )
        assert not result.is_error, result.content
        assert _size(result) <= budget.RESPONSE_BUDGET_BYTES - budget.ENVELOPE_BYTES
        report = result.structured_content
        assert report is not None
        kept = len(report["errors"])
        assert 50 < kept < 1000
        assert [e["row"] for e in report["errors"]] == list(range(2, 2 + kept))
        assert (report["error_count"], report["truncated"]) == (1500, True)
        assert report["error_summary"] == {name: {"type-error": 1500}}
        assert report["warnings"] == [
            f"{1000 - kept:,} of the 1,000 errors asked for were cut to fit the server's "
            f"response budget of {budget.RESPONSE_BUDGET_BYTES:,} bytes (long column names or "
            "values): ask for fewer with max_errors; error_count and error_summary count every "
            "error"
        ]

    _in_process(dirs, scenario)


def _long_report(errors: int, name: str = "c" * 200) -> CsvReport:
    return CsvReport(
        valid=False,
        row_count=errors,
        columns=(CsvColumn(name, 1, "integer", True),),
        errors=tuple(
            CsvError("type-error", "'x' is not a valid integer", row, name, 1, "x")
            for row in range(2, 2 + errors)
        ),
        error_count=errors,
        truncated=False,
        error_summary={name: {"type-error": errors}},
    )


@pytest.mark.parametrize("budget_bytes", [8_000, 20_000, 60_000])
def test_fit_keeps_the_most_errors_that_fit(budget_bytes: int) -> None:
    report = _long_report(300)
    result = fit_csv_report(report, budget_bytes=budget_bytes)
    assert budget.message_bytes(result) <= budget_bytes
    assert result.structured_content is not None
    kept = len(result.structured_content["errors"])
    assert 0 < kept < 300
    # The most that fit: one more error (and the warning's count one less) would not.
    warning = result.structured_content["warnings"][0]
    assert warning.startswith(f"{300 - kept:,} of the 300 errors asked for were cut")
    one_more = {
        **result.structured_content,
        "errors": [*result.structured_content["errors"], report.errors[kept].to_dict()],
        "warnings": [warning.replace(f"{300 - kept:,} of", f"{299 - kept:,} of", 1)],
    }
    with pytest.raises(ToolError, match="response budget"):
        budget.tool_result(one_more, budget=budget_bytes)
    assert result.structured_content["warnings"][0].startswith(f"{300 - kept:,} of the 300 ")
    # A report that fits is returned whole, without a warning.
    whole = fit_csv_report(_long_report(3), budget_bytes=budget_bytes)
    assert whole.structured_content is not None
    assert len(whole.structured_content["errors"]) == 3
    assert whole.structured_content["warnings"] == []


def test_fit_refuses_when_not_even_the_columns_fit() -> None:
    with pytest.raises(ToolError, match="response budget of 4,000 bytes"):
        fit_csv_report(_long_report(5, name="c" * 3000), budget_bytes=4_000)
