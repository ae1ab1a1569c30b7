"""The streamable HTTP transport: bearer-token auth, DNS-rebinding protection, body limit.

The MCP endpoint is ``/mcp``; ``/healthz`` answers ``{"status": "ok"}`` without auth so that a
container orchestrator can probe the server. Every other path needs the token when one is set.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from mcp_secure_sandbox.settings import Settings

__all__ = ["BearerAuth", "build_http_app", "serve_http", "transport_security"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

HEALTH_PATH = "/healthz"


async def _json_response(send: Send, status: int, body: dict[str, Any], extra: list[Any]) -> None:
    payload = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers + extra})
    await send({"type": "http.response.body", "body": payload})


class BearerAuth:
    """ASGI middleware that requires ``Authorization: Bearer <token>`` on every HTTP request.

    The comparison is constant-time (:func:`hmac.compare_digest`); a refused request gets 401 with
    a ``WWW-Authenticate: Bearer`` header (RFC 6750) and never learns anything about the token.
    ``/healthz`` is answered here, before auth.

    Args:
        app: The wrapped ASGI application.
        token: The expected token, or ``None`` to disable auth (loopback development only).
    """

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self._token = None if token is None else token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer ``/healthz``, refuse unauthorised requests, pass the rest to the app."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope.get("path") == HEALTH_PATH:
            await _json_response(send, 200, {"status": "ok"}, [])
            return
        if not self._authorized(scope):
            challenge = [(b"www-authenticate", b'Bearer realm="mcp-secure-sandbox"')]
            await _json_response(send, 401, {"error": "missing or invalid bearer token"}, challenge)
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        if self._token is None:
            return True
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                scheme, _, credential = bytes(value).partition(b" ")
                if scheme.lower() == b"bearer":
                    return hmac.compare_digest(credential.strip(), self._token)
        return False


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """DNS-rebinding protection: the Host and Origin values the HTTP transport accepts.

    With no ``--allowed-hosts``, the bound ``host:port`` is allowed (plus ``localhost`` and
    ``127.0.0.1`` on a loopback bind); with no ``--allowed-origins``, the matching ``http://``
    origins are.
    """
    hosts = list(settings.allowed_hosts)
    if not hosts:
        hosts = [f"{settings.host}:{settings.port}"]
        if settings.host in ("127.0.0.1", "localhost", "::1"):
            hosts += [f"127.0.0.1:{settings.port}", f"localhost:{settings.port}"]
    origins = list(settings.allowed_origins) or [f"http://{h}" for h in hosts]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def build_http_app(app: MCPServer[Any], settings: Settings) -> ASGIApp:
    """Return the ASGI application serving ``app`` over streamable HTTP with our protections."""
    starlette_app = app.streamable_http_app(
        max_request_body_size=settings.max_body_bytes,
        transport_security=transport_security(settings),
        host=settings.host,
    )
    return BearerAuth(starlette_app, settings.token)


def serve_http(app: MCPServer[Any], settings: Settings) -> None:
    """Serve ``app`` over streamable HTTP with uvicorn until interrupted (blocking)."""
    import uvicorn

    uvicorn.run(
        build_http_app(app, settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        server_header=False,
        lifespan="on",
    )
