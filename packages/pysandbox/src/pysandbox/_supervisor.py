"""Parent-side supervision of one child: spawn, drain, watch, kill, reap.

Everything here runs in the parent (the server). The child is started with ``subprocess.Popen``
without ``preexec_fn`` (CPython then uses ``vfork``/``posix_spawn``-style creation, safe in a
threaded parent), in a new session, with stdin on ``/dev/null``, only its two output pipes and
the configuration descriptor inherited, and an environment built from an allow-list.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "UNMEASURABLE_BYTES",
    "Outcome",
    "Supervisor",
    "WarmHandle",
    "WarmLauncher",
    "start_usage_entries",
    "sweep_processes",
    "workspace_usage",
]

_READ_CHUNK = 65536
_DISK_POLL_S = 0.05
_EXIT_GRACE_S = 0.25


@dataclass(frozen=True)
class Outcome:
    """What the parent observed about one child.

    Attributes:
        reason: The limit or event that made the parent stop the run (``"timeout"``,
            ``"output_limit"``, ``"disk_limit"``, ``"cancelled"``, ``"leftover"``) or ``None``.
        wait_status: Raw status from ``wait4``.
        cpu_time_s: User plus system CPU seconds of the child.
        maxrss_bytes: Peak resident set size of the child, bytes.
        stdout: Captured bytes (at most the cap).
        stderr: Captured bytes (at most the cap).
        stdout_truncated: More than the cap was written to stdout.
        stderr_truncated: More than the cap was written to stderr.
        duration_s: Wall-clock seconds from spawn to exit.
        swept: Number of stray processes killed by the sweep.
        workspace_allowance: ``(bytes, entries)`` the run could use before ``disk_limit``:
            the limits, or what the workspace already held at the start if that was more
            (so that a run can still clean up a workspace that is over its limit).
    """

    reason: str | None
    wait_status: int
    cpu_time_s: float
    maxrss_bytes: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    duration_s: float
    swept: int
    workspace_allowance: tuple[int, int]


def start_usage_entries(workspace_files: int) -> int:
    """How many entries to count at the start of a run: enough to see how far over it is."""
    return 10 * workspace_files + 1000


#: The size :func:`workspace_usage` reports for a workspace it cannot fully read: over any limit.
UNMEASURABLE_BYTES = 1 << 62


def workspace_usage(root: str, max_entries: int) -> tuple[int, int]:
    """Measure a workspace without following symlinks.

    A directory the caller may not list or search (code running as the server's own user can
    ``mkdir(mode=0o300)``) could hide any amount of data, so it makes the whole workspace count
    as :data:`UNMEASURABLE_BYTES`: over every limit, which stops the run (``disk_limit``) and
    makes later runs shrink-only until it is removed.

    Args:
        root: Directory to measure.
        max_entries: Stop counting once more entries than this were seen.

    Returns:
        ``(total_bytes, entries)``; ``entries`` may exceed ``max_entries`` by one when cut short.
        Each entry counts the larger of its apparent size (``st_size``) and its allocated
        blocks (``st_blocks`` x 512).
    """
    total = 0
    entries = 0
    stack = [root]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as it:
                for entry in it:
                    entries += 1
                    if entries > max_entries:
                        return total, entries
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except PermissionError:
                        return UNMEASURABLE_BYTES, entries
                    except OSError:
                        continue  # removed meanwhile
                    # Allocated blocks count too: fallocate(FALLOC_FL_KEEP_SIZE) reserves disk
                    # without changing st_size.
                    total += max(st.st_size, st.st_blocks * 512)
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except PermissionError:
            return UNMEASURABLE_BYTES, entries
        except OSError:
            continue  # removed meanwhile, or replaced by something that is not a directory
    return total, entries


def sweep_processes(session_id: int, marker: str) -> int:
    """Kill every process in session ``session_id`` or carrying ``marker`` in its environment.

    Runs until a pass finds nothing (a process may fork while the sweep runs).

    Args:
        session_id: The run's session id (the child's pid: it was started with ``setsid``).
        marker: ``NAME=value`` string set in the child's environment.

    Returns:
        Number of processes killed.
    """
    import psutil

    killed = 0
    own = os.getpid()
    needle = marker.split("=", 1)
    for _ in range(50):
        found = []
        for proc in psutil.process_iter():
            if proc.pid in (own, session_id):
                continue  # the run's own child is killed by killpg and reaped by its parent
            try:
                in_session = os.getsid(proc.pid) == session_id
            except OSError:
                continue
            if not in_session:
                try:
                    env = proc.environ()
                except (psutil.Error, OSError):
                    continue
                if env.get(needle[0]) != needle[1]:
                    continue
            found.append(proc)
        if not found:
            break
        for proc in found:
            with contextlib.suppress(psutil.Error, OSError):
                proc.kill()
                killed += 1
        psutil.wait_procs(found, timeout=0.5)
    return killed


class WarmHandle(Protocol):
    """A child forked by the warm zygote (see :class:`pysandbox._zygote.WarmChild`)."""

    pid: int
    zygote_died: bool

    def exit_fd(self) -> int:
        """Readable when the child exited."""

    def on_readable(self) -> bool:
        """Consume the event; whether the child exited."""

    def kill_group(self) -> None:
        """Kill the child's process group."""

    def reap(self) -> tuple[int, float, int] | None:
        """Reap; ``(status, cpu seconds, peak RSS bytes)`` or ``None``."""


#: Starts a warm child: ``(payload, stdout write end, stderr write end) -> handle``.
WarmLauncher = Callable[[bytes, int, int], WarmHandle]


class Supervisor:
    """Start one child and supervise it to the end. Not reusable.

    Args:
        argv: Command line of the child.
        env: Complete environment of the child.
        cwd: Working directory (the workspace).
        payload: Bytes the child reads from the configuration descriptor.
        deadline_s: Wall-clock limit in seconds.
        output_cap: Cap in bytes for each of stdout and stderr.
        workspace: Directory whose size and entry count are watched.
        workspace_bytes: Byte limit of the workspace.
        workspace_files: Entry-count limit of the workspace.
        marker: ``NAME=value`` environment marker of this run (for the sweep).
        always_sweep: Sweep for stray processes even after a clean exit (when process
            creation is not denied by seccomp).
        launcher: Warm mode: fork the child from the zygote with this (``payload`` is then
            the zygote's request) instead of spawning ``argv``. Supervision is the same.
        start_usage: ``(bytes, entries)`` of the workspace measured just before, so that
            :meth:`run` need not walk it again; ``None`` measures at the start of :meth:`run`.
    """

    def __init__(
        self,
        *,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        payload: bytes,
        deadline_s: float,
        output_cap: int,
        workspace: str,
        workspace_bytes: int,
        workspace_files: int,
        marker: str,
        always_sweep: bool,
        launcher: WarmLauncher | None = None,
        start_usage: tuple[int, int] | None = None,
    ) -> None:
        self._launcher = launcher
        #: ``(bytes, entries)`` measured before the start, or ``None``: measured by :meth:`run`.
        self.start_usage = start_usage
        self._warm: WarmHandle | None = None
        self._argv = argv
        self._env = env
        self._cwd = cwd
        self._payload = payload
        self._deadline_s = deadline_s
        self._cap = output_cap
        self._workspace = workspace
        self._ws_bytes = workspace_bytes
        self._ws_files = workspace_files
        self._marker = marker
        self._always_sweep = always_sweep
        self._lock = threading.Lock()
        self._reason: str | None = None
        self._pid: int | None = None
        self._reaped = False
        self._cancelled = False

    @property
    def started(self) -> bool:
        """Whether the child process has been created."""
        return self._pid is not None

    # -- control from other threads -----------------------------------------------------------
    def kill(self, reason: str) -> None:
        """Stop the run now: kill the process group and sweep. Safe from any thread.

        Args:
            reason: Recorded as the outcome's reason unless another one was recorded first.
        """
        with self._lock:
            if self._reason is None:
                self._reason = reason
            self._cancelled = True
            pid, reaped = self._pid, self._reaped
        if pid is not None and not reaped:
            self._kill_group(pid)
            with contextlib.suppress(Exception):
                sweep_processes(pid, self._marker)

    def _kill_group(self, pid: int) -> None:
        with self._lock:
            if self._reaped:
                return
            # The child is not reaped yet, so its pid (= pgid = sid) cannot have been reused.
            if self._warm is not None:
                self._warm.kill_group()  # the zygote holds it unreaped and kills the group
                return
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    def _register(self, pid: int) -> bool:
        """Record the child's pid; return whether the run was cancelled meanwhile."""
        with self._lock:
            self._pid = pid
            return self._cancelled

    def _trip(self, reason: str) -> None:
        with self._lock:
            if self._reason is None:
                self._reason = reason

    # -- the run --------------------------------------------------------------------------------
    def _config_fd(self) -> int:
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create("pysandbox-config", os.MFD_CLOEXEC)
        else:  # pragma: no cover - non-Linux
            tmp = tempfile.TemporaryFile()  # noqa: SIM115 - the fd outlives the object
            fd = os.dup(tmp.fileno())
            tmp.close()
        view = memoryview(self._payload)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.lseek(fd, 0, os.SEEK_SET)
        return fd

    def run(self) -> Outcome:
        """Spawn the child and supervise it until it has ended and been reaped.

        Returns:
            What was observed.

        Raises:
            OSError: The child could not be started.
        """
        with self._lock:
            if self._cancelled:
                raise InterruptedError(errno.EINTR, "the run was cancelled before it started")
        size, count = self.start_usage or workspace_usage(
            self._workspace, start_usage_entries(self._ws_files)
        )
        self._ws_bytes = max(self._ws_bytes, size)
        self._ws_files = max(self._ws_files, count)
        if self._launcher is not None:
            return self._run_warm(self._launcher)
        cfg_fd = self._config_fd()
        try:
            proc = subprocess.Popen(
                [*self._argv, str(cfg_fd)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self._cwd,
                env=self._env,
                close_fds=True,
                pass_fds=(cfg_fd,),
                start_new_session=True,
            )
        finally:
            os.close(cfg_fd)
        started = time.monotonic()
        if self._register(proc.pid):
            self._kill_group(proc.pid)
        try:
            return self._supervise(proc, started)
        finally:
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()

    def _run_warm(self, launcher: WarmLauncher) -> Outcome:
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        try:
            try:
                handle = launcher(self._payload, out_w, err_w)
            finally:
                os.close(out_w)
                os.close(err_w)
            started = time.monotonic()
            with self._lock:
                self._warm = handle
            if self._register(handle.pid):
                self._kill_group(handle.pid)
            return self._supervise_fds(handle.pid, out_r, err_r, started, proc=None, warm=handle)
        finally:
            os.close(out_r)
            os.close(err_r)

    def _supervise(self, proc: subprocess.Popen[bytes], started: float) -> Outcome:
        assert proc.stdout is not None  # noqa: S101 - created with PIPE above
        assert proc.stderr is not None  # noqa: S101
        outcome = self._supervise_fds(
            proc.pid, proc.stdout.fileno(), proc.stderr.fileno(), started, proc=proc, warm=None
        )
        return outcome

    def _supervise_fds(
        self,
        pid: int,
        out_fd: int,
        err_fd: int,
        started: float,
        *,
        proc: subprocess.Popen[bytes] | None,
        warm: WarmHandle | None,
    ) -> Outcome:
        deadline = started + self._deadline_s
        sel = selectors.DefaultSelector()
        bufs: dict[int, bytearray] = {}
        truncated: dict[int, bool] = {}
        for fd in (out_fd, err_fd):
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ, "pipe")
            bufs[fd] = bytearray()
            truncated[fd] = False
        pidfd = -1
        if warm is not None:
            sel.register(warm.exit_fd(), selectors.EVENT_READ, "warm")
        elif hasattr(os, "pidfd_open"):
            with contextlib.suppress(OSError):
                pidfd = os.pidfd_open(pid)
                sel.register(pidfd, selectors.EVENT_READ, "exit")
        open_pipes = 2
        exited_at: float | None = None
        next_disk = started + _DISK_POLL_S
        try:
            while True:
                now = time.monotonic()
                if self._reason is not None:
                    break
                if now >= deadline:
                    self._trip("timeout")
                    break
                if exited_at is not None and (open_pipes == 0 or now >= exited_at + _EXIT_GRACE_S):
                    if open_pipes:
                        self._trip("leftover")  # something else holds our pipes
                    break
                if now >= next_disk:
                    size, count = workspace_usage(self._workspace, self._ws_files)
                    if size > self._ws_bytes or count > self._ws_files:
                        self._trip("disk_limit")
                        break
                    # A large workspace is scanned less often: at most ~10% of a core.
                    scan = time.monotonic() - now
                    next_disk = now + max(_DISK_POLL_S, 10 * scan)
                wait = min(deadline, next_disk) - now
                if exited_at is not None:
                    wait = min(wait, exited_at + _EXIT_GRACE_S - now)
                if pidfd < 0 and warm is None:
                    wait = min(wait, 0.01)
                for key, _ in sel.select(max(wait, 0.0)):
                    if key.data == "warm":
                        if warm is not None and warm.on_readable():
                            sel.unregister(key.fd)
                            exited_at = exited_at or time.monotonic()
                        continue
                    if key.data == "exit":
                        sel.unregister(key.fd)
                        exited_at = exited_at or time.monotonic()
                        continue
                    fd = int(key.fd)
                    try:
                        chunk = os.read(fd, _READ_CHUNK)
                    except BlockingIOError:
                        continue
                    except OSError:
                        chunk = b""
                    if not chunk:
                        sel.unregister(fd)
                        open_pipes -= 1
                        continue
                    buf = bufs[fd]
                    room = self._cap - len(buf)
                    if len(chunk) > room:
                        buf += chunk[: max(room, 0)]
                        truncated[fd] = True
                        self._trip("output_limit")
                    else:
                        buf += chunk
                if warm is None and pidfd < 0 and exited_at is None and _exited(pid):
                    exited_at = time.monotonic()
            ended = time.monotonic()
        finally:
            sel.close()
            if pidfd >= 0:
                os.close(pidfd)
        # Kill the whole group while the unreaped child still pins its pgid, sweep, then reap.
        self._kill_group(pid)
        swept = 0
        if self._reason is not None or self._always_sweep:
            swept = sweep_processes(pid, self._marker)
        with self._lock:
            if warm is not None:
                reaped = warm.reap()
                if reaped is None:
                    # The zygote died: PR_SET_PDEATHSIG killed the child; no accounting.
                    status, usage = int(signal.SIGKILL), _ZERO_USAGE
                    if self._reason is None:
                        self._reason = "zygote_died"
                else:
                    status, cpu, rss = reaped
                    usage = _Usage(cpu, rss // 1024)
            else:
                try:
                    _, status, usage = os.wait4(pid, 0)
                except ChildProcessError:
                    # Someone else reaped it (a waitpid(-1) SIGCHLD handler in the host
                    # program): report a kill without accounting rather than inventing one.
                    status, usage = int(signal.SIGKILL), _ZERO_USAGE
                    if self._reason is None:
                        self._reason = "reaped_elsewhere"
            self._reaped = True
        if proc is not None:
            proc.returncode = _returncode(status)
        if exited_at is not None:
            ended = min(ended, exited_at)
        if self._reason is None and not os.WIFEXITED(status):
            pass
        return Outcome(
            reason=self._reason,
            wait_status=status,
            cpu_time_s=usage.ru_utime + usage.ru_stime,
            maxrss_bytes=int(usage.ru_maxrss) * (1 if sys.platform == "darwin" else 1024),
            stdout=bytes(bufs[out_fd]),
            stderr=bytes(bufs[err_fd]),
            stdout_truncated=truncated[out_fd],
            stderr_truncated=truncated[err_fd],
            duration_s=ended - started,
            swept=swept,
            workspace_allowance=(self._ws_bytes, self._ws_files),
        )


class _ZeroUsage:
    ru_utime = 0.0
    ru_stime = 0.0
    ru_maxrss = 0


_ZERO_USAGE: Any = _ZeroUsage()


class _Usage:
    def __init__(self, cpu_s: float, maxrss_kib: int) -> None:
        self.ru_utime = cpu_s
        self.ru_stime = 0.0
        self.ru_maxrss = maxrss_kib


def _exited(pid: int) -> bool:
    """Whether ``pid`` has exited, without reaping it (``waitid`` with ``WNOWAIT``)."""
    try:
        info: Any = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # pragma: no cover - already reaped
        return True
    return info is not None


def _returncode(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)
