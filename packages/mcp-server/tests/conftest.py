from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """A fresh workspace and snapshot directory."""
    workspace = tmp_path / "workspace"
    snapshots = tmp_path / "snapshots"
    workspace.mkdir()
    return workspace, snapshots
