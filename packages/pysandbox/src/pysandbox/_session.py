"""Sessions: one confined interpreter that keeps its globals across calls, stopped between them.

A :class:`Session` (opened by :meth:`pysandbox.Sandbox.open_session`, warm mode only) is one
child forked by the sandbox's warm zygote like a ready child (preloads, fresh randomness,
every layer of a run), serving calls from its code pipe in one globals dict
(:mod:`pysandbox.child._session`). After each call the child stops itself (``SIGSTOP``); the
parent returns the call's result only once it has seen every thread of the child stopped
(``/proc/<pid>/task/*/stat``, state ``T`` or ``t``), and resumes it (``SIGCONT``) only to run
the next call: no user code runs between calls.

After its first call the child is an interpreter the user's code controls, so the outcome of a
call comes only from what the parent observes itself (the table is in ``SECURITY.md``):

- CPU per call: the difference of ``utime + stime`` in ``/proc/<pid>/stat`` around the call;
  ``RLIMIT_CPU`` is raised per call by the parent (``prlimit``) to what the child used plus
  ``Limits.cpu_time_s``, under the hard limit :data:`SESSION_CPU_HARD_S` set at creation;
- the deadline: the parent interrupts (``SIGINT``: ``KeyboardInterrupt`` in the call); a child
  that stops itself within :data:`INTERRUPT_GRACE_S` stays alive (status ``timeout``), else it
  is killed and the session ends (reason ``timeout``);
- memory per call: the high-water mark is reset before the call (``/proc/<pid>/clear_refs``
  ``5``) and read after it (``VmHWM``); a call that fails with a peak of at least
  :data:`pysandbox._outcome.MEMORY_PEAK_SHARE` of the memory limit is ``memory_limit`` and ends
  the session; a ``MemoryError`` below it is ``error`` with the session alive;
- the process ending (``sys.exit()``, a signal): seen by the zygote on a pidfd and reaped;
- stdout and stderr: the session's pipes, drained during the call up to ``output_bytes`` per
  call; over it the call is interrupted (``output_limit``, the session stays alive);
- the workspace: measured during the call as for a run; over a limit the call is interrupted
  (``disk_limit``, the session stays alive);
- the result frame (the claimed status ``ok``/``error`` and the final value): bounded
  (:data:`pysandbox.child._values.RESULT_FRAME_MAX`), checked in shape, otherwise ignored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import errno
import functools
import marshal
import math
import os
import secrets
import selectors
import signal
import threading
import time
from types import CodeType
from typing import TYPE_CHECKING, Any

from pysandbox import _figures
from pysandbox._disk import UNMEASURABLE_BYTES, unlinked_bytes, workspace_usage
from pysandbox._layers import ExecutionMode
from pysandbox._outcome import CPU_SHARE, MEMORY_PEAK_SHARE
from pysandbox._result import RunResult, RunStatus
from pysandbox._supervisor import start_usage_entries
from pysandbox._wire import SESSION_KEY_BYTES
from pysandbox.child import _values
from pysandbox.child._kernel import SETUP_FAILED, SETUP_READY
from pysandbox.exceptions import SandboxSetupError, SessionEndedError

if TYPE_CHECKING:
    from pysandbox._limits import Limits
    from pysandbox.child import _zygote
    from pysandbox.runner import Sandbox

__all__ = [
    "DESCRIPTION_MAX",
    "INTERRUPT_GRACE_S",
    "SESSION_CPU_HARD_S",
    "Session",
    "SessionEnd",
    "claim_of",
    "one_shot_value",
    "open_session",
    "parse_frames",
    "proc_cpu_seconds",
    "stat_cpu_seconds",
    "stat_state",
    "status_bytes",
    "threads_stopped",
]

#: The hard ``RLIMIT_CPU`` of a session, set when it is created: all its calls together.
SESSION_CPU_HARD_S = 3600
#: Seconds an interrupted call has to stop itself before the parent kills the session.
INTERRUPT_GRACE_S = 0.5
#: Seconds the new session has to apply its layers and stop itself.
_START_S = 30.0
#: Most characters of a session's description.
DESCRIPTION_MAX = 200
#: How often a call's process state is read while no frame has come, seconds.
_STATE_POLL_S = 0.01
#: How often it is read once the frame has come, seconds.
_STOPPING_POLL_S = 0.0002
_DISK_POLL_S = 0.05
_READ_CHUNK = 65536
_BLIND_POLLS = 3


@functools.cache
def _clock_ticks() -> int:
    """Clock ticks per second of ``/proc``'s times (POSIX; read once)."""
    return os.sysconf("SC_CLK_TCK")


class SessionEnd(str, enum.Enum):
    """Why a session ended (``RunResult.session_end_reason``, ``Session.end_reason``)."""

    #: A call passed its deadline and did not stop within the grace after the interrupt, or
    #: the CPU limit killed it.
    TIMEOUT = "timeout"
    #: A call failed with its peak at the memory limit (or was killed there).
    MEMORY_LIMIT = "memory_limit"
    #: The code called ``sys.exit()`` (or the interpreter exited).
    EXIT = "exit"
    #: Killed: a cancelled call, a signal, a call that did not stop after an interrupt.
    KILLED = "killed"
    #: :meth:`Session.close` or :meth:`pysandbox.Sandbox.close`.
    CLOSED = "closed"

    def __str__(self) -> str:
        return self.value


class _Trip(enum.Enum):
    """Why the parent interrupted a call."""

    TIMEOUT = "timeout"
    OUTPUT_LIMIT = "output_limit"
    DISK_LIMIT = "disk_limit"
    CANCELLED = "cancelled"


def _task_states(pid: int) -> dict[str, str] | None:
    """Each thread's state letter (after the stat line's last ``)``), or ``None``: gone."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")  # noqa: PTH208 - names only
    except OSError:
        return None
    states: dict[str, str] = {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as fh:  # noqa: PTH123
                stat = fh.read()
        except OSError:
            continue  # the thread ended meanwhile
        states[tid] = stat_state(stat)
    return states


def _after_name(stat: bytes) -> list[bytes]:
    """The fields of a ``stat`` line after the name, which ends at the line's LAST ``)``.

    The name (``comm``) is the code's choice (``prctl(PR_SET_NAME)``, a thread's name): it may
    hold ``)``, spaces and state letters, so nothing before the last ``)`` is read.
    """
    return stat[stat.rfind(b")") + 1 :].split()


def stat_state(stat: bytes) -> str:
    """The state letter of a ``/proc/<pid>[/task/<tid>]/stat`` line (``?`` if unreadable).

    Args:
        stat: The line's bytes.

    Returns:
        ``R``, ``S``, ``T``, ``t``, ``Z``, ...
    """
    after = _after_name(stat)
    return after[0].decode("ascii", "replace") if after and len(after[0]) == 1 else "?"


def stat_cpu_seconds(stat: bytes) -> float | None:
    """``utime + stime`` of a ``/proc/<pid>/stat`` line in seconds, or ``None`` if malformed.

    Args:
        stat: The line's bytes.

    Returns:
        The seconds (clock ticks over ``SC_CLK_TCK``).
    """
    fields = _after_name(stat)
    try:
        return (int(fields[11]) + int(fields[12])) / _clock_ticks()
    except (IndexError, ValueError):
        return None


def threads_stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (state ``T`` or ``t``), read twice.

    The thread list is read again after the states: a thread created meanwhile fails it.

    Args:
        pid: The session child (unreaped: the pid is its own).

    Returns:
        ``True`` only when both readings list the same threads, all stopped.
    """
    first = _task_states(pid)
    if not first or any(state not in ("T", "t") for state in first.values()):
        return False
    second = _task_states(pid)
    return (
        second is not None
        and second.keys() == first.keys()
        and all(state in ("T", "t") for state in second.values())
    )


def proc_cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds of ``pid`` (all its threads), from ``/proc/<pid>/stat``.

    Args:
        pid: A process.

    Returns:
        The seconds, or ``None`` if it cannot be read.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:  # noqa: PTH123
            stat = fh.read()
    except OSError:
        return None
    return stat_cpu_seconds(stat)


def status_bytes(pid: int, key: bytes) -> int | None:
    """A ``kB`` line of ``/proc/<pid>/status`` (``VmHWM``, ``VmRSS``) in bytes, or ``None``."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:  # noqa: PTH123
            for line in fh:
                if line.startswith(key + b":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _reset_peak(pid: int) -> bool:
    """Reset the high-water mark of ``pid``'s resident set (``clear_refs`` ``5``)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "wb") as fh:  # noqa: PTH123
            fh.write(b"5")
    except OSError:
        return False
    return True


#: A frame's parsed form: ``(call number, ok, value)``.
Frame = tuple[int, bool, "dict[str, str] | None"]


def parse_frames(data: bytes) -> list[Frame] | None:
    """The frames on a session's result pipe (untrusted bytes), in order.

    Args:
        data: What the parent kept of the pipe during one call.

    Returns:
        ``(call number, ok, value)`` per frame, or ``None`` when ``data`` is not a sequence of
        well-formed frames (garbage, a cut frame, lengths that lie, a value over its bounds).
    """
    header = _values.FRAME_HEADER_BYTES
    frames: list[Frame] = []
    at = 0
    while at < len(data):
        head = data[at : at + header]
        if len(head) < header or head[:1] != b"V":
            return None
        if head[9:10] not in (b"o", b"e") or head[10:11] not in (b"0", b"1"):
            return None
        kind_len = int.from_bytes(head[11:15], "big")
        text_len = int.from_bytes(head[15:19], "big")
        size = header + kind_len + text_len
        if size > _values.RESULT_FRAME_MAX or at + size > len(data):
            return None
        seq, ok = int.from_bytes(head[1:9], "big"), head[9:10] == b"o"
        body = data[at + header : at + size]
        at += size
        if head[10:11] == b"0":
            if kind_len or text_len:
                return None
            frames.append((seq, ok, None))
            continue
        kind = body[:kind_len].decode("utf-8", "replace")
        text = body[kind_len:].decode("utf-8", "replace")
        if len(kind) > _values.TYPE_TEXT_MAX or len(text) > _values.REPR_TEXT_MAX:
            return None
        frames.append((seq, ok, {"type": kind, "text": text}))
    return frames


def claim_of(data: bytes, seq: int) -> tuple[bool, dict[str, str] | None] | None:
    """The claim of call ``seq`` on the result pipe: its one frame's ``(ok, value)``.

    Frames of earlier calls (the end of a call that stopped itself early, resumed by this
    one) are skipped.

    Args:
        data: What the parent kept of the pipe during the call.
        seq: The call's number.

    Returns:
        ``(ok, value)``, or ``None``: malformed bytes, or not exactly one frame of ``seq``.
    """
    frames = parse_frames(data)
    if frames is None:
        return None
    own = [(ok, value) for number, ok, value in frames if number == seq]
    return own[0] if len(own) == 1 else None


@dataclasses.dataclass
class _Call:
    """What the parent observed during one call."""

    stdout: bytearray = dataclasses.field(default_factory=bytearray)
    stderr: bytearray = dataclasses.field(default_factory=bytearray)
    stdout_cut: bool = False
    stderr_cut: bool = False
    frame: bytearray = dataclasses.field(default_factory=bytearray)
    frame_cut: bool = False
    figures: bytearray = dataclasses.field(default_factory=bytearray)
    figures_cut: bool = False
    trip: _Trip | None = None
    stopped: bool = False
    exited: bool = False
    killed: bool = False
    wait_status: int | None = None
    cpu_s: float = 0.0
    peak: int = 0
    duration_s: float = 0.0
    seq: int = 0


class Session:
    """A persistent confined interpreter: globals, imports and definitions stay across calls.

    Opened by :meth:`pysandbox.Sandbox.open_session` (warm mode only); a context manager.
    Calls are serialised (one at a time) and each holds one of the sandbox's run slots. The
    child is stopped between calls; every layer of a run is on for its whole life.

    Attributes:
        description: The caller's description (at most :data:`DESCRIPTION_MAX` characters).
        created_at: ``time.time()`` when it was opened, seconds.
        last_used_at: ``time.time()`` when its last call ended (``created_at`` before one).
        calls: How many calls ran (rejected ones not counted).
    """

    def __init__(
        self,
        sandbox: _Host,
        child: _zygote.WarmChild,
        fds: dict[str, int],
        layers: tuple[str, ...],
        description: str,
        *,
        key: bytes,
    ) -> None:
        self._sandbox = sandbox
        self._key = key  # begins every call's header on the code pipe
        self._child = child
        self._fds = fds
        self._layers = layers
        self.description = description
        self.created_at = time.time()
        self.last_used_at = self.created_at
        self.calls = 0
        self._lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._end: SessionEnd | None = None
        self._cancel: threading.Event | None = None
        self._reaped: tuple[int, float, int] | None = None
        self._pid = child.pid
        self._seq = 0  # the number of the last call sent (its frame carries it)

    # -- properties --
    @property
    def pid(self) -> int:
        """The session child's pid (its own process group and session)."""
        return self._pid

    @property
    def ended(self) -> bool:
        """Whether the session has ended (it runs nothing more)."""
        return self._end is not None

    @property
    def end_reason(self) -> str | None:
        """Why it ended (:class:`SessionEnd` values), or ``None`` while it lives."""
        return None if self._end is None else self._end.value

    @property
    def rss_bytes(self) -> int:
        """The child's resident set size now (``VmRSS``), bytes; 0 once it has ended."""
        if self._end is not None:
            return 0
        return status_bytes(self._pid, b"VmRSS") or 0

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- ending --
    def close(self) -> None:
        """End the session: kill its process group and reap it (idempotent, thread-safe).

        A call in progress is killed (its result says ``killed``).
        """
        cancel = self._cancel
        if cancel is not None:
            cancel.set()
        with self._lock:
            self._finish(SessionEnd.CLOSED)

    def _finish(self, reason: SessionEnd) -> None:
        """Kill, reap and release everything (first reason wins); caller holds ``_lock``."""
        with self._state_lock:
            if self._end is not None:
                return
            self._end = reason
        self._sandbox.unpark(self._child.pid)
        self._child.kill_group()
        self._reaped = self._child.reap()
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = {}
        self._sandbox.forget_session(self)

    # -- calls --
    def run(self, code: str, timeout: float | None = None) -> RunResult:
        """Check ``code`` and run it in the session; block until the call has ended.

        Args:
            code: Python source (astguard checks it on the host, as for a run).
            timeout: Wall-clock limit of this call, seconds (at most ``limits.timeout_s``).

        Returns:
            The call's result: ``result`` is the final expression's value; ``session_ended``
            and ``session_end_reason`` say whether (and why) the session ended with it.

        Raises:
            TypeError: ``code`` is not a str.
            ValueError: ``timeout`` is not a positive finite number.
            SessionEndedError: The session has ended.
            SandboxClosedError: The sandbox was closed.
        """
        return self._run(code, timeout, threading.Event())

    async def arun(self, code: str, timeout: float | None = None) -> RunResult:
        """Like :meth:`run`, without blocking the event loop.

        If the awaiting task is cancelled, the call is interrupted and the session is killed
        (reason ``killed``) before the cancellation propagates.

        Args:
            code: As for :meth:`run`.
            timeout: As for :meth:`run`.

        Returns:
            The call's result.

        Raises:
            TypeError, ValueError, SessionEndedError, SandboxClosedError: As :meth:`run`.
        """
        import asyncio

        from pysandbox.runner import _executor

        cancel = threading.Event()
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(_executor(), self._run, code, timeout, cancel)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            cancel.set()
            with contextlib.suppress(BaseException):
                await asyncio.shield(future)
            raise

    def _run(self, code: str, timeout: float | None, cancel: threading.Event) -> RunResult:
        with self._lock:
            if self._end is not None:
                raise SessionEndedError(self._end.value)
            checked = self._sandbox.check(code, timeout)
            if isinstance(checked, RunResult):
                return dataclasses.replace(checked, session_ended=False)
            compiled = self._sandbox.compile(code)
            if isinstance(compiled, RunResult):
                return dataclasses.replace(compiled, session_ended=False)
            self._seq += 1
            message = marshal.dumps({"code": code, "code_object": compiled, "seq": self._seq})
            # A call counts as a run of the workspace's coordinator: an exclusive operation
            # (a restore) waits for it, and it waits while one holds the workspace.
            with self._sandbox.run_slot(), self._sandbox.counted():
                if self._end is not None:  # closed while waiting for the slot
                    raise SessionEndedError(self._end.value)
                self._cancel = cancel
                self._sandbox.workspace_changed()
                try:
                    call = self._call(message, checked, cancel, self._seq)
                finally:
                    self._cancel = None
                    self._sandbox.workspace_changed()
            self.calls += 1
            self.last_used_at = time.time()
            return self._decide(call)

    def _signal(self, sig: int) -> None:
        self._child.send_signal(sig)

    def _call(self, message: bytes, deadline_s: float, cancel: threading.Event, seq: int) -> _Call:
        """Resume the child with call ``seq`` and watch it until it stopped again or ended."""
        lim = self._sandbox.limits
        pid = self._pid
        fds = self._fds
        call = _Call(seq=seq)
        before = proc_cpu_seconds(pid)
        if before is None or not _reset_peak(pid):
            self._finish(SessionEnd.KILLED)  # gone, or its /proc unreadable: not measurable
            call.killed = call.exited = True
            call.wait_status = self._wait_status()
            return call
        import resource  # POSIX only: sessions are Linux only (warm mode)

        soft = min(SESSION_CPU_HARD_S, math.ceil(before) + lim.cpu_time_s)
        try:
            resource.prlimit(pid, resource.RLIMIT_CPU, (soft, SESSION_CPU_HARD_S))
        except OSError:
            self._finish(SessionEnd.KILLED)  # no CPU backstop: run nothing
            call.killed = call.exited = True
            call.wait_status = self._wait_status()
            return call
        workspace = self._sandbox.workspace
        size, count = workspace_usage(workspace, start_usage_entries(lim.workspace_files))
        allowance = (max(lim.workspace_bytes, size), max(lim.workspace_files, count))
        try:
            device = os.stat(workspace).st_dev  # noqa: PTH116
        except OSError:
            device = -1
        pending = memoryview(self._key + len(message).to_bytes(8, "little") + message)
        sel = selectors.DefaultSelector()
        sources = {"out": fds["out"], "err": fds["err"], "fig": fds["fig"], "res": fds["res"]}
        for name, fd in sources.items():
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ, name)
        os.set_blocking(fds["code"], False)
        sel.register(fds["code"], selectors.EVENT_WRITE, "code")
        exit_fd = self._child.exit_fd()
        sel.register(exit_fd, selectors.EVENT_READ, "exit")
        started = time.monotonic()
        deadline = started + deadline_s
        grace_end: float | None = None  # set once the call is interrupted
        next_disk = started + _DISK_POLL_S
        next_state = started
        blind = 0
        self._signal(signal.SIGCONT)
        try:
            while True:
                now = time.monotonic()
                if call.trip is None:
                    if cancel.is_set():
                        call.trip = _Trip.CANCELLED
                    elif now >= deadline:
                        call.trip = _Trip.TIMEOUT
                    if call.trip is not None:
                        grace_end = now + INTERRUPT_GRACE_S
                        self._signal(signal.SIGINT)
                if grace_end is not None and now >= grace_end:
                    break  # it did not stop: killed below
                if not pending and now >= next_state:
                    if threads_stopped(pid):
                        while self._read("res", fds["res"], call, lim, None):
                            pass  # written before the stop
                        if call.trip is not None or not self._resume_stale(call):
                            call.stopped = True
                            break
                    wait_state = _STOPPING_POLL_S if call.frame else _STATE_POLL_S
                    next_state = now + wait_state
                if now >= next_disk and call.trip is None:
                    used, entries = workspace_usage(workspace, allowance[1])
                    held = unlinked_bytes(pid, workspace, device, lim.file_size_bytes)
                    blind = blind + 1 if held >= UNMEASURABLE_BYTES else 0
                    if held < UNMEASURABLE_BYTES or blind >= _BLIND_POLLS:
                        used += held
                    if used > allowance[0] or entries > allowance[1]:
                        call.trip = _Trip.DISK_LIMIT
                        grace_end = now + INTERRUPT_GRACE_S
                        self._signal(signal.SIGINT)
                    scan = time.monotonic() - now
                    next_disk = now + max(_DISK_POLL_S, 10 * scan)
                limit = min(t for t in (deadline, next_disk, next_state, grace_end) if t)
                for key, _ in sel.select(max(limit - time.monotonic(), 0.0)):
                    if key.data == "code":
                        try:
                            pending = pending[os.write(fds["code"], pending) :]
                        except BlockingIOError:
                            continue
                        except OSError:
                            pending = pending[len(pending) :]
                        if not pending:
                            sel.unregister(fds["code"])
                        continue
                    if key.data == "exit":
                        if self._child.on_readable():
                            call.exited = True
                        sel.unregister(exit_fd)
                        continue
                    if not self._read(key.data, int(key.fd), call, lim, sel):
                        continue
                    if key.data == "res":  # the end is near: read the state now
                        next_state = time.monotonic()
                    if (
                        call.trip is None
                        and key.data in ("out", "err")
                        and (call.stdout_cut or call.stderr_cut)
                    ):
                        call.trip = _Trip.OUTPUT_LIMIT
                        grace_end = time.monotonic() + INTERRUPT_GRACE_S
                        self._signal(signal.SIGINT)
                if call.exited:
                    break
        finally:
            sel.close()
        ended = time.monotonic()
        call.duration_s = ended - started
        if call.stopped and call.trip is not _Trip.CANCELLED and not call.exited:
            for name, fd in sources.items():  # what was written before the stop
                while self._read(name, fd, call, lim, None):
                    pass
            after = proc_cpu_seconds(pid)
            call.cpu_s = max(0.0, (after if after is not None else before) - before)
            call.peak = status_bytes(pid, b"VmHWM") or 0
            used, entries = workspace_usage(workspace, allowance[1])
            if call.trip is None and (used > allowance[0] or entries > allowance[1]):
                call.trip = _Trip.DISK_LIMIT
            return call
        # Ended, or to be killed: kill the group, reap, read the rest to the end.
        call.killed = not call.exited
        self._child.kill_group()
        status = self._wait_status()
        call.wait_status = status
        for name, fd in sources.items():
            for _ in range(64):
                if not self._read(name, fd, call, lim, None):
                    break
        if self._reaped is not None:
            call.cpu_s = max(0.0, self._reaped[1] - before)
            call.peak = self._reaped[2]
        return call

    def _resume_stale(self, call: _Call) -> bool:
        """At a stop with no frame of this call: resume it; return whether it was resumed.

        The code stopped itself before its end (or the tail of an earlier call that did so
        ran and ended): the frames of earlier calls are dropped and the child goes on, under
        this call's deadline. A stop with this call's frame, or with malformed bytes, ends it.
        """
        frames = None if call.frame_cut else parse_frames(bytes(call.frame))
        if frames is None or any(number == call.seq for number, _, _ in frames):
            return False
        call.frame.clear()
        self._signal(signal.SIGCONT)
        return True

    def _wait_status(self) -> int:
        """Reap the child now (killed already); its wait status (SIGKILL when lost)."""
        if self._reaped is None:
            self._child.kill_group()
            self._reaped = self._child.reap()
        if self._reaped is None:
            return int(signal.SIGKILL)
        return int(self._reaped[0])

    def _read(
        self,
        name: str,
        fd: int,
        call: _Call,
        lim: Limits,
        sel: selectors.BaseSelector | None,
    ) -> bool:
        """Read one chunk of ``name``'s pipe into ``call``; ``False``: nothing (now, or ever)."""
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if not chunk:
            if sel is not None:
                with contextlib.suppress(KeyError, ValueError):
                    sel.unregister(fd)
            return False
        if name in ("out", "err"):
            buf = call.stdout if name == "out" else call.stderr
            room = lim.output_bytes - len(buf)
            buf += chunk[: max(room, 0)]
            if len(chunk) > room:
                if name == "out":
                    call.stdout_cut = True
                else:
                    call.stderr_cut = True
        elif name == "res":
            room = 2 * _values.RESULT_FRAME_MAX + 1 - len(call.frame)
            call.frame += chunk[: max(room, 0)]
            call.frame_cut = call.frame_cut or len(chunk) > room
        else:
            room = _figures.read_cap() - len(call.figures)
            call.figures += chunk[: max(room, 0)]
            call.figures_cut = call.figures_cut or len(chunk) > room
        return True

    # -- the outcome --
    def _decide(self, call: _Call) -> RunResult:
        """The call's result from the parent's observations (the table in SECURITY.md)."""
        lim = self._sandbox.limits
        near_memory = call.peak >= MEMORY_PEAK_SHARE * lim.memory_bytes
        claimed = None if call.frame_cut else claim_of(bytes(call.frame), call.seq)
        value: dict[str, str] | None = None
        exit_code: int | None = None
        sig: int | None = None
        end: SessionEnd | None = None
        detail = ""
        trip_status = {
            _Trip.TIMEOUT: (RunStatus.TIMEOUT, "wall-clock deadline reached"),
            _Trip.OUTPUT_LIMIT: (RunStatus.OUTPUT_LIMIT, f"output passed {lim.output_bytes} bytes"),
            _Trip.DISK_LIMIT: (
                RunStatus.DISK_LIMIT,
                f"workspace passed {lim.workspace_bytes} bytes or {lim.workspace_files} entries",
            ),
            _Trip.CANCELLED: (RunStatus.KILLED, "call cancelled"),
        }
        if call.stopped and call.trip is not _Trip.CANCELLED and not call.exited:
            if call.trip is not None:
                status, detail = trip_status[call.trip]
                detail += "; the call was interrupted and the session stays alive"
            elif (claimed is None or not claimed[0]) and near_memory:
                status, end = RunStatus.MEMORY_LIMIT, SessionEnd.MEMORY_LIMIT
                detail = (
                    f"failed with its measured peak at the memory limit ({lim.memory_bytes} "
                    "bytes): the session was ended"
                )
            elif claimed is None:  # not known to have succeeded: failed
                status = RunStatus.ERROR
                detail = "the session stopped without exactly one well-formed result frame"
            else:
                status = RunStatus.OK if claimed[0] else RunStatus.ERROR
                value = claimed[1] if claimed[0] else None
        else:
            raw = call.wait_status if call.wait_status is not None else int(signal.SIGKILL)
            if call.killed:
                if call.trip is None:
                    status, end = RunStatus.KILLED, SessionEnd.KILLED
                    detail = "the session did not stop itself after its call: killed"
                else:
                    status, detail = trip_status[call.trip]
                    end = SessionEnd.TIMEOUT if call.trip is _Trip.TIMEOUT else SessionEnd.KILLED
                    if call.trip is not _Trip.CANCELLED:
                        detail += "; the call did not stop after the interrupt: session killed"
                sig = signal.SIGKILL
            elif os.WIFSIGNALED(raw):
                sig = os.WTERMSIG(raw)
                if sig in (signal.SIGXCPU, signal.SIGKILL) and (
                    call.cpu_s >= CPU_SHARE * lim.cpu_time_s
                ):
                    status, end = RunStatus.TIMEOUT, SessionEnd.TIMEOUT
                    detail = f"CPU time limit ({lim.cpu_time_s} s per call) reached"
                elif sig == signal.SIGKILL and near_memory:
                    status, end = RunStatus.MEMORY_LIMIT, SessionEnd.MEMORY_LIMIT
                    detail = "killed at the memory limit"
                else:
                    status, end = RunStatus.KILLED, SessionEnd.KILLED
                    detail = f"killed by signal {signal.Signals(sig).name}"
            else:
                exit_code = os.WEXITSTATUS(raw)
                end = SessionEnd.EXIT
                if exit_code != 0 and near_memory:
                    status, end = RunStatus.MEMORY_LIMIT, SessionEnd.MEMORY_LIMIT
                else:
                    status = RunStatus.OK if exit_code == 0 else RunStatus.ERROR
                detail = f"the session exited with status {exit_code}"
        if end is not None:
            self._finish(end)
        figures, omitted = _figures.parse_frames(bytes(call.figures), call.figures_cut)
        return RunResult(
            status=status,
            exit_code=exit_code,
            signal=sig,
            stdout=bytes(call.stdout).decode("utf-8", "backslashreplace"),
            stderr=bytes(call.stderr).decode("utf-8", "backslashreplace"),
            stdout_truncated=call.stdout_cut,
            stderr_truncated=call.stderr_cut,
            duration_ms=round(call.duration_s * 1000.0, 3),
            cpu_time_ms=round(call.cpu_s * 1000.0, 3),
            peak_memory_bytes=call.peak,
            layers=self._layers,
            detail=detail,
            figures=figures,
            figures_omitted=omitted,
            result=value,
            session_ended=self._end is not None,
            session_end_reason=None if self._end is None else self._end.value,
        )


def one_shot_value(figure_data: bytes, status: RunStatus) -> dict[str, str] | None:
    """A one-shot run's ``result``: its figure channel's value frame, for an ``ok`` run only.

    Args:
        figure_data: What the parent kept of the run's figure channel.
        status: The run's status as the parent decided it.

    Returns:
        ``{"type", "text"}``, or ``None`` (not ``ok``, no value, or malformed bytes).
    """
    if status is not RunStatus.OK:
        return None
    data = _figures.value_frame(figure_data)
    claim = claim_of(data, 0) if data is not None else None
    return claim[1] if claim is not None and claim[0] else None


class _Host:
    """What a session uses of its sandbox: the checks, the run slots, the tracking."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.limits = sandbox.limits
        self.workspace = sandbox.workspace

    def check(self, code: str, timeout: float | None) -> float | RunResult:
        """The call's deadline, or the result of a refused call (nothing ran)."""
        return self.sandbox._check(code, timeout)

    def compile(self, code: str) -> CodeType | RunResult | None:
        """The code compiled as for a run, ``None`` (the child reports the error) or a refusal."""
        return self.sandbox._compile(code)

    def workspace_changed(self) -> None:
        """A call starts or ended: the runs' kept workspace measurement is stale.

        Runs reuse the measurement of the last run's end while nothing else changed the
        workspace; a session call changes it, and a run that overlaps a call keeps none.
        """
        sandbox = self.sandbox
        with sandbox._disk_lock:
            sandbox._disk_generation += 1
            sandbox._manifest = None

    def run_slot(self) -> contextlib.AbstractContextManager[object]:
        """One of the sandbox's run slots (a call holds one while it runs)."""
        slots: contextlib.AbstractContextManager[object] = self.sandbox._run_slots
        return slots

    def counted(self) -> contextlib.AbstractContextManager[None]:
        """The call counted as a run in the workspace's coordinator for the ``with`` block."""
        return self.sandbox.coordinator.run()

    def park(self, pid: int) -> None:
        """Park the session's process: every exclusive operation finds it stopped or stops it."""
        self.sandbox.park(pid)

    def unpark(self, pid: int) -> None:
        """The session ended: its process is no longer the coordinator's to stop."""
        with contextlib.suppress(ProcessLookupError, ValueError, OSError):
            self.sandbox.unpark(pid)

    def forget_session(self, session: Session) -> None:
        """The session ended: the sandbox stops tracking it."""
        with self.sandbox._sessions_lock:
            self.sandbox._sessions.discard(session)


def open_session(sandbox: Sandbox, description: str) -> Session:
    """Fork a session child on ``sandbox``'s zygote (see :meth:`pysandbox.Sandbox.open_session`).

    Raises:
        TypeError: ``description`` is not a str.
        ValueError: ``description`` is longer than :data:`DESCRIPTION_MAX`.
        SessionsNeedWarmMode: The sandbox runs in spawn mode.
        IsolationUnavailable, SandboxSetupError, SandboxClosedError: As for a run.
    """
    import resource  # POSIX only: sessions are Linux only (warm mode)

    from pysandbox._launch import ZygoteLauncher
    from pysandbox._pool import max_code_bytes
    from pysandbox.child._zygote import ZygoteError
    from pysandbox.exceptions import SandboxClosedError, SessionsNeedWarmMode

    if not isinstance(description, str):
        raise TypeError(f"description must be a str, not {type(description).__name__}")
    if len(description) > DESCRIPTION_MAX:
        raise ValueError(f"description is {len(description)} characters; at most {DESCRIPTION_MAX}")
    sandbox._check("", None)  # closed, or a required layer missing: raises
    if sandbox._execution != ExecutionMode.WARM:
        raise SessionsNeedWarmMode("execution='spawn' was asked for")
    config = sandbox._child_config()
    caps = sandbox.capabilities()
    request = config.run_request("", None, secrets.token_hex(16))
    request["rlimits"] = [
        (kind, soft, SESSION_CPU_HARD_S if kind == resource.RLIMIT_CPU else hard)
        for kind, soft, hard in request["rlimits"]
    ]
    request["max_code_bytes"] = max_code_bytes(sandbox._policy.max_source_bytes)
    request["session_child"] = True
    key = secrets.token_bytes(SESSION_KEY_BYTES)
    request["session_key"] = key
    child = fds = None
    for _attempt in range(2):
        launcher = sandbox._launcher(config)
        if not isinstance(launcher, ZygoteLauncher):
            raise SessionsNeedWarmMode(sandbox._zygote_reason or "the warm zygote is unavailable")
        try:
            child, fds = open_child(launcher.zygote, dict(request))
            break
        except ZygoteError:
            sandbox._discard_zygote(launcher.zygote)  # the next attempt starts another
    if child is None or fds is None:
        raise SandboxSetupError("the warm zygote did not take the session twice")
    host = _Host(sandbox)
    session = Session(host, child, fds, config.layers(caps.active_layers), description, key=key)
    with sandbox._sessions_lock:
        sandbox._sessions.add(session)
    try:
        # Stopped between calls, it stays stopped through an exclusive operation (a restore),
        # which never continues a process it found stopped.
        host.park(child.pid)
    except BaseException:
        session.close()
        raise
    if sandbox._closed:
        session.close()
        raise SandboxClosedError
    return session


def open_child(
    zygote: _zygote.Zygote,
    request: dict[str, Any],
) -> tuple[_zygote.WarmChild, dict[str, int]]:
    """Ask ``zygote`` for a session child; return it, stopped, with the parent's pipe ends.

    Args:
        zygote: The sandbox's running zygote.
        request: The :class:`pysandbox._wire.RunRequest` (with ``session_child``).

    Returns:
        The zygote's handle and the read ends ``out``, ``err``, ``fig``, ``res`` and the write
        end ``code``.

    Raises:
        pysandbox.child._zygote.ZygoteError: The zygote did not take the request.
        SandboxSetupError: The child could not apply its layers, or did not stop in time.
    """
    ends = [os.pipe2(os.O_CLOEXEC) for _ in range(6)]  # out, err, setup, fig, code, result
    (out_r, out_w), (err_r, err_w), (setup_r, setup_w), (fig_r, fig_w) = ends[:4]
    (code_r, code_w), (res_r, res_w) = ends[4:]
    theirs = (out_w, err_w, setup_w, fig_w, code_r, res_w)
    ours = {"out": out_r, "err": err_r, "fig": fig_r, "code": code_w, "res": res_r}
    try:
        sock = zygote.request(marshal.dumps(request), theirs)
        child = zygote.forked(sock)
    except BaseException:
        for fd in (*ours.values(), setup_r):
            os.close(fd)
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    try:
        setup = _read_setup(setup_r)
        if setup[:1] != SETUP_READY:
            reason = (
                setup[1:].decode("utf-8", "backslashreplace").strip()
                if setup[:1] == SETUP_FAILED
                else "the session child ended before its isolation layers were in place"
            )
            raise SandboxSetupError(reason)
        deadline = time.monotonic() + _START_S
        while not threads_stopped(child.pid):
            if time.monotonic() >= deadline or _task_states(child.pid) is None:
                raise SandboxSetupError("the session child did not stop after its setup")
            time.sleep(_STOPPING_POLL_S)
    except BaseException:
        child.kill_group()
        child.reap()
        for fd in ours.values():
            os.close(fd)
        raise
    finally:
        os.close(setup_r)
    return child, ours


def _read_setup(fd: int) -> bytes:
    """Read the setup channel to its end (at most 4 KiB), within :data:`_START_S`."""
    data = b""
    deadline = time.monotonic() + _START_S
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    try:
        while len(data) <= 4096:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                break
            try:
                chunk = os.read(fd, 4096)
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                break
            if not chunk:
                break
            data += chunk
    finally:
        sel.close()
    return data
