"""A real streamable-HTTP server process on a free loopback port, for the HTTP regressions."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(
    tmp: Path, extra_env: dict[str, str], *args: str
) -> tuple[subprocess.Popen[bytes], int, Path]:
    """Start the server on a free loopback port; wait until ``/healthz`` answers."""
    port = _free_port()
    log = tmp / "server.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_")}
    env.update(extra_env)
    cmd = [sys.executable, "-m", "mcp_secure_sandbox", "--workspace", str(tmp / "ws")]
    cmd += ["--snapshots", str(tmp / "snap"), "--transport", "streamable-http"]
    cmd += ["--port", str(port), *args]
    (tmp / "ws").mkdir()
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc, port, log
        except httpx2.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the HTTP server did not come up:\n{log.read_text()}")
        time.sleep(0.2)
