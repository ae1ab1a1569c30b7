"""The server's confined workers: validation and diffs on :class:`pysandbox.AsyncConfinedPool`.

Validation of a JSON Schema or a CSV file given by the caller can cost exponential time or
unbounded memory (F06); so can a diff of two large snapshots. Such work never runs in the
server: each job goes to a worker of pysandbox's public confined pool (the mechanism's one
home: fresh ``python -I`` workers with an empty environment, confined by
:func:`pysandbox.confine_worker` with the kernel layers of a run and reads granted by
distribution ``RECORD``, JSON lines, every answer checked, a job past its deadline or memory
budget killed with its worker, workers retired after ``max_jobs`` or before their
``RLIMIT_CPU`` bites). The worker runs :func:`mcp_secure_sandbox._worker.job` after
:func:`mcp_secure_sandbox._worker.setup`; this module names the server's error kinds, its
read grants (the workspace and the store) and the sentence a caller reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pysandbox import AsyncConfinedPool
from pysandbox._confined_pool import ANSWER_MAX_BYTES, CPU_RESERVE_S, MAX_JOBS_PER_WORKER
from pysandbox.exceptions import JobError, WorkerLimitExceeded, WorkerProtocolError
from wsnapshot.workspace import MAX_DEPTH

__all__ = [
    "ANSWER_MAX_BYTES",
    "CPU_RESERVE_S",
    "ERROR_KINDS",
    "MAX_JOBS_PER_WORKER",
    "WorkerError",
    "WorkerLimit",
    "WorkerPool",
    "WorkerProtocolError",
]

ERROR_KINDS = frozenset({"input", "schema", "snapshot_id", "snapshot", "memory", "failed"})
"""The error kinds a worker may answer; anything else is a malformed answer."""

WorkerLimit = WorkerLimitExceeded
"""A job was stopped by its deadline or its memory budget (``reason``); its worker replaced."""
WorkerError = JobError
"""A job's own error, as the worker reported it (``kind``: ``"input"`` (a bad argument, named
in the message), ``"schema"``, ``"snapshot_id"`` (malformed or unknown), ``"snapshot"`` (the
store refused: a corrupt snapshot, a workspace past its caps) or ``"failed"``)."""

HANDLER = "mcp_secure_sandbox._worker:job"
SETUP = "mcp_secure_sandbox._worker:setup"


class WorkerPool(AsyncConfinedPool):
    """Up to ``size`` confined workers for the server's validation or diff jobs.

    The caller bounds how many jobs are in flight (at most ``size``: admission is the caller's,
    :mod:`mcp_secure_sandbox.concurrency`); the pool starts a worker when none is idle.

    Args:
        size: Largest number of worker processes.
        deadline_s: Wall-clock time a job may take, in seconds.
        memory_bytes: Address-space budget of each worker (``RLIMIT_AS``), in bytes.
        workspace: Directory ``csv_path`` and ``diff`` jobs read (read-only), or ``None``.
        require_kernel_layers: A worker that cannot apply Landlock and seccomp refuses to start
            (the server's ``require_layers`` decides).
        store: Snapshot store ``diff`` jobs read (read-only: the worker opens it with
            ``SnapshotStore.open_read_only`` and Landlock lets it read only), or ``None``.
        too_expensive: The end of the sentence a caller reads when a job was stopped.
        max_jobs: Jobs a worker does before it is retired (:data:`MAX_JOBS_PER_WORKER`).
        cpu_reserve_s: CPU seconds beyond one job's that a worker's jobs share before it is
            retired (:data:`CPU_RESERVE_S`).
        job_cpu_s: CPU time one job may use, in seconds; ``None``: the deadline.
        command: The worker's command line (tests give a stand-in); ``None``: pysandbox's
            pool worker running :data:`HANDLER`.

    Raises:
        ValueError: A distribution the worker imports cannot be granted by ``RECORD``.
    """

    def __init__(
        self,
        *,
        size: int,
        deadline_s: float,
        memory_bytes: int,
        workspace: Path | None,
        require_kernel_layers: bool,
        store: Path | None = None,
        too_expensive: str = "the schema or data is too expensive",
        max_jobs: int = MAX_JOBS_PER_WORKER,
        cpu_reserve_s: int = CPU_RESERVE_S,
        job_cpu_s: float | None = None,
        command: Sequence[str] | None = None,
    ) -> None:
        super().__init__(
            HANDLER,
            setup=SETUP,
            options={
                "workspace": str(workspace) if workspace is not None else None,
                "store": str(store) if store is not None else None,
            },
            size=size,
            deadline_s=deadline_s,
            memory_bytes=memory_bytes,
            max_jobs=max_jobs,
            error_kinds=ERROR_KINDS,
            read_only=tuple(p for p in (workspace, store) if p is not None),
            # A walk of the workspace holds a descriptor per level, up to wsnapshot's MAX_DEPTH
            # (a run can leave a tree that deep): 64 made a 60-level tree kill every diff.
            open_files=MAX_DEPTH + 64,
            require_kernel_layers=require_kernel_layers,
            too_expensive=too_expensive,
            cpu_reserve_s=cpu_reserve_s,
            job_cpu_s=job_cpu_s,
            command=command,
        )
