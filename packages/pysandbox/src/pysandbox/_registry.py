"""Sessions behind opaque handles: ids bound to a principal, limits, lifetimes, the sweep.

A :class:`SessionRegistry` maps server-minted handles (``sess_`` and 128 random bits from
:mod:`secrets`, URL-safe Base64) to :class:`pysandbox.Session` objects of one sandbox. Each
handle is bound to the principal string that created it: a lookup checks the handle (by its
SHA-256 digest, then :func:`hmac.compare_digest` on the handle itself) and the principal, and
another principal's handle is exactly an unknown one (same exception, same message). The
registry enforces, at every create:

- at most ``max_sessions`` sessions in all and ``max_per_principal`` per principal
  (:class:`~pysandbox.exceptions.TooManySessions`, with both counts);
- the memory budget: the resident set sizes of the live sessions, the sandbox's ready
  children and its runs (:meth:`pysandbox.Sandbox.children_rss_bytes`) below
  ``memory_budget_bytes`` (:class:`~pysandbox.exceptions.SessionBudgetExceeded`), checked at
  every call too;

and each session's lifetime: it expires at ``min(end of its last call + idle_timeout_s,
creation + max_lifetime_s)`` (seconds of the injected clock, ``time.time`` by default). An
expired session is closed by :meth:`SessionRegistry.sweep` (a caller runs it periodically) or
at its next lookup, and a session whose call ended it (``exit``, ``timeout``, ...) is forgotten
at once. A call in progress is never swept. Thread-safe: one lock guards the table; forking and
the calls themselves run outside it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from pysandbox.exceptions import (
    SessionBudgetExceeded,
    SessionEndedError,
    TooManySessions,
    UnknownSession,
)

if TYPE_CHECKING:
    from pysandbox._result import RunResult
    from pysandbox.runner import Sandbox

__all__ = [
    "HANDLE_BYTES",
    "HANDLE_PREFIX",
    "SessionInfo",
    "SessionLike",
    "SessionRegistry",
]

#: Random bytes of a handle (128 bits).
HANDLE_BYTES = 16
#: What every handle begins with (readable in logs; carries no secret).
HANDLE_PREFIX = "sess_"


class SessionLike(Protocol):
    """What the registry uses of a :class:`pysandbox.Session` (tests pass fakes)."""

    description: str

    @property
    def ended(self) -> bool: ...

    @property
    def rss_bytes(self) -> int: ...

    def run(self, code: str, timeout: float | None = None) -> RunResult: ...

    async def arun(self, code: str, timeout: float | None = None) -> RunResult: ...

    def close(self) -> None: ...


@dataclasses.dataclass(frozen=True)
class SessionInfo:
    """One session as its principal sees it (:meth:`SessionRegistry.list`).

    Attributes:
        session_id: The handle.
        principal: Who created it (the only one who can see or use it).
        description: The creator's description.
        created_at: When it was created, seconds of the registry's clock (epoch by default).
        last_used_at: When its last call ended (``created_at`` before the first).
        expires_at: ``min(last_used_at + idle_timeout_s, created_at + max_lifetime_s)``.
        calls: Calls that ran in it (rejected ones included: they took a turn).
        cpu_time_ms: CPU its calls used, in milliseconds (the calls' ``cpu_time_ms``).
        rss_bytes: Its resident set now, bytes (0 once ended).
        busy: Whether a call is in progress.
    """

    session_id: str
    principal: str
    description: str
    created_at: float
    last_used_at: float
    expires_at: float
    calls: int
    cpu_time_ms: float
    rss_bytes: int
    busy: bool


@dataclasses.dataclass
class _Entry:
    handle: str
    principal: str
    session: SessionLike
    created_at: float
    last_used_at: float
    calls: int = 0
    cpu_time_ms: float = 0.0
    busy: int = 0


def _digest(handle: str) -> bytes:
    return hashlib.sha256(handle.encode("utf-8", "surrogatepass")).digest()


def _check_principal(principal: object) -> None:
    if not isinstance(principal, str) or not principal:
        raise TypeError("principal must be a non-empty str")


def _check_positive(name: str, value: float, kind: type) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    if kind is int and not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not 0 < value < float("inf"):
        raise ValueError(f"{name} must be positive and finite, got {value}")


class SessionRegistry:
    """Sessions of one sandbox behind opaque handles bound to principals (see the module).

    Args:
        sandbox: The sandbox the sessions are opened on (warm mode), or ``None`` with
            ``opener`` (tests).
        max_sessions: Most live sessions in all (>= 1).
        max_per_principal: Most live sessions of one principal (>= 1, at most
            ``max_sessions``).
        memory_budget_bytes: The resident set sizes of the live sessions, ready children and
            runs must stay below this for a create or a call to start (bytes, > 0).
        idle_timeout_s: A session expires this long after its last call ended (seconds, > 0).
        max_lifetime_s: A session expires this long after its creation (seconds, > 0).
        clock: Seconds now (``time.time``); tests inject a fake one.
        opener: Opens a session from a description (``sandbox.open_session`` by default).
        children_rss: Bytes of the sandbox's ready children and runs
            (``sandbox.children_rss_bytes`` by default; ``0`` without a sandbox).

    Raises:
        TypeError, ValueError: A limit is not a positive finite number (ints for the counts),
            or ``max_per_principal`` exceeds ``max_sessions``, or neither ``sandbox`` nor
            ``opener`` is given.
    """

    def __init__(
        self,
        sandbox: Sandbox | None,
        *,
        max_sessions: int,
        max_per_principal: int,
        memory_budget_bytes: int,
        idle_timeout_s: float,
        max_lifetime_s: float,
        clock: Callable[[], float] = time.time,
        opener: Callable[[str], SessionLike] | None = None,
        children_rss: Callable[[], int] | None = None,
    ) -> None:
        _check_positive("max_sessions", max_sessions, int)
        _check_positive("max_per_principal", max_per_principal, int)
        _check_positive("memory_budget_bytes", memory_budget_bytes, int)
        _check_positive("idle_timeout_s", idle_timeout_s, float)
        _check_positive("max_lifetime_s", max_lifetime_s, float)
        if max_per_principal > max_sessions:
            raise ValueError(
                f"max_per_principal ({max_per_principal}) exceeds max_sessions ({max_sessions})"
            )
        if opener is None:
            if sandbox is None:
                raise ValueError("give a sandbox or an opener")
            opener = sandbox.open_session
        if children_rss is None:
            children_rss = sandbox.children_rss_bytes if sandbox is not None else (lambda: 0)
        self.max_sessions = max_sessions
        self.max_per_principal = max_per_principal
        self.memory_budget_bytes = memory_budget_bytes
        self.idle_timeout_s = float(idle_timeout_s)
        self.max_lifetime_s = float(max_lifetime_s)
        self._clock = clock
        self._open = opener
        self._children_rss = children_rss
        self._lock = threading.Lock()
        self._entries: dict[bytes, _Entry] = {}
        self._opening: dict[str, int] = {}  # principal -> creates in progress
        self._closed = False

    # -- lifetimes --
    def expires_at(self, created_at: float, last_used_at: float) -> float:
        """When a session created at ``created_at``, last used at ``last_used_at``, expires.

        Returns:
            ``min(last_used_at + idle_timeout_s, created_at + max_lifetime_s)``, seconds.
        """
        return min(last_used_at + self.idle_timeout_s, created_at + self.max_lifetime_s)

    def _expired(self, entry: _Entry, now: float) -> bool:
        return not entry.busy and now >= self.expires_at(entry.created_at, entry.last_used_at)

    def _info(self, entry: _Entry) -> SessionInfo:
        return SessionInfo(
            session_id=entry.handle,
            principal=entry.principal,
            description=entry.session.description,
            created_at=entry.created_at,
            last_used_at=entry.last_used_at,
            expires_at=self.expires_at(entry.created_at, entry.last_used_at),
            calls=entry.calls,
            cpu_time_ms=round(entry.cpu_time_ms, 3),
            rss_bytes=0 if entry.session.ended else entry.session.rss_bytes,
            busy=entry.busy > 0,
        )

    # -- memory --
    def memory_in_use(self) -> int:
        """Bytes the budget counts now: the sessions', ready children's and runs' resident sets.

        Read from ``/proc`` (blocking, a few ms).
        """
        with self._lock:
            sessions = [entry.session for entry in self._entries.values()]
        return sum(s.rss_bytes for s in sessions if not s.ended) + self._children_rss()

    def _check_budget(self) -> None:
        used = self.memory_in_use()
        if used >= self.memory_budget_bytes:
            raise SessionBudgetExceeded(self.memory_budget_bytes, used)

    # -- create, look up, call --
    def create(self, principal: str, description: str = "") -> SessionInfo:
        """Open a session for ``principal``; return its info (with the new handle).

        Args:
            principal: Who asks (any non-empty str; the server's principal name).
            description: The session's description (the library's bound on its length).

        Returns:
            The new session's :class:`SessionInfo`.

        Raises:
            TypeError: ``principal`` is not a non-empty str (or ``description`` not a str).
            TooManySessions: ``max_sessions`` in all, or ``max_per_principal`` of this
                principal's, are live (or being opened).
            SessionBudgetExceeded: The memory in use is at or over the budget.
            pysandbox.exceptions.SandboxClosedError: The registry or the sandbox was closed.
            Whatever :meth:`pysandbox.Sandbox.open_session` raises (``SessionsNeedWarmMode``,
            ``ValueError`` for a long description, ``SandboxSetupError``).
        """
        from pysandbox.exceptions import SandboxClosedError

        _check_principal(principal)
        self.sweep()
        with self._lock:
            if self._closed:
                raise SandboxClosedError
            total = len(self._entries) + sum(self._opening.values())
            mine = sum(e.principal == principal for e in self._entries.values())
            mine += self._opening.get(principal, 0)
            if total >= self.max_sessions or mine >= self.max_per_principal:
                raise TooManySessions(
                    limit=self.max_sessions,
                    total=total,
                    yours=mine,
                    per_principal=self.max_per_principal,
                )
            self._opening[principal] = self._opening.get(principal, 0) + 1
        entry: _Entry | None = None
        try:
            self._check_budget()
            session = self._open(description)
            now = self._clock()
            handle = HANDLE_PREFIX + secrets.token_urlsafe(HANDLE_BYTES)
            entry = _Entry(handle, principal, session, created_at=now, last_used_at=now)
        finally:
            with self._lock:  # the reservation becomes the entry in one step
                self._opening[principal] -= 1
                if not self._opening[principal]:
                    del self._opening[principal]
                closed = self._refusing()
                if entry is not None and not closed:
                    self._entries[_digest(entry.handle)] = entry
        if closed:
            session.close()
            raise SandboxClosedError
        return self._info(entry)

    def _refusing(self) -> bool:
        """Whether :meth:`close_all` ran (caller holds ``_lock``)."""
        return self._closed

    def _find(self, session_id: object, principal: str) -> _Entry:
        """The live entry of ``session_id`` owned by ``principal``; caller holds ``_lock``."""
        if not isinstance(session_id, str):
            raise UnknownSession(repr(session_id))
        entry = self._entries.get(_digest(session_id))
        if (
            entry is None
            or not hmac.compare_digest(entry.handle.encode(), session_id.encode("utf-8", "replace"))
            or not hmac.compare_digest(
                entry.principal.encode("utf-8", "replace"), principal.encode("utf-8", "replace")
            )
        ):
            raise UnknownSession(session_id)
        return entry

    def _take(self, session_id: object, principal: str) -> _Entry:
        """The live entry, expired or ended ones closed and forgotten (then unknown)."""
        with self._lock:
            entry = self._find(session_id, principal)
            gone = entry.session.ended or self._expired(entry, self._clock())
            if gone:
                del self._entries[_digest(entry.handle)]
        if gone:
            entry.session.close()
            raise UnknownSession(entry.handle)
        return entry

    def info(self, session_id: str, principal: str) -> SessionInfo:
        """The info of one of ``principal``'s sessions.

        Raises:
            UnknownSession: No live session of ``principal`` has this handle.
        """
        return self._info(self._take(session_id, principal))

    def run(
        self, session_id: str, principal: str, code: str, timeout: float | None = None
    ) -> RunResult:
        """Run ``code`` in one of ``principal``'s sessions (blocking).

        Args:
            session_id: The handle :meth:`create` returned.
            principal: Who asks.
            code: Python source.
            timeout: The call's wall-clock limit, seconds (see :meth:`pysandbox.Session.run`).

        Returns:
            The call's result; a call that ended the session (``session_ended``) forgets it.

        Raises:
            UnknownSession: No live session of ``principal`` has this handle (closed, expired,
                ended, another principal's, never minted).
            SessionBudgetExceeded: The memory in use is at or over the budget.
            TypeError, ValueError, SandboxClosedError: As :meth:`pysandbox.Session.run`.
        """
        entry = self._begin(session_id, principal)
        try:
            result = entry.session.run(code, timeout)
        except SessionEndedError:
            self._forget(entry)
            raise UnknownSession(entry.handle) from None
        finally:
            self._end(entry)
        return self._account(entry, result)

    async def arun(
        self, session_id: str, principal: str, code: str, timeout: float | None = None
    ) -> RunResult:
        """Like :meth:`run`, awaiting the call; a cancelled call kills the session.

        The lookup and the budget read ``/proc`` before the call (a few ms): a caller whose
        loop must not block uses :meth:`begin_call` in a thread, then awaits the session.

        Raises:
            As :meth:`run`.
        """
        entry = self._begin(session_id, principal)
        try:
            result = await entry.session.arun(code, timeout)
        except SessionEndedError:
            self._forget(entry)
            raise UnknownSession(entry.handle) from None
        finally:
            self._end(entry)
        return self._account(entry, result)

    def begin_call(self, session_id: str, principal: str) -> SessionLike:
        """Look up, budget-check and mark busy one session (the first half of :meth:`arun`).

        For a caller that awaits :meth:`pysandbox.Session.arun` itself (in its own scope)
        and then calls :meth:`end_call` with the result (or ``None``), whatever happened.

        Returns:
            The session, marked busy (the sweep leaves it).

        Raises:
            UnknownSession, SessionBudgetExceeded: As :meth:`run`.
        """
        return self._begin(session_id, principal).session

    def end_call(self, session_id: str, principal: str, result: RunResult | None) -> None:
        """The second half of :meth:`begin_call`: count ``result``, forget an ended session."""
        with self._lock:
            entry = self._entries.get(_digest(session_id))
        if entry is None or entry.principal != principal:
            return
        self._end(entry)
        if result is not None:
            self._account(entry, result)
        elif entry.session.ended:
            self._forget(entry)

    def _begin(self, session_id: str, principal: str) -> _Entry:
        entry = self._take(session_id, principal)
        with self._lock:
            # The sweep may have taken it between the lookup and here (it leaves busy ones).
            if self._entries.get(_digest(entry.handle)) is not entry:
                raise UnknownSession(entry.handle)
            entry.busy += 1
        try:
            self._check_budget()
        except BaseException:
            self._end(entry)
            raise
        return entry

    def _end(self, entry: _Entry) -> None:
        # The call's end is its last use, set in the same step that makes it sweepable again:
        # a session idle for nearly its time-out before the call is not swept right after it.
        with self._lock:
            entry.busy = max(0, entry.busy - 1)
            entry.last_used_at = self._clock()

    def _account(self, entry: _Entry, result: RunResult) -> RunResult:
        with self._lock:
            entry.calls += 1
            entry.cpu_time_ms += result.cpu_time_ms
            entry.last_used_at = self._clock()
        if result.session_ended or entry.session.ended:
            self._forget(entry)
        return result

    def _forget(self, entry: _Entry) -> None:
        with self._lock:
            if self._entries.get(_digest(entry.handle)) is entry:
                del self._entries[_digest(entry.handle)]
        entry.session.close()

    # -- listing, closing, the sweep --
    def list(self, principal: str) -> list[SessionInfo]:
        """``principal``'s live sessions, oldest first (no one else's).

        Returns:
            Their :class:`SessionInfo` (expired ones not swept yet are left out).
        """
        now = self._clock()
        with self._lock:
            mine = [
                e
                for e in self._entries.values()
                if e.principal == principal and not self._expired(e, now)
            ]
        return [self._info(e) for e in sorted(mine, key=lambda e: e.created_at)]

    def count(self, principal: str | None = None) -> int:
        """Live sessions (of ``principal`` when given)."""
        with self._lock:
            return sum(
                principal is None or e.principal == principal for e in self._entries.values()
            )

    def close(self, session_id: str, principal: str) -> None:
        """Close one of ``principal``'s sessions (its process killed and reaped).

        Raises:
            UnknownSession: As :meth:`run` (closing twice: the second is unknown).
        """
        with self._lock:
            entry = self._find(session_id, principal)
            del self._entries[_digest(entry.handle)]
        entry.session.close()

    def sweep(self) -> int:
        """Close every expired session that has no call in progress, and every ended one.

        Returns:
            How many were closed.
        """
        now = self._clock()
        with self._lock:
            gone = [
                (key, e)
                for key, e in self._entries.items()
                if self._expired(e, now) or (not e.busy and e.session.ended)
            ]
            for key, _entry in gone:
                del self._entries[key]
        for _key, entry in gone:
            entry.session.close()
        return len(gone)

    def close_all(self) -> int:
        """Close every session and refuse new ones (shutdown); return how many were closed."""
        with self._lock:
            self._closed = True
            entries = list(self._entries.values())
            self._entries.clear()
        for entry in entries:
            entry.session.close()
        return len(entries)
