"""Outcome of one sandboxed run."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import astguard

__all__ = ["RunResult", "RunStatus"]


class RunStatus(str, enum.Enum):
    """How a run ended, decided by the parent from what it observed.

    The values and meanings are those of the status table in ``DESIGN.md``.
    """

    #: Exit code 0.
    OK = "ok"
    #: Non-zero exit from an exception in user code (including ``PermissionError`` from a
    #: confinement layer and ``OSError(EFBIG)`` from the file-size limit).
    ERROR = "error"
    #: The static checker refused the code; nothing ran.
    REJECTED = "rejected"
    #: The wall-clock deadline or the CPU-time limit ended the run.
    TIMEOUT = "timeout"
    #: ``MemoryError`` under the memory limit, or a kill the parent attributes to memory.
    MEMORY_LIMIT = "memory_limit"
    #: stdout or stderr passed its cap and the run was stopped.
    OUTPUT_LIMIT = "output_limit"
    #: The workspace passed its byte or file-count limit and the run was stopped.
    DISK_LIMIT = "disk_limit"
    #: Any other signal (a crash, a seccomp kill, a cancelled run).
    KILLED = "killed"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class RunResult:
    """The result of :meth:`pysandbox.Sandbox.run`.

    Attributes:
        status: How the run ended (see :class:`RunStatus`).
        exit_code: Exit status of the child when it exited normally, else ``None``.
        signal: Number of the signal that ended the child, else ``None``.
        stdout: Captured standard output, decoded as UTF-8 with ``backslashreplace``.
        stderr: Captured standard error (user tracebacks without the bootstrap's frames).
        stdout_truncated: stdout passed ``Limits.output_bytes`` and was cut there.
        stderr_truncated: stderr passed ``Limits.output_bytes`` and was cut there.
        duration_ms: Wall-clock time from start of the child to its end, in milliseconds.
        cpu_time_ms: User plus system CPU time of the child (``wait4``), in milliseconds.
        peak_memory_bytes: Peak resident set size of the child (``wait4`` ``ru_maxrss``), bytes.
        violations: The static checker's findings, astguard's ``Violation`` values (non-empty
            when ``status`` is ``rejected``; pysandbox's own source-size refusal is one too,
            rule ``PS001``).
        layers: Names of the isolation layers that were active for this run.
        detail: One human sentence about the outcome (which limit tripped, ...), or ``""``.
        changed_files: ``(relative path, size in bytes)`` of every regular file of the
            workspace the run created or changed, sorted by path (``/``-separated). Known
            when the run's process ended on its own (the end-of-run walk); empty otherwise.
            With runs overlapping on one workspace, the others' changes are included.
        figures: The bytes of the figures the run showed without saving them (matplotlib
            figures left open at its end), in order, from the figure channel; untrusted bytes
            (the user's code can write the channel): check them before use. At most
            ``pysandbox._figures.FIGURE_CHANNEL_COUNT`` figures and ``FIGURE_CHANNEL_BYTES``.
        figures_omitted: Figures shown but not carried (over the channel's caps, or cut).
        result: The value of the code's final expression statement, or ``None`` (no final
            expression statement, or its value is ``None``): ``{"type": module + "." +
            qualname, "text": repr}``, the repr bounded in the child before it is sent
            (:func:`pysandbox.child._values.bounded_repr`). Untrusted text: the user's code
            chose it. Set for ``ok`` runs and session calls only.
        session_ended: A session call: whether the session ended with this call; ``None`` for
            a one-shot run.
        session_end_reason: Why the session ended (``timeout``, ``memory_limit``, ``exit``,
            ``killed``), or ``None`` (alive, or a one-shot run).
    """

    status: RunStatus
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ms: float = 0.0
    cpu_time_ms: float = 0.0
    peak_memory_bytes: int = 0
    violations: tuple[astguard.Violation, ...] = ()
    layers: tuple[str, ...] = ()
    detail: str = ""
    changed_files: tuple[tuple[str, int], ...] = ()
    figures: tuple[bytes, ...] = ()
    figures_omitted: int = 0
    result: dict[str, str] | None = None
    session_ended: bool | None = None
    session_end_reason: str | None = None

    @property
    def ok(self) -> bool:
        """True when the status is ``ok``."""
        return self.status is RunStatus.OK

    def to_dict(self) -> dict[str, Any]:
        """Return the result as JSON-compatible data (violations as dicts)."""
        return {
            "status": self.status.value,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "stdout_truncated": self.stdout_truncated,
            "stderr_truncated": self.stderr_truncated,
            "duration_ms": self.duration_ms,
            "cpu_time_ms": self.cpu_time_ms,
            "peak_memory_bytes": self.peak_memory_bytes,
            "violations": [v.to_dict() for v in self.violations],
            "layers": [str(layer) for layer in self.layers],
            "detail": self.detail,
            "changed_files": [{"path": p, "size": n} for p, n in self.changed_files],
            "figure_bytes": [len(f) for f in self.figures],
            "figures_omitted": self.figures_omitted,
            "result": dict(self.result) if self.result is not None else None,
            "session_ended": self.session_ended,
            "session_end_reason": self.session_end_reason,
        }
