"""Principals: who is calling, as a name, and the tokens that prove it over streamable HTTP.

stdio has one principal, :data:`DEFAULT_PRINCIPAL`. Over streamable HTTP each bearer token
stands for one principal: the ``--tokens-file`` (``SANDBOX_TOKENS_FILE``) names them, one
``NAME:TOKEN`` per line (:func:`read_tokens_file`); without it the single token
(``SANDBOX_HTTP_TOKEN``, ``--token-file``) is the principal ``default``, and so is an
unauthenticated loopback server. :class:`Principals` holds them and finds the principal of a
credential in constant time; :class:`~mcp_secure_sandbox.http_transport.BearerAuth` records
the principal it authenticated in the request's ASGI scope (``scope["user"]``, a
:class:`PrincipalUser`) and a tool reads it with :func:`principal_of`. A client cannot forge
it: the scope is the server's, and the name comes only from the token that matched.

Principal names appear in the log (``principal=NAME`` on each call's line) and in a caller's
own ``get_sandbox_metrics`` (``caller``); tokens appear in no message, log line or ``repr``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import stat
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken

from mcp_secure_sandbox.settings import (
    DEFAULT_PRINCIPAL,
    PRINCIPAL_NAME_PATTERN,
    PRINCIPAL_TOKEN_MIN_CHARS,
    TOKENS_FILE_MAX_BYTES,
    ConfigError,
    check_token,
)

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.server.mcpserver import Context

__all__ = [
    "DEFAULT_PRINCIPAL",
    "PRINCIPAL_NAME",
    "PRINCIPAL_TOKEN_MIN_CHARS",
    "TOKENS_FILE_MAX_BYTES",
    "PrincipalContext",
    "PrincipalUser",
    "Principals",
    "current_principal",
    "principal_of",
    "principal_of_request",
    "read_tokens_file",
]

# DEFAULT_PRINCIPAL ("default"), the name pattern and the tokens file's limits are declared
# beside the token rule in mcp_secure_sandbox.settings (their one home, which the settings page
# and --help read) and exported here.
#: What a principal's name is (:data:`~mcp_secure_sandbox.settings.PRINCIPAL_NAME_PATTERN`).
PRINCIPAL_NAME = re.compile(PRINCIPAL_NAME_PATTERN)
_NAME_RULE = (
    "lower-case letters, digits, '_' and '-', 1 to 64 characters, beginning with a letter or a "
    "digit"
)
#: The tokens file's flag, as messages name it.
TOKENS_FILE_FLAG = "--tokens-file"
_FORMAT = (
    "write one NAME:TOKEN per line (NAME: lower-case letters, digits, '_', '-'; TOKEN: at "
    f"least {PRINCIPAL_TOKEN_MIN_CHARS} visible ASCII characters, for example from openssl rand "
    "-hex 32); blank lines and lines beginning with # are ignored"
)


def _digest(token: str | bytes) -> bytes:
    """SHA-256 of a token: every comparison is between 32-byte digests, whatever the lengths."""
    return hashlib.sha256(token.encode() if isinstance(token, str) else token).digest()


class Principals(Mapping[str, str]):
    """The principals of an HTTP server: each name with its bearer token, read-only.

    A mapping from name to token (iteration gives the names, in the order given). Its ``repr``
    names the principals and never shows a token. :meth:`authenticate` finds the principal of
    a credential in constant time.

    Args:
        tokens: Each principal's name and token. A name matches :data:`PRINCIPAL_NAME`; a token
            is held to :func:`~mcp_secure_sandbox.settings.check_token` and has at least
            :data:`PRINCIPAL_TOKEN_MIN_CHARS` characters; no two principals share a token.
        source: Where the tokens came from, for messages (``--tokens-file PATH``); kept as
            :attr:`source` (the file a :class:`~mcp_secure_sandbox.settings.Settings` read).

    Raises:
        ConfigError: No principal, a name that breaks the rule, a token that breaks the token
            rule, or two principals with one token; the message names the principal (never
            the token, not even a part of it).
    """

    def __init__(self, tokens: Mapping[str, str], source: str = "Principals") -> None:
        self.source = source
        given: object = tokens  # hostile until checked: code may pass anything
        if not isinstance(given, Mapping) or not given:
            raise ConfigError(f"{source}: give at least one principal as a mapping NAME: TOKEN")
        entries: list[tuple[str, str, bytes]] = []
        seen: dict[bytes, str] = {}
        for name, token in tokens.items():
            _check_name(name, source)
            _check_principal_token(token, f"{source} principal {name}")
            digest = _digest(token)
            if digest in seen:
                raise ConfigError(
                    f"{source}: principals {seen[digest]} and {name} have the same token; give "
                    "each principal its own"
                )
            seen[digest] = name
            entries.append((name, token, digest))
        self._entries = tuple(entries)
        self._tokens = {name: token for name, token, _ in entries}

    @classmethod
    def single(cls, token: str, source: str = "the HTTP token") -> Principals:
        """The one principal :data:`DEFAULT_PRINCIPAL` of a single token (``SANDBOX_HTTP_TOKEN``).

        The token is held to :func:`~mcp_secure_sandbox.settings.check_token` only (at least
        :data:`~mcp_secure_sandbox.settings.TOKEN_MIN_CHARS` characters), as it always was.

        Args:
            token: The token.
            source: Where it came from, for messages.

        Raises:
            ConfigError: The token breaks the token rule (the message names ``source``).
        """
        check_token(token, source)
        made = cls.__new__(cls)
        made.source = source
        made._entries = ((DEFAULT_PRINCIPAL, token, _digest(token)),)
        made._tokens = {DEFAULT_PRINCIPAL: token}
        return made

    def __getitem__(self, name: str) -> str:
        """The token of principal ``name``; :class:`KeyError` for an unknown name."""
        return self._tokens[name]

    def __iter__(self) -> Iterator[str]:
        """The names, in the order given."""
        return iter(self._tokens)

    def __len__(self) -> int:
        """How many principals there are."""
        return len(self._entries)

    def __repr__(self) -> str:
        """``Principals(alice, bob)``: the names only."""
        return f"Principals({', '.join(self._tokens)})"

    def authenticate(self, credential: str | bytes) -> str | None:
        """The name of the principal whose token is ``credential``, or ``None``.

        Constant time in what matters: the credential's SHA-256 digest is compared with every
        principal's (:func:`hmac.compare_digest`), all of them whatever matched, so neither
        the time nor the order tells which principal (or whether any) it was, nor how long the
        tokens are.

        Args:
            credential: What followed ``Bearer`` in the ``Authorization`` header.

        Returns:
            The principal's name, or ``None`` when no token matches.
        """
        offered = _digest(credential)
        found: str | None = None
        for name, _, digest in self._entries:
            matched = hmac.compare_digest(offered, digest)
            found = name if matched else found
        return found


def _check_name(name: object, source: str) -> str:
    if not isinstance(name, str) or PRINCIPAL_NAME.fullmatch(name) is None:
        # the text given is not repeated: a line without its name may begin with a token
        raise ConfigError(f"{source}: a principal's name is {_NAME_RULE}")
    return name


def _check_principal_token(token: object, source: str) -> str:
    if isinstance(token, str) and len(token) < PRINCIPAL_TOKEN_MIN_CHARS:
        raise ConfigError(
            f"{source}: the token must be at least {PRINCIPAL_TOKEN_MIN_CHARS} characters long "
            "(for example: openssl rand -hex 32)"
        )
    return check_token(token, source)  # type: ignore[arg-type]  # it refuses a non-str


def read_tokens_file(path: str, flag: str = TOKENS_FILE_FLAG) -> Principals:
    """Read the tokens file ``path``: one ``NAME:TOKEN`` per line, the one home of its format.

    Each line is split at its first ``:`` (surrounding spaces, tabs and a CR are ignored);
    blank lines and lines beginning with ``#`` are ignored. The file must be a regular file of
    at most :data:`TOKENS_FILE_MAX_BYTES` bytes that neither the group nor others may read or
    write (checked on the opened file, ``fstat``).

    Args:
        path: The file (``--tokens-file``, ``SANDBOX_TOKENS_FILE``).
        flag: How messages name the setting.

    Returns:
        The principals, in the file's order, with ``source`` ``"--tokens-file PATH"``.

    Raises:
        ConfigError: The file cannot be opened, is not a regular file, is open to the group or
            others (the message names its mode and says ``chmod 600``), is too large, or holds
            no principal; or a line is not ASCII, has no ``:``, a bad name, a token that breaks
            the token rule or is shorter than :data:`PRINCIPAL_TOKEN_MIN_CHARS`, or repeats an
            earlier line's name or token. One line naming the file and the line number, never
            a token nor a part of one.
    """
    source = f"{flag} {path}"
    try:
        # O_NONBLOCK: a FIFO is refused by the check below instead of blocking the start
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(f"{source}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{source} is not a regular file; {_FORMAT}")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise ConfigError(
                f"{source} is open to other users (mode {mode:04o}): its tokens let anyone who "
                f"reads it run code as this server; chmod 600 {path}"
            )
        chunks: list[bytes] = []
        size = 0
        while size <= TOKENS_FILE_MAX_BYTES:
            chunk = os.read(fd, TOKENS_FILE_MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        raw = b"".join(chunks)
    except OSError as exc:
        raise ConfigError(f"{source}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(raw) > TOKENS_FILE_MAX_BYTES:
        raise ConfigError(
            f"{source} holds more than {TOKENS_FILE_MAX_BYTES} bytes: is it the right file? "
            f"{_FORMAT}"
        )
    tokens: dict[str, str] = {}
    first_line: dict[str, int] = {}
    line_of_token: dict[bytes, int] = {}
    for number, line_bytes in enumerate(raw.split(b"\n"), start=1):
        where = f"{source} line {number}"
        try:
            line = line_bytes.decode("ascii").strip(" \t\r")
        except UnicodeDecodeError:
            raise ConfigError(f"{where} is not ASCII text; {_FORMAT}") from None
        if not line or line.startswith("#"):
            continue
        name, colon, token = line.partition(":")
        if not colon:
            raise ConfigError(f"{where} has no ':' between a name and a token; {_FORMAT}")
        _check_name(name, where)
        if name in first_line:
            raise ConfigError(
                f"{where}: the principal {name} is already named on line {first_line[name]}; "
                "give each principal one line"
            )
        _check_principal_token(token, where)
        digest = _digest(token)
        if digest in line_of_token:
            raise ConfigError(
                f"{where}: the same token as line {line_of_token[digest]}; give each principal "
                "its own token"
            )
        first_line[name] = line_of_token[digest] = number
        tokens[name] = token
    if not tokens:
        raise ConfigError(f"{source} holds no principal; {_FORMAT}")
    return Principals(tokens, source)


class PrincipalUser(AuthenticatedUser):
    """The ASGI ``scope["user"]`` of a request :class:`~.http_transport.BearerAuth` let in.

    An :class:`~mcp.server.auth.middleware.bearer_auth.AuthenticatedUser` whose client id is
    the principal's name: the SDK binds each streamable-HTTP transport session to the
    principal that opened it (another principal's request on it is answered 404, as an
    unknown session). No token is kept in it.

    Args:
        principal: The principal's name.
    """

    def __init__(self, principal: str) -> None:
        super().__init__(AccessToken(token="", client_id=principal, scopes=[]))
        self.principal = principal


def principal_of_request(request: Any) -> str:
    """The principal of the request a handler serves: :func:`principal_of` from the request.

    Args:
        request: ``ServerRequestContext.request``: ``None`` on stdio and in-memory transports;
            over streamable HTTP the Starlette request, whose ASGI scope
            :class:`~.http_transport.BearerAuth` gave a :class:`PrincipalUser`.

    Returns:
        The principal's name; :data:`DEFAULT_PRINCIPAL` without an HTTP request.

    Raises:
        RuntimeError: An HTTP request without a :class:`PrincipalUser`: the app was served
            without :class:`~.http_transport.BearerAuth` (never answered as ``default``).
    """
    if request is None:
        return DEFAULT_PRINCIPAL
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, Mapping) else None
    if not isinstance(user, PrincipalUser):
        raise RuntimeError(
            "this HTTP request has no authenticated principal: serve the server with "
            "mcp_secure_sandbox.http_transport.build_http_app (BearerAuth records it)"
        )
    return user.principal


def principal_of(ctx: Context) -> str:
    """The principal a tool call comes from: what to bind a session (or any state) to.

    stdio (and the SDK's in-memory client): :data:`DEFAULT_PRINCIPAL`. Streamable HTTP: the
    name of the principal whose token :class:`~.http_transport.BearerAuth` authenticated for
    this very request, read from the server's ASGI scope; never from a header, an argument or
    anything else a client sends after authenticating.

    Args:
        ctx: The tool's :class:`mcp.server.mcpserver.Context`.

    Returns:
        The principal's name (it matches :data:`PRINCIPAL_NAME`).

    Raises:
        ValueError: ``ctx`` is not within a request (the SDK's).
        RuntimeError: An HTTP request BearerAuth did not authenticate (see
            :func:`principal_of_request`).
    """
    return principal_of_request(ctx.request_context.request)


_current: ContextVar[str | None] = ContextVar("mcp_secure_sandbox_principal", default=None)


def current_principal() -> str | None:
    """The principal of the request being handled (set by :class:`PrincipalContext`), if any.

    For logs and metrics, where no ``ctx`` is at hand; a tool binding state uses
    :func:`principal_of`.
    """
    return _current.get()


class PrincipalContext:
    """Server middleware: :func:`current_principal` is the request's for its handler's duration.

    Installed on the server (``app.middleware``) so that each call's log line names its
    principal. An HTTP request without one (an app served without BearerAuth) has ``None``
    here; :func:`principal_of` refuses it.
    """

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Set the principal of ``ctx``'s request, call the handler, restore the previous one."""
        try:
            principal: str | None = principal_of_request(ctx.request)
        except RuntimeError:  # not served through BearerAuth: principal_of refuses its tools
            principal = None
        token = _current.set(principal)
        try:
            return await call_next(ctx)
        finally:
            _current.reset(token)
