"""MCP prompts: write a script that passes the live policy; diagnose a validation error."""

from __future__ import annotations

import json
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from pydantic import Field

from datavalidate import DataValidateError, validate_json
from mcp_secure_sandbox._declare import size_words
from mcp_secure_sandbox.state import ServerState
from mcp_secure_sandbox.tools.validation import parse_json_strict

__all__ = ["register"]


INVALID_PARAMS = -32602
"""JSON-RPC 2.0 error code for invalid method parameters."""


def _invalid(message: str) -> MCPError:
    """A protocol error the client sees with this exact message (not a generic one)."""
    return MCPError(code=INVALID_PARAMS, message=message)


def register(app: MCPServer[Any], state: ServerState) -> None:
    """Register the prompts on ``app``."""

    @app.prompt(
        title="Write a script that passes the sandbox policy",
        description="Ask for a Python script for a task, within the live sandbox policy.",
    )
    def generate_secure_script(
        task: Annotated[str, Field(description="What the script should do, in plain words.")],
    ) -> str:
        modules = ", ".join(sorted(state.policy.allowed_modules))
        limits = state.limits
        return (
            f"Write a Python 3 script for this task:\n\n{task}\n\n"
            "It will run with the run_sandbox_code tool, in a sandbox with these rules:\n"
            f"- Imports: only these modules (and their public submodules): {modules}.\n"
            "- The current directory is the workspace; read and write files there with open() or "
            "pathlib using relative paths. Paths outside the workspace raise PermissionError.\n"
            "- No network, no subprocesses or os.system, no exec/eval/compile/__import__, no "
            "access to dunder attributes other than ordinary ones such as __init__ and __name__, "
            "no frame or code-object introspection.\n"
            f"- Limits: {state.settings.default_timeout_s:g} s wall clock by default (at most "
            f"{state.settings.max_timeout_s:g} s), {size_words(limits.memory_bytes)} of memory, "
            f"{size_words(limits.output_bytes)} of output per stream (the answer shows the first "
            f"and last {size_words(state.settings.stream_excerpt_bytes)} of each).\n"
            "Print the results to stdout. Return only the script in one ```python block."
        )

    @app.prompt(
        title="Diagnose a JSON Schema validation error",
        description="Validate a JSON payload and ask for a corrected one, error by error.",
    )
    def diagnose_validation_error(
        data_json: Annotated[str, Field(description="The JSON payload, as text.")],
        schema: Annotated[
            str,
            Field(description="A registered schema name (config, user, dataset) or JSON text."),
        ],
    ) -> str:
        try:
            instance = parse_json_strict(data_json)
        except ToolError as exc:
            # Text that does not parse is the first thing to diagnose, not a wrong call.
            return (
                f"This payload was meant to be JSON, but it does not parse: {exc}.\n\n"
                f"Payload:\n```\n{data_json}\n```\n\nExplain what makes it invalid JSON, "
                "then give the corrected payload in one ```json block, changing as little as "
                "possible."
            )
        schema_arg: Any = schema
        if schema.lstrip().startswith(("{", "[", "true", "false")):
            try:
                schema_arg = parse_json_strict(schema, "schema")
            except ToolError as exc:
                raise _invalid(
                    f"{exc}; give a registered schema name or a schema as JSON text"
                ) from None
        elif schema not in state.registry:
            names = ", ".join(state.registry.names())
            raise _invalid(f"schema: no schema is registered as {schema!r}; registered: {names}")
        try:
            report = validate_json(instance, schema_arg, registry=state.registry)
        except DataValidateError as exc:
            raise _invalid(f"schema: {exc}") from None
        schema_text = schema if isinstance(schema_arg, str) else json.dumps(schema_arg, indent=2)
        if report.valid:
            findings = "The payload is valid: say so, and suggest nothing to change."
        else:
            lines = [
                f"- at {e.instance_location or '(root)'} (JSON Pointer {e.instance_location!r}), "
                f"keyword {e.keyword!r} at schema {e.schema_location!r}: {e.message}"
                for e in report.errors
            ]
            more = report.error_count - len(report.errors)
            if more:
                lines.append(f"- ... and {more} more errors")
            findings = "The validator reported these errors:\n" + "\n".join(lines)
        return (
            f"This JSON payload was validated against the schema "
            f"{'named ' + schema_text if isinstance(schema_arg, str) else 'below'} "
            f"({report.draft}).\n\nPayload:\n```json\n{data_json}\n```\n\n"
            + ("" if isinstance(schema_arg, str) else f"Schema:\n```json\n{schema_text}\n```\n\n")
            + f"{findings}\n\nExplain each error, quoting its JSON Pointer, then give a "
            "corrected payload that satisfies the schema in one ```json block, changing as "
            "little as possible."
        )
