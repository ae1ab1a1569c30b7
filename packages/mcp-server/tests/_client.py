"""The one client bootstrap of the tests and the benchmarks: the SDK's ``mcp.Client``, connected
in process to :func:`~mcp_secure_sandbox.server.create_server` (:func:`in_process`), to a real
server process over stdio (:func:`over_stdio`), both from the server's own flags, or to a server
over streamable HTTP with a bearer token (:func:`over_http`).

``bench/``, ``harness/`` and ``load/`` put ``tests/`` on ``sys.path`` and import this module
(:func:`stdio_params`, :func:`connect_stdio`, :func:`over_http`); ``examples/demo.py`` stays
self-contained, as a user reads it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, TextIO, TypeVar

import anyio
import httpx2
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

T = TypeVar("T")

#: How ``mcp.Client`` connects: the SDK's default (``"auto"``: ``server/discover``, and for an
#: in-process server a direct dispatch) and ``"legacy"`` (the ``initialize`` handshake).
Mode = Literal["auto", "legacy"]
MODES: tuple[Mode, ...] = ("auto", "legacy")


def server_argv(workspace: Path, snapshots: Path, *flags: str) -> list[str]:
    """The server's command-line arguments (without the program): the two directories, then
    ``flags`` as a user would type them."""
    return ["--workspace", str(workspace), "--snapshots", str(snapshots), *flags]


def stdio_params(
    workspace: Path, snapshots: Path, *flags: str, env: Mapping[str, str] | None = None
) -> StdioServerParameters:
    """Parameters that start ``python -m mcp_secure_sandbox`` with :func:`server_argv`.

    Args:
        workspace: The server's ``--workspace``.
        snapshots: Its ``--snapshots``.
        flags: More of its flags, e.g. ``("--max-timeout", "30")``.
        env: The process's whole environment (the SDK's default set when ``None``).
    """
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_secure_sandbox", *server_argv(workspace, snapshots, *flags)],
        env=None if env is None else dict(env),
    )


def in_process(
    workspace: Path,
    snapshots: Path,
    scenario: Callable[[Client], Awaitable[T]],
    *flags: str,
    mode: Mode = "auto",
    **client: Any,
) -> T:
    """Run ``scenario`` with ``mcp.Client`` connected in process to a server started with
    ``flags``; return what it returns.

    The flags are parsed by the server's own ``settings_from_args`` (with an empty environment:
    no ``SANDBOX_*`` variable of the host leaks in), the directories prepared as the console
    script does, and the server built by ``create_server``; its lifespan runs, and its state is
    closed, within the ``async with``.

    Args:
        workspace: The server's ``--workspace``.
        snapshots: Its ``--snapshots``.
        scenario: What the client does.
        flags: More of the server's flags.
        mode: ``mcp.Client``'s connect mode (:data:`MODES`).
        client: More keyword arguments for ``mcp.Client`` (``message_handler``...).

    Raises:
        ConfigError: The flags are refused, as the console script would refuse them.
    """
    from mcp_secure_sandbox.server import create_server
    from mcp_secure_sandbox.settings import prepare_directories, settings_from_args

    settings = prepare_directories(
        settings_from_args(server_argv(workspace, snapshots, *flags), {})
    )

    async def main() -> T:
        app, _state = create_server(settings)
        async with Client(app, mode=mode, **client) as session:
            return await scenario(session)

    return anyio.run(main)


def connect_stdio(
    params: StdioServerParameters,
    *,
    errlog: TextIO | None = None,
    mode: Mode = "auto",
    **client: Any,
) -> Client:
    """``mcp.Client`` over the stdio of the process ``params`` start, to enter with ``async with``.

    Args:
        params: The command (:func:`stdio_params` for the server's own).
        errlog: Where the process's stderr goes (the SDK's default, this process's stderr, when
            ``None``).
        mode: ``mcp.Client``'s connect mode.
        client: More keyword arguments for ``mcp.Client`` (``message_handler``...).
    """
    transport = stdio_client(params) if errlog is None else stdio_client(params, errlog=errlog)
    return Client(transport, mode=mode, **client)


def over_stdio(
    workspace: Path,
    snapshots: Path,
    scenario: Callable[[Client], Awaitable[T]],
    *flags: str,
    mode: Mode = "auto",
    env: Mapping[str, str] | None = None,
) -> T:
    """As :func:`in_process`, with a real ``python -m mcp_secure_sandbox`` process over stdio
    (for what only a process shows: the stdio framing, signals, the console script)."""

    async def main() -> T:
        params = stdio_params(workspace, snapshots, *flags, env=env)
        async with connect_stdio(params, mode=mode) as s:
            return await scenario(s)

    return anyio.run(main)


@asynccontextmanager
async def over_http(
    url: str,
    token: str | None = None,
    *,
    timeout: float | httpx2.Timeout = 60,
    mode: Mode = "auto",
    **http: Any,
) -> AsyncIterator[Client]:
    """``mcp.Client`` connected to ``url`` (``http://HOST:PORT/mcp``) over streamable HTTP.

    Args:
        url: The server's MCP endpoint.
        token: The bearer token sent with every request (none when ``None``).
        timeout: The HTTP client's timeout, in seconds (or an ``httpx2.Timeout``).
        mode: ``mcp.Client``'s connect mode.
        http: More keyword arguments for ``httpx2.AsyncClient`` (``limits``...).
    """
    headers = {} if token is None else {"authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout, **http) as transport,
        Client(streamable_http_client(url, http_client=transport), mode=mode) as client,
    ):
        yield client


async def call(session: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; return its structured content."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} failed: {result.content}"
    assert result.structured_content is not None, f"{tool} returned no structured content"
    return dict(result.structured_content)


async def call_error(session: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail as a tool error; return the error text."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, f"{tool} unexpectedly succeeded: {result.structured_content}"
    return " ".join(getattr(c, "text", "") for c in result.content)


async def read_json(session: Client, uri: str) -> Any:
    """Read a JSON resource and parse it."""
    result = await session.read_resource(uri)
    return json.loads(result.contents[0].text)  # type: ignore[union-attr]
