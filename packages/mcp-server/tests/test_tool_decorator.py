"""Tools as module-level functions with one declarative decorator (``tools/_tool.py``).

Every declared tool is importable and callable outside MCP; what the decorator declares
(metrics, admission and the workspace gate mode, the lifespan state) is observed through
``mcp.Client(app)`` in process, and misuse is refused with a message saying what to do.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp import Client
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

from datavalidate import JsonReport
from mcp_secure_sandbox import _schemas
from mcp_secure_sandbox.server import create_server
from mcp_secure_sandbox.settings import prepare_directories, settings_from_args
from mcp_secure_sandbox.state import ServerState
from mcp_secure_sandbox.tools import TOOLS
from mcp_secure_sandbox.tools._tool import (
    Admission,
    admitted,
    note,
    register_tools,
    spec_of,
    state_of,
    tool,
)
from wsnapshot import RestoreReport

T = TypeVar("T")


def _serve(
    dirs: tuple[Path, Path],
    flags: tuple[str, ...],
    body: Callable[[Client, ServerState], Awaitable[T]],
) -> T:
    workspace, snapshots = dirs
    settings = prepare_directories(
        settings_from_args(
            ["--workspace", str(workspace), "--snapshots", str(snapshots), *flags], {}
        )
    )

    async def main() -> T:
        app, state = create_server(settings)
        async with Client(app) as client:
            return await body(client, state)

    return anyio.run(main)


def test_every_tool_is_a_declared_module_level_function(
    dirs: tuple[Path, Path],
) -> None:
    async def listed(client: Client, _: ServerState) -> list[str]:
        return [t.name for t in (await client.list_tools()).tools]

    names = _serve(dirs, (), listed)
    declared = {fn.__name__ for fn in TOOLS}
    assert set(names) == declared
    assert len(declared) == len(TOOLS) == 16
    for fn in TOOLS:
        module = inspect.getmodule(fn)
        assert module is not None and getattr(module, fn.__name__) is fn
        assert "<locals>" not in fn.__qualname__, fn.__qualname__
        assert spec_of(fn).name == fn.__name__


def test_a_tool_called_directly_outside_mcp(dirs: tuple[Path, Path]) -> None:
    """The module-level function makes the whole call with a context holding the state."""
    from mcp_secure_sandbox.tools.snapshots import list_state_snapshots
    from mcp_secure_sandbox.tools.workspace import write_workspace_file

    async def direct(_: Client, state: ServerState) -> tuple[Any, Any]:
        request: ServerRequestContext[Any, Any] = ServerRequestContext(
            session=None,  # type: ignore[arg-type]  # no progress is sent: nothing waits
            lifespan_context=state,
            protocol_version="2025-06-18",
            method="tools/call",
        )
        ctx: Context[Any, Any] = Context(request_context=request)
        written = await write_workspace_file("a.txt", "abc", ctx)
        listed = await list_state_snapshots(ctx)
        return written, listed

    (written, listed), counted = anyio.run(lambda: _run_direct(dirs, direct))
    assert written.structured_content == {"path": "a.txt", "bytes_written": 3}
    assert listed.structured_content == {"snapshots": [], "count": 0}
    assert (dirs[0] / "a.txt").read_bytes() == b"abc"
    # The decorator's metrics counted both calls under their names (made after each call).
    assert counted["write_workspace_file"]["calls"] == 1
    assert counted["list_state_snapshots"]["calls"] == 1


async def _run_direct(
    dirs: tuple[Path, Path], body: Callable[[Client, ServerState], Awaitable[T]]
) -> tuple[T, dict[str, Any]]:
    """``body``'s result and the per-tool counters after it."""
    workspace, snapshots = dirs
    settings = prepare_directories(
        settings_from_args(["--workspace", str(workspace), "--snapshots", str(snapshots)], {})
    )
    app, state = create_server(settings)
    async with Client(app) as client:
        result = await body(client, state)
        await anyio.sleep(0)  # the accounting runs once the call's task yields
        return result, state.metrics.snapshot()["tools"]


def test_the_declared_admission_holds_the_workspace_gate(dirs: tuple[Path, Path]) -> None:
    """With the workspace held alone, calls declared exclusive wait and are answered busy;
    a diff of two snapshots (no workspace, by its arguments) and unadmitted calls go on."""

    async def held(client: Client, state: ServerState) -> dict[str, tuple[bool, str]]:
        created = await client.call_tool("create_state_snapshot", {})
        assert created.structured_content is not None
        sid = created.structured_content["id"]
        calls = {
            "write_workspace_file": {"path": "x.txt", "content": "x"},
            "create_state_snapshot": {},
            "restore_state_snapshot": {"snapshot_id": sid},
            "diff_state_snapshots": {"snapshot_id": sid},
            "diff_state_snapshots/other": {"snapshot_id": sid, "other_id": sid},
            "list_workspace_files": {},
            "list_state_snapshots": {},
        }
        seen: dict[str, tuple[bool, str]] = {}
        async with state.admission.admit(None, "the test", 5.0, workspace="exclusive"):
            for key, arguments in calls.items():
                result = await client.call_tool(key.split("/")[0], arguments)
                text = result.content[0].text if result.content[0].type == "text" else ""
                seen[key] = (bool(result.is_error), text)
        return seen

    seen = _serve(dirs, ("--admission-wait", "0.2"), held)
    for name in ("write_workspace_file", "create_state_snapshot", "restore_state_snapshot"):
        failed, text = seen[name]
        assert failed and f"busy, retry: {name} waited 0.2 s for the workspace" in text, text
    failed, text = seen["diff_state_snapshots"]
    assert failed and "busy, retry: diff_state_snapshots waited 0.2 s" in text, text
    for name in ("diff_state_snapshots/other", "list_workspace_files", "list_state_snapshots"):
        assert seen[name][0] is False, seen[name]
    assert not (dirs[0] / "x.txt").exists()


def test_a_server_whose_lifespan_yields_no_state_fails_the_call(dirs: tuple[Path, Path]) -> None:
    """A programming error: the client gets the SDK's generic tool error, the server's log
    the reason (:func:`state_of`, below)."""
    workspace, snapshots = dirs
    settings = prepare_directories(
        settings_from_args(["--workspace", str(workspace), "--snapshots", str(snapshots)], {})
    )
    from mcp_secure_sandbox.tools.snapshots import list_state_snapshots

    async def main() -> str:
        app: MCPServer[Any] = MCPServer("bare")  # the SDK's default lifespan: no state
        register_tools(app, settings, [list_state_snapshots])
        async with Client(app) as client:
            result = await client.call_tool("list_state_snapshots", {})
            assert result.is_error
            return result.content[0].text if result.content[0].type == "text" else ""

    assert anyio.run(main) == "Error executing tool list_state_snapshots"


_ANNOTATIONS = ToolAnnotations(title="t", read_only_hint=True)


def test_the_decorator_refuses_what_it_cannot_serve() -> None:
    def not_async(ctx: Context) -> None:
        """Not a coroutine function."""

    async def no_context(x: int) -> int:
        """No Context parameter."""
        return x

    with pytest.raises(TypeError, match="a tool function is async"):
        tool(annotations=_ANNOTATIONS)(not_async)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"add a `ctx: Context` parameter"):
        tool(annotations=_ANNOTATIONS)(no_context)
    with pytest.raises(TypeError, match="is not declared with @tool"):
        spec_of(no_context)


def test_outcome_and_admission_helpers_outside_a_call_are_refused() -> None:
    with pytest.raises(RuntimeError, match="from a tool declared with @tool"):
        note(status="ok")

    async def enter() -> None:
        async with admitted():
            pass

    with pytest.raises(RuntimeError, match=r"@tool\(admit=\.\.\.\)"):
        anyio.run(enter)


def test_state_of_names_a_foreign_lifespan() -> None:
    request: ServerRequestContext[Any, Any] = ServerRequestContext(
        session=None,  # type: ignore[arg-type]
        lifespan_context={},
        protocol_version="2025-06-18",
        method="tools/call",
    )
    with pytest.raises(RuntimeError, match="not a ServerState"):
        state_of(Context(request_context=request))


def test_admission_modes_are_declared_per_tool() -> None:
    from mcp_secure_sandbox.tools import snapshots, workspace

    diff = spec_of(snapshots.diff_state_snapshots).admit
    assert diff is not None and diff.kind == "snapshot" and callable(diff.workspace)
    assert diff.workspace({"other_id": ""}) == "exclusive"
    assert diff.workspace({"other_id": "x"}) is None
    write = spec_of(workspace.write_workspace_file)
    assert write.admit == Admission(None, workspace="exclusive", consistent=True)
    assert write.admit_around is False
    assert spec_of(snapshots.list_state_snapshots).admit is None
    assert spec_of(snapshots.restore_state_snapshot).after is not None


def test_library_fields_derive_names_and_types_from_the_dataclass() -> None:
    fields = _schemas.library_fields(RestoreReport)
    assert list(fields)[:3] == ["snapshot_id", "deleted", "rewritten"]
    assert fields["deleted"] == list[str]  # tuple[str, ...] published as a JSON array
    assert fields["unchanged"] is int
    chosen = _schemas.library_fields(JsonReport, ("truncated", "valid"), types={"valid": str})
    assert chosen == {"truncated": bool, "valid": str}  # a property: its return type
    with pytest.raises(KeyError, match="JsonReport has no field or property 'nope'"):
        _schemas.library_fields(JsonReport, ("nope",))
    run = _schemas.RunOutput.__annotations__
    assert list(run)[: len(_schemas.RUN_FIELDS)] == list(_schemas.RUN_FIELDS)
    assert run["status"] is str and run["files_omitted"] is int
