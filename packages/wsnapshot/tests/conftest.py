"""Fixtures; helpers live in ``_helpers.py`` beside this file.

Modules marked ``both_backends`` run every test that takes the ``store`` fixture twice: on the
local backend and on the S3 backend, against a moto server on loopback that this session starts
once (per xdist worker) in its own process. Tests that also take ``store_dir`` look at the local
directory's layout and run on the local backend only.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from wsnapshot import SnapshotStore
from wsnapshot.testing import CutProxy, moto_server

#: The bucket the S3 tests use; each test has its own prefix in it.
BUCKET = "wsnapshot-tests"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    both = metafunc.definition.get_closest_marker("both_backends") is not None
    local_only = metafunc.definition.get_closest_marker("local_only") is not None
    if both and not local_only and "store_dir" not in metafunc.fixturenames:
        metafunc.parametrize("backend", ["local", "s3"])
    else:
        metafunc.parametrize("backend", ["local"])


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A moto S3 server on loopback with the bucket ``BUCKET``; the ``AWS_*`` environment set.

    The server is ``wsnapshot.testing.moto_server`` (the one home the MCP server's tests share).
    """
    pytest.importorskip("obstore", reason="the S3 backend's extra (wsnapshot[s3]) is missing")
    logs = tmp_path_factory.mktemp("moto") / "moto.log"
    with moto_server(BUCKET, log=logs) as server, pytest.MonkeyPatch.context() as mp:
        server.patch_environment(mp)
        yield server.url


@pytest.fixture
def s3_url(s3_endpoint: str) -> str:
    """A new, empty ``s3://`` store location (its own prefix in ``BUCKET``)."""
    return f"s3://{BUCKET}/t/{uuid.uuid4().hex}"


@pytest.fixture
def backend() -> str:
    """``local`` unless parametrised (see :func:`pytest_generate_tests`)."""
    return "local"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    d = tmp_path / "ws"
    d.mkdir()
    return d


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(ws: Path, tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> SnapshotStore:
    if backend == "s3":
        url = request.getfixturevalue("s3_url")
        return SnapshotStore(ws, url, workers=1, state_dir=tmp_path / "state")
    return SnapshotStore(ws, tmp_path / "store", workers=1)


def open_like(store: SnapshotStore, ws: Path | str, **kwargs: object) -> SnapshotStore:
    """Another store on ``store``'s location (a new state directory for an S3 one)."""
    if store.backend == "s3":
        state = Path(os.fspath(ws)).parent / f"state-{uuid.uuid4().hex[:8]}"
        return SnapshotStore(ws, store.store_dir, state_dir=state, **kwargs)  # type: ignore[arg-type]
    return SnapshotStore(ws, store.store_dir, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def cut(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CutProxy]:
    """The ``AWS_ENDPOINT_URL`` of the stores this test opens goes through a :class:`CutProxy`."""
    proxy = CutProxy(s3_endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    try:
        yield proxy
    finally:
        proxy.close()


#: Tests under ``tests/e2e/`` start real processes: the folder is their ``e2e`` mark.
E2E_DIR = Path(__file__).resolve().parent / "e2e"


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under ``tests/e2e/`` ``e2e`` (``tests/README.md`` states the rule)."""
    for item in items:
        if E2E_DIR in item.path.parents:
            item.add_marker(pytest.mark.e2e)
