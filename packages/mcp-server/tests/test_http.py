from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from starlette.testclient import TestClient

from mcp_secure_sandbox.http_transport import build_http_app, transport_security
from mcp_secure_sandbox.settings import Settings

TOKEN = "s3cret-token-0123456789abcdef"


def _settings(tmp_path: Path, token: str | None = TOKEN) -> Settings:
    return Settings(
        workspace=tmp_path / "ws",
        snapshots=tmp_path / "snap",
        transport="streamable-http",
        token=token,
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
