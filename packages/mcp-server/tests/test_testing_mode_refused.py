"""The server refuses to start in a process that has pysandbox's testing-only variable set."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_secure_sandbox.server import create_server
from mcp_secure_sandbox.settings import ConfigError, Settings, prepare_directories


@pytest.mark.parametrize("value", ["1", "0", ""])
def test_testing_kernel_only_variable_refuses_start(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    workspace, snapshots = dirs
    settings = prepare_directories(Settings(workspace=workspace, snapshots=snapshots), environ={})
    monkeypatch.setenv("PYSANDBOX_TESTING_KERNEL_ONLY", value)
    with pytest.raises(ConfigError, match="PYSANDBOX_TESTING_KERNEL_ONLY is set"):
        create_server(settings)


def test_without_the_variable_the_server_builds(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, snapshots = dirs
    settings = prepare_directories(Settings(workspace=workspace, snapshots=snapshots), environ={})
    monkeypatch.delenv("PYSANDBOX_TESTING_KERNEL_ONLY", raising=False)
    _server, state = create_server(settings)
    state.close()
