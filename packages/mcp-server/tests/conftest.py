from __future__ import annotations

from pathlib import Path

import pytest

from _client import MODES, Mode


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """A fresh workspace and snapshot directory."""
    workspace = tmp_path / "workspace"
    snapshots = tmp_path / "snapshots"
    workspace.mkdir()
    return workspace, snapshots


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> Mode:
    """``mcp.Client``'s connect mode: the SDK's default (``auto``) and ``legacy``, one test each."""
    mode: Mode = request.param
    return mode


#: Tests under ``tests/e2e/`` start real processes: the folder is their ``e2e`` mark.
E2E_DIR = Path(__file__).resolve().parent / "e2e"


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under ``tests/e2e/`` ``e2e`` (``tests/README.md`` states the rule)."""
    for item in items:
        if E2E_DIR in item.path.parents:
            item.add_marker(pytest.mark.e2e)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test marked ``kernel("landlock", "seccomp")`` where a layer it names is missing.

    Raises:
        pytest.UsageError: A name that is not a kernel layer (a typo would never skip).
    """
    layers = [layer for mark in item.iter_markers("kernel") for layer in mark.args]
    if not layers:
        return
    from pysandbox import _probe

    kernel = _probe.probe_kernel()
    have = {"landlock": kernel.landlock_abi >= 1, "seccomp": kernel.seccomp}
    unknown = [layer for layer in layers if layer not in have]
    if unknown:
        raise pytest.UsageError(f"pytest.mark.kernel takes {sorted(have)}, not {unknown}")
    if not all(have[str(layer)] for layer in layers):
        pytest.skip("kernel layers unavailable")
