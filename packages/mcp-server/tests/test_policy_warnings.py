"""Extending the allow-list with a module that reaches the system is logged (astguard decides)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mcp_secure_sandbox.settings import Settings, prepare_directories
from mcp_secure_sandbox.state import ServerState


def test_extra_modules_that_reach_the_system_are_warned_about(
    dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    workspace, snapshots = dirs
    settings = prepare_directories(
        Settings(
            workspace=workspace,
            snapshots=snapshots,
            extra_modules=("os.path", "json", "logging.handlers", "ipaddress", "socket"),
        ),
        environ={},
    )
    with caplog.at_level(logging.WARNING, logger="mcp_secure_sandbox"):
        state = ServerState(settings)
    try:
        warned = [r.getMessage().split(":")[0] for r in caplog.records]
        assert warned == [
            "--extra-modules os.path",
            "--extra-modules logging.handlers",
            "--extra-modules socket",
        ]
        assert state.policy.allowed_modules >= {"os.path", "json", "ipaddress", "socket"}
    finally:
        state.close()
