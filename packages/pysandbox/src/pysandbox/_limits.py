"""Resource limits of one sandboxed run."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pysandbox._bounds import Bound, bounded, check_fields

__all__ = ["Limits"]

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Limits applied to every run of a :class:`~pysandbox.Sandbox`.

    All values must be positive and finite; each field's bounds are declared with it (read them
    with ``pysandbox.bound_of(Limits, name)``). The kernel enforces the per-process ones
    (``setrlimit``); the parent enforces the wall clock, the workspace size and file count, and
    the output caps.

    Attributes:
        timeout_s: Wall-clock deadline of a run, in seconds (default 10). ``run(timeout=...)``
            may shorten it for one run, never lengthen it.
        cpu_time_s: CPU time of the child, in seconds (``RLIMIT_CPU``; soft limit, hard limit
            one second later; default 10).
        memory_bytes: Data segment of the child (``RLIMIT_DATA``; ``RLIMIT_AS`` is twice this
            as a backstop), in bytes (default 512 MiB, at least 64 MiB).
        file_size_bytes: Largest file the child may write (``RLIMIT_FSIZE``; writes beyond fail
            with ``OSError(EFBIG)``), in bytes (default 64 MiB).
        workspace_bytes: Total size of the workspace, watched by the parent, in bytes
            (default 1 GiB).
        workspace_files: Number of entries (files, directories, links) in the workspace,
            watched by the parent (default 10 000).
        open_files: File descriptors of the child (``RLIMIT_NOFILE``; default 64, at least 16).
        output_bytes: Cap of stdout and of stderr, each, in bytes (default 8 MiB). Passing it
            stops the run with status ``output_limit``. It bounds the work a run can do; what a
            caller passes on (an MCP response, a log) is the caller's own, smaller, cut.

    The largest accepted source is not here: it is the policy's ``max_source_bytes``
    (astguard's one source-size limit, 200,000 bytes of UTF-8 by default), refused with rule
    ``PS001`` before the AST gate.
    """

    timeout_s: float = bounded(10.0, Bound(float, positive=True))
    cpu_time_s: int = bounded(10, Bound(int, positive=True))
    memory_bytes: int = bounded(512 * MiB, Bound(int, minimum=64 * MiB, minimum_text="64 MiB"))
    file_size_bytes: int = bounded(64 * MiB, Bound(int, positive=True))
    workspace_bytes: int = bounded(1024 * MiB, Bound(int, positive=True))
    workspace_files: int = bounded(10_000, Bound(int, positive=True))
    open_files: int = bounded(64, Bound(int, minimum=16))
    output_bytes: int = bounded(8 * MiB, Bound(int, positive=True))

    def __post_init__(self) -> None:
        check_fields(self)

    def to_dict(self) -> dict[str, Any]:
        """Return the limits as a JSON-compatible dict."""
        return asdict(self)
