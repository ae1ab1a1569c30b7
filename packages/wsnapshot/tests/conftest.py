"""Fixtures; helpers live in ``_helpers.py`` beside this file.

Modules marked ``both_backends`` run every test that takes the ``store`` fixture twice: on the
local backend and on the S3 backend, against a moto server on loopback that this session starts
once (per xdist worker) in its own process. Tests that also take ``store_dir`` look at the local
directory's layout and run on the local backend only.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from wsnapshot import SnapshotStore

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A moto S3 server on loopback with the bucket ``BUCKET``; the ``AWS_*`` environment set."""
    pytest.importorskip("obstore", reason="the S3 backend's extra (wsnapshot[s3]) is missing")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    logs = tmp_path_factory.mktemp("moto") / "moto.log"
    with logs.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        for _ in range(600):  # until it answers (each try waits for a connection or a refusal)
            if proc.poll() is not None:
                pytest.fail(f"moto exited: {logs.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(url + "/moto-api/", timeout=5).close()  # noqa: S310
                break
            except (urllib.error.URLError, ConnectionError):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(0.05)
        request = urllib.request.Request(f"{url}/{BUCKET}", method="PUT")  # noqa: S310
        urllib.request.urlopen(request, timeout=10).close()  # noqa: S310
        env = {
            "AWS_ENDPOINT_URL": url,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
        }
        with pytest.MonkeyPatch.context() as mp:
            for key, value in env.items():
                mp.setenv(key, value)
            mp.delenv("AWS_SESSION_TOKEN", raising=False)
            mp.delenv("AWS_PROFILE", raising=False)
            yield url
    finally:
        proc.kill()
        proc.wait()


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


class Cut:
    """A TCP proxy on loopback in front of the moto server, which a test can cut and restore.

    While cut, every connection (the open keep-alive ones included) is closed and new ones are
    closed at once: the bucket is unreachable. Attributes: ``url``, the proxy's endpoint.
    """

    def __init__(self, target: str) -> None:
        host, _, port = target.removeprefix("http://").partition(":")
        self._target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._up = threading.Event()
        self._up.set()
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._up.is_set():
                client.close()
                continue
            upstream = socket.create_connection(self._target)
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def cut(self) -> None:
        """Make the bucket unreachable (now, for the open connections too)."""
        self._up.clear()
        with self._lock:
            for s in self._open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self._open.clear()

    def restore(self) -> None:
        """Make it reachable again."""
        self._up.set()

    def close(self) -> None:
        self.cut()
        self._listener.close()


@pytest.fixture
def cut(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cut]:
    """The ``AWS_ENDPOINT_URL`` of the stores this test opens goes through a :class:`Cut`."""
    proxy = Cut(s3_endpoint)
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
