"""Exceptions of :mod:`pysandbox`, all rooted in :class:`SandboxError`."""

from __future__ import annotations

__all__ = [
    "ExclusiveTimeout",
    "IsolationUnavailable",
    "JobError",
    "SandboxClosedError",
    "SandboxError",
    "SandboxSetupError",
    "SessionBudgetExceeded",
    "SessionEndedError",
    "SessionsNeedWarmMode",
    "TooManySessions",
    "UnknownSession",
    "WorkerLimitExceeded",
    "WorkerProtocolError",
    "WorkerStartError",
]


class SandboxError(Exception):
    """Base class of every error raised by :mod:`pysandbox` (not for outcomes of user code)."""


class IsolationUnavailable(SandboxError):
    """A required isolation layer is not available here, so the sandbox refuses to run.

    Attributes:
        missing: Names of the required layers that are not active (``"landlock"``, ...).
        reasons: For each missing layer, why it is not active.
    """

    def __init__(self, missing: tuple[str, ...], reasons: dict[str, str]) -> None:
        self.missing = missing
        self.reasons = dict(reasons)
        super().__init__(missing, reasons)

    def __str__(self) -> str:
        details = "; ".join(
            f"{name}: {self.reasons.get(name, 'unavailable')}" for name in self.missing
        )
        return (
            f"required isolation layer(s) unavailable: {details}. Refusing to run untrusted code. "
            "To accept weaker isolation, construct the Sandbox with require=() "
            "(UNSAFE: Python-level guards and rlimits only)."
        )


class SandboxSetupError(SandboxError):
    """The child could not apply a requested isolation layer; no user code ran.

    Attributes:
        detail: The child's own description of what failed.
    """

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)

    def __str__(self) -> str:
        return f"the sandboxed interpreter could not apply its isolation layers: {self.detail}"


class SandboxClosedError(SandboxError):
    """The :class:`~pysandbox.Sandbox` was closed; it runs nothing more."""

    def __str__(self) -> str:
        return "this Sandbox has been closed"


class ExclusiveTimeout(SandboxError):
    """The workspace could not be held exclusively in time; nothing was stopped or changed.

    Raised by :meth:`pysandbox.Sandbox.exclusive` (and
    :meth:`pysandbox.WorkspaceCoordinator.exclusive`).

    Attributes:
        wait_s: The wait that passed, in seconds.
        runs_in_progress: Runs still counted when it passed.
        reason: What was still holding the workspace.
    """

    def __init__(self, wait_s: float, runs_in_progress: int, reason: str) -> None:
        self.wait_s = wait_s
        self.runs_in_progress = runs_in_progress
        self.reason = reason
        super().__init__(wait_s, runs_in_progress, reason)

    def __str__(self) -> str:
        return (
            f"the workspace could not be held exclusively within {self.wait_s:g} s: "
            f"{self.reason} ({self.runs_in_progress} run(s) in progress); nothing was "
            "stopped or changed, try again"
        )


class WorkerLimitExceeded(SandboxError):
    """A :class:`~pysandbox.ConfinedPool` job was stopped by its deadline or its memory budget.

    The worker that ran it was killed (or exited) and is replaced when the next job needs one;
    the pool goes on.

    Attributes:
        reason: ``"deadline"`` (the wall-clock deadline passed, or the worker died, e.g. of its
            ``RLIMIT_AS`` or ``RLIMIT_CPU``) or ``"memory"`` (the worker reported
            ``MemoryError`` under its ``RLIMIT_AS`` budget).
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class WorkerProtocolError(SandboxError):
    """A confined worker answered something that is not a well-formed answer.

    The worker was killed and replaced and nothing of the answer was used: a correct worker
    never does this, so the answer is treated as coming from a compromised or broken process.
    """


class WorkerStartError(SandboxError, RuntimeError):
    """A confined worker could not be started (or the pool is closed); no job ran."""


class JobError(SandboxError):
    """A job's own error: raised by a pool handler in the worker, re-raised by the pool.

    A handler raises it for an expected failure of its input (a bad argument, a schema it
    refuses); the worker answers ``{"error": {"kind", "message"}}`` and stays for the next job.
    The pool raises it again, in the caller, with the same kind and message.

    Attributes:
        kind: A short name the pool was told to accept (``error_kinds``), or ``"failed"``
            (any other exception of the handler; its worker is replaced).
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class SessionsNeedWarmMode(SandboxError):
    """:meth:`~pysandbox.Sandbox.open_session` in spawn mode: sessions need warm mode.

    Attributes:
        reason: Why the sandbox runs in spawn mode (asked for, or the zygote could not start).
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)

    def __str__(self) -> str:
        return (
            "sessions need warm mode (a session is forked by the warm zygote), but this "
            f"sandbox runs in spawn mode: {self.reason}. Use Sandbox(execution='warm') on Linux"
        )


class SessionEndedError(SandboxError):
    """The :class:`~pysandbox.Session` has ended; it runs nothing more.

    Attributes:
        reason: Why it ended (``timeout``, ``memory_limit``, ``exit``, ``killed``, ``closed``).
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)

    def __str__(self) -> str:
        return f"this session has ended ({self.reason}): open a new one"


def _shown(session_id: str) -> str:
    """A handle as a message shows it: as given when it looks like one, else cut and quoted.

    The id is the caller's (hostile) text: at most 64 characters of ``[A-Za-z0-9_-]`` are shown
    as they are; anything else is shown by its ``repr``, cut to 40 characters.
    """
    if 0 < len(session_id) <= 64 and all(
        c.isascii() and (c.isalnum() or c in "_-") for c in session_id
    ):
        return session_id
    text = repr(session_id)
    return text if len(text) <= 40 else text[:37] + "..."


class UnknownSession(SandboxError):
    """No live session of the caller has this handle (:class:`pysandbox.SessionRegistry`).

    Closed, expired, ended, never minted, or another principal's: all read the same.

    Attributes:
        session_id: The handle as given, shortened for display (:attr:`shown`).
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(session_id)

    @property
    def shown(self) -> str:
        """The handle as messages show it (a hostile id cut and quoted)."""
        return _shown(self.session_id)

    def __str__(self) -> str:
        return f"unknown session {self.shown} (it may have been closed or expired)"


class TooManySessions(SandboxError):
    """A create would pass the registry's session limits.

    Attributes:
        limit: Most live sessions in all.
        total: Live sessions (and creates in progress) now.
        yours: The asking principal's of them.
        per_principal: Most live sessions of one principal.
    """

    def __init__(self, *, limit: int, total: int, yours: int, per_principal: int) -> None:
        self.limit = limit
        self.total = total
        self.yours = yours
        self.per_principal = per_principal
        super().__init__(limit, total, yours, per_principal)

    def __str__(self) -> str:
        if self.yours >= self.per_principal:
            return (
                f"{self.yours} sessions of this principal are live, its maximum of "
                f"{self.per_principal} ({self.total} of at most {self.limit} in all)"
            )
        return f"{self.total} sessions are live, the maximum of {self.limit} ({self.yours} yours)"


class SessionBudgetExceeded(SandboxError):
    """The memory the sessions budget counts is at or over the budget.

    Attributes:
        budget: The budget, bytes.
        used: What was in use when it was checked, bytes (sessions, ready children, runs).
    """

    def __init__(self, budget: int, used: int) -> None:
        self.budget = budget
        self.used = used
        super().__init__(budget, used)

    def __str__(self) -> str:
        return f"the sessions memory budget ({self.budget} bytes) is in use ({self.used} bytes)"
