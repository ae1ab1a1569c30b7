"""Fixtures; helpers live in ``_helpers.py`` beside this file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from wsnapshot import SnapshotStore


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    d = tmp_path / "ws"
    d.mkdir()
    return d


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(ws: Path, store_dir: Path) -> SnapshotStore:
    return SnapshotStore(ws, store_dir, workers=1)
