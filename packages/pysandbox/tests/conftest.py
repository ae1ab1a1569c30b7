from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator

import pytest

from pysandbox import Sandbox
from sandbox_helpers import KERNEL


@pytest.fixture
def workspace(tmp_path: pathlib.Path) -> pathlib.Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def sandbox(workspace: pathlib.Path) -> Iterator[Sandbox]:
    require = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()
    with Sandbox(workspace, require=require) as sb:
        yield sb


@pytest.fixture
def python_only(workspace: pathlib.Path) -> Iterator[Sandbox]:
    with Sandbox(workspace, require=(), kernel_layers=False) as sb:
        yield sb


def pytest_configure(config: pytest.Config) -> None:
    """``PYSANDBOX_TEST_EXECUTION=spawn`` runs the whole suite with spawn execution.

    Warm execution is the default; ``nox -s tests`` runs the suite once in each mode.
    """
    mode = os.environ.get("PYSANDBOX_TEST_EXECUTION")
    if mode:
        defaults = Sandbox.__init__.__kwdefaults__
        assert defaults is not None
        defaults["execution"] = mode
