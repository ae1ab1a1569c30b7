"""Run/restore coordination: hold a sandbox's workspace exclusively.

A restore (or anything else that rewrites the workspace from outside) must not race a process
that can write the workspace. :class:`WorkspaceCoordinator` knows two kinds of holders:

- **runs**: a call in progress counts as one from the moment it holds its run slot until its
  whole process tree has been killed and reaped (:meth:`WorkspaceCoordinator.run`).
  :meth:`WorkspaceCoordinator.exclusive` *waits* for them, up to ``wait_s``, then raises
  :class:`~pysandbox.ExclusiveTimeout`; while the workspace is held, new runs *wait* (they are
  not refused) until the exclusive operation ends.
- **parked processes**: long-lived processes registered with
  :meth:`WorkspaceCoordinator.park` (their start time is recorded: a pid reused by another
  process is never signalled). They are *stopped* for the exclusive operation: one found
  stopped already (every thread in state ``T`` or ``t``) is left as it is and never continued;
  any other is sent ``SIGSTOP`` and polled until every thread is stopped; one not confirmed
  stopped within ``stop_wait_s`` is sent ``SIGKILL``, unparked and reported
  (:attr:`ExclusiveReport.killed`, and logged). At the end, exactly the processes stopped for
  the operation get ``SIGCONT``.

Signals go through a ``pidfd`` opened before the start time is checked, so a pid that is
reused after the check cannot receive them. Linux only (``/proc``, ``pidfd``).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import pathlib
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pysandbox.exceptions import ExclusiveTimeout, SandboxClosedError

__all__ = [
    "EXCLUSIVE_WAIT_S",
    "STOP_WAIT_S",
    "ExclusiveReport",
    "WorkspaceCoordinator",
    "process_start_time",
    "thread_states",
]

#: Default seconds :meth:`WorkspaceCoordinator.exclusive` waits for runs in progress to end.
EXCLUSIVE_WAIT_S = 10.0
#: Default seconds a parked process has to be confirmed stopped before it is killed.
STOP_WAIT_S = 1.0
#: Seconds between two reads of the thread states of the processes being stopped.
_POLL_S = 0.005
#: Seconds between two looks at a waiting run's cancellation.
_CANCEL_POLL_S = 0.05
#: Thread states of a stopped thread: job-control stop and tracing stop.
_STOPPED = frozenset("Tt")
#: Thread states of a thread that runs nothing any more (zombie, dead).
_DEAD = frozenset("ZX")
_PROC = pathlib.Path("/proc")

log = logging.getLogger("pysandbox")


def _stat_fields(data: bytes) -> list[bytes]:
    """The fields of a ``/proc/<pid>/stat`` line from the state (field 3) on.

    The command name (field 2) is the process's to choose: it may hold spaces, parentheses
    and newlines, so the fields are split after its *last* ``)``.

    Raises:
        ValueError: The line has no ``)`` or too few fields.
    """
    head, paren, tail = data.rpartition(b")")
    if not paren or b"(" not in head:
        raise ValueError("malformed /proc stat line")
    fields = tail.split()
    if len(fields) < 20:
        raise ValueError("malformed /proc stat line")
    return fields


def _read(path: pathlib.Path) -> bytes | None:
    """The bytes of a ``/proc`` file, or ``None`` when it is gone (the process or thread)."""
    try:
        return path.read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None


def process_start_time(pid: int) -> int | None:
    """The start time of process ``pid`` (field 22 of ``/proc/<pid>/stat``, clock ticks).

    Args:
        pid: A process id.

    Returns:
        The start time since boot, or ``None`` when no such process exists (or its stat line
        cannot be read as one). Two processes with the same pid have different start times.
    """
    data = _read(_PROC / str(pid) / "stat")
    if data is None:
        return None
    try:
        return int(_stat_fields(data)[19])
    except ValueError:
        return None


def thread_states(pid: int) -> list[str] | None:
    """The state letter of every thread of process ``pid`` (``/proc/<pid>/task/*/stat``).

    Args:
        pid: A process id.

    Returns:
        One letter per thread still listed (``R``, ``S``, ``D``, ``T``, ``t``, ``Z``...), or
        ``None`` when the process is gone.
    """
    try:
        tasks = list((_PROC / str(pid) / "task").iterdir())
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    states: list[str] = []
    for task in tasks:
        data = _read(task / "stat")
        if data is None:
            continue  # the thread ended meanwhile
        with contextlib.suppress(ValueError):
            states.append(_stat_fields(data)[0].decode("ascii", "replace")[:1])
    return states


def _stopped(states: list[str]) -> bool:
    """Whether every thread that can still run is stopped (and at least one is left)."""
    live = [s for s in states if s not in _DEAD]
    return bool(live) and all(s in _STOPPED for s in live)


def _gone(states: list[str] | None) -> bool:
    """Whether the process is gone or runs nothing any more (only zombie threads)."""
    return states is None or all(s in _DEAD for s in states)


def _check_wait(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class ExclusiveReport:
    """What :meth:`WorkspaceCoordinator.exclusive` did to the parked processes.

    Attributes:
        stopped: Pids stopped with ``SIGSTOP`` for the operation (continued at its end).
        already_stopped: Pids found stopped: left stopped, never continued.
        killed: Pids not confirmed stopped within ``stop_wait_s``: killed with ``SIGKILL``
            and unparked (also logged as a warning).
        skipped: Pids gone, or reused by another process (their start time changed): not
            signalled, unparked.
    """

    stopped: tuple[int, ...] = ()
    already_stopped: tuple[int, ...] = ()
    killed: tuple[int, ...] = ()
    skipped: tuple[int, ...] = ()


@dataclass
class _Stopping:
    """The processes being stopped: what :meth:`WorkspaceCoordinator._resume` undoes."""

    stopped: dict[int, int] = field(default_factory=dict)  # pid -> pidfd, to continue
    already_stopped: list[int] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)

    def report(self) -> ExclusiveReport:
        return ExclusiveReport(
            tuple(self.stopped),
            tuple(self.already_stopped),
            tuple(self.killed),
            tuple(self.skipped),
        )


class WorkspaceCoordinator:
    """Runs, parked processes and exclusive operations on one workspace (thread-safe).

    :class:`~pysandbox.Sandbox` has one (:attr:`~pysandbox.Sandbox.coordinator`); its runs
    count in it, and :meth:`~pysandbox.Sandbox.exclusive` adds draining the ready children and
    invalidating the workspace manifest. See the module for the rules.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._runs = 0
        self._held = False
        self._closed = False
        self._parked: dict[int, int] = {}  # pid -> start time at park

    @property
    def runs_in_progress(self) -> int:
        """Runs counted now (a run counts until its process tree is reaped)."""
        with self._cond:
            return self._runs

    @property
    def held(self) -> bool:
        """Whether an exclusive operation holds the workspace now."""
        with self._cond:
            return self._held

    @property
    def parked(self) -> tuple[int, ...]:
        """The parked pids, in the order they were parked."""
        with self._cond:
            return tuple(self._parked)

    def park(self, pid: int) -> None:
        """Register ``pid``, a long-lived process that can write the workspace.

        It is stopped during every exclusive operation (see the module). Parking waits, as a
        run does, while an exclusive operation holds the workspace. Parking a pid again
        records its start time again.

        Args:
            pid: The process id (not this process's own, nor 1).

        Raises:
            TypeError: ``pid`` is not an int.
            ValueError: ``pid`` is this process, ``1`` or not positive.
            ProcessLookupError: No process ``pid`` exists.
            PermissionError: This process may not signal ``pid`` (another user's).
            OSError: Not on Linux (``ENOSYS``).
            SandboxClosedError: The coordinator was closed.
        """
        if isinstance(pid, bool) or not isinstance(pid, int):
            raise TypeError(f"pid must be an int, not {type(pid).__name__}")
        if pid <= 1 or pid == os.getpid():
            raise ValueError(f"pid {pid} cannot be parked (not positive, init, or this process)")
        if not sys.platform.startswith("linux"):
            raise OSError(errno.ENOSYS, "parking a process needs Linux (/proc, pidfd)")
        with self._cond:
            while self._held and not self._closed:
                self._cond.wait()
            if self._closed:
                raise SandboxClosedError
            start = process_start_time(pid)
            if start is None:
                raise ProcessLookupError(errno.ESRCH, f"no process {pid} to park")
            try:
                os.kill(pid, 0)  # a process this one may not signal could never be stopped
            except PermissionError:
                raise PermissionError(
                    errno.EPERM, f"process {pid} cannot be signalled by this process"
                ) from None
            self._parked[pid] = start

    def unpark(self, pid: int) -> bool:
        """Forget the parked process ``pid`` (it is no longer stopped for exclusive operations).

        A process stopped by the exclusive operation in progress is still continued at its end.

        Args:
            pid: A process id.

        Returns:
            Whether ``pid`` was parked.
        """
        with self._cond:
            return self._parked.pop(pid, None) is not None

    def enter_run(self, cancelled: Callable[[], bool] | None = None) -> bool:
        """Count a run in; wait first while an exclusive operation holds the workspace.

        Args:
            cancelled: Asked while waiting; when it returns true the wait ends.

        Returns:
            ``True`` once counted (pair it with :meth:`leave_run`); ``False`` when cancelled
            while waiting (not counted).

        Raises:
            SandboxClosedError: The coordinator was closed.
        """
        with self._cond:
            while self._held and not self._closed:
                if cancelled is not None and cancelled():
                    return False
                self._cond.wait(_CANCEL_POLL_S)
            if self._closed:
                raise SandboxClosedError
            self._runs += 1
            return True

    def leave_run(self) -> None:
        """Count a run out: its processes are all gone."""
        with self._cond:
            self._runs -= 1
            self._cond.notify_all()

    @contextlib.contextmanager
    def run(self) -> Iterator[None]:
        """Count a call in progress as a run for the ``with`` block (see :meth:`enter_run`).

        Raises:
            SandboxClosedError: The coordinator was closed.
        """
        self.enter_run()
        try:
            yield
        finally:
            self.leave_run()

    def close(self) -> None:
        """Refuse further runs and parks; wake the waiting ones (they raise)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(
        self, *, wait_s: float = EXCLUSIVE_WAIT_S, stop_wait_s: float = STOP_WAIT_S
    ) -> Iterator[ExclusiveReport]:
        """Hold the workspace: no run in progress, new runs waiting, parked processes stopped.

        Args:
            wait_s: Most seconds to wait for another exclusive operation and for the runs in
                progress to end.
            stop_wait_s: Most seconds for the parked processes to be confirmed stopped; one
                that is not is killed (and for as long again, its death is awaited).

        Yields:
            What was done to the parked processes.

        Raises:
            ExclusiveTimeout: Runs were still in progress (or another exclusive operation
                held the workspace) after ``wait_s``; nothing was stopped.
            SandboxClosedError: The coordinator was closed.
            TypeError, ValueError: A wait is not a finite number of seconds >= 0.
        """
        wait = _check_wait("wait_s", wait_s)
        stop_wait = _check_wait("stop_wait_s", stop_wait_s)
        parked = self._acquire(wait)
        stopping = _Stopping()
        try:
            self._stop(parked, stop_wait, stopping)
            yield stopping.report()
        finally:
            self._resume(stopping)
            with self._cond:
                self._held = False
                self._cond.notify_all()

    def _acquire(self, wait_s: float) -> dict[int, int]:
        """Take the hold once no run is in progress; the parked processes then."""
        deadline = time.monotonic() + wait_s
        with self._cond:
            while self._held and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ExclusiveTimeout(
                        wait_s, self._runs, "another exclusive operation holds the workspace"
                    )
                self._cond.wait(remaining)
            if self._closed:
                raise SandboxClosedError
            self._held = True  # from here new runs wait
            try:
                while self._runs:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise ExclusiveTimeout(wait_s, self._runs, "runs are still in progress")
                    self._cond.wait(remaining)
            except BaseException:
                self._held = False
                self._cond.notify_all()
                raise
            return dict(self._parked)

    def _forget(self, pid: int, start: int) -> None:
        with self._cond:
            if self._parked.get(pid) == start:
                del self._parked[pid]

    def _stop(self, parked: dict[int, int], stop_wait_s: float, out: _Stopping) -> None:
        """Stop every parked process (see the module); record what was done in ``out``."""
        pending: dict[int, tuple[int, int]] = {}  # pid -> (pidfd, start time)
        try:
            for pid, start in parked.items():
                try:
                    fd = os.pidfd_open(pid)
                except ProcessLookupError:
                    self._skip(pid, start, out, "gone")
                    continue
                # The pidfd pins the process: checked after it is opened, the start time
                # proves it is the parked one, and every signal goes through it.
                if process_start_time(pid) != start:
                    os.close(fd)
                    self._skip(pid, start, out, "its pid was reused (start time changed)")
                    continue
                states = thread_states(pid)
                if _gone(states):
                    os.close(fd)
                    self._skip(pid, start, out, "gone")
                elif states is not None and _stopped(states):
                    os.close(fd)
                    out.already_stopped.append(pid)
                else:
                    try:
                        signal.pidfd_send_signal(fd, signal.SIGSTOP)
                    except ProcessLookupError:
                        os.close(fd)
                        self._skip(pid, start, out, "gone")
                        continue
                    pending[pid] = (fd, start)
            deadline = time.monotonic() + stop_wait_s
            while pending:
                for pid, (fd, start) in list(pending.items()):
                    states = thread_states(pid)
                    if _gone(states) or process_start_time(pid) != start:
                        del pending[pid]
                        os.close(fd)
                        self._skip(pid, start, out, "gone")
                    elif states is not None and _stopped(states):
                        del pending[pid]
                        out.stopped[pid] = fd
                if not pending or time.monotonic() >= deadline:
                    break
                time.sleep(_POLL_S)
            for pid, (fd, start) in list(pending.items()):
                del pending[pid]
                try:
                    self._kill(fd, pid, stop_wait_s)
                finally:
                    os.close(fd)
                self._forget(pid, start)
                out.killed.append(pid)
        finally:
            for fd, _ in pending.values():  # interrupted: not stopped, not ours to continue
                os.close(fd)

    def _skip(self, pid: int, start: int, out: _Stopping, why: str) -> None:
        log.info("parked process %d not stopped for an exclusive operation: %s", pid, why)
        self._forget(pid, start)
        out.skipped.append(pid)

    @staticmethod
    def _kill(fd: int, pid: int, wait_s: float) -> None:
        """``SIGKILL`` through ``fd``; wait up to ``wait_s`` for the process to end."""
        log.warning(
            "parked process %d was not confirmed stopped for an exclusive operation: killed",
            pid,
        )
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        # A pidfd polls readable once its process has ended (a zombie runs nothing).
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.poll(max(wait_s, _POLL_S) * 1000)

    @staticmethod
    def _resume(stopping: _Stopping) -> None:
        """``SIGCONT`` exactly the processes stopped for the operation; close their pidfds."""
        while stopping.stopped:
            _, fd = stopping.stopped.popitem()
            try:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(fd, signal.SIGCONT)
            finally:
                os.close(fd)
