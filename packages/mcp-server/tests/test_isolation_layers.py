"""A missing kernel layer: a warning at start-up, or exit 2 when required; refusals as tool text.

A blocked layer is simulated by patching pysandbox's kernel probe (in this process: the server is
built with ``create_server`` and called through ``mcp.Client(app)``, whose lifespan gives the
tools the server's state).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult

from mcp_secure_sandbox.__main__ import main
from mcp_secure_sandbox.server import create_server
from mcp_secure_sandbox.settings import ConfigError, Settings, prepare_directories
from pysandbox import IsolationUnavailable, _probe

KERNEL = _probe.probe_kernel()
BLOCKED = "blocked for the test"
needs_kernel = pytest.mark.kernel("landlock", "seccomp")  # conftest skips where one is missing


@pytest.fixture
def landlock_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = dataclasses.replace(KERNEL, landlock_abi=0, landlock_reason=BLOCKED)
    monkeypatch.setattr(_probe, "probe_kernel", lambda: blocked)
    monkeypatch.setattr(_probe, "_verified", {})


def _error(result: CallToolResult) -> str:
    """The text of a tool error (the call must have failed)."""
    assert result.is_error, result.structured_content
    return " ".join(getattr(c, "text", "") for c in result.content)


def _settings(dirs: tuple[Path, Path], **changes: Any) -> Settings:
    workspace, snapshots = dirs
    return prepare_directories(
        Settings(workspace=workspace, snapshots=snapshots, **changes), environ={}
    )


@needs_kernel
@pytest.mark.usefixtures("landlock_blocked")
def test_a_required_layer_that_is_missing_stops_the_start(dirs: tuple[Path, Path]) -> None:
    with pytest.raises(ConfigError) as info:
        create_server(_settings(dirs))
    message = str(info.value)
    expected = f"--require-layers: the landlock layer is unavailable here ({BLOCKED})"
    assert message.startswith(expected)
    assert "SANDBOX_REQUIRE_LAYERS" in message
    workspace, snapshots = dirs
    assert main(["--workspace", str(workspace), "--snapshots", str(snapshots)]) == 2


@needs_kernel
@pytest.mark.usefixtures("landlock_blocked")
def test_a_missing_layer_that_is_not_required_is_a_warning(
    dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="mcp_secure_sandbox"):
        app, state = create_server(_settings(dirs, require_layers=("seccomp",)))
    try:
        assert [r.getMessage() for r in caplog.records] == [
            f"isolation layer landlock is unavailable ({BLOCKED}); runs go without it "
            "(not in --require-layers)"
        ]

        # The other layer still works and is used.
        async def scenario() -> None:
            async with Client(app) as client:
                result = await client.call_tool("run_sandbox_code", {"code": "print(6 * 7)"})
                content = result.structured_content
                assert content is not None
                assert (content["status"], content["stdout"]) == ("ok", "42\n")
                # Run results no longer list layers (sandbox://status does): ask the sandbox.
                capabilities = state.sandbox.capabilities()
                assert capabilities.layer("seccomp").active
                assert not capabilities.layer("landlock").active

        anyio.run(scenario)
    finally:
        state.close()


def test_a_refusal_reaches_the_client_as_the_tools_text(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, state = create_server(_settings(dirs, require_layers=()))
    refusal = IsolationUnavailable(("landlock",), {"landlock": BLOCKED})

    async def refuse(code: str, *, timeout: float | None = None) -> None:
        raise refusal

    monkeypatch.setattr(state.sandbox, "arun", refuse)

    async def scenario() -> str:
        async with Client(app) as client:
            return _error(await client.call_tool("run_sandbox_code", {"code": "print(1)"}))

    try:
        text = anyio.run(scenario)
    finally:
        state.close()
    assert text == (
        "Error executing tool run_sandbox_code: the sandbox refused to run: required isolation "
        f"layer(s) unavailable (landlock: {BLOCKED}). The server requires them by "
        "--require-layers (SANDBOX_REQUIRE_LAYERS); an operator can make the layer available, "
        "or list fewer layers (none: Python-level isolation only, unsafe)."
    )


def test_server_writes_and_restores_invalidate_the_workspace_manifest(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, state = create_server(_settings(dirs, require_layers=()))
    calls: list[str] = []
    monkeypatch.setattr(state.sandbox, "invalidate_workspace_manifest", lambda: calls.append("x"))

    async def scenario() -> None:
        async with Client(app) as client:
            await client.call_tool("write_workspace_file", {"path": "a.txt", "content": "1"})
            assert calls == ["x"]
            snap = await client.call_tool("create_state_snapshot", {})
            snapshot_id = snap.structured_content["id"]
            await client.call_tool("write_workspace_file", {"path": "a.txt", "content": "2"})
            await client.call_tool("restore_state_snapshot", {"snapshot_id": snapshot_id})
            assert calls == ["x", "x", "x"]

    try:
        anyio.run(scenario)
    finally:
        state.close()


def test_a_restore_while_a_run_is_alive_is_busy_and_changes_nothing(
    dirs: tuple[Path, Path],
) -> None:
    app, state = create_server(_settings(dirs, require_layers=(), admission_wait_s=0.2))
    workspace = dirs[0]

    async def scenario() -> str:
        async with Client(app) as client:
            await client.call_tool("write_workspace_file", {"path": "a.txt", "content": "1"})
            snap = await client.call_tool("create_state_snapshot", {})
            snapshot_id = snap.structured_content["id"]
            await client.call_tool("write_workspace_file", {"path": "a.txt", "content": "2"})
            assert state.sandbox.coordinator.enter_run()  # a run whose process is still alive
            try:
                refused = await client.call_tool(
                    "restore_state_snapshot", {"snapshot_id": snapshot_id}
                )
                assert (workspace / "a.txt").read_text() == "2"  # the restore did not start
            finally:
                state.sandbox.coordinator.leave_run()
            await client.call_tool("restore_state_snapshot", {"snapshot_id": snapshot_id})
            assert (workspace / "a.txt").read_text() == "1"
            return _error(refused)

    try:
        message = anyio.run(scenario)
    finally:
        state.close()
    assert message == (
        "Error executing tool restore_state_snapshot: busy, retry: a run's processes are still "
        "being stopped; the restore did not start (call again in a few seconds)"
    )
