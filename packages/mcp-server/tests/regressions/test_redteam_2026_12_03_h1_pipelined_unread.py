"""A peer that pipelines requests and never reads its answers cannot hold a slot (H1, 2026-12-03).

The finding: one client opened connections with a small ``SO_RCVBUF``, wrote
``GET /healthz HTTP/1.1`` 20,000 times on each in one write and never read. Each connection
stayed "being served" forever (the server paused for writing, no deadline, never evicted), so
after ``--http-max-connections`` of them every new client got 503, without a token.

The write-progress deadline itself is driven in process (uvicorn with the guarded protocol
in a thread, an app whose answers are 4 MiB and kept alive, the way a legitimate tool answer
may be): a peer that never reads is aborted at the deadline, when the slots run out it is the
one evicted, and an app that waits on ``receive()`` no longer lets uvicorn read a pipeline
ahead without bound.

A real server with a 2 s request deadline (also the write-progress deadline) and a cap of 8
connections. Each variant opens more hostile connections than the cap, all at once, waits the
deadline plus a margin, and asserts that the server process holds none of the hostile
connections (asked of its sockets: the peers never read) and that a fresh client gets 200 from
``/healthz``. Unauthenticated refusals that already closed before (the ``401``) are kept as a
guard of their own. Slowloris-style partial requests are the
request deadline's (``test_redteam_2026_12_01_f09_o1_o2_http_abuse.py``); one variant here
pipelines answers and then leaves a request unfinished.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from asyncio import selector_events
from collections.abc import Iterator

import anyio
import httpx2
import psutil
import pytest
import uvicorn

from _http_server import start_server
from mcp_secure_sandbox.http_transport import (
    MAX_PIPELINED_BYTES,
    ConnectionGuard,
    GuardedH11Protocol,
)

TOKEN = "h1-token-" + "0123456789abcdef0123"
DEADLINE_S = 2.0
CAP = 8
#: Hostile connections per variant: more than the cap, opened at once.
HOSTILE = 2 * CAP
#: A connection must be closed within the deadline plus this (generous: a loaded CI machine).
MARGIN_S = 8.0
#: The finding's count of pipelined requests in one write.
PIPELINED = 20_000


@pytest.fixture(scope="module")
def server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    """A server with a token, a 2 s deadline and a cap of 8 connections: (port, pid)."""
    env = {
        "SANDBOX_HTTP_TOKEN": TOKEN,
        "SANDBOX_HTTP_REQUEST_TIMEOUT": str(DEADLINE_S),
        "SANDBOX_HTTP_MAX_CONNECTIONS": str(CAP),
    }
    proc, port, _ = start_server(tmp_path_factory.mktemp("h1"), env)
    try:
        yield port, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def server(server_process: tuple[int, int]) -> int:
    """The port of :func:`server_process`."""
    return server_process[0]


def _request(
    method: str, path: str, headers: bytes = b"", body: bytes = b"", host: str = "127.0.0.1"
) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n".encode() + headers
    if body:
        head += f"content-length: {len(body)}\r\n".encode()
    return head + b"\r\n" + body


HEALTHZ = _request("GET", "/healthz")
AUTH = f"authorization: Bearer {TOKEN}\r\n".encode()
JSON = b"content-type: application/json\r\naccept: application/json, text/event-stream\r\n"
PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'


def _hostile(port: int, payload: bytes) -> socket.socket:
    """A connection with a small receive buffer that writes ``payload`` as far as it goes."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    sock.setblocking(False)
    sent = 0
    try:
        while sent < len(payload):
            sent += sock.send(payload[sent : sent + 1 << 20])
    except (BlockingIOError, InterruptedError):
        pass  # the server stopped reading: the rest stays unsent, as an attacker's would
    except OSError:
        pass  # already closed by the server
    return sock


def _closed_by_server(sock: socket.socket, until: float) -> bool:
    """True once the server closed its end (EOF or reset) before ``until``; reads what it sent."""
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return False
        if not select.select([sock], [], [], min(left, 0.5))[0]:
            continue
        try:
            if sock.recv(1 << 16) == b"":
                return True
        except BlockingIOError:
            continue
        except OSError:
            return True


def _held_by_server(pid: int, hostile: list[socket.socket], until: float) -> int:
    """How many of ``hostile`` the server process still has open at ``until`` (or sooner, 0).

    Asked of the server (its sockets, by the peer's port), not by reading: a peer that read
    would be taking what it is sent, and one answer the kernel absorbed whole can end in a
    close the peer sees only after reading it all.
    """
    ports = {sock.getsockname()[1] for sock in hostile}
    while True:
        peers = [conn.raddr for conn in psutil.Process(pid).net_connections(kind="tcp")]
        held = len([peer for peer in peers if ports.intersection(peer[1:])])  # () if none
        if held == 0 or time.monotonic() >= until:
            return held
        time.sleep(0.2)


def _assert_shed(server: tuple[int, int], payload: bytes) -> None:
    port, pid = server
    hostile = [_hostile(port, payload) for _ in range(HOSTILE)]
    try:
        # Nobody reads for the deadline: a server that holds what it cannot send holds it now.
        time.sleep(DEADLINE_S + 1)
        held = _held_by_server(pid, hostile, time.monotonic() + MARGIN_S)
        answer = httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
    finally:
        for sock in hostile:
            sock.close()
    assert held == 0, f"{held} of {HOSTILE} connections that never read are still open"
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok"}


@pytest.mark.e2e  # a real server process (tests/README.md)
@pytest.mark.slow
@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(HEALTHZ * PIPELINED, id="pipelined-healthz"),
        pytest.param(
            _request("GET", "/healthz", b"connection: keep-alive\r\n") * PIPELINED,
            id="pipelined-healthz-keep-alive",
        ),
        pytest.param(_request("GET", "/missing", AUTH) * PIPELINED, id="pipelined-404"),
        pytest.param(
            HEALTHZ * PIPELINED + b"GET /healthz HTTP/1.1\r\nHost: 1", id="pipelined-then-partial"
        ),
    ],
)
def test_connections_that_never_read_are_closed_and_fresh_clients_served(
    server_process: tuple[int, int], payload: bytes
) -> None:
    _assert_shed(server_process, payload)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(
            _request("POST", "/mcp", JSON + b"authorization: Bearer no\r\n", PING) * PIPELINED,
            id="pipelined-post-bad-token",
        ),
        pytest.param(_request("GET", "/mcp") * PIPELINED, id="pipelined-get-no-token"),
        pytest.param(
            (HEALTHZ + _request("POST", "/mcp", JSON + b"authorization: Bearer no\r\n", PING))
            * (PIPELINED // 2),
            id="pipelined-healthz-and-post-bad-token",
        ),
        pytest.param(
            (_request("GET", "/missing", AUTH) + _request("GET", "/mcp")) * (PIPELINED // 2),
            id="pipelined-404-and-401",
        ),
    ],
)
def test_refusals_that_closed_before_still_close(
    server_process: tuple[int, int], payload: bytes
) -> None:
    """The ``401`` carried ``Connection: close`` before H1 (these passed before the fix).

    Kept so that the refusal's close, now applied to every ``4xx``/``5xx`` in one place
    (:class:`~mcp_secure_sandbox.http_transport.CloseRefusals`), stays.
    """
    _assert_shed(server_process, payload)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "count"),
    [
        pytest.param(PING, PIPELINED // 4, id="ping-without-session-400"),
        pytest.param(PING + b" " * 4096, PIPELINED // 8, id="large-ping-without-session-400"),
    ],
)
def test_pipelined_authorised_posts_never_read_are_closed(
    server_process: tuple[int, int], body: bytes, count: int
) -> None:
    """Authorised calls the MCP app answers (its Host check passed).

    Kept-alive ``200`` answers to authorised calls (``initialize``) are small enough that the
    kernel's socket buffers take hundreds of them: the write deadline for those is driven in
    process below, with answers no socket buffer holds.
    """
    post = _request("POST", "/mcp", JSON + AUTH, body, host=f"127.0.0.1:{server_process[0]}")
    _assert_shed(server_process, post * count)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("path", "headers"),
    [
        pytest.param("/healthz", b"", id="healthz"),
        pytest.param("/healthz", b"connection: keep-alive\r\n", id="healthz-keep-alive"),
        pytest.param("/missing", AUTH, id="404"),
        pytest.param("/missing", AUTH + b"connection: keep-alive\r\n", id="404-keep-alive"),
    ],
)
def test_unauthenticated_answers_close_the_connection(
    server: int, path: str, headers: bytes
) -> None:
    """One connection carries one such answer: what was pipelined after it is never parsed."""
    with socket.create_connection(("127.0.0.1", server), timeout=10) as sock:
        sock.sendall(_request("GET", path, headers) * 3)
        received = b""
        until = time.monotonic() + 10
        while time.monotonic() < until:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            received += chunk
    assert received.count(b"HTTP/1.1 ") == 1, received
    assert b"connection: close\r\n" in received.lower()


#: receive() calls of /poll: each lets uvicorn resume reading the connection.
POLLS = 20
BIG = 4 << 20  # an answer that cannot sit in the socket buffers of a peer that does not read


async def _big_app(scope: dict[str, object], receive: object, send: object) -> None:
    assert callable(send)
    assert callable(receive)
    if scope["type"] != "http":
        return
    if scope["path"] == "/poll":  # an app that waits on receive() while it works
        for _ in range(POLLS):
            with anyio.move_on_after(0.05):
                await receive()
    body = b"x" * BIG if scope["path"] == "/big" else b"ok"
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def guarded() -> Iterator[tuple[int, ConnectionGuard]]:
    """An in-process uvicorn on the guarded protocol: cap 2, a 1 s deadline (port, guard)."""
    guard = ConnectionGuard(cap=2, request_timeout_s=1.0)
    protocol = type("TestH11Protocol", (GuardedH11Protocol,), {"guard": guard})
    config = uvicorn.Config(
        _big_app,
        http=protocol,
        ws="none",
        lifespan="off",
        log_level="error",
        timeout_keep_alive=600,  # only the guard may close a connection here
    )
    server = uvicorn.Server(config)
    sock = socket.create_server(("127.0.0.1", 0))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    port = int(sock.getsockname()[1])
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield port, guard
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


@pytest.mark.parametrize(
    "count",
    [pytest.param(1, id="one-answer"), pytest.param(50, id="pipelined-answers")],
)
def test_a_peer_that_never_reads_is_aborted_at_the_write_deadline(
    guarded: tuple[int, ConnectionGuard], count: int
) -> None:
    port, guard = guarded
    sock = _hostile(port, _request("GET", "/big") * count)
    try:
        time.sleep(1.0 + 1.0)  # nothing read for longer than the deadline (reading is progress)
        closed = _closed_by_server(sock, time.monotonic() + MARGIN_S)
    finally:
        sock.close()
    assert closed, "a peer that took nothing for the deadline was not closed"
    assert guard.stats()["write_stalled"] == 1
    assert httpx2.get(f"http://127.0.0.1:{port}/small", timeout=10).text == "ok"


def test_a_peer_that_reads_keeps_its_connection(guarded: tuple[int, ConnectionGuard]) -> None:
    """The deadline is on progress: a client that reads its kept-alive answers is not cut.

    The control of the two tests around it (it passes without the write deadline too).
    """
    port, guard = guarded
    with httpx2.Client(timeout=10) as client:
        sizes = [len(client.get(f"http://127.0.0.1:{port}/big").content) for _ in range(3)]
    assert sizes == [BIG] * 3
    assert guard.stats().get("write_stalled", 0) == 0


def test_peers_that_never_read_are_evicted_when_the_slots_run_out(
    guarded: tuple[int, ConnectionGuard],
) -> None:
    port, guard = guarded
    guard.request_timeout_s = 600.0  # eviction, not the deadline, must free the slots
    hostile = [_hostile(port, _request("GET", "/big") * 50) for _ in range(2)]
    try:
        time.sleep(0.5)  # both answered as far as the peers take (nothing)
        # two clients that keep their connections: each needs a slot a hostile peer holds
        with httpx2.Client(timeout=10) as one, httpx2.Client(timeout=10) as two:
            answers = [c.get(f"http://127.0.0.1:{port}/small") for c in (one, two)]
            until = time.monotonic() + MARGIN_S
            closed = [_closed_by_server(sock, until) for sock in hostile]
    finally:
        for sock in hostile:
            sock.close()
    assert [a.status_code for a in answers] == [200, 200]
    assert closed == [True, True]
    assert guard.stats()["evicted"] == 2


#: What asyncio's socket transport reads at once: the bound is the hold plus one read.
READ_SIZE: int = selector_events._SelectorSocketTransport.max_size  # type: ignore[attr-defined]


def test_pipelined_bytes_held_unparsed_are_bounded(guarded: tuple[int, ConnectionGuard]) -> None:
    """uvicorn resumes reading on every receive() of the app: the hold keeps the bound."""
    port, guard = guarded
    guard.request_timeout_s = 600.0  # nothing is closed: what is held is measured
    sock = _hostile(port, _request("GET", "/poll") * 200_000)
    try:
        time.sleep(POLLS * 0.05 * 3)  # the app polls receive() through three requests
        held = [len(c.conn.trailing_data[0]) for c in list(guard._open)]
    finally:
        sock.close()
    assert held, "the connection was not admitted"
    assert max(held) <= MAX_PIPELINED_BYTES + READ_SIZE
