"""``validate_json_data`` and ``validate_csv_data`` (datavalidate)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Annotated, Any, TypeVar

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field, TypeAdapter

from datavalidate import (
    DEFAULT_MAX_ERRORS,
    MAX_ENCODING_CHARS,
    MAX_ERRORS_LIMIT,
    CsvReport,
    JsonError,
    text_encoding,
)
from mcp_secure_sandbox import budget, surface
from mcp_secure_sandbox._answers import csv_report, json_report
from mcp_secure_sandbox._schemas import JsonReportOutput
from mcp_secure_sandbox._worker import MAX_CSV_FILE_BYTES, reason
from mcp_secure_sandbox.concurrency import Progress
from mcp_secure_sandbox.jsontext import MAX_INPUT_BYTES, JsonTextError, loads_strict
from mcp_secure_sandbox.settings import Settings
from mcp_secure_sandbox.state import ServerState
from mcp_secure_sandbox.tools._tool import Admission, note, state_of, tool
from mcp_secure_sandbox.workers import WorkerError, WorkerLimit, WorkerProtocolError
from wsnapshot import WorkspaceError

__all__ = [
    "MAX_INPUT_BYTES",
    "TOOLS",
    "fit_csv_report",
    "in_worker",
    "is_json_text",
    "parse_json_strict",
    "schema_argument",
    "validate_csv_data",
    "validate_json_data",
]

T = TypeVar("T")
_CSV_REPORT: TypeAdapter[CsvReport] = TypeAdapter(CsvReport)


def parse_json_strict(text: str, argument: str = "data_json") -> Any:
    """Parse JSON text strictly (:func:`mcp_secure_sandbox.jsontext.loads_strict`).

    Args:
        text: The JSON text.
        argument: What the text was given as, for the messages (``data_json``, ``data_path
            <path>``, ``schema``).

    Raises:
        ToolError: The text is not valid JSON, naming the argument, the line and the column.
    """
    try:
        return loads_strict(text)
    except JsonTextError as exc:
        raise ToolError(f"{argument} {exc}") from None


def is_json_text(value: object) -> bool:
    """True when ``value`` is a string that parses as a JSON object, array or boolean."""
    if not isinstance(value, str) or not value.lstrip().startswith(("{", "[", "t", "f")):
        return False
    try:
        return isinstance(json.loads(value), dict | list | bool)
    except (ValueError, RecursionError):
        return False


def _suggest_data_json(error: JsonError) -> JsonError:
    if error.keyword != "type" or error.instance_location != "":
        return error
    hint = " (data is a string holding JSON text: did you mean data_json?)"
    return replace(error, message=error.message + hint)


def schema_argument(
    state: ServerState, schema: object, argument: str = "schema_name_or_dict"
) -> Any:
    """The schema argument as sent: an object or boolean, or a string naming a registered schema.

    Raises:
        ToolError: A string that is not a registered name; when it holds JSON text (parsing or
            not), the message says to pass the schema as an object.
    """
    if not isinstance(schema, str) or schema in state.registry:
        return schema
    names = ", ".join(state.registry.names())
    if schema.lstrip().startswith(("{", "[")) or is_json_text(schema):
        try:
            parse_json_strict(schema, argument)
            problem = "holds JSON text"
        except ToolError as exc:
            problem = f"looks like JSON text, which does not parse ({exc})"
        raise ToolError(
            f"{argument}: a string is the name of a registered schema ({names}); this one "
            f"{problem}: pass the schema as an object, not as a string"
        )
    raise ToolError(f"{argument}: no schema is registered as {schema!r}; registered: {names}")


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


_MOST = surface.size_words(MAX_INPUT_BYTES)
_JSON_FILE = "use data_path"


def _json_params(settings: Settings) -> dict[str, Any]:
    """The JSON sources' annotations: what the live body limit allows."""
    return {
        "data": Annotated[
            Any,
            Field(
                description="The JSON value to validate; a string is a string. "
                + surface.body_limit(settings, _JSON_FILE)
            ),
        ],
        "data_json": Annotated[
            str,
            Field(
                description=f"The document as JSON text, at most {_MOST}. "
                + surface.body_limit(settings, _JSON_FILE)
            ),
        ],
        "data_path": Annotated[
            str, Field(description=f"A JSON file in the workspace, at most {_MOST}.")
        ],
    }


def _csv_params(settings: Settings) -> dict[str, Any]:
    """The CSV sources' annotations: what the live body limit allows."""
    return {
        "csv_content": Annotated[
            str,
            Field(
                description="The CSV text. "
                + surface.body_limit(settings, "write the file in a run, use csv_path")
            ),
        ],
        "csv_path": Annotated[
            str,
            Field(
                description="A CSV file in the workspace (streamed, at most "
                f"{surface.size_words(MAX_CSV_FILE_BYTES)})."
            ),
        ],
    }


#: Reading a workspace file holds the workspace alone (no run changes it meanwhile).
_READ_FILE = Admission(None, workspace="exclusive", what="validate_json_data (data_path)")


@tool(
    params=_json_params,
    fill=lambda _: {"json_max": _MOST},
    output=JsonReportOutput,
    annotations=ToolAnnotations(
        title="Validate JSON against a JSON Schema",
        read_only_hint=True,
        idempotent_hint=True,
        open_world_hint=False,
    ),
)
async def validate_json_data(
    schema_name_or_dict: Annotated[
        str | dict[str, Any] | bool,
        Field(description="A registered schema name (config, user, dataset) or a schema."),
    ],
    ctx: Context,
    data: Any = None,
    data_json: str = "",
    data_path: str = "",
) -> dict[str, Any]:
    """Validate a JSON value against a JSON Schema and report every error with its location.

    Give exactly one of `data` (any JSON value, null included; a string is validated as a
    string), `data_json` (JSON text, parsed strictly: duplicate keys and NaN/Infinity are
    errors, big numbers stay exact) or `data_path` (a workspace JSON file, at most
    {json_max}). The schema is a registered name (`config`, `user`, `dataset`; see
    sandbox://schemas) or a schema object, not a string of JSON; its draft comes from
    `$schema` (4, 6, 7, 2019-09, 2020-12; default 2020-12). Formats are asserted; a remote
    `$ref` is never fetched.

    Example: schema_name_or_dict={"type": "object", "required": ["id"]}, data={"name": "x"}
    gives valid=false, an error at instance_location "" for keyword "required".

    Returns valid, draft, error_count, truncated and errors (instance_location and
    schema_location as JSON Pointers, keyword, message, the value shortened).
    """
    state = state_of(ctx)
    source = _one_source(ctx, "data", "data_json", "data_path", nullable=("data",))
    schema = schema_argument(state, _given_arguments(ctx).get("schema_name_or_dict"))
    job: dict[str, Any] = {"op": "validate_json", "schema": schema}
    if source == "data_json":
        job.update(instance_text=data_json, argument="data_json")
    elif source == "data_path":
        async with _READ_FILE.enter(state, ctx, "validate_json_data", {}):
            raw = await _read_workspace(state, data_path, MAX_INPUT_BYTES, "data_path")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolError(
                f"data_path {data_path}: not UTF-8 ({exc.reason} at byte {exc.start})"
            ) from None
        job.update(instance_text=text, argument=f"data_path {data_path}")
    else:
        # As sent: the SDK's argument model would have parsed a JSON-looking string.
        job["instance"] = _given_arguments(ctx)["data"]
    report = await in_worker(
        state, job, "schema_name_or_dict: ", json_report, state.queue_progress(ctx)
    )
    note(status="valid" if report["valid"] else "invalid")
    errors: list[JsonError] = report["errors"]
    if source == "data" and is_json_text(job["instance"]):
        errors = [_suggest_data_json(e) for e in errors]
    return {**report, "errors": errors}


@tool(
    params=_csv_params,
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
    required_headers: Annotated[
        list[str] | None, Field(description="Column names the header must contain.")
    ] = None,
    type_constraints: Annotated[
        dict[str, Any] | None,
        Field(description='Per column: a type, or {"type": ..., constraint: value}.'),
    ] = None,
    table_schema: Annotated[
        dict[str, Any] | None, Field(description="A Frictionless Table Schema.")
    ] = None,
    delimiter: Annotated[str, Field(description='One character, or "sniff"; default ",".')] = "",
    csv_path: str = "",
    encoding: Annotated[
        str,
        Field(
            description='The text encoding of csv_path, such as "latin-1" or "cp1252"; '
            'default "utf-8".',
            max_length=MAX_ENCODING_CHARS,
        ),
    ] = "",
    max_errors: Annotated[
        int,
        Field(
            description="Errors listed; error_count and error_summary count all.",
            ge=0,
            le=MAX_ERRORS_LIMIT,
        ),
    ] = DEFAULT_MAX_ERRORS,
) -> Annotated[CallToolResult, CsvReport]:
    r"""Validate CSV data: required headers, column types and Table Schema constraints.

    Give exactly one source: `csv_content` (the CSV text) or `csv_path` (a CSV file in the
    workspace, validated streaming, for files too large to pass as text). Columns are
    described by `type_constraints` in the short form {"age": "integer"} or the long form
    {"age": {"type": "integer", "minimum": 0, "required": true}}, or by a Frictionless
    `table_schema` ({"fields": [...], "missingValues": [...], "primaryKey": ...}). Types:
    string, integer, number, boolean, date, time, datetime, year. Constraints: required,
    unique, minimum, maximum, minLength, maxLength, pattern, enum. `delimiter` is a single
    character, or "sniff" to detect , ; tab or |. `encoding` is the text encoding of
    `csv_path` (default UTF-8; a text codec Python knows, such as "latin-1" or "cp1252");
    `csv_content` is text already.

    Example: csv_content="id,age\\n1,x\\n", type_constraints={"age": "integer"} gives a
    type-error at row 2, column age.

    Returns valid, row_count, columns, error_count, error_summary ({column: {code: count}}
    of all errors), truncated, the delimiter used, warnings (no rules given, a header that
    looks ;-separated, bytes invalid in the encoding) and the first `max_errors` errors (row
    counted with the header as row 1, column, value, a stable code such as type-error, a
    message).
    """
    state = state_of(ctx)
    source = _one_source(ctx, "csv_content", "csv_path")
    dialect: str | dict[str, Any] | None = None
    if delimiter:
        if delimiter == "sniff":
            dialect = "sniff"
        elif len(delimiter) == 1 and delimiter not in '\r\n"':
            dialect = {"delimiter": delimiter}
        else:
            raise ToolError(f"delimiter must be one character or 'sniff', got {delimiter!r}")
    kwargs: dict[str, Any] = {
        "required_headers": tuple(required_headers or ()),
        "constraints": type_constraints,
        "table_schema": table_schema,
        "dialect": dialect,
        "max_errors": max_errors,
    }
    if encoding:
        if source == "csv_content":
            raise ToolError(
                "encoding applies to csv_path only: csv_content is text already "
                "(drop encoding, or write the bytes to a file and give csv_path)"
            )
        try:
            kwargs["encoding"] = text_encoding(encoding)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
    job: dict[str, Any] = {"op": "validate_csv", "kwargs": kwargs}
    if source == "csv_content":
        job["text"] = csv_content
        report: CsvReport = await in_worker(state, job, "", csv_report, state.queue_progress(ctx))
    else:
        job["path"] = csv_path
        # The file is read by the worker: no run may change it meanwhile.
        report = await in_worker(
            state, job, "", csv_report, state.queue_progress(ctx), workspace=True
        )
    note(status="valid" if report.valid else "invalid")
    return fit_csv_report(report)


TOOLS = (validate_json_data, validate_csv_data)
"""The tools of this module, in the order they are listed."""


def fit_csv_report(
    report: CsvReport, *, budget_bytes: int = budget.RESPONSE_BUDGET_BYTES
) -> CallToolResult:
    """The tool result of a CSV report, its error list cut from the end to fit the budget.

    Up to :data:`datavalidate.MAX_ERRORS_LIMIT` errors are asked for, each carrying its column
    name and value; when they do not fit one answer, the most that do are kept (in file order),
    ``truncated`` is true and a warning says how many were cut and why. ``error_count`` and
    ``error_summary`` still count every error.

    Args:
        report: The checked report.
        budget_bytes: Largest encoded answer, in bytes.

    Returns:
        The result (structured content and its text mirror).

    Raises:
        ToolError: Even with no error listed the answer passes the budget (the columns and the
            summary alone are too large), as :func:`mcp_secure_sandbox.budget.tool_result` says.
    """
    data = _CSV_REPORT.dump_python(report, mode="json", by_alias=True)
    try:
        return budget.tool_result(data, budget=budget_bytes)
    except ToolError:
        if not report.errors:
            raise
    listed = len(report.errors)

    def attempt(keep: int) -> CallToolResult:
        cut = listed - keep
        note = (
            f"{cut:,} of the {listed:,} errors asked for were cut to fit the server's "
            f"response budget of {budget_bytes:,} bytes (long column names or values): ask "
            "for fewer with max_errors; error_count and error_summary count every error"
        )
        shaped = {
            **data,
            "errors": data["errors"][:keep],
            "truncated": True,
            "warnings": [*data["warnings"], note],
        }
        return budget.tool_result(shaped, budget=budget_bytes)

    best = attempt(0)  # raises when even the columns and the summary do not fit
    low, high = 0, listed - 1  # ``listed`` did not fit
    while low < high:
        middle = (low + high + 1) // 2
        try:
            best, low = attempt(middle), middle
        except ToolError:
            high = middle - 1
    return best


async def in_worker(
    state: ServerState,
    job: dict[str, Any],
    schema_prefix: str,
    check: Callable[[Any], T],
    progress: Progress | None = None,
    *,
    workspace: bool = False,
) -> T:
    """Run a validation job in a confined worker, once admitted; map its failures to tool errors.

    Args:
        state: The server's state (admission and worker pool).
        job: The job (:func:`mcp_secure_sandbox._worker.handle`).
        schema_prefix: Put before a schema error datavalidate reports (the argument's name).
        check: Checks the result's shape and converts it (:mod:`mcp_secure_sandbox._answers`).
        progress: Reports the call's place while it waits (:meth:`ServerState.queue_progress`).
        workspace: The job reads a workspace file: it holds the workspace alone (no run
            changes the file meanwhile) as well as its worker.

    Returns:
        The worker's result, through ``check``.

    Raises:
        Busy: The queue is full, or no worker (and workspace) within the admission wait.
        ToolError: Stopped past the deadline or the
            memory budget ("validation stopped after 10 s / 256 MiB: ..."); a malformed answer
            (the worker was replaced); a bad input or schema, as the worker reported it.
    """
    async with state.admission.admit(
        "validation",
        "the validation",
        state.settings.admission_wait_s,
        workspace="exclusive" if workspace else None,
        progress=progress,
        bound=state.wait_bound,
    ):
        try:
            result: T = await state.workers.call(job, what="validation", check=check)
            return result
        except (WorkerLimit, WorkerProtocolError) as exc:
            raise ToolError(str(exc)) from None
        except WorkerError as exc:
            prefix = schema_prefix if exc.kind == "schema" else ""
            raise ToolError(f"{prefix}{exc}") from None
        except RuntimeError as exc:
            raise ToolError(f"validation is unavailable: {exc}") from None


async def _read_workspace(state: ServerState, path: str, max_bytes: int, argument: str) -> bytes:
    def read() -> bytes:
        try:
            return state.workspace.read_bytes(path, max_bytes=max_bytes)
        except (WorkspaceError, OSError) as exc:
            raise ToolError(f"{argument} {path}: {reason(exc)}") from None

    return await anyio.to_thread.run_sync(read, limiter=state.admission.limiter("light"))
