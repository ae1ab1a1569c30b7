"""Registering a tool with its docstring, dedented, as the description the model reads."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer

__all__ = ["tool"]

F = TypeVar("F", bound=Callable[..., Any])


def tool(app: MCPServer[Any], **options: Any) -> Callable[[F], F]:
    """Like ``@app.tool(**options)``, with the docstring cleaned (``inspect.cleandoc``) first."""

    def decorator(fn: F) -> F:
        app.add_tool(fn, description=inspect.cleandoc(fn.__doc__ or ""), **options)
        return fn

    return decorator
