"""Exceptions of :mod:`pysandbox`, all rooted in :class:`SandboxError`."""

from __future__ import annotations

__all__ = [
    "IsolationUnavailable",
    "SandboxClosedError",
    "SandboxError",
    "SandboxSetupError",
    "SessionEndedError",
    "SessionsNeedWarmMode",
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
