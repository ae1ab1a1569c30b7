from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator

import pytest

from pysandbox import EXECUTION_ENV, Sandbox
from sandbox_helpers import KERNEL, kernel_skip_reason


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
    """Refuse the suite's old mode switch, so a stale command line never runs warm unnoticed.

    The suite runs in the library's default execution mode: ``PYSANDBOX_EXECUTION=spawn``
    (pysandbox itself honours it, :func:`pysandbox.default_execution`) runs every
    ``Sandbox`` constructed without ``execution=`` in spawn mode; ``nox -s tests`` runs the
    suite once in each mode. ``tests/e2e/test_execution_mode.py`` checks the mode is the one asked.
    """
    if "PYSANDBOX_TEST_EXECUTION" in os.environ:
        raise pytest.UsageError(
            f"PYSANDBOX_TEST_EXECUTION is gone: set {EXECUTION_ENV}=spawn|warm instead"
        )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test marked ``kernel("landlock", ...)`` where a layer it names is missing."""
    for mark in item.iter_markers("kernel"):
        reason = kernel_skip_reason(mark.args)
        if reason is not None:
            pytest.skip(reason)


#: Tests under ``tests/e2e/`` start real processes: the folder is their ``e2e`` mark.
E2E_DIR = pathlib.Path(__file__).resolve().parent / "e2e"


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under ``tests/e2e/`` ``e2e`` (``tests/README.md`` states the rule)."""
    for item in items:
        if E2E_DIR in item.path.parents:
            item.add_marker(pytest.mark.e2e)
