"""The HTTP front sheds abuse (F09, O1, O2 of the 2026-12-01 review).

A real server with a 2 s request deadline and a cap of 16 connections. A slow request, in every
spelling (silent, partial request line, headers or body trickled, on a fresh or a kept-alive
connection), is closed within the deadline plus a generous margin; a flood of connections beyond
the cap keeps at most the cap open and authorised clients are still served; a tool call that
answers over an event stream for longer than the deadline is not cut.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest

from _client import over_http
from _http_server import start_server

# This regression starts real processes, so it is e2e too (tests/README.md).
pytestmark = pytest.mark.e2e

TOKEN = "abuse-token-" + "0123456789abcdef0123"
DEADLINE_S = 2.0
CAP = 16
#: A connection must be closed within the deadline plus this (generous: a loaded CI machine).
MARGIN_S = 5.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The port of a server with a token, a 2 s request deadline and a cap of 16 connections."""
    env = {
        "SANDBOX_HTTP_TOKEN": TOKEN,
        "SANDBOX_HTTP_REQUEST_TIMEOUT": str(DEADLINE_S),
        "SANDBOX_HTTP_MAX_CONNECTIONS": str(CAP),
    }
    proc, port, _ = start_server(tmp_path_factory.mktemp("abuse"), env)
    try:
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server closed its end (EOF or reset), reading any 408 it sent first."""
    while select.select([sock], [], [], 0)[0]:
        try:
            if sock.recv(4096) == b"":
                return True
        except OSError:
            return True
    return False


def _hold(sock: socket.socket, first: bytes, trickle: bytes, step_s: float = 0.2) -> float:
    """Send ``first``, then ``trickle`` a byte every ``step_s`` until the server closes.

    Returns:
        Seconds from the start until the server closed the connection, or ``inf`` when it was
        still open after the deadline plus the margin.
    """
    start = time.monotonic()
    try:
        sock.sendall(first)
        for i in range(int((DEADLINE_S + MARGIN_S) / step_s)):
            if _closed_by_server(sock):
                return time.monotonic() - start
            if trickle:
                sock.sendall(trickle[i % len(trickle) : i % len(trickle) + 1])
            time.sleep(step_s)
    except OSError:  # broken pipe or reset: the server closed
        return time.monotonic() - start
    return time.monotonic() - start if _closed_by_server(sock) else float("inf")


HEAD = (
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
    b"accept: application/json, text/event-stream\r\ncontent-length: 4000\r\n"
)
AUTH = f"authorization: Bearer {TOKEN}\r\n".encode()
ENDLESS_HEADER = b"x-slow: " + b"a" * 4000


@pytest.mark.parametrize(
    ("first", "trickle"),
    [
        pytest.param(b"", b"", id="silent"),
        pytest.param(b"POST /mc", b"", id="partial-request-line"),
        pytest.param(HEAD, b"", id="headers-unfinished"),
        pytest.param(b"", HEAD, id="request-byte-by-byte"),
        pytest.param(HEAD, ENDLESS_HEADER, id="one-header-trickled"),
        pytest.param(HEAD + AUTH + b"\r\n", b"{", id="authorised-body-trickled"),
        pytest.param(HEAD + b"\r\n", b" ", id="unauthorised-body-trickled"),
        pytest.param(
            b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /heal", b"", id="kept-alive"
        ),
        pytest.param(
            b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", HEAD, id="kept-alive-trickled"
        ),
    ],
)
@pytest.mark.slow
def test_a_slow_request_is_closed_at_the_deadline(
    server: int, first: bytes, trickle: bytes
) -> None:
    with _connect(server) as sock:
        elapsed = _hold(sock, first, trickle)
    assert elapsed < DEADLINE_S + MARGIN_S, "the server held a slow request past its deadline"


def test_an_unfinished_request_gets_408(server: int) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        sock.settimeout(DEADLINE_S + MARGIN_S)
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408 ")


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.mark.parametrize("partial", [b"", b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"])
def test_a_flood_beyond_the_cap_leaves_authorised_clients_served(
    server: int, partial: bytes
) -> None:
    flood = [_connect(server) for _ in range(3 * CAP)]
    try:
        for sock in flood:
            sock.sendall(partial)
        # the server's accept loop has seen them all once a request of ours is answered
        answer = httpx2.post(
            f"http://127.0.0.1:{server}/mcp",
            json=INIT,
            headers={**HEADERS, "authorization": f"Bearer {TOKEN}"},
            timeout=10,
        )
        held = sum(not _closed_by_server(sock) for sock in flood)
    finally:
        for sock in flood:
            sock.close()
    assert answer.status_code == 200
    assert "serverInfo" in answer.text
    assert held <= CAP - 1  # the cap, one of which the authorised client took


@pytest.mark.slow
def test_an_event_stream_longer_than_the_deadline_is_not_cut(server: int) -> None:
    seconds = 3 * DEADLINE_S

    async def scenario() -> dict[str, object]:
        async with over_http(f"http://127.0.0.1:{server}/mcp", TOKEN, mode="legacy") as session:
            code = f"import time\ntime.sleep({seconds})\nprint('slept')"
            result = await session.call_tool("run_sandbox_code", {"code": code, "timeout_sec": 30})
            return dict(result.structured_content or {})

    started = time.monotonic()
    out = anyio.run(scenario)
    assert out["stdout"] == "slept\n", out
    assert time.monotonic() - started >= seconds


def test_a_websocket_upgrade_is_not_accepted(server: int) -> None:
    with _connect(server) as sock:
        sock.sendall(
            b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            + AUTH
            + b"\r\n"
        )
        sock.settimeout(10)
        status_line = sock.recv(4096).split(b"\r\n", 1)[0]
    assert b" 101 " not in status_line
    assert status_line.startswith(b"HTTP/1.1 4")


def _no_token_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_")}


def _run_cli(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "mcp_secure_sandbox", "--workspace", str(tmp_path / "w")]
    cmd += ["--snapshots", str(tmp_path / "s"), "--transport", "streamable-http", *args]
    return subprocess.run(
        cmd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    "args",
    [
        pytest.param((), id="loopback"),
        pytest.param(("--host", "localhost"), id="localhost"),
        pytest.param(("--host", "::1"), id="ipv6-loopback"),
    ],
)
def test_no_token_without_the_flag_is_refused(tmp_path: Path, args: tuple[str, ...]) -> None:
    proc = _run_cli(tmp_path, _no_token_env(), *args)
    assert proc.returncode == 2, proc.stderr
    for needle in ("without a token", "--allow-unauthenticated-http", "SANDBOX_HTTP_TOKEN"):
        assert needle in proc.stderr
    assert "--token-file" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("host", "env"),
    [
        pytest.param("0.0.0.0", {}, id="any-flag"),  # noqa: S104 - the refusal is tested
        pytest.param("::", {}, id="any-v6-flag"),
        pytest.param("192.0.2.1", {}, id="address-flag"),
        pytest.param("0.0.0.0", {"SANDBOX_ALLOW_UNAUTHENTICATED_HTTP": "1"}, id="any-env"),  # noqa: S104
        pytest.param("127.0.0.2", {}, id="other-loopback-net"),
    ],
)
def test_no_token_on_a_non_loopback_host_is_refused_even_with_the_flag(
    tmp_path: Path, host: str, env: dict[str, str]
) -> None:
    args = ("--host", host) if env else ("--host", host, "--allow-unauthenticated-http")
    proc = _run_cli(tmp_path, {**_no_token_env(), **env}, *args)
    assert proc.returncode == 2, proc.stderr
    assert f"on {host} without a token" in proc.stderr
    assert "loopback" in proc.stderr


def test_the_removed_remote_opt_in_is_refused(tmp_path: Path) -> None:
    env = {**_no_token_env(), "SANDBOX_ALLOW_REMOTE_WITHOUT_TOKEN": "1"}
    proc = _run_cli(tmp_path, env, "--host", "0.0.0.0")  # noqa: S104 - the refusal is tested
    assert proc.returncode == 2
    assert "SANDBOX_ALLOW_REMOTE_WITHOUT_TOKEN is no longer supported" in proc.stderr


@pytest.mark.slow
def test_no_token_with_the_flag_is_served_with_a_warning(tmp_path: Path) -> None:
    proc, port, log = start_server(tmp_path, {}, "--allow-unauthenticated-http")
    try:

        async def scenario() -> str:
            async with over_http(f"http://127.0.0.1:{port}/mcp", mode="legacy") as session:
                content = (await session.read_resource("sandbox://status")).contents[0]
                return str(getattr(content, "text", ""))

        status = json.loads(anyio.run(scenario))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert status["settings"]["http_auth"] is False
    assert status["settings"]["allow_unauthenticated_http"] is True
    [warning] = status["warnings"]
    assert "WITHOUT a token" in warning
    assert "every local user" in warning
    assert f"WARNING mcp_secure_sandbox.http: {warning}" in log.read_text()


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_a_port_in_use_is_refused_before_serving(tmp_path: Path, host: str) -> None:
    """New user: the server logged "serving", then uvicorn exited 3 with a bind error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as taken:
        taken.bind((host, 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**_no_token_env(), "SANDBOX_HTTP_TOKEN": TOKEN}
        proc = _run_cli(tmp_path, env, "--host", host, "--port", str(port))
    assert proc.returncode == 2, proc.stderr
    assert f"port {port} on {host} is already in use" in proc.stderr
    assert "choose another --port" in proc.stderr
    assert "serving" not in proc.stderr
    assert "Traceback" not in proc.stderr
    # Nothing this start created is left behind.
    assert not (tmp_path / "w").exists() and not (tmp_path / "s").exists()
