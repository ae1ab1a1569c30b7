"""Registering a tool: its docstring as the description, its result within the response budget.

A tool function returns its structured result typed (a ``TypedDict`` of ``_schemas`` or a
library dataclass), or a ready :class:`~mcp.types.CallToolResult` (``run_sandbox_code`` fits its
streams itself). The wrapper registered with the SDK turns a typed result into a
``CallToolResult`` whose text mirror is the compact JSON of the structured content, once, and
which fits the response budget (:mod:`mcp_secure_sandbox.budget`). The return annotation the SDK
sees is ``Annotated[CallToolResult, <the type>]``: the SDK still derives the output schema from
the type and validates every structured result against it.

The schemas a client lists are compacted once, at registration (:func:`compact_schema`): the
``title`` pydantic derives from every name ("Timeout Sec" for ``timeout_sec``) is dropped and a
model's description keeps its first paragraph (a library dataclass's docstring goes on with its
attributes for Python readers), and the result model's own description is left out (the tool's
description says what it returns; the models inside the result keep theirs). Every parameter
keeps its description; what a schema accepts is unchanged (the SDK validates against the types,
not the published dict).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, TypeVar, get_args, get_origin

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import TypeAdapter

from mcp_secure_sandbox import budget

__all__ = ["compact_schema", "publish", "tool"]

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

#: JSON Schema keywords whose value is a mapping of names to schemas, a list of schemas, a schema.
_SCHEMA_MAPS = ("properties", "$defs", "patternProperties", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains")


def compact_schema(schema: Any) -> Any:
    """``schema`` without pydantic's derived titles, each description cut to its first paragraph.

    An ``anyOf`` of bare types (``str | None``) becomes a list of types, its equivalent, and
    ``"additionalProperties": true``, the default, is left out. Only
    schema positions are rewritten: a property *named* ``title`` stays, as do ``default``,
    ``const`` and ``enum`` values.

    Args:
        schema: A JSON Schema as pydantic generates it (a dict; anything else is returned as is).

    Returns:
        A new schema accepting the same instances.
    """
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items() if k != "title"}
    if out.get("additionalProperties") is True:
        del out["additionalProperties"]  # the default
    if isinstance(out.get("description"), str):
        out["description"] = out["description"].split("\n\n", 1)[0].strip()
    for key in _SCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: compact_schema(sub) for name, sub in out[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [compact_schema(sub) for sub in out[key]]
    options = out.get("anyOf")
    if (
        isinstance(options, list)
        and options
        and "type" not in out
        and all(isinstance(o, dict) and set(o) == {"type"} for o in options)
        and all(isinstance(o["type"], str) for o in options)
    ):
        del out["anyOf"]
        out["type"] = [o["type"] for o in options]  # {"anyOf": [{"type": "integer"}, ...]}
    for key in _SCHEMA_ONE:
        if key in out:
            out[key] = compact_schema(out[key])
    return out


def tool(
    app: MCPServer[Any],
    *,
    params: Mapping[str, Any] | None = None,
    fill: Mapping[str, str] | None = None,
    **options: Any,
) -> Callable[[F], F]:
    """Like ``@app.tool(**options)``, with the cleaned docstring and the budgeted result.

    For a tool defined inside a function (``run_sandbox_code`` until it is declared with
    :func:`mcp_secure_sandbox.tools._tool.tool`, and tests); the description is made as
    :func:`publish` says.

    Args:
        app: The server to register on.
        params: Annotations that replace those of the named parameters (bounds known only at
            registration, e.g. ``timeout_sec``'s maximum from the settings).
        fill: Text for the ``{name}`` placeholders of the docstring (what the live settings
            say: the modules a run may import, its limits); other braces stay as written.
        **options: Passed to :meth:`MCPServer.add_tool` (``annotations``, ``title``...).

    Returns:
        A decorator that registers an ``async`` tool function and returns it unchanged.
    """

    def decorator(fn: F) -> F:
        publish(app, fn, params=params, fill=fill, **options)
        return fn

    return decorator


def publish(
    app: MCPServer[Any],
    fn: Callable[..., Awaitable[Any]],
    *,
    name: str | None = None,
    doc: str | None = None,
    out_type: Any = None,
    params: Mapping[str, Any] | None = None,
    fill: Mapping[str, str] | None = None,
    **options: Any,
) -> None:
    """Register the ``async`` function ``fn`` as a tool: cleaned description, budgeted result.

    The description is the docstring, cleaned, each paragraph on one line (a line break costs
    a client's context as much as a word), with each ``{name}`` of ``fill`` replaced. The
    input and output schemas are compacted (:func:`compact_schema`).

    Args:
        app: The server to register on.
        fn: The tool function; it returns its typed result or a ``CallToolResult``.
        name: The tool's name; ``fn.__name__`` by default.
        doc: The docstring; ``fn.__doc__`` by default.
        out_type: The structured result's type; by default ``fn``'s return annotation
            (``Annotated[CallToolResult, T]`` means ``T``).
        params: Annotations that replace those of the named parameters.
        fill: Text for the ``{name}`` placeholders of the docstring.
        **options: Passed to :meth:`MCPServer.add_tool` (``annotations``, ``title``...).
    """
    name = name or fn.__name__
    sig = inspect.signature(fn, eval_str=True)
    if params:
        sig = sig.replace(
            parameters=[
                p.replace(annotation=params[p.name]) if p.name in params else p
                for p in sig.parameters.values()
            ]
        )
    if out_type is None:
        out_type = sig.return_annotation
    if get_origin(out_type) is Annotated and get_args(out_type)[0] is CallToolResult:
        out_type = get_args(out_type)[1]  # the tool builds its CallToolResult itself
    adapter: TypeAdapter[Any] = TypeAdapter(out_type)

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> CallToolResult:
        result = await fn(*args, **kwargs)
        if isinstance(result, CallToolResult):
            return result
        return budget.tool_result(adapter.dump_python(result, mode="json", by_alias=True))

    wrapper.__signature__ = sig.replace(  # type: ignore[attr-defined]
        return_annotation=Annotated[CallToolResult, out_type]
    )
    paragraphs = inspect.cleandoc(doc if doc is not None else fn.__doc__ or "").split("\n\n")
    description = "\n\n".join(" ".join(p.split("\n")) for p in paragraphs)
    for key, text in (fill or {}).items():
        description = description.replace("{" + key + "}", text)
    app.add_tool(wrapper, name=name, description=description, **options)
    # The SDK keeps the registered tool in its manager (no public accessor); both fields are
    # read live ("reassigning them later takes effect on the next call").
    registered = app._tool_manager.get_tool(name)
    if registered is not None:
        registered.parameters = compact_schema(registered.parameters)
        metadata = registered.fn_metadata
        output = compact_schema(metadata.output_schema)
        if isinstance(output, dict):
            output.pop("description", None)  # the tool's description says what it returns
        metadata.output_schema = output
