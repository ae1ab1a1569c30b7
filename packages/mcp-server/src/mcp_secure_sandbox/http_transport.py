"""The streamable HTTP transport: bearer-token auth, DNS-rebinding protection, abuse shedding.

The MCP endpoint is ``/mcp``; ``/healthz`` answers ``{"status": "ok"}`` without auth so that a
container orchestrator can probe the server. Every other path needs the token when one is set.

uvicorn alone holds a connection for as long as its client keeps it open before a request is
complete (its keep-alive time-out restarts on every byte, its concurrency limit is checked after
the headers), so a few thousand slow connections exhaust the server's file descriptors before
any authentication. :class:`GuardedH11Protocol` (uvicorn's h11 protocol, pinned in
``pyproject.toml``) adds what is missing, in front of everything else:

- an absolute deadline to receive a whole request (request line, headers and body), armed when
  the connection is made or the next request starts, disarmed once the request is complete:
  responses, including event streams that last for hours, are never cut;
- a write-progress deadline, the same ``--http-request-timeout``: a connection whose peer leaves
  what the server sends unread (the transport paused for writing, or closing with bytes still
  unsent) for that long is aborted; while it is paused the next pipelined request is not parsed,
  and the bytes of pipelined requests held unparsed are bounded (:data:`MAX_PIPELINED_BYTES`:
  past it the connection stops being read until its answers are taken);
- ``Connection: close`` on every ``/healthz`` answer and every 4xx/5xx refusal
  (:class:`CloseRefusals`), so one connection carries one unauthenticated request;
- a cap on open connections below the soft ``RLIMIT_NOFILE`` (:func:`connection_cap`): over it,
  the oldest connection that is not being served is closed to make room (else the one whose
  peer has not read for longest), and when every connection is being served and reads what it
  is sent the new one gets 503.

:class:`BearerAuth` authenticates ``http`` scopes against the principals (each token is one
principal's, :mod:`mcp_secure_sandbox.principals`) and records the principal in the scope,
refuses ``websocket`` and unknown ones, and lets ``lifespan`` through. :class:`BodyLimit`,
behind it, applies the one body limit (``--max-body``: 413 with a JSON-RPC error the SDK client
shows) and the budget of bodies in flight (``--max-body-in-flight``: past it a request waits up
to ``--admission-wait``, then gets 503 with ``Retry-After: 1``).
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import math
import re
import resource
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, ClassVar

import anyio
import h11
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from mcp_secure_sandbox.budget import MAX_WRITE_BYTES
from mcp_secure_sandbox.principals import DEFAULT_PRINCIPAL, Principals, PrincipalUser
from mcp_secure_sandbox.settings import LOOPBACK_HOSTS, ConfigError, Settings

__all__ = [
    "BearerAuth",
    "BodyBudget",
    "BodyLimit",
    "CloseRefusals",
    "ConnectionGuard",
    "GuardedH11Protocol",
    "bind_http",
    "build_http_app",
    "build_uvicorn_config",
    "connection_cap",
    "http_warnings",
    "serve_http",
    "transport_security",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

HEALTH_PATH = "/healthz"
#: Descriptors kept free for everything but HTTP connections (runs' pipes, the zygote, snapshot
#: files, logs): a quarter of the soft limit, and at least this many.
FD_HEADROOM_MIN = 64
#: Seconds between two warnings about shed connections (a flood must not flood the log too).
SHED_WARNING_INTERVAL_S = 60.0
#: WebSocket close code "policy violation" (RFC 6455): sent before accept, the client gets 403.
WS_POLICY_VIOLATION = 1008
#: JSON-RPC "invalid request": the code of the body limit's refusals (the SDK client shows the
#: message of a JSON-RPC error in a non-2xx JSON body).
JSONRPC_INVALID_REQUEST = -32600
#: A body refused for its size is still read (and dropped) up to this many times ``--max-body``
#: before the 413 is sent, so that a client that sends before it reads (the SDK's) gets it.
DISCARD_FACTOR = 2
#: Bytes of pipelined requests a connection holds unparsed while it answers the one before (h11
#: parses the next only once the answer is sent); past it the connection is not read until the
#: answers are taken. A request's headers alone may be this big (uvicorn's h11 limit, 16 KiB).
MAX_PIPELINED_BYTES = 64 * 1024
#: ``Connection: close``, sent on ``/healthz`` answers and 4xx/5xx refusals.
_CLOSE = (b"connection", b"close")
#: A ``Content-Length`` value: ASCII decimal digits only (RFC 9110 8.6).
_DECIMAL = re.compile(rb"[0-9]{1,18}")

#: The message of a 401: what the client must send, never anything about the expected token.
UNAUTHORIZED_MESSAGE = (
    "missing or invalid bearer token: send the header 'Authorization: Bearer <token>' with the "
    "token this server was started with (SANDBOX_HTTP_TOKEN or --token-file), or your own from "
    "its --tokens-file"
)

_REQUEST_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: 33\r\n\r\nthe request was not sent in time\n"
)
_SERVICE_UNAVAILABLE = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: 26\r\n\r\ntoo many open connections\n"
)

log = logging.getLogger("mcp_secure_sandbox.http")


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

    The token is looked up among the principals in constant time
    (:meth:`~mcp_secure_sandbox.principals.Principals.authenticate`); the request then reaches
    the app with ``scope["user"]`` the principal's
    :class:`~mcp_secure_sandbox.principals.PrincipalUser` (whatever the client sent; without
    auth, the principal ``default``), which
    :func:`~mcp_secure_sandbox.principals.principal_of` reads and by which the SDK binds each
    transport session to the principal that opened it. A refused request gets 401 with
    a ``WWW-Authenticate: Bearer`` header (RFC 6750) and a JSON-RPC error whose message
    (:data:`UNAUTHORIZED_MESSAGE`, which the SDK client shows as the call's error) says what to
    send; it never learns anything about the tokens or the principals.
    ``/healthz`` is answered here, before auth. A ``websocket`` scope is closed with code 1008
    before it is accepted (the client sees 403), token or not: the server speaks no WebSocket.
    ``lifespan`` goes to the app unchanged.

    Args:
        app: The wrapped ASGI application.
        principals: The principals (``Settings.http_principals``), or one token (held to
            :func:`~mcp_secure_sandbox.settings.check_token`: the principal ``default``), or
            ``None`` to disable auth (loopback development only, see
            ``--allow-unauthenticated-http``; every request is then ``default``'s).
        health: Returns why the server cannot serve (``/healthz`` then answers 503 with
            ``{"status": "unavailable", "reason"}``), or ``None``; no callback: always healthy.

    Raises:
        RuntimeError: From a call, for a scope type other than ``http``, ``websocket`` and
            ``lifespan`` (the ASGI specification asks an app to raise on a type it does not
            know); the wrapped app is never called with it.
        ConfigError: From the constructor, for a token :func:`check_token` refuses (the
            message never holds the token).
    """

    def __init__(
        self,
        app: ASGIApp,
        principals: Principals | str | None,
        health: Callable[[], str | None] | None = None,
    ) -> None:
        self.app = app
        given: object = principals  # hostile until checked: code may pass anything
        if given is not None and not isinstance(given, Principals):
            # check_token refuses what is no str, naming the type
            given = Principals.single(given, "BearerAuth token")  # type: ignore[arg-type]
        self._principals: Principals | None = given
        # one scope user per principal, made once (not per request)
        names = [DEFAULT_PRINCIPAL] if given is None else list(given)
        self._users = {name: PrincipalUser(name) for name in names}
        self._health = health

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer ``/healthz``, refuse unauthorised requests, pass the rest to the app."""
        kind = scope.get("type")
        if kind == "lifespan":
            await self.app(scope, receive, send)
            return
        if kind == "websocket":
            await send({"type": "websocket.close", "code": WS_POLICY_VIOLATION})
            return
        if kind != "http":
            raise RuntimeError(f"refusing an ASGI scope of unknown type {kind!r}")
        if scope.get("path") == HEALTH_PATH:
            reason = self._health() if self._health is not None else None
            if reason is not None:  # e.g. the workspace is now served by another server
                await _json_response(send, 503, {"status": "unavailable", "reason": reason}, [])
                return
            await _json_response(send, 200, {"status": "ok"}, [])
            return
        principal = self._principal(scope)
        if principal is None:
            challenge = [(b"www-authenticate", b'Bearer realm="mcp-secure-sandbox"')]
            await _jsonrpc_refusal(send, 401, UNAUTHORIZED_MESSAGE, challenge)
            return
        # a copy: the server's record of who this is, replacing whatever "user" there was
        await self.app({**scope, "user": self._users[principal]}, receive, send)

    def _principal(self, scope: Scope) -> str | None:
        """The principal of the request's bearer token (the first Authorization header's)."""
        if self._principals is None:
            return DEFAULT_PRINCIPAL
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                scheme, _, credential = bytes(value).partition(b" ")
                if scheme.lower() == b"bearer":
                    return self._principals.authenticate(credential.strip())
        return None


class CloseRefusals:
    """ASGI middleware: ``Connection: close`` on ``/healthz`` answers and on 4xx/5xx responses.

    Those need no token (``/healthz``, the 401, the refusals before it), so without it one
    connection could pipeline thousands of them and never read the answers. uvicorn closes the
    connection once such a response is sent; h11 never parses what was pipelined after it.
    Other scopes, and 1xx-3xx answers on other paths, pass untouched.

    Args:
        app: The wrapped ASGI application.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Call the app, adding ``Connection: close`` to the answers that need it."""
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        health = scope.get("path") == HEALTH_PATH

        async def closing_send(message: Message) -> None:
            if message.get("type") == "http.response.start" and (
                health or int(message.get("status", 200)) >= 400
            ):
                headers = message.get("headers", [])
                kept = [(k, v) for k, v in headers if bytes(k).lower() != b"connection"]
                message = {**message, "headers": [*kept, _CLOSE]}
            await send(message)

        await self.app(scope, receive, closing_send)


class BodyBudget:
    """Bytes of HTTP request bodies the server holds at once, granted first come first served.

    Used from the event loop's thread only.

    Args:
        capacity: Bytes in flight at most (``--max-body-in-flight``).
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("the budget of bodies in flight must be positive")
        self.capacity = capacity
        self.in_use = 0
        self._waiters: deque[tuple[int, anyio.Event]] = deque()

    @property
    def waiting(self) -> int:
        """Requests waiting for their share of the budget now."""
        return len(self._waiters)

    async def take(self, size: int, wait_s: float) -> bool:
        """Take ``size`` bytes of the budget, waiting at most ``wait_s`` seconds.

        Returns:
            ``True`` when taken (give it back with :meth:`release`), ``False`` when the wait
            passed; a cancelled wait takes nothing.
        """
        if not self._waiters and self.in_use + size <= self.capacity:
            self.in_use += size
            return True
        waiter = (size, anyio.Event())
        self._waiters.append(waiter)
        try:
            with anyio.move_on_after(wait_s):
                await waiter[1].wait()
        except BaseException:
            self._give_up(waiter)
            raise
        if waiter[1].is_set():
            return True
        self._give_up(waiter)
        return False

    def release(self, size: int) -> None:
        """Give back ``size`` bytes taken with :meth:`take`; waiters that now fit get theirs."""
        self.in_use -= size
        self._grant()

    def _give_up(self, waiter: tuple[int, anyio.Event]) -> None:
        if waiter[1].is_set():
            self.release(waiter[0])  # granted as the wait ended: pass it on
        else:
            self._waiters.remove(waiter)
            self._grant()  # the next one may fit now

    def _grant(self) -> None:
        while self._waiters and self.in_use + self._waiters[0][0] <= self.capacity:
            size, event = self._waiters.popleft()
            self.in_use += size
            event.set()


async def _jsonrpc_refusal(
    send: Send, status: int, message: str, extra: list[tuple[bytes, bytes]]
) -> None:
    """Answer ``status`` with a JSON-RPC error whose message the SDK client shows."""
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": JSONRPC_INVALID_REQUEST, "message": message},
    }
    await _json_response(send, status, body, [*extra, _CLOSE])


class BodyLimit:
    """ASGI middleware: the one HTTP body limit and the budget of bodies in flight.

    A request declaring a ``Content-Length`` over ``max_body`` gets 413 without its body being
    kept; a chunked one (any ``Transfer-Encoding``) is read up to ``max_body`` (413 past it).
    Either way the rest of a refused body is read and dropped, up to :data:`DISCARD_FACTOR`
    times ``max_body``, before the 413 is sent, so a client that sends its whole body before
    it reads gets the answer rather than a reset. Framing that is ambiguous (both
    ``Transfer-Encoding`` and ``Content-Length``, several ``Content-Length``, one that is not
    a decimal number) gets 400 (:func:`_body_framing`). Each request holds its share of
    ``budget`` (its ``Content-Length``, else ``max_body``) from its headers until the app has
    answered it; a request that cannot get its share within ``wait_s`` gets 503 with
    ``Retry-After: 1``.
    Refusals are JSON-RPC errors (``id`` null) the SDK client shows as the call's error.
    Requests without a body, and scopes other than ``http``, pass untouched.

    Args:
        app: The wrapped ASGI application.
        max_body: Largest request body in bytes (``--max-body``).
        budget: Bytes of bodies in flight (``--max-body-in-flight``).
        wait_s: Longest wait for a share of the budget, in seconds (``--admission-wait``).
    """

    def __init__(self, app: ASGIApp, max_body: int, budget: BodyBudget, wait_s: float) -> None:
        self.app = app
        self.max_body = max_body
        self.budget = budget
        self.wait_s = wait_s

    def too_large(self, size: str) -> str:
        """The 413 message for a body of ``size`` (text: a number or "more than N")."""
        return (
            f"request body of {size} bytes is larger than this server's HTTP limit of "
            f"{self.max_body:,} bytes (--max-body); write_workspace_file takes at most "
            f"{MAX_WRITE_BYTES // 2**20} MiB of content per call: put larger data into the "
            "workspace in parts, or let a run produce it, and pass its path (csv_path, "
            "data_path)"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse an oversized body, wait for a share of the budget, then call the app."""
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        framing = _body_framing(scope.get("headers", []))
        if isinstance(framing, str):
            await _jsonrpc_refusal(send, 400, framing, [])
            return
        declared = framing  # None: chunked (Transfer-Encoding); else the Content-Length
        if declared == 0:
            await self.app(scope, receive, send)
            return
        if declared is not None and declared > self.max_body:
            # Read what the client sends (discarded, never buffered) before answering: a
            # client still sending when the server closes gets a reset, not the 413.
            await self._discard(receive, 0)
            await _jsonrpc_refusal(send, 413, self.too_large(f"{declared:,}"), [])
            return
        share = self.max_body if declared is None else declared
        if not await self.budget.take(share, self.wait_s):
            await _jsonrpc_refusal(
                send,
                503,
                f"the server holds as many request bodies as it takes at once "
                f"({self.budget.capacity:,} bytes, --max-body-in-flight) and this one waited "
                f"{self.wait_s:g} s (--admission-wait) for its turn; retry in a second",
                [(b"retry-after", b"1")],
            )
            return
        try:
            if declared is None:  # h11 holds a declared length to its word; a chunked one not
                replay = await self._read_chunked(receive, send)
                if replay is None:
                    return
                receive = replay
            await self.app(scope, receive, send)
        finally:
            self.budget.release(share)

    async def _discard(self, receive: Receive, seen: int) -> None:
        """Read and drop the rest of a refused body, up to ``DISCARD_FACTOR`` x ``max_body``.

        Nothing is kept, so the budget is not involved; the request deadline
        (``--http-request-timeout``) bounds the time, the cap the bytes: past it the refusal is
        sent and the connection closed with the rest unread.

        Args:
            receive: The request's ASGI ``receive``.
            seen: Body bytes already read.
        """
        bound = DISCARD_FACTOR * self.max_body
        while seen <= bound:
            message = await receive()
            if message["type"] != "http.request":
                return
            seen += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    async def _read_chunked(self, receive: Receive, send: Send) -> Receive | None:
        """Read a body without a length up to ``max_body``; ``None`` once refused with 413."""
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                parts_done: list[Message] = [message]
                break
            body = bytes(message.get("body", b""))
            size += len(body)
            if size > self.max_body:
                parts.clear()  # nothing more is kept
                if message.get("more_body", False):
                    await self._discard(receive, size)
                await _jsonrpc_refusal(
                    send, 413, self.too_large(f"more than {self.max_body:,}"), []
                )
                return None
            parts.append(body)
            if not message.get("more_body", False):
                parts_done = []
                break
        queued: deque[Message] = deque(
            [{"type": "http.request", "body": b"".join(parts), "more_body": False}, *parts_done]
        )

        async def replay() -> Message:
            return queued.popleft() if queued else await receive()

        return replay


def _body_framing(headers: Iterable[tuple[bytes, bytes]]) -> int | str | None:
    """How a request frames its body, from its headers, as :class:`BodyLimit` books it.

    Args:
        headers: The ASGI scope's header pairs (names in any case).

    Returns:
        The ``Content-Length`` (``0`` when neither header is sent), ``None`` for a body framed
        by ``Transfer-Encoding`` (whatever its value: booked as chunked, the largest share), or
        the message of a 400 refusal: both headers at once (RFC 9112 6.3 lets a server reject
        it; it is how requests are smuggled past a proxy, and no client we serve sends it),
        more than one ``Content-Length`` header or a list in one, or a value that is not a
        decimal number (a sign, inner spaces, another digit set).
    """
    lengths: list[bytes] = []
    encoded = False
    for name, value in headers:
        key = bytes(name).lower()
        if key == b"content-length":
            lengths.append(bytes(value))
        elif key == b"transfer-encoding":
            encoded = True
    if encoded and lengths:
        return (
            "a request with both Transfer-Encoding and Content-Length is refused "
            "(RFC 9112 6.3); send one of them"
        )
    if encoded:
        return None
    if not lengths:
        return 0
    if len(lengths) > 1:
        return "a request with more than one Content-Length header is refused; send one"
    text = lengths[0].strip(b" \t")
    if not _DECIMAL.fullmatch(text):
        return "the Content-Length header is not a decimal number of bytes"
    return int(text)


def http_warnings(settings: Settings) -> list[str]:
    """The warnings about how HTTP is exposed, for the log and ``sandbox://status``.

    Returns:
        One sentence per problem (empty on stdio, or on HTTP with a token).
    """
    if settings.transport != "streamable-http" or settings.http_principals is not None:
        return []
    return [
        f"HTTP on {settings.host}:{settings.port} is served WITHOUT a token "
        "(--allow-unauthenticated-http): every local user can run code as this server's user; "
        "set SANDBOX_HTTP_TOKEN or --token-file"
    ]


def connection_cap(setting: int, soft_limit: int | None = None) -> int:
    """The number of HTTP connections the server keeps open at most.

    Args:
        setting: ``--http-max-connections``.
        soft_limit: The soft ``RLIMIT_NOFILE``; the process's own when ``None``.

    Returns:
        ``setting``, lowered to leave a quarter of the descriptors (at least
        :data:`FD_HEADROOM_MIN`) to the rest of the server.

    Raises:
        ConfigError: The descriptor limit leaves no room for a single connection.
    """
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0] if soft_limit is None else soft_limit
    if soft == resource.RLIM_INFINITY:
        return setting
    room = soft - max(FD_HEADROOM_MIN, soft // 4)
    if room < 1:
        raise ConfigError(
            f"the open-file limit ({soft}) leaves no descriptor for HTTP connections; raise it "
            "(ulimit -n, or the container's nofile limit) above "
            f"{FD_HEADROOM_MIN + 1}"
        )
    return min(setting, room)


class ConnectionGuard:
    """The open HTTP connections of one server, their cap, the request deadline, counters.

    Used from the event loop's thread only. Connections are kept in the order they were made, so
    the oldest one that is not being served is the first closed when the cap is reached; when
    all are, the one whose peer has left what it is sent unread for longest is aborted.

    Args:
        cap: Connections open at most (see :func:`connection_cap`).
        request_timeout_s: Seconds a client has to send a whole request, and seconds a peer may
            leave what the server sends unread (the write-progress deadline).
    """

    def __init__(self, cap: int, request_timeout_s: float) -> None:
        if cap < 1 or not 0 < request_timeout_s < math.inf:
            raise ValueError("the cap and the request time-out must be positive")
        self.cap = cap
        self.request_timeout_s = request_timeout_s
        self._open: dict[GuardedH11Protocol, None] = {}  # insertion order: oldest first
        self.timed_out = 0
        self.write_stalled = 0
        self.evicted = 0
        self.refused = 0
        self._last_warning = -math.inf

    @property
    def open_connections(self) -> int:
        """Connections admitted and not yet closed."""
        return len(self._open)

    def stats(self) -> dict[str, int]:
        """Counters since start.

        Returns:
            ``open``, ``cap``, ``timed_out`` (request deadline), ``write_stalled`` (write
            deadline), ``evicted``, ``refused``.
        """
        return {
            "open": len(self._open),
            "cap": self.cap,
            "timed_out": self.timed_out,
            "write_stalled": self.write_stalled,
            "evicted": self.evicted,
            "refused": self.refused,
        }

    def admit(self, connection: GuardedH11Protocol) -> bool:
        """Register a new connection, making room if the cap is reached.

        At the cap the oldest connection not being served is closed; when every one is, the
        one whose peer has left what it is sent unread for longest (:attr:`stalled_since`) is
        aborted.

        Returns:
            ``False`` when the cap is reached and every open connection is being served to a
            peer that reads: the caller refuses the new connection.
        """
        if len(self._open) >= self.cap:
            victim = next((c for c in self._open if not c.serving), None)
            if victim is None:
                stalled = [c for c in self._open if c.stalled_since is not None]
                victim = min(stalled, key=lambda c: c.stalled_since or 0.0, default=None)
            if victim is None:
                self.refused += 1
                self._warn()
                return False
            self.evicted += 1
            self.release(victim)
            if victim.stalled_since is None:
                victim.transport.close()
            else:  # close() would wait for a peer that does not read
                victim.transport.abort()
            self._warn()
        self._open[connection] = None
        return True

    def release(self, connection: GuardedH11Protocol) -> None:
        """Forget a connection (closed, or evicted); unknown connections are ignored."""
        self._open.pop(connection, None)

    def request_timed_out(self) -> None:
        """Count a connection closed at the request deadline."""
        self.timed_out += 1
        self._warn()

    def write_timed_out(self) -> None:
        """Count a connection aborted at the write-progress deadline."""
        self.write_stalled += 1
        self._warn()

    def _warn(self) -> None:
        now = time.monotonic()
        if now - self._last_warning >= SHED_WARNING_INTERVAL_S:
            self._last_warning = now
            log.warning(
                "shedding HTTP connections (%s since start; cap %d, request and write "
                "deadline %g s)",
                ", ".join(f"{k} {v}" for k, v in self.stats().items() if k != "cap"),
                self.cap,
                self.request_timeout_s,
            )


class _HeldFlow(FlowControl):
    """uvicorn's flow control with a hold on reading that uvicorn's own resumes do not lift."""

    held = False

    def hold(self) -> None:
        """Stop reading until :meth:`release` (uvicorn's ``resume_reading`` calls included)."""
        self.held = True
        self.pause_reading()

    def release(self) -> None:
        """Lift the hold; reading resumes at uvicorn's next ``resume_reading``."""
        self.held = False

    def resume_reading(self) -> None:
        """Resume reading as uvicorn does, unless held."""
        if not self.held:
            super().resume_reading()


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with request and write-progress deadlines and a connection cap.

    uvicorn creates one per connection; :func:`build_uvicorn_config` makes a subclass whose
    :attr:`guard` is the server's :class:`ConnectionGuard`. The request deadline runs while the
    client is sending a request: from ``connection_made`` (or, on a kept-alive connection, from
    the first byte of the next request) until h11 has the whole body. Past it the connection is
    closed (with 408 when no request line was complete). It is never armed while a response is
    sent.

    The write-progress deadline (the same length) runs while the server has bytes the peer has
    not taken: armed at ``pause_writing`` (the transport's buffer over its high-water mark) and
    whenever a response ends, or the connection is closed, with bytes still unsent. The
    connection is aborted (a plain close would wait for the peer forever) when it stayed paused
    for writing for the whole deadline, or when its peer took nothing of the unsent bytes in
    it; it is disarmed once everything is sent, and restarts when the peer takes some. While
    paused for writing, the next pipelined request is not parsed; the bytes of pipelined
    requests held unparsed are kept to :data:`MAX_PIPELINED_BYTES` (plus one read) by not
    reading the connection until its answers are taken.
    """

    guard: ClassVar[ConnectionGuard]
    _deadline: asyncio.TimerHandle | None = None
    _write_deadline: asyncio.TimerHandle | None = None
    _served_one = False
    _deferred = False  # a response ended while paused for writing: the next cycle waits
    _paused_since: float | None = None  # event-loop time of pause_writing, until resume_writing
    _unsent = 0  # bytes unsent when the write deadline was (re)armed
    #: Event-loop time since which the peer has left what it is sent unread (bytes unsent and
    #: the write deadline armed; reset when it takes some), or ``None``.
    stalled_since: float | None = None

    @property
    def serving(self) -> bool:
        """True while the app handles a request of this connection (its response not done)."""
        # uvicorn types the attribute as always set; it is None before the first request
        cycle: RequestResponseCycle | None = getattr(self, "cycle", None)
        return cycle is not None and not cycle.response_complete

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Admit the connection under the cap and arm the deadline, or refuse it with 503."""
        super().connection_made(transport)
        self.flow = _HeldFlow(transport)
        if not self.guard.admit(self):
            transport.write(_SERVICE_UNAVAILABLE)
            self._close()
            return
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        """Disarm and forget the connection, then let uvicorn clean up."""
        self._disarm()
        self._disarm_write()
        self._deferred = False
        self.guard.release(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Feed h11 as uvicorn does, bound what is left unparsed, then follow the request."""
        super().data_received(data)
        if len(self.conn.trailing_data[0]) > MAX_PIPELINED_BYTES and isinstance(
            self.flow, _HeldFlow
        ):
            self.flow.hold()  # pipelined ahead of its answers: read no more until they are taken
        self._follow_request()

    def on_response_complete(self) -> None:
        """Start a kept-alive connection's next cycle as uvicorn does, unless paused for writing.

        A peer that does not take its answers gets no further request of its parsed: the next
        cycle starts when it reads (``resume_writing``), or the write deadline closes it.
        """
        self._watch_unsent()
        if self.transport.is_closing():
            pass
        elif self.flow.write_paused:
            self._deferred = True
            return
        super().on_response_complete()
        flow = self.flow
        unparsed = len(self.conn.trailing_data[0])
        if isinstance(flow, _HeldFlow) and flow.held and unparsed <= MAX_PIPELINED_BYTES:
            flow.release()
            if self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
                flow.resume_reading()  # the rest of a request is still to come
        self._follow_request()

    def pause_writing(self) -> None:
        """The transport's buffer is full: stop as uvicorn does, arm the write deadline."""
        super().pause_writing()
        if self._paused_since is None:
            self._paused_since = self.loop.time()
        self._arm_write()

    def resume_writing(self) -> None:
        """The peer took what was sent: start a cycle that waited for it."""
        super().resume_writing()
        self._paused_since = None
        if self.transport.get_write_buffer_size() == 0:
            self._disarm_write()
        if self._deferred:
            self._deferred = False
            self.on_response_complete()

    def send_400_response(self, msg: str) -> None:
        """Answer an unparsable request with 400 as uvicorn does; watch the unsent bytes."""
        super().send_400_response(msg)
        self._watch_unsent()

    def _follow_request(self) -> None:
        state = self.conn.their_state
        if state is h11.SEND_BODY or (state is h11.IDLE and self.conn.trailing_data[0]):
            self._arm()  # a request is arriving: headers or body incomplete
        elif state is h11.IDLE:
            if self._served_one:
                self._disarm()  # between requests: uvicorn's keep-alive time-out applies
        else:
            self._served_one = True  # DONE, MUST_CLOSE, CLOSED, ERROR: nothing more to receive
            self._disarm()

    def _arm(self) -> None:
        if self._deadline is None and not self.transport.is_closing():
            self._deadline = self.loop.call_later(self.guard.request_timeout_s, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        self.guard.request_timed_out()
        if self.conn.their_state is h11.IDLE and not self.serving:
            self.transport.write(_REQUEST_TIMEOUT)
        self._close()

    def _close(self) -> None:
        """Close once what is buffered is sent, or abort at the write deadline."""
        self.transport.close()
        self._watch_unsent()

    def _watch_unsent(self) -> None:
        """A closing transport waits to send its buffer: give the peer the write deadline."""
        if self.transport.get_write_buffer_size() > 0:
            self._arm_write()

    def _arm_write(self, delay: float | None = None) -> None:
        if self._write_deadline is None:
            if self.stalled_since is None:
                self.stalled_since = self.loop.time()
            self._unsent = self.transport.get_write_buffer_size()
            self._write_deadline = self.loop.call_later(
                self.guard.request_timeout_s if delay is None else delay, self._write_expired
            )

    def _disarm_write(self) -> None:
        self.stalled_since = None
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _write_expired(self) -> None:
        self._write_deadline = None
        now, unsent = self.loop.time(), self.transport.get_write_buffer_size()
        bound = self.guard.request_timeout_s
        if unsent == 0 and self._paused_since is None:
            self.stalled_since = None  # all sent
            return
        paused_for = 0.0 if self._paused_since is None else now - self._paused_since
        if paused_for >= bound or unsent >= self._unsent:
            self.guard.write_timed_out()  # paused throughout, or the peer took nothing
            self.transport.abort()
            return
        self.stalled_since = now  # the peer took some: a new window
        self._arm_write(None if self._paused_since is None else bound - paused_for)


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """DNS-rebinding protection: the Host and Origin values the HTTP transport accepts.

    With no ``--allowed-hosts``, the bound ``host:port`` is allowed (plus ``localhost`` and
    ``127.0.0.1`` on a loopback bind); with no ``--allowed-origins``, the matching ``http://``
    origins are.
    """
    hosts = list(settings.allowed_hosts)
    if not hosts:
        hosts = [f"{settings.host}:{settings.port}"]
        if settings.host in LOOPBACK_HOSTS:
            hosts += [f"127.0.0.1:{settings.port}", f"localhost:{settings.port}"]
    origins = list(settings.allowed_origins) or [f"http://{h}" for h in hosts]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def build_http_app(
    app: MCPServer[Any], settings: Settings, health: Callable[[], str | None] | None = None
) -> ASGIApp:
    """Return the ASGI application serving ``app`` over streamable HTTP with our protections.

    From the outside in: :class:`CloseRefusals` (``Connection: close`` on ``/healthz`` and
    4xx/5xx answers), :class:`BearerAuth` (``/healthz``, answered from ``health``; the
    token), :class:`BodyLimit` (``--max-body``, ``--max-body-in-flight``), the SDK's app (Host
    and Origin checks). The principals are ``settings.http_principals``.
    """
    starlette_app = app.streamable_http_app(
        max_request_body_size=settings.max_body_bytes,
        transport_security=transport_security(settings),
        host=settings.host,
    )
    limited = BodyLimit(
        starlette_app,
        settings.max_body_bytes,
        BodyBudget(settings.max_body_in_flight_bytes),
        settings.admission_wait_s,
    )
    return CloseRefusals(BearerAuth(limited, settings.http_principals, health))


def build_uvicorn_config(
    app: MCPServer[Any], settings: Settings, health: Callable[[], str | None] | None = None
) -> tuple[uvicorn.Config, ConnectionGuard]:
    """The uvicorn configuration serving ``app``, and the guard its connections report to.

    Raises:
        ConfigError: The open-file limit leaves no room for connections (:func:`connection_cap`).
    """
    guard = ConnectionGuard(
        connection_cap(settings.http_max_connections), settings.http_request_timeout_s
    )
    protocol = type("ServerH11Protocol", (GuardedH11Protocol,), {"guard": guard})
    config = uvicorn.Config(
        build_http_app(app, settings, health),
        host=settings.host,
        port=settings.port,
        http=protocol,
        ws="none",  # no WebSocket upgrade (BearerAuth refuses websocket scopes as well)
        log_level=settings.log_level.lower(),
        server_header=False,
        lifespan="on",
    )
    return config, guard


#: Pending connections the listening socket queues (uvicorn's default ``--backlog``).
LISTEN_BACKLOG = 2048


def bind_http(settings: Settings) -> socket.socket:
    """Bind and listen on ``--host``/``--port`` before anything says the server is serving.

    Returns:
        The listening socket (close-on-exec); :func:`serve_http` serves on it.

    Raises:
        ConfigError: The address cannot be bound: the port is in use (another server, or any
            program listening there), the address is not this machine's, or the port needs
            privileges; the message names the host, the port and the remedy.
    """
    try:
        return socket.create_server(
            (settings.host, settings.port),
            family=socket.AF_INET6 if ":" in settings.host else socket.AF_INET,
            backlog=LISTEN_BACKLOG,
        )
    except OSError as exc:
        where = f"{settings.host}:{settings.port}"
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {settings.port} on {settings.host} is already in use (another "
                "mcp-secure-sandbox server, or another program listening there; `ss -ltnp "
                f"'sport = :{settings.port}'` shows which): stop it, or choose another --port"
            ) from None
        raise ConfigError(
            f"cannot listen on {where}: {exc.strerror or exc}; check --host and --port "
            "(ports below 1024 need privileges)"
        ) from None


def serve_http(
    app: MCPServer[Any],
    settings: Settings,
    health: Callable[[], str | None] | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Serve ``app`` over streamable HTTP with uvicorn until interrupted (blocking).

    Args:
        app: The MCP server.
        settings: The server's settings.
        health: :class:`BearerAuth`'s (``/healthz``).
        sock: The listening socket from :func:`bind_http`; bound here when ``None``.

    Raises:
        ConfigError: As :func:`build_uvicorn_config` and :func:`bind_http`.
    """
    config, guard = build_uvicorn_config(app, settings, health)
    if sock is None:
        sock = bind_http(settings)
    for warning in http_warnings(settings):
        log.warning("%s", warning)
    log.info(
        "HTTP: at most %d connections, %g s to send a request and to take an answer",
        guard.cap,
        guard.request_timeout_s,
    )
    uvicorn.Server(config).run(sockets=[sock])
