"""Test support, not for production: an S3 server on loopback for tests of the S3 backend.

:func:`moto_server` starts moto's S3 server (``python -m moto.server``, the ``moto[server]``
distribution, which no extra of wsnapshot installs: a test environment brings it) in its own
process, on a free loopback port, creates the buckets asked for and stops the server when the
block ends. :class:`CutProxy` stands between a store and that server so a test can take the
bucket away and give it back. Both packages' suites (wsnapshot's and the MCP server's) use
them; nothing here is imported by wsnapshot itself, and moto is never imported in this
process (only its server is run).

Example (a pytest fixture)::

    with moto_server("my-bucket", log=tmp / "moto.log") as server:
        server.patch_environment(monkeypatch)
        store = SnapshotStore(ws, "s3://my-bucket/prefix", state_dir=tmp / "state")
"""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = ["MOTO_START_TRIES", "CutProxy", "EnvPatcher", "MotoServer", "moto_server"]

#: How many times :func:`moto_server` asks the new server whether it answers; each try waits
#: for a connection (or its refusal) and then up to 50 ms for the process to exit.
MOTO_START_TRIES = 600

#: The ``AWS_*`` variables a test's environment must not carry into the moto store: a session
#: token or a profile would be sent with (or replace) the test's credentials.
_UNSET = ("AWS_SESSION_TOKEN", "AWS_PROFILE")


class EnvPatcher(Protocol):
    """What :meth:`MotoServer.patch_environment` needs of a ``pytest.MonkeyPatch``."""

    def setenv(self, name: str, value: str) -> None:
        """Set the variable ``name`` to ``value``."""

    def delenv(self, name: str, raising: bool = ...) -> None:
        """Remove the variable ``name`` (no error when ``raising`` is false and it is unset)."""


@dataclass(frozen=True)
class MotoServer:
    """A running moto S3 server (from :func:`moto_server`).

    Attributes:
        url: Its endpoint, ``http://127.0.0.1:PORT``.
        log: The file holding its stdout and stderr.
    """

    url: str
    log: Path

    def environment(
        self,
        *,
        access_key_id: str = "testing",
        secret_access_key: str = "testing",  # noqa: S107 (moto takes any key: no credential)
        region: str = "us-east-1",
    ) -> dict[str, str | None]:
        """The ``AWS_*`` environment that points the S3 backend at this server.

        Args:
            access_key_id: ``AWS_ACCESS_KEY_ID`` (moto accepts any).
            secret_access_key: ``AWS_SECRET_ACCESS_KEY`` (a test that checks a secret is never
                shown passes a recognisable one).
            region: ``AWS_REGION``.

        Returns:
            Each variable and its value; ``None`` for a variable to remove
            (``AWS_SESSION_TOKEN``, ``AWS_PROFILE``).
        """
        env: dict[str, str | None] = {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": access_key_id,
            "AWS_SECRET_ACCESS_KEY": secret_access_key,
            "AWS_REGION": region,
        }
        env.update(dict.fromkeys(_UNSET))
        return env

    def patch_environment(self, patcher: EnvPatcher, **credentials: str) -> None:
        """Apply :meth:`environment` through ``patcher`` (a ``pytest.MonkeyPatch``).

        Args:
            patcher: Sets and removes variables, and undoes it later (``setenv``, ``delenv``).
            credentials: Passed to :meth:`environment` (``secret_access_key=...``).
        """
        for name, value in self.environment(**credentials).items():
            if value is None:
                patcher.delenv(name, raising=False)
            else:
                patcher.setenv(name, value)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_until_it_answers(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    for _ in range(MOTO_START_TRIES):
        if proc.poll() is not None:
            tail = log.read_text(encoding="utf-8", errors="replace")[-2000:]
            raise RuntimeError(f"moto exited with status {proc.returncode}: {tail}")
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=5).close()  # noqa: S310
            return
        except (urllib.error.URLError, ConnectionError):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(0.05)
    raise RuntimeError(f"moto did not answer on {url} after {MOTO_START_TRIES} tries")


@contextlib.contextmanager
def moto_server(*buckets: str, log: Path | None = None) -> Iterator[MotoServer]:
    """Run moto's S3 server on loopback for the duration of the block, with ``buckets`` created.

    Args:
        buckets: Buckets to create (empty) before the block starts.
        log: Where the server's output goes; a temporary file (removed afterwards) when
            ``None``.

    Yields:
        The server: its ``url`` and :meth:`MotoServer.environment`. The caller's environment
        is left unchanged.

    Raises:
        ModuleNotFoundError: moto is not installed (``pip install 'moto[server]'``).
        RuntimeError: The server exited, or never answered, before the block could start.
        urllib.error.URLError: A bucket could not be created.
    """
    if importlib.util.find_spec("moto") is None:
        raise ModuleNotFoundError(
            "wsnapshot.testing.moto_server needs moto's server: pip install 'moto[server]'",
            name="moto",
        )
    with contextlib.ExitStack() as stack:
        if log is None:
            log = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "moto.log"
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            _wait_until_it_answers(proc, url, log)
            for bucket in buckets:
                request = urllib.request.Request(f"{url}/{bucket}", method="PUT")  # noqa: S310
                urllib.request.urlopen(request, timeout=10).close()  # noqa: S310
            yield MotoServer(url=url, log=log)
        finally:
            proc.kill()
            proc.wait()


class CutProxy:
    """A TCP proxy on loopback in front of an S3 server, which a test can cut and restore.

    While cut, every connection (the open keep-alive ones included) is closed and new ones are
    closed at once: the bucket is unreachable. Point the store at :attr:`url` (its
    ``AWS_ENDPOINT_URL``).

    Args:
        target: The server's endpoint, ``http://HOST:PORT`` (:attr:`MotoServer.url`).

    Attributes:
        url: The proxy's endpoint, ``http://127.0.0.1:PORT``.
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
        """Make the bucket reachable again (new connections go through)."""
        self._up.set()

    def close(self) -> None:
        """Cut every connection and stop listening."""
        self.cut()
        self._listener.close()
