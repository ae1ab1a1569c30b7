"""A public pool of confined worker processes for work on hostile input.

Work on caller-supplied input that is not code (validating a JSON Schema or a CSV file, reading
an export) can cost exponential time or unbounded memory. :class:`AsyncConfinedPool` (anyio)
and :class:`ConfinedPool` (blocking, for synchronous code) run each job in a worker process
started fresh as ``python -I -m pysandbox._pool_worker`` (never a fork of a threaded caller)
with an empty environment, no descriptor but its pipes, in its own session, and confined by
:func:`pysandbox.confine_worker` before its first job with the kernel layers of a run: rlimits
(``RLIMIT_AS`` is the memory budget), no_new_privs, Landlock read-only on the standard library
and the files of the distributions it needs (by their ``RECORD``, as a run's extra modules),
seccomp without exec, process creation or sockets. Jobs and answers are JSON lines, never
pickle: a compromised worker cannot run code in the caller, and every answer is checked (its
envelope, then the caller's schema or validator) before anything of it is used.

A job past its deadline is killed with its worker (``SIGKILL``); a worker whose memory budget
ran out answers so and exits, or dies; either way the caller gets
:class:`~pysandbox.exceptions.WorkerLimitExceeded` and the pool goes on with a new worker,
started when the next job needs one. A worker is retired after ``max_jobs`` jobs, or when its
``RLIMIT_CPU`` (which counts every job it ran) leaves less than one job's budget.
``ProcessPoolExecutor`` can do neither (it cannot kill one task, and a dead worker breaks the
whole pool), hence this pool.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import logging
import math
import os
import re
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import psutil
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from pysandbox import _distributions
from pysandbox._answer_schema import compile_schema
from pysandbox._pool_worker import MAX_MESSAGE_CHARS
from pysandbox.exceptions import (
    JobError,
    WorkerLimitExceeded,
    WorkerProtocolError,
    WorkerStartError,
)

__all__ = [
    "ANSWER_MAX_BYTES",
    "CPU_RESERVE_S",
    "MAX_JOBS_PER_WORKER",
    "RESERVED_KINDS",
    "START_TIMEOUT_S",
    "AnswerCheck",
    "AsyncConfinedPool",
    "ConfinedPool",
]

log = logging.getLogger("pysandbox")

AnswerCheck = Callable[[Any], Any]
"""A validator of a job's result: returns what the caller gets, raises ``ValueError`` or
``TypeError`` (a pydantic ``ValidationError`` is a ``ValueError``) on a wrong shape."""

ANSWER_MAX_BYTES = 16 * 1024 * 1024
"""Largest answer line a worker may send, in bytes."""
START_TIMEOUT_S = 30.0
"""Time a new worker has to import, set up, confine itself and say it is ready, in seconds."""
MAX_JOBS_PER_WORKER = 200
"""Jobs one worker does by default before it is retired (ended between jobs)."""
CPU_RESERVE_S = 20
"""CPU seconds a worker may spend on jobs beyond one job's budget before it is retired.

A worker's ``RLIMIT_CPU`` counts every job it ever ran: it is set to what its start-up used
plus one job's budget (the job's CPU time and 2 s) plus this reserve, and a worker whose CPU
time (read by the pool from ``/proc``, never from the worker) leaves less than one job's budget
is retired between jobs, so a legitimate job is never killed for CPU earlier jobs spent.
"""
RESERVED_KINDS = frozenset({"memory", "failed"})
"""Error kinds every worker may answer: ``memory`` (the budget ran out) and ``failed``."""
OPEN_FILES = 64
"""A worker's ``RLIMIT_NOFILE`` by default."""
_PARSE_INLINE_BYTES = 64 * 1024
"""Answers longer than this are parsed in a thread, not on the event loop."""
_REFERENCE = re.compile(
    r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
)


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


def _cpu_limit(pid: int) -> float | None:
    """The soft ``RLIMIT_CPU`` of process ``pid`` in seconds, from ``/proc``; ``None`` if none."""
    try:
        soft, _hard = psutil.Process(pid).rlimit(psutil.RLIMIT_CPU)
    except (psutil.Error, OSError):
        return None
    return None if soft == psutil.RLIM_INFINITY else float(soft)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads(line: bytes) -> Any:
    """Parse an answer line; a line that is not JSON (NaN, nested past the parser) is malformed."""
    try:
        return json.loads(line, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise WorkerProtocolError(f"not JSON ({type(exc).__name__})") from None


def _answer_error(answer: object, kinds: frozenset[str]) -> tuple[str, str] | None:
    """The ``(kind, message)`` of an error answer, ``None`` for ``{"ok": ...}``.

    Raises:
        WorkerProtocolError: Not ``{"ok": value}`` nor ``{"error": {"kind", "message"}}`` with a
            kind in ``kinds`` and a string message of at most 4000 characters.
    """
    if not isinstance(answer, dict) or len(answer) != 1:
        raise WorkerProtocolError("not an object with exactly one key, 'ok' or 'error'")
    if "ok" in answer:
        return None
    error = answer.get("error")
    if not isinstance(error, dict) or set(error) != {"kind", "message"}:
        raise WorkerProtocolError("'error' is not an object of 'kind' and 'message'")
    kind, message = error["kind"], error["message"]
    if not isinstance(kind, str) or kind not in kinds:
        raise WorkerProtocolError(f"unknown error kind {str(kind)[:40]!r}")
    if not isinstance(message, str) or len(message) > MAX_MESSAGE_CHARS:
        raise WorkerProtocolError(
            f"'message' is not a string of at most {MAX_MESSAGE_CHARS} characters"
        )
    return kind, message


def _check_of(schema: Mapping[str, Any] | AnswerCheck | None) -> AnswerCheck | None:
    if schema is None or callable(schema):
        return schema
    return compile_schema(schema)


def _top_level(reference: str, import_paths: Sequence[str]) -> str | None:
    """The installed top-level module of ``reference``; ``None`` when ``import_paths`` has it.

    Raises:
        ValueError: Not ``pkg.module:function``, or its module is found nowhere.
    """
    if not _REFERENCE.match(reference):
        raise ValueError(f"{reference!r} is not 'pkg.module:function'")
    top = reference.partition(":")[0].partition(".")[0]
    for directory in import_paths:
        if Path(directory, top).is_dir() or Path(directory, f"{top}.py").is_file():
            return None
    if importlib.util.find_spec(top) is None:
        raise ValueError(f"{reference!r}: module {top!r} is not installed")
    return top


def read_grants(
    references: Iterable[str], distributions: Iterable[str], import_paths: Sequence[str] = ()
) -> _distributions.Grants:
    """What a worker may read: the closure of pysandbox, the handler's and ``distributions``.

    Args:
        references: ``"pkg.module:function"`` references the worker imports.
        distributions: Top-level import names of further modules its jobs import (the
            distribution providing each, and its dependency closure, is granted by ``RECORD``).
        import_paths: Directories of modules that are not installed (a reference whose
            top-level module is in one is granted by its directory, not resolved).

    Returns:
        The grants, as for a run's extra modules.

    Raises:
        ValueError: A malformed reference, a module not installed, or a distribution that cannot
            be granted (:class:`pysandbox._distributions.DistributionError`: no ``RECORD``, a
            requirement not installed).
    """
    found = [_top_level(r, import_paths) for r in references]
    tops = ["pysandbox", *(t for t in found if t is not None), *distributions]
    try:
        return _distributions.resolve(tuple(dict.fromkeys(tops)))
    except _distributions.DistributionError as exc:
        # The same rules as a run's extra modules; the message names this pool's argument.
        message = str(exc).removeprefix("extra_modules: ")
        raise _distributions.DistributionError(f"distributions: {message}") from None


class AsyncConfinedPool:
    """Up to ``size`` confined workers running ``handler`` on JSON jobs (anyio, async).

    The caller bounds how many jobs are in flight: a job with no idle worker starts one (up to
    :attr:`size` live; past it the job waits its turn within its deadline).

    Args:
        handler: ``"pkg.module:function"``: ``function(job)`` gets the job (a JSON value) and
            returns the result (JSON-serialisable); it raises
            :class:`~pysandbox.exceptions.JobError` for an error of its input.
        distributions: Top-level import names of modules the handler imports beyond its own
            distribution's dependencies (``("datavalidate",)``); with the handler's and
            pysandbox's they are the only installed code a worker can read, by ``RECORD``.
        size: Largest number of worker processes (at least 1).
        deadline_s: Wall-clock time a job may take, in seconds, starting a worker included.
        memory_bytes: Address-space budget of each worker (``RLIMIT_AS``), in bytes.
        max_jobs: Jobs a worker does before it is retired (:data:`MAX_JOBS_PER_WORKER`).
        answer_schema: What a result must be: a JSON Schema dict (the subset
            :mod:`pysandbox._answer_schema` checks), a validator callable
            (:data:`AnswerCheck`), or ``None``; :meth:`call`'s ``check`` overrides it.
        error_kinds: The kinds of :class:`JobError` the handler may raise, besides
            :data:`RESERVED_KINDS`; any other kind is a malformed answer.
        setup: ``"pkg.module:function"`` called once in each worker, before confinement, with
            ``options`` (imports, warm-up, opening what jobs read); ``None``: nothing.
        options: A JSON value given to ``setup``.
        read_only: Further paths a worker may read (files, directories beneath).
        import_paths: Directories put first on each worker's ``sys.path`` and granted
            read-only: where a handler that is not installed (an application's module) is
            imported from.
        open_files: Each worker's ``RLIMIT_NOFILE``.
        require_kernel_layers: A worker that cannot apply Landlock and seccomp refuses to start
            (:class:`~pysandbox.exceptions.WorkerStartError`); ``False`` accepts rlimits only
            where the kernel offers nothing more (UNSAFE for hostile input).
        too_expensive: The end of the sentence a caller reads when a job was stopped.
        cpu_reserve_s: CPU seconds beyond one job's that a worker's jobs share before it is
            retired (:data:`CPU_RESERVE_S`).
        job_cpu_s: CPU time one job may use, in seconds; ``None``: the deadline (a
            single-threaded job uses at most its wall-clock time).
        command: The worker's command line (tests give a stand-in); ``None``: ``python -I -m
            pysandbox._pool_worker HANDLER``.

    Raises:
        ValueError: A bad size, deadline or budget, a malformed reference, a module or
            distribution that cannot be granted, an answer schema with a keyword pysandbox does
            not check.
    """

    def __init__(
        self,
        handler: str,
        *,
        distributions: Sequence[str] = (),
        size: int = 1,
        deadline_s: float,
        memory_bytes: int,
        max_jobs: int = MAX_JOBS_PER_WORKER,
        answer_schema: Mapping[str, Any] | AnswerCheck | None = None,
        error_kinds: Iterable[str] = (),
        setup: str | None = None,
        options: Any = None,
        read_only: Sequence[str | os.PathLike[str]] = (),
        import_paths: Sequence[str | os.PathLike[str]] = (),
        open_files: int = OPEN_FILES,
        require_kernel_layers: bool = True,
        too_expensive: str = "the job is too expensive",
        cpu_reserve_s: int = CPU_RESERVE_S,
        job_cpu_s: float | None = None,
        command: Sequence[str] | None = None,
    ) -> None:
        if size < 1 or max_jobs < 1:
            raise ValueError("size and max_jobs are at least 1")
        if not (deadline_s > 0 and math.isfinite(deadline_s)):
            raise ValueError("deadline_s is a positive number of seconds")
        if memory_bytes < 16 << 20:
            raise ValueError("memory_bytes is at least 16 MiB (an interpreter needs that)")
        self.size = size
        self.deadline_s = deadline_s
        self.memory_bytes = memory_bytes
        self.max_jobs = max_jobs
        self.too_expensive = too_expensive
        self.job_cpu_s = deadline_s if job_cpu_s is None else job_cpu_s
        self.error_kinds = frozenset(error_kinds) | RESERVED_KINDS
        self._check = _check_of(answer_schema)
        references = [handler, *([setup] if setup else [])]
        # The handler on the command line only names the worker for ps (the configuration
        # line is what the worker reads).
        self._command = list(
            command or (sys.executable, "-I", "-m", "pysandbox._pool_worker", handler)
        )
        imports = [os.path.realpath(p) for p in import_paths]
        for directory in imports:
            if not Path(directory).is_dir():
                raise ValueError(f"import_paths: {directory!r} is not a directory")
        if command is None:
            grants = read_grants(references, distributions, imports)
            reads, lists = [*grants.read_roots], [*grants.list_roots]
        else:
            reads, lists = [], []
        extra = [*imports, *(os.path.realpath(p) for p in read_only)]
        self._config = {
            "handler": handler,
            "setup": setup,
            "options": options,
            "import_paths": imports,
            "memory_bytes": memory_bytes,
            # CPU seconds beyond what start-up used (the worker adds that): one job's budget
            # and the reserve later jobs share (see CPU_RESERVE_S).
            "cpu_time_s": math.ceil(self.job_cpu_s) + 2 + cpu_reserve_s,
            "read_only": [*reads, *extra],
            "list_only": lists,
            "open_files": open_files,
            "installed_code": False,
            "require_kernel_layers": require_kernel_layers,
        }
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._slots: anyio.Semaphore | None = None
        self.replaced = 0
        self.retired = 0
        self.closed = False
        self._parse_threads: anyio.CapacityLimiter | None = None

    @property
    def config(self) -> dict[str, Any]:
        """The configuration line each worker gets (a copy): handler, budgets, read grants."""
        return json.loads(json.dumps(self._config))  # type: ignore[no-any-return]

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
                raise WorkerStartError(
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
        job: Any,
        *,
        what: str = "job",
        check: AnswerCheck | None = None,
    ) -> Any:
        """Run one job in a worker and return its result (the ``ok`` value), checked.

        Every answer is checked before anything of it is used: an answer line over
        :data:`ANSWER_MAX_BYTES`, not JSON, not ``{"ok": ...}`` / ``{"error": {"kind",
        "message"}}`` with a kind the pool accepts, or whose ``ok`` value the check refuses is
        malformed: the worker is killed and replaced and :class:`WorkerProtocolError` raised.

        Args:
            job: A JSON-serialisable value, given to the handler.
            what: What the job is, for messages (``"validation"``).
            check: Validates the ``ok`` value and returns what the caller gets (raises
                ``ValueError`` or ``TypeError``); ``None``: the pool's ``answer_schema``.

        Returns:
            The handler's JSON result, through the check.

        Raises:
            WorkerLimitExceeded: Past the deadline or the memory budget (the worker was
                replaced).
            JobError: The job's own error, as the handler raised it.
            WorkerProtocolError: A malformed answer (the worker was replaced).
            WorkerStartError: No worker could be started; the pool is closed.
            TypeError: ``job`` is not JSON-serialisable.
        """
        if self.closed:
            raise WorkerStartError("the pool is closed")
        payload = json.dumps(job, separators=(",", ":"), default=str).encode() + b"\n"
        check = check if check is not None else self._check
        if self._slots is None:
            self._slots = anyio.Semaphore(self.size)
        # The deadline covers waiting for a slot and starting a worker (after a kill, the next
        # job starts one).
        deadline = anyio.current_time() + self.deadline_s
        acquired = False
        with anyio.move_on_at(deadline):
            await self._slots.acquire()
            acquired = True
        if not acquired:
            raise WorkerLimitExceeded("deadline", self.limit_message(what))
        try:
            return await self._call(payload, deadline, what, check)
        finally:
            self._slots.release()

    async def _call(
        self, payload: bytes, deadline: float, what: str, check: AnswerCheck | None
    ) -> Any:
        found: _Worker | None = None
        with anyio.move_on_at(deadline):
            found = self._idle.pop() if self._idle else await self._start()
        if found is None:  # (a worker started just at the deadline goes on: the send times out)
            raise WorkerLimitExceeded("deadline", self.limit_message(what))
        worker = found
        line: bytes | None = None
        keep = False
        try:
            with anyio.move_on_at(deadline):
                assert worker.process.stdin is not None  # noqa: S101 - PIPE
                await worker.process.stdin.send(payload)
                line = await worker.reader.receive_until(b"\n", ANSWER_MAX_BYTES)
            if line is None:
                raise WorkerLimitExceeded("deadline", self.limit_message(what))
            if len(line) <= _PARSE_INLINE_BYTES:
                answer = _loads(line)
            else:
                if self._parse_threads is None:
                    self._parse_threads = anyio.CapacityLimiter(2)
                answer = await anyio.to_thread.run_sync(_loads, line, limiter=self._parse_threads)
            error = _answer_error(answer, self.error_kinds)
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
            keep = kind not in RESERVED_KINDS
            if kind == "memory":
                raise WorkerLimitExceeded("memory", self.limit_message(what))
            raise JobError(kind, message)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, OSError):
            # The worker died: its memory budget (or the kernel) ended it.
            log.warning("%s: worker stopped (deadline or memory budget), replaced", what)
            raise WorkerLimitExceeded("deadline", self.limit_message(what)) from None
        except anyio.DelimiterNotFound:
            raise self._malformed(what, f"an answer line over {ANSWER_MAX_BYTES:,} bytes") from None
        except WorkerProtocolError as exc:
            raise self._malformed(what, str(exc)) from None
        finally:
            # Dead, out of memory, past its deadline, malformed, failed, or the call was
            # cancelled mid-job: the worker goes. Otherwise it is kept unless due to retire.
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
        """Kill every worker and wait for each to end; the pool runs nothing more."""
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

    async def __aenter__(self) -> AsyncConfinedPool:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class ConfinedPool:
    """:class:`AsyncConfinedPool` for synchronous code: :meth:`call` blocks until the answer.

    The workers belong to an event loop in a daemon thread of the pool's own; :meth:`call` is
    safe from several threads at once (at most ``size`` jobs run, the others wait within their
    deadline). Use it as a context manager, or call :meth:`close`; a pool left open never keeps
    the interpreter from exiting (its workers end when their stdin closes).

    Args:
        handler: As :class:`AsyncConfinedPool`.
        **options: :class:`AsyncConfinedPool`'s keyword arguments (``deadline_s`` and
            ``memory_bytes`` are required).

    Raises:
        ValueError: As :class:`AsyncConfinedPool`.
    """

    def __init__(self, handler: str, **options: Any) -> None:
        self.pool = AsyncConfinedPool(handler, **options)
        ready = threading.Event()
        self._token: Any = None
        self._stop: anyio.Event | None = None

        async def serve() -> None:
            self._token = anyio.lowlevel.current_token()
            self._stop = anyio.Event()
            ready.set()
            await self._stop.wait()

        self._thread = threading.Thread(
            target=anyio.run, args=(serve,), name="pysandbox-pool", daemon=True
        )
        self._thread.start()
        ready.wait()
        # Collected without close(): kill the workers (safe from any thread).
        weakref.finalize(self, self.pool.close)

    def call(self, job: Any, *, what: str = "job", check: AnswerCheck | None = None) -> Any:
        """Run one job in a worker; as :meth:`AsyncConfinedPool.call`, blocking.

        Raises:
            WorkerLimitExceeded: Past the deadline or the memory budget (worker replaced).
            JobError: The job's own error, as the handler raised it.
            WorkerProtocolError: A malformed answer (the worker was replaced).
            WorkerStartError: No worker could be started; the pool is closed.
        """
        if self.pool.closed:
            raise WorkerStartError("the pool is closed")
        one = functools.partial(self.pool.call, job, what=what, check=check)
        return anyio.from_thread.run(one, token=self._token)

    @property
    def pids(self) -> list[int]:
        """Process ids of the live workers."""
        return self.pool.pids

    def close(self) -> None:
        """Kill every worker, wait for each to end and stop the pool's thread (idempotent)."""
        if self._thread.is_alive():
            anyio.from_thread.run(self.pool.aclose, token=self._token)
            assert self._stop is not None  # noqa: S101 - set before the thread was ready
            anyio.from_thread.run_sync(self._stop.set, token=self._token)
            self._thread.join()

    def __enter__(self) -> ConfinedPool:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
