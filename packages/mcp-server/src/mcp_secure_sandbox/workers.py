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
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

__all__ = ["ANSWER_MAX_BYTES", "WorkerError", "WorkerLimit", "WorkerPool"]

log = logging.getLogger("mcp_secure_sandbox")

ANSWER_MAX_BYTES = 16 * 1024 * 1024
"""Largest answer line a worker may send, in bytes (reports are bounded far below it)."""
START_TIMEOUT_S = 30.0
"""Time a new worker has to import, confine itself and say it is ready, in seconds."""


class WorkerLimit(Exception):
    """A job was stopped by its deadline or its memory budget; its worker was replaced.

    Attributes:
        reason: ``"deadline"`` or ``"memory"``.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class WorkerError(Exception):
    """A job's own error, as the worker reported it.

    Attributes:
        kind: ``"input"`` (a bad argument, named in the message), ``"schema"`` or ``"failed"``.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(eq=False)
class _Worker:
    process: Process
    reader: BufferedByteReceiveStream
    jobs: int = 0


class WorkerPool:
    """Up to ``size`` confined workers; each job is sent to an idle one.

    The caller bounds how many jobs are in flight (at most ``size``: admission is the caller's,
    :mod:`mcp_secure_sandbox.concurrency`); the pool starts a worker when none is idle.

    Args:
        size: Largest number of worker processes.
        deadline_s: Wall-clock time a job may take, in seconds.
        memory_bytes: Address-space budget of each worker (``RLIMIT_AS``), in bytes.
        workspace: Directory ``csv_path`` jobs read (read-only), or ``None``.
        require_kernel_layers: A worker that cannot apply Landlock and seccomp refuses to start
            (the server's ``require_layers`` decides).
    """

    def __init__(
        self,
        *,
        size: int,
        deadline_s: float,
        memory_bytes: int,
        workspace: Path | None,
        require_kernel_layers: bool,
    ) -> None:
        self.size = size
        self.deadline_s = deadline_s
        self.memory_bytes = memory_bytes
        self._config = {
            "memory_bytes": memory_bytes,
            "cpu_time_s": int(deadline_s) + 2,
            "workspace": str(workspace) if workspace is not None else None,
            "require_kernel_layers": require_kernel_layers,
        }
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self.replaced = 0
        self.closed = False

    @property
    def pids(self) -> list[int]:
        """Process ids of the live workers."""
        return [w.process.pid for w in self._all]

    def limit_message(self, what: str) -> str:
        """The sentence a caller reads when a job of ``what`` was stopped."""
        return (
            f"{what} stopped after {self.deadline_s:g} s / {self.memory_bytes // (1 << 20)} MiB: "
            "the schema or data is too expensive"
        )

    async def _start(self) -> _Worker:
        env: Mapping[str, str] = {"LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        process = await anyio.open_process(
            [sys.executable, "-I", "-m", "mcp_secure_sandbox._worker"],
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
            if "ready" not in json.loads(line):
                raise RuntimeError(f"unexpected first line {line[:200]!r}")
        except BaseException as exc:
            await self._discard(worker)
            if isinstance(exc, Exception):
                raise RuntimeError(
                    f"a validation worker failed to start (exit status {process.returncode}): "
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

    async def call(self, job: dict[str, Any], *, what: str) -> Any:
        """Run one job in a worker and return its result (the ``ok`` value).

        Args:
            job: The job (see :func:`mcp_secure_sandbox._worker.handle`).
            what: What the job is, for messages (``"validation"``).

        Returns:
            The worker's JSON result.

        Raises:
            WorkerLimit: Past the deadline or the memory budget (the worker was replaced).
            WorkerError: The job's own error (bad input, a schema datavalidate refuses).
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
        answer: dict[str, Any] | None = None
        try:
            with anyio.move_on_at(deadline):
                assert worker.process.stdin is not None  # noqa: S101 - PIPE
                await worker.process.stdin.send(payload)
                line = await worker.reader.receive_until(b"\n", ANSWER_MAX_BYTES)
                answer = json.loads(line)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, OSError):
            answer = None  # the worker died: its memory budget (or the kernel) ended it
        except anyio.DelimiterNotFound:
            answer = {"error": {"kind": "failed", "message": "answer too large"}}
        finally:
            if answer is None:
                kind = None
            else:
                kind = answer["error"].get("kind") if "error" in answer else "ok"
            if kind in (None, "memory", "failed"):
                # Dead, out of memory, past its deadline, or the call was cancelled mid-job.
                await self._discard(worker)
                self.replaced += 1
            else:
                self._keep(worker)
        if answer is None:
            log.warning("%s: worker stopped (deadline or memory budget), replaced", what)
            raise WorkerLimit("deadline", self.limit_message(what))
        if "error" in answer:
            kind, message = answer["error"]["kind"], answer["error"]["message"]
            if kind == "memory":
                raise WorkerLimit("memory", self.limit_message(what))
            raise WorkerError(kind, message)
        return answer["ok"]

    def _keep(self, worker: _Worker) -> None:
        worker.jobs += 1
        if self.closed:
            worker.process.kill()
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
