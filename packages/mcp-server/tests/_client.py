"""Helpers to drive the real server process over stdio with the MCP SDK client."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

T = TypeVar("T")


def server_params(
    workspace: Path, snapshots: Path, *extra: str, env: dict[str, str] | None = None
) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "mcp_secure_sandbox",
            "--workspace",
            str(workspace),
            "--snapshots",
            str(snapshots),
            *extra,
        ],
        env=env,
    )


def with_session(
    workspace: Path, snapshots: Path, scenario: Callable[[ClientSession], Awaitable[T]], *extra: str
) -> T:
    """Start the server, initialize a session, run ``scenario`` in it, return its result."""

    async def main() -> T:
        async with (
            stdio_client(server_params(workspace, snapshots, *extra)) as (r, w),
            ClientSession(r, w) as s,
        ):
            await s.initialize()
            return await scenario(s)

    return anyio.run(main)


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; return its structured content."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} failed: {result.content}"
    assert result.structured_content is not None, f"{tool} returned no structured content"
    return dict(result.structured_content)


async def call_error(session: ClientSession, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail as a tool error; return the error text."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, f"{tool} unexpectedly succeeded: {result.structured_content}"
    return " ".join(getattr(c, "text", "") for c in result.content)


async def read_json(session: ClientSession, uri: str) -> Any:
    """Read a JSON resource and parse it."""
    result = await session.read_resource(uri)
    return json.loads(result.contents[0].text)  # type: ignore[union-attr]
