"""``validate_json_data`` and ``validate_csv_data`` (datavalidate)."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from datavalidate import CsvReport, DataValidateError, validate_csv, validate_json
from mcp_secure_sandbox._schemas import JsonReportOutput
from mcp_secure_sandbox.state import ServerState
from mcp_secure_sandbox.tools._register import tool
from wsnapshot import WorkspaceError

__all__ = ["MAX_INPUT_BYTES", "parse_json_strict", "register"]

MAX_INPUT_BYTES = 16 * 1024 * 1024
"""Largest JSON document or workspace JSON file accepted, in bytes."""
MAX_CSV_FILE_BYTES = 1024 * 1024 * 1024
"""Largest workspace CSV file validated by path (streamed), in bytes."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (RFC 8259 has no NaN or Infinity)")


def _pairs_no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate object key {key!r}")
        seen[key] = value
    return seen


def _number(text: str) -> float | Decimal:
    """A JSON number with a fraction or exponent: a float when exact, else a Decimal."""
    value = float(text)
    exact = Decimal(text)
    if math.isfinite(value) and Decimal(value) == exact:
        return value
    return exact


def _max_int_digits() -> int:
    """The interpreter's limit on decimal digits of an int (CVE-2020-10735), 4300 by default."""
    getter = getattr(sys, "get_int_max_str_digits", None)
    return int(getter()) if getter is not None else 4300


def parse_json_strict(text: str) -> Any:
    """Parse JSON text strictly: duplicate keys and NaN/Infinity are errors, numbers exact.

    Integers keep every digit (Python ``int``); a decimal number that a binary double cannot
    represent exactly is kept as a :class:`decimal.Decimal`, which JSON Schema's numeric
    keywords compare exactly.

    Raises:
        ToolError: The text is not valid JSON, naming the line and column.
    """
    if len(text.encode("utf-8", "surrogatepass")) > MAX_INPUT_BYTES:
        raise ToolError(f"data_json is larger than {MAX_INPUT_BYTES} bytes")
    try:
        return json.loads(
            text,
            object_pairs_hook=_pairs_no_duplicates,
            parse_constant=_reject_constant,
            parse_float=_number,
        )
    except json.JSONDecodeError as exc:
        raise ToolError(
            f"data_json is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except ValueError as exc:
        if "int_max_str_digits" in str(exc) or "integer string conversion" in str(exc):
            raise ToolError(
                f"data_json holds an integer of more than {_max_int_digits()} digits; "
                "such numbers are refused (they cost quadratic time to convert)"
            ) from None
        raise ToolError(f"data_json is not valid JSON: {exc}") from None
    except RecursionError:
        raise ToolError("data_json is nested too deeply") from None


def _given_arguments(ctx: Context) -> Mapping[str, Any]:
    """The arguments exactly as the client sent them (to tell an explicit null from absence)."""
    params = ctx.request_context.params or {}
    arguments = params.get("arguments") or {}
    return arguments if isinstance(arguments, Mapping) else {}


def _one_source(ctx: Context, *names: str, nullable: tuple[str, ...] = ()) -> str:
    """Return which one of ``names`` the client sent; a ToolError unless exactly one.

    A key sent as null counts as absent, except for the names in ``nullable`` (``data``, where
    null is a JSON value to validate).
    """
    sent = _given_arguments(ctx)
    given = [n for n in names if n in sent and (sent[n] is not None or n in nullable)]
    if len(given) != 1:
        raise ToolError(
            f"give exactly one of {', '.join(names)} (got: {', '.join(given) or 'none'})"
        )
    return given[0]


def register(app: MCPServer[Any], state: ServerState) -> None:
    """Register the validation tools on ``app``."""

    @tool(
        app,
        annotations=ToolAnnotations(
            title="Validate JSON against a JSON Schema",
            read_only_hint=True,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    async def validate_json_data(
        schema_name_or_dict: str | dict[str, Any] | bool,
        ctx: Context,
        data: Any = None,
        data_json: str = "",
        data_path: str = "",
    ) -> JsonReportOutput:
        """Validate a JSON value against a JSON Schema and report every error with its location.

        Give exactly one source of data: `data` (any JSON value, null included), `data_json`
        (the document as JSON text, parsed strictly: duplicate keys and NaN/Infinity are errors
        and big numbers stay exact), or `data_path` (a JSON file in the workspace, at most
        16 MiB). The schema is a registered name (`config`, `user`, `dataset`; see the
        sandbox://schemas resource) or a schema object; its draft comes from `$schema`
        (default 2020-12; drafts 4, 6, 7, 2019-09 and 2020-12). Formats are asserted. Remote
        `$ref` is never fetched.

        Example: schema_name_or_dict={"type": "object", "required": ["id"]}, data={"name": "x"}
        gives valid=false with an error at instance_location "" for keyword "required".

        Returns valid, draft, error_count, truncated, and errors (instance_location and
        schema_location as JSON Pointers, keyword, message, the offending value shortened).
        """
        async with state.instrument("validate_json_data") as outcome:
            source = _one_source(ctx, "data", "data_json", "data_path", nullable=("data",))
            if source == "data_json":
                instance = parse_json_strict(data_json)
            elif source == "data_path":
                async with state.gate.exclusive():
                    raw = await _read_workspace(state, data_path, MAX_INPUT_BYTES, "data_path")
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise ToolError(
                        f"data_path {data_path}: not UTF-8 ({exc.reason} at byte {exc.start})"
                    ) from None
                instance = parse_json_strict(text)
            else:
                instance = data
            try:
                report = await anyio.to_thread.run_sync(
                    lambda: validate_json(instance, schema_name_or_dict, registry=state.registry)
                )
            except DataValidateError as exc:
                raise ToolError(f"schema_name_or_dict: {exc}") from None
            outcome["status"] = "valid" if report.valid else "invalid"
            return {
                "valid": report.valid,
                "draft": report.draft,
                "error_count": report.error_count,
                "truncated": report.truncated,
                "errors": list(report.errors),
            }

    @tool(
        app,
        annotations=ToolAnnotations(
            title="Validate CSV headers, types and constraints",
            read_only_hint=True,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    async def validate_csv_data(
        ctx: Context,
        *,
        csv_content: str = "",
        required_headers: list[str] | None = None,
        type_constraints: dict[str, Any] | None = None,
        table_schema: dict[str, Any] | None = None,
        delimiter: str = "",
        csv_path: str = "",
    ) -> CsvReport:
        r"""Validate CSV data: required headers, column types and Table Schema constraints.

        Give exactly one source: `csv_content` (the CSV text) or `csv_path` (a CSV file in the
        workspace, validated streaming, for files too large to pass as text). Columns are
        described by `type_constraints` in the short form {"age": "integer"} or the long form
        {"age": {"type": "integer", "minimum": 0, "required": true}}, or by a Frictionless
        `table_schema` ({"fields": [...], "missingValues": [...], "primaryKey": ...}). Types:
        string, integer, number, boolean, date, time, datetime, year. Constraints: required,
        unique, minimum, maximum, minLength, maxLength, pattern, enum. `delimiter` is a single
        character, or "sniff" to detect , ; tab or |.

        Example: csv_content="id,age\\n1,x\\n", type_constraints={"age": "integer"} gives a
        type-error at row 2, column age.

        Returns valid, row_count, columns (name, number, type), error_count, truncated, the
        delimiter used, and errors (row as a person counts lines with the header as row 1,
        column, value, a stable code such as missing-header or type-error, and a message).
        """
        async with state.instrument("validate_csv_data") as outcome:
            source = _one_source(ctx, "csv_content", "csv_path")
            dialect: str | dict[str, Any] | None = None
            if delimiter:
                if delimiter == "sniff":
                    dialect = "sniff"
                elif len(delimiter) == 1 and delimiter not in '\r\n"':
                    dialect = {"delimiter": delimiter}
                else:
                    raise ToolError(
                        f"delimiter must be one character or 'sniff', got {delimiter!r}"
                    )
            kwargs: dict[str, Any] = {
                "required_headers": tuple(required_headers or ()),
                "constraints": type_constraints,
                "table_schema": table_schema,
                "dialect": dialect,
            }
            try:
                if source == "csv_content":
                    report = await anyio.to_thread.run_sync(
                        lambda: validate_csv(csv_content, **kwargs)
                    )
                else:
                    async with state.gate.exclusive():
                        report = await anyio.to_thread.run_sync(
                            lambda: _validate_workspace_csv(state, csv_path, kwargs)
                        )
            except (ValueError, DataValidateError) as exc:
                raise ToolError(str(exc)) from None
            outcome["status"] = "valid" if report.valid else "invalid"
            return report


def _validate_workspace_csv(state: ServerState, path: str, kwargs: dict[str, Any]) -> CsvReport:
    try:
        stream = state.workspace.open_read(path, max_bytes=MAX_CSV_FILE_BYTES)
    except (WorkspaceError, OSError) as exc:
        raise ToolError(f"csv_path {path}: {exc}") from None
    with stream:
        return validate_csv(stream, **kwargs)


async def _read_workspace(state: ServerState, path: str, max_bytes: int, argument: str) -> bytes:
    def read() -> bytes:
        try:
            return state.workspace.read_bytes(path, max_bytes=max_bytes)
        except (WorkspaceError, OSError) as exc:
            raise ToolError(f"{argument} {path}: {_reason(exc)}") from None

    return await anyio.to_thread.run_sync(read)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)
