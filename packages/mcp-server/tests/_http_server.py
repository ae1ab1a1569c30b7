"""A real streamable-HTTP server process on a free loopback port (``tests/e2e/test_http_e2e.py``
and the HTTP regressions): the one place a test starts the server over HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest

from _client import server_argv


def free_port() -> int:
    """A loopback TCP port free at the time of the call."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def launch(
    workspace: Path, snapshots: Path, log: Path, env: Mapping[str, str], *flags: str
) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``python -m mcp_secure_sandbox`` over streamable HTTP on a free port, its stdout and
    stderr into ``log``; wait until ``/healthz`` answers (at most 60 s, a guard against a server
    that never comes up, which fails the test with the log).

    Args:
        workspace: Its ``--workspace``.
        snapshots: Its ``--snapshots``.
        log: The file its output goes to.
        env: Its whole environment.
        flags: More of its flags.

    Returns:
        The process and its port.
    """
    port = free_port()
    cmd = [sys.executable, "-m", "mcp_secure_sandbox", *server_argv(workspace, snapshots)]
    cmd += ["--transport", "streamable-http", "--port", str(port), *flags]
    with log.open("w") as err:
        proc = subprocess.Popen(
            cmd, env=dict(env), stdin=subprocess.DEVNULL, stdout=err, stderr=err
        )
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc, port
        except httpx2.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait(timeout=30)
            pytest.fail(f"the HTTP server did not come up:\n{log.read_text()}")
        time.sleep(0.2)


@contextmanager
def serving(
    workspace: Path, snapshots: Path, log: Path, env: Mapping[str, str], *flags: str
) -> Iterator[str]:
    """:func:`launch`, then yield the server's base URL (``http://127.0.0.1:PORT``); the
    server is terminated on the way out."""
    proc, port = launch(workspace, snapshots, log, env, *flags)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def start_server(
    tmp: Path, extra_env: dict[str, str], *args: str
) -> tuple[subprocess.Popen[bytes], int, Path]:
    """:func:`launch` in ``tmp`` (``ws``, ``snap``, ``server.log``) with the environment
    without ``SANDBOX_*`` variables plus ``extra_env``: the process, its port, its log."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_")}
    env.update(extra_env)
    (tmp / "ws").mkdir()
    log = tmp / "server.log"
    proc, port = launch(tmp / "ws", tmp / "snap", log, env, *args)
    return proc, port, log
