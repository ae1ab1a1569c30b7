"""The run limits' defaults have one home, ``pysandbox.Limits``: the server takes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_secure_sandbox.settings import Settings, settings_from_args
from pysandbox import Limits

FIELDS = ("memory_bytes", "output_bytes", "file_size_bytes", "workspace_bytes", "workspace_files")


@pytest.mark.parametrize("name", FIELDS)
def test_the_server_default_is_pysandbox_s(name: str) -> None:
    settings = Settings(workspace=Path("ws"), snapshots=Path("snaps"))
    assert getattr(settings, name) == getattr(Limits(), name)
    assert getattr(settings_from_args([], {}), name) == getattr(Limits(), name)


def test_the_workspace_default_is_one_gib() -> None:
    assert Limits().workspace_bytes == 1024**3
    assert settings_from_args([], {}).workspace_bytes == 1024**3
