"""Strict tool arguments: the input schema a client reads is the one a call is held to.

The SDK validates a call's arguments with the tool's pydantic model: it ignores unknown names
(``timeout`` for ``timeout_sec`` then runs with the default), converts loosely (a JSON string
where an object is expected is parsed), and reports a failure as a multi-line dump with a URL.
:class:`StrictArguments` is server middleware (the SDK's public ``middleware=`` hook, which sees
the raw request before the SDK's own validation) that checks every ``tools/call`` against the
tool's published input schema first and answers a wrong call with a tool error of one line:
the argument, what was expected, what was given, and a did-you-mean for a misspelled name.
The JSON Schema validation is datavalidate's.
"""

from __future__ import annotations

import difflib
import json
import logging
from collections.abc import Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent

import datavalidate

__all__ = [
    "TOOL_ERROR_PREFIX",
    "StrictArguments",
    "check_arguments",
    "describe_schema",
    "json_type",
    "unknown_tool",
]

log = logging.getLogger("mcp_secure_sandbox")

INVALID_PARAMS = -32602
"""JSON-RPC 2.0 error code for invalid method parameters."""
TOOL_ERROR_PREFIX = "Error executing tool "
"""How the SDK begins the text of a tool call that failed; refused arguments begin alike."""
_TYPE_KEYWORDS = frozenset({"type", "anyOf", "oneOf", "enum", "const"})
_SHOWN_CHARS = 60


def json_type(value: object) -> str:
    """The JSON type name of a Python value decoded from JSON (``"string"``, ``"array"``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _bounds(schema: Mapping[str, Any]) -> str:
    parts = []
    for key, words in (
        ("minimum", "at least"),
        ("exclusiveMinimum", "more than"),
        ("maximum", "at most"),
        ("exclusiveMaximum", "less than"),
        ("maxLength", "at most {} characters"),
        ("minLength", "at least {} characters"),
    ):
        if key in schema:
            parts.append(words.format(schema[key]) if "{}" in words else f"{words} {schema[key]}")
    return f" ({', '.join(parts)})" if parts else ""


def describe_schema(schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> str:
    """Say in a few words what a (pydantic-generated) property schema accepts.

    Args:
        schema: The property's schema.
        defs: The ``$defs`` of the whole input schema, to follow ``$ref``.

    Returns:
        E.g. ``"number (more than 0, at most 60) or null"``, ``"array of string"``,
        ``"one of 'utf-8', 'base64'"``, or ``"any JSON value"``.
    """
    defs = defs or {}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return describe_schema(defs.get(ref.removeprefix("#/$defs/"), {}), defs)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(describe_schema(s, defs) for s in schema[key])
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    kind = schema.get("type")
    if kind is None:
        return "any JSON value"
    names = kind if isinstance(kind, list) else [kind]
    text = " or ".join(str(n) for n in names)
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        text = f"array of {describe_schema(schema['items'], defs)}"
    return text + _bounds(schema)


def _shown(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _holds_json(value: object) -> bool:
    """True when ``value`` is a string whose JSON parses to an object, array or boolean."""
    if not isinstance(value, str):
        return False
    try:
        return isinstance(json.loads(value), dict | list | bool)
    except (ValueError, RecursionError):
        return False


def check_arguments(
    tool: str,
    schema: Mapping[str, Any],
    arguments: Mapping[str, Any],
    *,
    compiled: datavalidate.CompiledSchema | None = None,
) -> str | None:
    """Check a call's arguments against a tool's input schema.

    Args:
        tool: The tool's name, for the message.
        schema: The tool's input schema (``type: object`` with ``properties``).
        arguments: The arguments exactly as the client sent them.
        compiled: ``schema`` compiled by :func:`datavalidate.compile` (``check_formats``
            false), to skip finding it in the registry's cache; compiled here when ``None``.

    Returns:
        ``None`` when the call is well-formed, else one line naming the first problem: an
        unknown argument (with the closest known name), a missing one, or a value of the
        wrong type or out of bounds (the argument, what it accepts, what was given).
    """
    properties: Mapping[str, Any] = schema.get("properties", {})
    known = ", ".join(properties) or "no arguments"
    for name in arguments:
        if name not in properties:
            close = difflib.get_close_matches(name, list(properties), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            return f"{tool}: unknown argument {name!r}{hint} ({tool} takes {known})"
    if compiled is None:
        compiled = datavalidate.compile(dict(schema), check_formats=False)
    report = compiled.validate(dict(arguments), max_errors=1)
    if report.valid:
        return None
    error = report.errors[0]
    parts = error.instance_location.split("/")[1:]
    if not parts:
        if error.keyword == "required":
            missing = [n for n in schema.get("required", []) if n not in arguments]
            return (
                f"{tool}: missing argument {', '.join(map(repr, missing))} ({tool} takes {known})"
            )
        return f"{tool}: {error.message}"
    name = parts[0].replace("~1", "/").replace("~0", "~")
    if len(parts) == 1 and error.keyword in _TYPE_KEYWORDS | {"maximum", "minimum"} | {
        "exclusiveMaximum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
    }:
        value = arguments[name]
        expected = describe_schema(properties[name], schema.get("$defs"))
        message = (
            f"{tool}: argument {name}: expected {expected}, got {json_type(value)} {_shown(value)}"
        )
        if error.keyword in _TYPE_KEYWORDS and _holds_json(value):
            message += " (a string holding JSON: pass the value itself, not JSON text)"
        return message
    where = "/".join(parts[1:])
    return f"{tool}: argument {name}{' at ' + where if where else ''}: {error.message}"


def unknown_tool(name: str, tools: list[str]) -> str:
    """The one line for a call to a tool the server does not have.

    Args:
        name: The name the client called.
        tools: The server's tool names.

    Returns:
        E.g. ``'"run_code": unknown tool; did you mean 'run_sandbox_code'? (the tools are:
        ...)'`` (the name JSON-quoted and cut to 60 characters: it is the client's text).
    """
    close = difflib.get_close_matches(name, tools, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{_shown(name)}: unknown tool{hint} (the tools are: {', '.join(sorted(tools))})"


class StrictArguments:
    """Server middleware that refuses malformed ``tools/call`` arguments with one line.

    Args:
        app: The server whose tools' input schemas are enforced (read and compiled once, from
            :meth:`MCPServer.list_tools`, on the first call).
    """

    def __init__(self, app: MCPServer[Any]) -> None:
        self._app = app
        self._schemas: dict[str, tuple[dict[str, Any], datavalidate.CompiledSchema]] | None = None

    async def _input_schemas(
        self,
    ) -> dict[str, tuple[dict[str, Any], datavalidate.CompiledSchema]]:
        if self._schemas is None:
            schemas = {t.name: dict(t.input_schema) for t in await self._app.list_tools()}
            self._schemas = {
                name: (schema, datavalidate.compile(schema, check_formats=False))
                for name, schema in schemas.items()
            }
        return self._schemas

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Answer a malformed ``tools/call`` with a tool error; pass everything else on.

        A ``prompts/get`` that fails is answered with an invalid-params error whose message is
        the failure's, logged as one line (the SDK would log a traceback).
        """
        if ctx.method == "prompts/get":
            return await self._prompt(ctx, call_next)
        params = ctx.params
        if ctx.method == "tools/call" and isinstance(params, Mapping):
            name = params.get("name")
            arguments = params.get("arguments") or {}
            schemas = await self._input_schemas()
            problem = None
            if isinstance(name, str) and name not in schemas:
                problem = unknown_tool(name, list(schemas))
            elif isinstance(name, str) and isinstance(arguments, Mapping):
                schema, compiled = schemas[name]
                problem = check_arguments(name, schema, arguments, compiled=compiled)
            if problem is not None:
                log.warning("%s", problem[:300])
                # The SDK's wording for a failed tool call, so that every refusal reads alike.
                text = f"{TOOL_ERROR_PREFIX}{problem}"
                return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        return await call_next(ctx)

    async def _prompt(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        params = ctx.params or {}
        name = params.get("name")
        try:
            return await call_next(ctx)
        except MCPError as exc:
            log.warning("prompt %r: %s", name, str(exc)[:300])
            raise
        except Exception as exc:  # every failure becomes one invalid-params line
            message = str(exc) or type(exc).__name__
            log.warning("prompt %r: %s", name, message[:300])
            raise MCPError(code=INVALID_PARAMS, message=message) from None
