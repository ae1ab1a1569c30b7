"""A small pool of confined worker processes for work on caller-supplied input.

Validation of a JSON Schema or a CSV file given by the caller can cost exponential time or
unbounded memory (F06). Such work never runs in the server: each job goes to a worker process
(:mod:`mcp_secure_sandbox._worker`) started fresh as ``python -I -m mcp_secure_sandbox._worker``
(never a fork of the threaded server) with an empty environment (no token), no descriptor but
its pipes, in its own session, and confined by :func:`pysandbox.confine_worker` before its
first job. Jobs and answers are JSON lines, never pickle: a compromised worker cannot run code
in the server.

A job past its deadline is killed with its worker (``SIGKILL``); a worker whose memory budget
(``RLIMIT_AS``) ran out answers so and exits, or dies; either way the pool goes on with a new
worker, started when the next job needs one. ``ProcessPoolExecutor`` can do neither (it cannot
kill one task, and a dead worker breaks the whole pool), hence this pool.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import psutil
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

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

log = logging.getLogger("mcp_secure_sandbox")
T = TypeVar("T")

ANSWER_MAX_BYTES = 16 * 1024 * 1024
"""Largest answer line a worker may send, in bytes (reports are bounded far below it)."""
START_TIMEOUT_S = 30.0
"""Time a new worker has to import, confine itself and say it is ready, in seconds."""
MAX_JOBS_PER_WORKER = 200
"""Jobs one worker does before it is retired (ended between jobs) and a fresh one takes over."""
CPU_RESERVE_S = 20
"""CPU seconds a worker may spend on jobs beyond one job's deadline before it is retired.

A worker's ``RLIMIT_CPU`` counts every job it ever ran: it is set to what its start-up used
plus one job's budget (the deadline and 2 s) plus this reserve, and a worker whose CPU time
(read by the server from ``/proc``, never from the worker) leaves less than one job's budget
is retired between jobs, so a legitimate job is never killed for CPU earlier jobs spent.
"""
ERROR_KINDS = frozenset({"input", "schema", "snapshot_id", "snapshot", "memory", "failed"})
"""The error kinds a worker may answer; anything else is a malformed answer."""
_MAX_MESSAGE_CHARS = 4000
_PARSE_INLINE_BYTES = 64 * 1024
"""Answers longer than this are parsed in a thread, not on the event loop."""


class WorkerLimit(Exception):
    """A job was stopped by its deadline or its memory budget; its worker was replaced.

    Attributes:
        reason: ``"deadline"`` or ``"memory"``.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class WorkerProtocolError(Exception):
    """A worker answered something that is not a well-formed answer; it was killed and replaced.

    A correct worker never does this: the answer is treated as coming from a compromised or
    broken process and nothing of it is used.
    """


class WorkerError(Exception):
    """A job's own error, as the worker reported it.

    Attributes:
        kind: ``"input"`` (a bad argument, named in the message), ``"schema"``,
            ``"snapshot_id"`` (malformed or unknown), ``"snapshot"`` (the store refused: a
            corrupt snapshot, a workspace past its caps) or ``"failed"``.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(eq=False)
class _Worker:
    process: Process
    reader: BufferedByteReceiveStream
    jobs: int = 0


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) process ``pid`` has used, in seconds; ``None`` if unreadable."""
    try:
        times = psutil.Process(pid).cpu_times()
    except (psutil.Error, OSError):
        return None
    return float(times.user + times.system)


def _answer_error(answer: object) -> tuple[str, str] | None:
    """The ``(kind, message)`` of an error answer, ``None`` for ``{"ok": ...}``.

    Raises:
        WorkerProtocolError: Not ``{"ok": value}`` nor ``{"error": {"kind", "message"}}`` with a
            known kind and a string message of at most 4000 characters.
    """
    if not isinstance(answer, dict) or len(answer) != 1:
        raise WorkerProtocolError("not an object with exactly one key, 'ok' or 'error'")
    if "ok" in answer:
        return None
    error = answer.get("error")
    if not isinstance(error, dict) or set(error) != {"kind", "message"}:
        raise WorkerProtocolError("'error' is not an object of 'kind' and 'message'")
    kind, message = error["kind"], error["message"]
    if kind not in ERROR_KINDS:
        raise WorkerProtocolError(f"unknown error kind {str(kind)[:40]!r}")
    if not isinstance(message, str) or len(message) > _MAX_MESSAGE_CHARS:
        raise WorkerProtocolError(
            f"'message' is not a string of at most {_MAX_MESSAGE_CHARS} characters"
        )
    return kind, message


def _cpu_limit(pid: int) -> float | None:
    """The soft ``RLIMIT_CPU`` of process ``pid`` in seconds, from ``/proc``; ``None`` if none."""
    try:
        soft, _hard = psutil.Process(pid).rlimit(psutil.RLIMIT_CPU)
    except (psutil.Error, OSError):
        return None
    return None if soft == psutil.RLIM_INFINITY else float(soft)


def _loads(line: bytes) -> Any:
    """Parse an answer line; a line that is not JSON (or nested past the parser) is malformed."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise WorkerProtocolError(f"not JSON ({type(exc).__name__})") from None


class WorkerPool:
    """Up to ``size`` confined workers; each job is sent to an idle one.

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
        job_cpu_s: CPU time one job may use, in seconds; ``None``: the deadline (a
            single-threaded job uses at most its wall-clock time).
        command: The worker's command line (tests give a stand-in); ``None``: ``python -I -m
            mcp_secure_sandbox._worker``.
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
        self.size = size
        self.deadline_s = deadline_s
        self.memory_bytes = memory_bytes
        self.max_jobs = max_jobs
        self.too_expensive = too_expensive
        self.job_cpu_s = deadline_s if job_cpu_s is None else job_cpu_s
        self._command = list(command or (sys.executable, "-I", "-m", "mcp_secure_sandbox._worker"))
        self._config = {
            "memory_bytes": memory_bytes,
            # CPU seconds beyond what start-up used (the worker adds that): one job's budget
            # and the reserve later jobs share (see CPU_RESERVE_S).
            "cpu_time_s": math.ceil(self.job_cpu_s) + 2 + cpu_reserve_s,
            "workspace": str(workspace) if workspace is not None else None,
            "store": str(store) if store is not None else None,
            "require_kernel_layers": require_kernel_layers,
        }
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self.replaced = 0
        self.retired = 0
        self.closed = False
        self._parse_threads: anyio.CapacityLimiter | None = None

    @property
    def pids(self) -> list[int]:
        """Process ids of the live workers."""
        return [w.process.pid for w in self._all]

    def limit_message(self, what: str) -> str:
        """The sentence a caller reads when a job of ``what`` was stopped."""
        return (
            f"{what} stopped after {self.deadline_s:g} s / {self.memory_bytes // (1 << 20)} MiB: "
            f"{self.too_expensive}"
        )

    async def _start(self) -> _Worker:
        env: Mapping[str, str] = {"LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        process = await anyio.open_process(
            self._command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env=dict(env),
            start_new_session=True,
        )
        assert process.stdin is not None and process.stdout is not None  # noqa: S101 - PIPE
        worker = _Worker(process, BufferedByteReceiveStream(process.stdout))
        self._all.add(worker)
        try:
            with anyio.fail_after(START_TIMEOUT_S):
                await process.stdin.send(json.dumps(self._config).encode() + b"\n")
                line = await worker.reader.receive_until(b"\n", 64 * 1024)
            ready = _loads(line)
            if not isinstance(ready, dict) or not isinstance(ready.get("ready"), dict):
                raise WorkerProtocolError(f"unexpected first line {line[:200]!r}")
        except BaseException as exc:
            await self._discard(worker)
            if isinstance(exc, Exception):
                raise RuntimeError(
                    f"a worker failed to start (exit status {process.returncode}): "
                    f"{type(exc).__name__}"
                ) from None
            raise
        return worker

    async def _discard(self, worker: _Worker) -> None:
        self._all.discard(worker)
        with anyio.CancelScope(shield=True):
            if worker.process.returncode is None:
                worker.process.kill()
            await worker.process.aclose()

    async def call(
        self,
        job: dict[str, Any],
        *,
        what: str,
        check: Callable[[Any], T] | None = None,
    ) -> Any:
        """Run one job in a worker and return its result (the ``ok`` value).

        Every answer is checked before anything of it is used: an answer line over
        :data:`ANSWER_MAX_BYTES`, not JSON, not ``{"ok": ...}`` / ``{"error": {"kind",
        "message"}}``, or whose ``ok`` value ``check`` refuses is malformed: the worker is
        killed and replaced and :class:`WorkerProtocolError` raised.

        Args:
            job: The job (see :func:`mcp_secure_sandbox._worker.handle`).
            what: What the job is, for messages (``"validation"``).
            check: Validates the ``ok`` value and returns what the caller gets (raises
                ``ValueError`` or ``TypeError``, e.g. a pydantic ``ValidationError``, on a wrong
                shape); ``None`` returns the value as parsed.

        Returns:
            The worker's JSON result, through ``check``.

        Raises:
            WorkerLimit: Past the deadline or the memory budget (the worker was replaced).
            WorkerError: The job's own error (bad input, a schema datavalidate refuses).
            WorkerProtocolError: A malformed answer (the worker was replaced).
            RuntimeError: No worker could be started; the pool is closed.
        """
        if self.closed:
            raise RuntimeError("the server is shutting down")
        payload = json.dumps(job, separators=(",", ":"), default=str).encode() + b"\n"
        # The deadline covers starting a worker (after a kill, the next job starts one).
        deadline = anyio.current_time() + self.deadline_s
        with anyio.move_on_after(self.deadline_s):
            worker = self._idle.pop() if self._idle else await self._start()
        if anyio.current_time() >= deadline:
            raise WorkerLimit("deadline", self.limit_message(what))
        line: bytes | None = None
        keep = False
        try:
            with anyio.move_on_at(deadline):
                assert worker.process.stdin is not None  # noqa: S101 - PIPE
                await worker.process.stdin.send(payload)
                line = await worker.reader.receive_until(b"\n", ANSWER_MAX_BYTES)
            if line is None:
                raise WorkerLimit("deadline", self.limit_message(what))
            if len(line) <= _PARSE_INLINE_BYTES:
                answer = _loads(line)
            else:
                if self._parse_threads is None:
                    self._parse_threads = anyio.CapacityLimiter(2)
                answer = await anyio.to_thread.run_sync(_loads, line, limiter=self._parse_threads)
            error = _answer_error(answer)
            if error is None:
                result = answer["ok"]
                if check is not None:
                    try:
                        result = check(result)
                    except (ValueError, TypeError) as exc:
                        raise WorkerProtocolError(
                            f"the result has the wrong shape ({type(exc).__name__})"
                        ) from None
                keep = True
                return result
            kind, message = error
            keep = kind not in ("memory", "failed")
            if kind == "memory":
                raise WorkerLimit("memory", self.limit_message(what))
            raise WorkerError(kind, message)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, OSError):
            # The worker died: its memory budget (or the kernel) ended it.
            log.warning("%s: worker stopped (deadline or memory budget), replaced", what)
            raise WorkerLimit("deadline", self.limit_message(what)) from None
        except anyio.DelimiterNotFound:
            raise self._malformed(what, f"an answer line over {ANSWER_MAX_BYTES:,} bytes") from None
        except WorkerProtocolError as exc:
            raise self._malformed(what, str(exc)) from None
        finally:
            # Dead, out of memory, past its deadline, malformed, or the call was cancelled
            # mid-job: the worker goes. Otherwise it is kept unless it is due to retire.
            if keep:
                await self._keep(worker)
            else:
                await self._discard(worker)
                self.replaced += 1

    def _malformed(self, what: str, reason: str) -> WorkerProtocolError:
        log.error("%s: a worker gave a malformed answer (%s); killed and replaced", what, reason)
        return WorkerProtocolError(
            f"{what} failed: its worker gave a malformed answer ({reason}); the worker was "
            "killed and replaced, call again"
        )

    def due_to_retire(self, worker_pid: int, jobs: int) -> bool:
        """Whether a worker that did ``jobs`` jobs must be ended before its next job.

        After :attr:`max_jobs` jobs; or when its CPU time (``/proc``) leaves less than one job's
        budget (:attr:`job_cpu_s` and 1 s) below its ``RLIMIT_CPU`` soft limit, so that the next
        job is never killed for CPU earlier jobs spent.
        """
        if jobs >= self.max_jobs:
            return True
        used = cpu_seconds(worker_pid)
        limit = _cpu_limit(worker_pid)
        if used is None or limit is None:
            return False  # count only (a vanished worker fails its next send and is replaced)
        return limit - used < self.job_cpu_s + 1

    async def _keep(self, worker: _Worker) -> None:
        worker.jobs += 1
        if self.closed:
            await self._discard(worker)
        elif self.due_to_retire(worker.process.pid, worker.jobs):
            await self._discard(worker)
            self.retired += 1
        else:
            self._idle.append(worker)

    async def aclose(self) -> None:
        """Kill every worker and wait for each to end."""
        self.closed = True
        for worker in list(self._all):
            await self._discard(worker)
        self._idle.clear()

    def close(self) -> None:
        """Kill every worker now (the event loop reaps them; safe outside async code)."""
        self.closed = True
        for worker in list(self._all):
            if worker.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.process.pid, 9)
        self._idle.clear()
