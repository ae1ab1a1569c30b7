from __future__ import annotations

import json
import logging
import math
import resource
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import Context, MCPServer
from starlette.testclient import TestClient

from mcp_secure_sandbox.http_transport import (
    BearerAuth,
    BodyBudget,
    BodyLimit,
    ConnectionGuard,
    build_http_app,
    connection_cap,
    http_warnings,
    transport_security,
)
from mcp_secure_sandbox.principals import Principals, PrincipalUser, principal_of
from mcp_secure_sandbox.settings import ConfigError, Settings

TOKEN = "s3cret-token-0123456789abcdef"


def _settings(
    tmp_path: Path, token: str | None = TOKEN, *, allow_unauthenticated_http: bool = False
) -> Settings:
    return Settings(
        workspace=tmp_path / "ws",
        snapshots=tmp_path / "snap",
        transport="streamable-http",
        token=token,
        allow_unauthenticated_http=allow_unauthenticated_http,
    )


def _client(tmp_path: Path, token: str | None = TOKEN) -> TestClient:
    app: MCPServer[Any] = MCPServer("t")

    @app.tool()
    def ping() -> str:
        return "pong"

    asgi = build_http_app(app, _settings(tmp_path, token))
    return TestClient(asgi, base_url="http://127.0.0.1:8000")


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def test_healthz_needs_no_token(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_request_without_token_is_refused(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        response = client.post("/mcp", json=INIT, headers=HEADERS)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert TOKEN not in response.text


def test_wrong_token_is_refused(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        response = client.post(
            "/mcp", json=INIT, headers={**HEADERS, "authorization": "Bearer nope"}
        )
    assert response.status_code == 401


def test_right_token_is_accepted(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        response = client.post(
            "/mcp", json=INIT, headers={**HEADERS, "authorization": f"Bearer {TOKEN}"}
        )
    assert response.status_code == 200
    assert "secure" in response.text or "serverInfo" in response.text


def test_foreign_host_is_refused_even_with_token(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        response = client.post(
            "/mcp",
            json=INIT,
            headers={**HEADERS, "authorization": f"Bearer {TOKEN}", "host": "evil.example:8000"},
        )
    assert response.status_code in (400, 403, 421)


def test_default_allowed_hosts_follow_the_bind(tmp_path: Path) -> None:
    security = transport_security(_settings(tmp_path))
    assert security.allowed_hosts == ["127.0.0.1:8000", "127.0.0.1:8000", "localhost:8000"]
    assert "http://localhost:8000" in security.allowed_origins


class _Recorder:
    """An ASGI app that records whether it was called."""

    def __init__(self) -> None:
        self.scopes: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.scopes.append(scope["type"])


def _call(app: BearerAuth, scope: dict[str, Any]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    anyio.run(app, scope, receive, send)
    return sent


def _auth_header(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {token}".encode())]


@pytest.mark.parametrize("token", [TOKEN, None], ids=["auth-on", "auth-off"])
@pytest.mark.parametrize(
    "headers",
    [[], _auth_header(TOKEN), _auth_header("wrong")],
    ids=["no-token", "right-token", "wrong-token"],
)
def test_websocket_scopes_are_refused(token: str | None, headers: list[Any]) -> None:
    inner = _Recorder()
    sent = _call(
        BearerAuth(inner, token), {"type": "websocket", "path": "/mcp", "headers": headers}
    )
    assert inner.scopes == []
    assert sent == [{"type": "websocket.close", "code": 1008}]


@pytest.mark.parametrize("kind", ["webtransport", "HTTP", "http2", "", None])
def test_unknown_scopes_are_refused(kind: str | None) -> None:
    inner = _Recorder()
    with pytest.raises(RuntimeError, match="unknown type"):
        _call(BearerAuth(inner, TOKEN), {"type": kind, "path": "/mcp", "headers": []})
    assert inner.scopes == []


def test_lifespan_passes_through() -> None:
    inner = _Recorder()
    assert _call(BearerAuth(inner, TOKEN), {"type": "lifespan"}) == []
    assert inner.scopes == ["lifespan"]


@pytest.mark.parametrize(
    ("setting", "soft", "cap"),
    [
        (512, 1024, 512),  # a quarter (256) kept for the rest of the server
        (512, 512, 384),
        (512, 200, 136),  # at least 64 kept
        (10, 100_000, 10),
        (512, resource.RLIM_INFINITY, 512),
    ],
)
def test_the_connection_cap_stays_below_the_descriptor_limit(
    setting: int, soft: int, cap: int
) -> None:
    assert connection_cap(setting, soft) == cap


@pytest.mark.parametrize("soft", [64, 20, 1])
def test_a_descriptor_limit_without_room_is_a_config_error(soft: int) -> None:
    with pytest.raises(ConfigError, match="open-file limit"):
        connection_cap(512, soft)


class _FakeTransport:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


class _FakeConnection:
    def __init__(self, serving: bool, stalled_since: float | None = None) -> None:
        self.serving = serving
        self.stalled_since = stalled_since
        self.transport = _FakeTransport()


def test_the_guard_closes_the_oldest_idle_connection_at_the_cap() -> None:
    guard = ConnectionGuard(cap=3, request_timeout_s=1)
    busy, idle_old, idle_new = _FakeConnection(True), _FakeConnection(False), _FakeConnection(False)
    for conn in (busy, idle_old, idle_new):
        assert guard.admit(conn)  # type: ignore[arg-type]
    newcomer = _FakeConnection(False)
    assert guard.admit(newcomer)  # type: ignore[arg-type]
    assert (busy.transport.closed, idle_old.transport.closed, idle_new.transport.closed) == (
        False,
        True,
        False,
    )
    assert guard.stats() == {
        "open": 3,
        "cap": 3,
        "timed_out": 0,
        "write_stalled": 0,
        "evicted": 1,
        "refused": 0,
    }


def test_the_guard_refuses_a_connection_when_all_are_served() -> None:
    guard = ConnectionGuard(cap=2, request_timeout_s=1)
    served = [_FakeConnection(True), _FakeConnection(True)]
    for conn in served:
        assert guard.admit(conn)  # type: ignore[arg-type]
    assert not guard.admit(_FakeConnection(False))  # type: ignore[arg-type]
    assert not any(conn.transport.closed for conn in served)
    assert guard.stats()["refused"] == 1
    guard.release(served[0])  # type: ignore[arg-type]
    assert guard.admit(_FakeConnection(False))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("stalls", "victim"),
    [
        pytest.param((None, 5.0, None), 1, id="one-stalled"),
        pytest.param((9.0, 5.0, 7.0), 1, id="longest-stalled"),
        pytest.param((2.0, None, None), 0, id="oldest-connection-stalled"),
    ],
)
def test_the_guard_aborts_the_longest_stalled_connection_when_all_are_served(
    stalls: tuple[float | None, ...], victim: int
) -> None:
    """A peer that does not read what it is sent does not keep its slot as "being served"."""
    guard = ConnectionGuard(cap=3, request_timeout_s=1)
    served = [_FakeConnection(True, since) for since in stalls]
    for conn in served:
        assert guard.admit(conn)  # type: ignore[arg-type]
    assert guard.admit(_FakeConnection(False))  # type: ignore[arg-type]
    assert [conn.transport.closed for conn in served] == [i == victim for i in range(3)]
    assert (guard.stats()["evicted"], guard.stats()["refused"]) == (1, 0)


def test_http_warnings_name_the_missing_token(tmp_path: Path) -> None:
    assert http_warnings(_settings(tmp_path)) == []
    [warning] = http_warnings(_settings(tmp_path, token=None, allow_unauthenticated_http=True))
    assert "WITHOUT a token" in warning
    assert "127.0.0.1:8000" in warning


def test_a_chunked_body_over_the_limit_gets_413_as_a_json_rpc_error(tmp_path: Path) -> None:
    """A body without a Content-Length is counted as it arrives (h11 holds a declared one)."""
    app: MCPServer[Any] = MCPServer("t")
    settings = Settings(
        workspace=tmp_path / "ws",
        snapshots=tmp_path / "snap",
        transport="streamable-http",
        token=TOKEN,
        max_body_bytes=1024,
        max_body_in_flight_bytes=4096,
    )
    with TestClient(build_http_app(app, settings), base_url="http://127.0.0.1:8000") as client:
        response = client.post(
            "/mcp",
            content=iter([b"{", b" " * 1024, b"}"]),  # a generator: sent chunked
            headers={**HEADERS, "authorization": f"Bearer {TOKEN}"},
        )
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == -32600
    assert error["message"].startswith(
        "request body of more than 1,024 bytes is larger than this server's HTTP limit of "
        "1,024 bytes (--max-body)"
    )


def test_the_body_budget_grants_in_arrival_order_and_a_cancelled_waiter_takes_nothing() -> None:
    budget = BodyBudget(100)
    order: list[str] = []

    async def main() -> None:
        assert await budget.take(60, 0)

        async def wants(name: str, size: int) -> None:
            if await budget.take(size, math.inf):
                order.append(name)

        async with anyio.create_task_group() as tg:
            tg.start_soon(wants, "big", 50)
            while budget.waiting < 1:
                await anyio.sleep(0)
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as inner:
                    inner.start_soon(wants, "cancelled", 50)
                    while budget.waiting < 2:
                        await anyio.sleep(0)
                    scope.cancel()
            assert budget.waiting == 1
            # A small body that would fit does not overtake the waiter ahead of it.
            assert not await budget.take(10, 0)
            budget.release(60)
        assert (budget.in_use, order) == (50, ["big"])
        budget.release(50)
        assert budget.in_use == 0

    anyio.run(main)


@pytest.mark.parametrize(
    "headers",
    [
        [(b"content-length", b"0"), (b"transfer-encoding", b"chunked")],
        [(b"transfer-encoding", b"chunked"), (b"content-length", b"1")],
        [(b"Content-Length", b"1"), (b"Transfer-Encoding", b"gzip, chunked")],
        [(b"content-length", b"5"), (b"content-length", b"5")],
        [(b"content-length", b"5"), (b"content-length", b"7")],
        [(b"content-length", b"5, 7")],
        [(b"content-length", b"+5")],
        [(b"content-length", b"-5")],
        [(b"content-length", b"5 5")],
        [(b"content-length", b"0x10")],
        [(b"content-length", "\u0665".encode())],  # an Arabic-Indic five
        [(b"content-length", b"")],
    ],
)
def test_ambiguous_body_framing_gets_400_before_the_app(
    headers: list[tuple[bytes, bytes]],
) -> None:
    """The budget books what the framing says: a framing two parsers could read apart is refused.

    (Before: CL 0 or 1 with Transfer-Encoding booked 0 or 1 byte for a chunked body of up to
    --max-body; a CL that was not all digits booked nothing.)
    """
    inner = _Recorder()
    limit = BodyLimit(inner, 1024, BodyBudget(4096), 0.1)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "path": "/mcp", "headers": headers}
    anyio.run(limit, scope, receive, send)
    assert inner.scopes == []
    assert sent[0]["status"] == 400
    assert (b"connection", b"close") in sent[0]["headers"]
    body = json.loads(sent[1]["body"])
    assert body["error"]["code"] == -32600
    assert limit.budget.in_use == 0


@pytest.mark.parametrize(
    ("headers", "share"),
    [
        ([(b"content-length", b"100")], 100),
        ([(b"content-length", b" 100\t")], 100),  # optional whitespace around the value
        ([(b"transfer-encoding", b"chunked")], 1024),
        ([(b"transfer-encoding", b"identity")], 1024),  # any coding: booked as chunked
    ],
)
def test_plain_framing_books_its_share(headers: list[tuple[bytes, bytes]], share: int) -> None:
    booked: list[int] = []
    budget = BodyBudget(4096)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        booked.append(budget.in_use)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: Any) -> None:
        pass

    scope = {"type": "http", "headers": headers}
    anyio.run(BodyLimit(app, 1024, budget, 0.1), scope, receive, send)
    assert booked == [share]
    assert budget.in_use == 0


@pytest.mark.parametrize(("declared", "reads"), [(3000, 3), (5000, 3)])
def test_a_refused_body_is_read_and_dropped_up_to_the_bound(declared: int, reads: int) -> None:
    """413 comes after the client's body is read (dropped), at most DISCARD_FACTOR x max_body."""
    chunks = 0

    async def receive() -> dict[str, Any]:
        nonlocal chunks
        chunks += 1
        return {"type": "http.request", "body": b"x" * 1000, "more_body": chunks * 1000 < declared}

    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        assert chunks == reads  # nothing is answered before the reads
        sent.append(message)

    inner = _Recorder()
    scope = {"type": "http", "headers": [(b"content-length", str(declared).encode())]}
    anyio.run(BodyLimit(inner, 1024, BodyBudget(4096), 0.1), scope, receive, send)
    assert sent[0]["status"] == 413
    assert inner.scopes == []


# --- principals over streamable HTTP (issue 28 item 4) ---------------------------------------

ALICE = "alice-s3cret-" + "a" * 27
BOB = "bob-s3cret-" + "b" * 29


def _whoami_client(tmp_path: Path, **settings: Any) -> TestClient:
    """The real HTTP app (build_http_app) around a server whose tool answers principal_of(ctx)."""
    app: MCPServer[Any] = MCPServer("t")

    @app.tool()
    def whoami(ctx: Context) -> str:
        return principal_of(ctx)

    built = Settings(
        workspace=tmp_path / "ws",
        snapshots=tmp_path / "snap",
        transport="streamable-http",
        **settings,
    )
    return TestClient(build_http_app(app, built), base_url="http://127.0.0.1:8000")


def _events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


WHOAMI = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "whoami"}}


def _open_session(client: TestClient, token: str | None) -> dict[str, str]:
    """Initialize a (2025-06-18, stateful) transport session; its request headers."""
    auth = {"authorization": f"Bearer {token}"} if token else {}
    opened = client.post("/mcp", json=INIT, headers={**HEADERS, **auth})
    assert opened.status_code == 200
    headers = {
        **HEADERS,
        **auth,
        "mcp-session-id": opened.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-06-18",
    }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert client.post("/mcp", json=initialized, headers=headers).status_code == 202
    return headers


def _whoami(client: TestClient, headers: dict[str, str]) -> str:
    answer = client.post("/mcp", json=WHOAMI, headers=headers)
    assert answer.status_code == 200, answer.text
    (event,) = _events(answer.text)
    result = event["result"]
    assert result["isError"] is False
    return str(result["structuredContent"]["result"])


def test_two_principals_are_each_resolved_to_their_own_name(tmp_path: Path) -> None:
    principals = Principals({"alice": ALICE, "bob": BOB})
    with _whoami_client(tmp_path, principals=principals) as client:
        alice, bob = _open_session(client, ALICE), _open_session(client, BOB)
        assert [_whoami(client, alice), _whoami(client, bob), _whoami(client, alice)] == [
            "alice",
            "bob",
            "alice",
        ]


def test_each_principal_is_resolved_without_protocol_sessions(tmp_path: Path) -> None:
    """MCP 2026-07-28 (no initialize, no Mcp-Session-Id): each request is its token's."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    call = {**WHOAMI, "params": {"name": "whoami", "arguments": {}, "_meta": meta}}
    modern = {
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "whoami",
    }
    principals = Principals({"alice": ALICE, "bob": BOB})
    with _whoami_client(tmp_path, principals=principals) as client:
        for token, name in ((BOB, "bob"), (ALICE, "alice")):
            headers = {**HEADERS, **modern, "authorization": f"Bearer {token}"}
            answer = client.post("/mcp", json=call, headers=headers)
            assert answer.status_code == 200, answer.text
            assert answer.json()["result"]["structuredContent"] == {"result": name}


def test_a_principal_cannot_use_another_principals_transport_session(tmp_path: Path) -> None:
    principals = Principals({"alice": ALICE, "bob": BOB})
    with _whoami_client(tmp_path, principals=principals) as client:
        alice = _open_session(client, ALICE)
        as_bob = {**alice, "authorization": f"Bearer {BOB}"}
        answer = client.post("/mcp", json=WHOAMI, headers=as_bob)
        assert answer.status_code == 404  # as for an unknown session
        assert "alice" not in answer.text
        assert _whoami(client, alice) == "alice"


@pytest.mark.parametrize(
    "authorization",
    [
        pytest.param(None, id="none"),
        pytest.param(f"Basic {ALICE}", id="basic-scheme"),
        pytest.param(f"Bearer {ALICE[:-1]}", id="prefix"),
        pytest.param(f"Bearer {ALICE}x", id="suffix"),
        pytest.param(f"Bearer {ALICE.upper()}", id="upper-case"),
        pytest.param("Bearer alice", id="the-name"),
        pytest.param("Bearer default", id="the-default-name"),
        pytest.param("Bearer ", id="empty"),
        pytest.param(f"Bearer {ALICE}:{BOB}", id="both"),
    ],
)
def test_a_wrong_token_gets_401_whatever_the_principals(
    tmp_path: Path, authorization: str | None
) -> None:
    principals = Principals({"alice": ALICE, "bob": BOB})
    headers = {**HEADERS, **({"authorization": authorization} if authorization else {})}
    with _whoami_client(tmp_path, principals=principals) as client:
        answer = client.post("/mcp", json=INIT, headers=headers)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")
    assert "alice" not in answer.text and "s3cret" not in answer.text


def test_the_single_token_and_no_token_are_the_default_principal(tmp_path: Path) -> None:
    with _whoami_client(tmp_path, token=TOKEN) as client:
        assert _whoami(client, _open_session(client, TOKEN)) == "default"
    with _whoami_client(tmp_path, allow_unauthenticated_http=True) as client:
        assert _whoami(client, _open_session(client, None)) == "default"


def _recorded_scope(auth: BearerAuth, headers: list[tuple[bytes, bytes]], **extra: Any) -> Any:
    seen: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope)

    auth.app = app
    _call(auth, {"type": "http", "path": "/mcp", "headers": headers, **extra})
    (scope,) = seen
    return scope


@pytest.mark.parametrize(
    "forged",
    [
        pytest.param(PrincipalUser("bob"), id="principal-user"),
        pytest.param("bob", id="a-string"),
        pytest.param(None, id="none"),
    ],
)
def test_bearer_auth_replaces_any_user_already_in_the_scope(forged: object) -> None:
    auth = BearerAuth(_Recorder(), Principals({"alice": ALICE, "bob": BOB}))
    scope = _recorded_scope(auth, _auth_header(ALICE), user=forged)
    assert isinstance(scope["user"], PrincipalUser) and scope["user"].principal == "alice"


def test_the_real_server_logs_and_counts_each_call_with_its_principal_never_its_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The server as built (create_server) behind the HTTP app: one call per principal."""
    from mcp_secure_sandbox.server import create_server
    from mcp_secure_sandbox.settings import prepare_directories

    settings = prepare_directories(
        Settings(
            workspace=tmp_path / "ws",
            snapshots=tmp_path / "snap",
            transport="streamable-http",
            principals=Principals({"alice": ALICE, "bob": BOB}),
            ready_children=0,
        ),
        environ={},
    )
    caplog.set_level(logging.INFO, logger="mcp_secure_sandbox")
    app, state = create_server(settings)
    call = {**WHOAMI, "params": {"name": "list_workspace_files", "arguments": {}}}
    metrics = {**WHOAMI, "params": {"name": "get_sandbox_metrics", "arguments": {}}}
    callers = []
    try:
        with TestClient(build_http_app(app, settings), base_url="http://127.0.0.1:8000") as client:
            for token in (BOB, ALICE):
                headers = _open_session(client, token)
                assert client.post("/mcp", json=call, headers=headers).status_code == 200
                answer = client.post("/mcp", json=metrics, headers=headers)
                (event,) = _events(answer.text)
                callers.append(event["result"]["structuredContent"]["caller"])
                # each sees its own figures only: never another principal's name
                assert ("alice" in answer.text) == (token == ALICE)
    finally:
        state.close()
    assert callers == [
        {"principal": "bob", "calls": 1, "errors": 0},
        {"principal": "alice", "calls": 1, "errors": 0},
    ]
    lines = [r.getMessage() for r in caplog.records if "list_workspace_files" in r.getMessage()]
    assert [line.split(" status=")[0] for line in lines] == [
        "list_workspace_files principal=bob",
        "list_workspace_files principal=alice",
    ]
    assert "get_sandbox_metrics principal=alice status=ok" in caplog.text
    assert "s3cret" not in caplog.text
