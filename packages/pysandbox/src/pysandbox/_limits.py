"""Resource limits of one sandboxed run."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Limits"]

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Limits applied to every run of a :class:`~pysandbox.Sandbox`.

    All values must be positive. The kernel enforces the per-process ones (``setrlimit``);
    the parent enforces the wall clock, the workspace size and file count, and the output caps.

    Attributes:
        timeout_s: Wall-clock deadline of a run, in seconds (default 10). ``run(timeout=...)``
            may shorten it for one run, never lengthen it.
        cpu_time_s: CPU time of the child, in seconds (``RLIMIT_CPU``; soft limit, hard limit
            one second later; default 10).
        memory_bytes: Data segment of the child (``RLIMIT_DATA``; ``RLIMIT_AS`` is twice this
            as a backstop), in bytes (default 512 MiB).
        file_size_bytes: Largest file the child may write (``RLIMIT_FSIZE``; writes beyond fail
            with ``OSError(EFBIG)``), in bytes (default 64 MiB).
        workspace_bytes: Total size of the workspace, watched by the parent, in bytes
            (default 256 MiB).
        workspace_files: Number of entries (files, directories, links) in the workspace,
            watched by the parent (default 10 000).
        open_files: File descriptors of the child (``RLIMIT_NOFILE``; default 64).
        output_bytes: Cap of stdout and of stderr, each, in bytes (default 8 MiB). Passing it
            stops the run with status ``output_limit``. It bounds the work a run can do; what a
            caller passes on (an MCP response, a log) is the caller's own, smaller, cut.

    The largest accepted source is not here: it is the policy's ``max_source_bytes``
    (astguard's one source-size limit, 200,000 bytes of UTF-8 by default), refused with rule
    ``PS001`` before the AST gate.
    """

    timeout_s: float = 10.0
    cpu_time_s: int = 10
    memory_bytes: int = 512 * MiB
    file_size_bytes: int = 64 * MiB
    workspace_bytes: int = 256 * MiB
    workspace_files: int = 10_000
    open_files: int = 64
    output_bytes: int = 8 * MiB

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"Limits.{name} must be a number, not {type(value).__name__}")
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"Limits.{name} must be a positive finite number, got {value!r}")
            if name != "timeout_s" and not isinstance(value, int):
                raise TypeError(f"Limits.{name} must be an int, got {value!r}")
        if self.open_files < 16:
            raise ValueError(f"Limits.open_files must be at least 16, got {self.open_files}")
        if self.memory_bytes < 64 * MiB:
            raise ValueError(
                f"Limits.memory_bytes must be at least 64 MiB, got {self.memory_bytes}"
            )

    def to_dict(self) -> dict[str, Any]:
        """Return the limits as a JSON-compatible dict."""
        return asdict(self)
