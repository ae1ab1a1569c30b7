"""Parent-side supervision of one run: launch, drain, watch, kill, sweep, reap.

Everything here runs in the parent (the server). A launcher (:mod:`pysandbox._launch`, spawn or
zygote) starts the child and returns a handle; the supervisor watches it the same way in both
modes and returns an :class:`~pysandbox._outcome.Observation`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import threading
import time

from pysandbox import _figures
from pysandbox._disk import UNMEASURABLE_BYTES, Listing, unlinked_bytes, workspace_usage
from pysandbox._launch import ChildHandle, Launcher, RunSpec
from pysandbox._outcome import Observation, Stop
from pysandbox.child._kernel import SETUP_FAILED, SETUP_READY

__all__ = ["Supervisor", "start_usage_entries", "sweep_processes"]

_READ_CHUNK = 65536
_DISK_POLL_S = 0.05
_EXIT_GRACE_S = 0.25
#: Polls in a row that cannot read the child's descriptors before they count as unmeasurable.
_BLIND_POLLS = 3


def start_usage_entries(workspace_files: int) -> int:
    """How many entries to count at the start of a run: enough to see how far over it is."""
    return 10 * workspace_files + 1000


def _read_setup(fd: int, into: bytearray) -> bool:
    """Read what the setup channel holds into ``into``; return ``False`` at its end.

    The channel carries a few bytes once; more than 4 KiB (which the bootstrap never
    writes) ends it.
    """
    try:
        chunk = os.read(fd, 4096)
    except BlockingIOError:
        return True
    except OSError:
        return False
    into += chunk
    return bool(chunk) and len(into) <= 4096


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


class Supervisor:
    """Supervise one run to the end: deadline, output caps, workspace limits, kill, reap.

    One per run; :meth:`run` may be called again only after a launch that failed (a zygote
    that did not take the run), with another launcher.

    Args:
        deadline_s: Wall-clock limit in seconds.
        output_cap: Cap in bytes for each of stdout and stderr.
        workspace: Directory whose size and entry count are watched.
        workspace_bytes: Byte limit of the workspace.
        workspace_files: Entry-count limit of the workspace.
        marker: ``NAME=value`` environment marker of this run (for the sweep).
        always_sweep: Sweep for stray processes even after a clean exit (when process
            creation is not denied by seccomp).
        start_usage: ``(bytes, entries)`` of the workspace measured just before, so that
            :meth:`run` need not walk it again; ``None`` measures at the start of :meth:`run`.
        file_size_bytes: The run's ``RLIMIT_FSIZE``: what an unlinked file the child has
            mapped counts when it cannot be measured (see
            :func:`pysandbox._disk.unlinked_bytes`).

    Each poll adds to the walk of the workspace the files the child holds open or mapped
    after unlinking them (:func:`pysandbox._disk.unlinked_bytes`).
    """

    def __init__(
        self,
        *,
        deadline_s: float,
        output_cap: int,
        workspace: str,
        workspace_bytes: int,
        workspace_files: int,
        marker: str,
        always_sweep: bool,
        start_usage: tuple[int, int] | None = None,
        file_size_bytes: int = 0,
    ) -> None:
        #: ``(bytes, entries)`` measured before the start, or ``None``: measured by :meth:`run`.
        self.start_usage = start_usage
        self._deadline_s = deadline_s
        self._cap = output_cap
        self._workspace = workspace
        self._ws_bytes = workspace_bytes
        self._ws_files = workspace_files
        self._marker = marker
        self._always_sweep = always_sweep
        self._file_size = file_size_bytes
        self._device = -1
        self._lock = threading.Lock()
        self._stop: Stop | None = None
        self._handle: ChildHandle | None = None
        self._reaped = False
        self._cancelled = False

    @property
    def started(self) -> bool:
        """Whether the child process has been created."""
        return self._handle is not None

    @property
    def pid(self) -> int | None:
        """The run's child pid while it is unreaped, else ``None`` (not started, or reaped)."""
        with self._lock:
            if self._handle is None or self._reaped:
                return None
            return self._handle.pid

    # -- control from other threads -----------------------------------------------------------
    def kill(self, stop: Stop) -> None:
        """Stop the run now: kill the process group and sweep. Safe from any thread.

        Args:
            stop: Recorded as the reason unless another one was recorded first.
        """
        with self._lock:
            if self._stop is None:
                self._stop = stop
            self._cancelled = True
            handle, reaped = self._handle, self._reaped
        if handle is not None and not reaped:
            self._kill_group()
            with contextlib.suppress(Exception):
                sweep_processes(handle.pid, self._marker)

    def _kill_group(self) -> None:
        with self._lock:
            # The child is not reaped yet, so its pid (= pgid = sid) cannot have been reused.
            if self._reaped or self._handle is None:
                return
            self._handle.kill()

    def _register(self, handle: ChildHandle) -> bool:
        """Record the child's handle; return whether the run was cancelled meanwhile."""
        with self._lock:
            self._handle = handle
            return self._cancelled

    def _trip(self, stop: Stop) -> None:
        with self._lock:
            if self._stop is None:
                self._stop = stop

    # -- the run --------------------------------------------------------------------------------
    def use_marker(self, marker: str) -> None:
        """Sweep by ``marker`` (``NAME=value``) instead (set before :meth:`run`).

        A run that claims a ready child takes the marker that child was started with.
        """
        self._marker = marker

    def run(self, launcher: Launcher, spec: RunSpec) -> Observation:
        """Launch the child and supervise it until it has ended and been reaped.

        Returns:
            What was observed.

        Raises:
            InterruptedError: The run was cancelled before it started.
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
        try:
            self._device = os.stat(self._workspace).st_dev  # noqa: PTH116
        except OSError:
            self._device = -1  # gone: the walk reports it unmeasurable
        handle = launcher.launch(spec)
        started = time.monotonic()
        if self._register(handle):
            self._kill_group()
        try:
            return self._watch(handle, started)
        finally:
            handle.close()

    def _watch(self, handle: ChildHandle, started: float) -> Observation:
        deadline = started + self._deadline_s
        out_fd, err_fd = handle.stdout_fd, handle.stderr_fd
        sel = selectors.DefaultSelector()
        bufs: dict[int, bytearray] = {}
        truncated: dict[int, bool] = {}
        for fd in (out_fd, err_fd):
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ, "pipe")
            bufs[fd] = bytearray()
            truncated[fd] = False
        # The figure channel: drained like the streams (kept up to its cap, the rest read and
        # dropped so that the child never blocks); it never stops the run.
        figure_fd = handle.figure_fd
        figures = bytearray()
        figure_cut = False
        figure_cap = _figures.read_cap()
        os.set_blocking(figure_fd, False)
        sel.register(figure_fd, selectors.EVENT_READ, "figure")
        setup_fd = handle.setup_fd
        os.set_blocking(setup_fd, False)
        sel.register(setup_fd, selectors.EVENT_READ, "setup")
        setup = bytearray()
        exit_fd = handle.exit_fd()
        if exit_fd >= 0:
            sel.register(exit_fd, selectors.EVENT_READ, "exit")
        open_pipes = 3
        exited_at: float | None = None
        next_disk = started + _DISK_POLL_S
        blind = 0  # polls in a row that could not read the child's descriptors
        try:
            while True:
                now = time.monotonic()
                if self._stop is not None:
                    break
                if now >= deadline:
                    self._trip(Stop.TIMEOUT)
                    break
                if exited_at is not None and (open_pipes == 0 or now >= exited_at + _EXIT_GRACE_S):
                    if open_pipes:
                        self._trip(Stop.LEFTOVER)  # something else holds our pipes
                    break
                if now >= next_disk:
                    size, count = workspace_usage(self._workspace, self._ws_files)
                    if exited_at is None:
                        held = unlinked_bytes(
                            handle.pid, self._workspace, self._device, self._file_size
                        )
                        # A live child's /proc entries can be unreadable for a moment (its
                        # memory or credentials changing): only in a row does it count.
                        blind = blind + 1 if held >= UNMEASURABLE_BYTES else 0
                        if held < UNMEASURABLE_BYTES or blind >= _BLIND_POLLS:
                            size += held
                    if size > self._ws_bytes or count > self._ws_files:
                        self._trip(Stop.DISK_LIMIT)
                        break
                    # A large workspace is scanned less often: at most ~10% of a core.
                    scan = time.monotonic() - now
                    next_disk = now + max(_DISK_POLL_S, 10 * scan)
                wait = min(deadline, next_disk) - now
                if exited_at is not None:
                    wait = min(wait, exited_at + _EXIT_GRACE_S - now)
                if exit_fd < 0:
                    wait = min(wait, 0.01)
                for key, _ in sel.select(max(wait, 0.0)):
                    if key.data == "setup":
                        if not _read_setup(setup_fd, setup):
                            sel.unregister(setup_fd)
                        continue
                    if key.data == "exit":
                        if handle.on_exit_fd():
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
                    if key.data == "figure":
                        room = figure_cap - len(figures)
                        figure_cut = figure_cut or len(chunk) > room
                        figures += chunk[: max(room, 0)]
                        continue
                    buf = bufs[fd]
                    room = self._cap - len(buf)
                    if len(chunk) > room:
                        buf += chunk[: max(room, 0)]
                        truncated[fd] = True
                        self._trip(Stop.OUTPUT_LIMIT)
                    else:
                        buf += chunk
                if exit_fd < 0 and exited_at is None and handle.has_exited():
                    exited_at = time.monotonic()
            ended = time.monotonic()
        finally:
            sel.close()
        # Kill the whole group while the unreaped child still pins its pgid, sweep, then reap.
        self._kill_group()
        swept = 0
        if self._stop is not None or self._always_sweep:
            swept = sweep_processes(handle.pid, self._marker)
        with self._lock:
            reaped = handle.reap()
            if reaped.lost is not None and self._stop is None:
                self._stop = reaped.lost
            self._reaped = True
            stop = self._stop
        if exited_at is not None:
            ended = min(ended, exited_at)
        for _ in range(3):  # the writer is gone (closed before the user's code, or dead)
            if not _read_setup(setup_fd, setup):
                break
        ready = bytes(setup[:1]) == SETUP_READY
        setup_error = ""
        if bytes(setup[:1]) == SETUP_FAILED:
            setup_error = setup[1:].decode("utf-8", "backslashreplace").strip()
        end_usage = None
        end_listing: Listing | None = None
        if stop in (None, Stop.LEFTOVER) and os.WIFEXITED(reaped.wait_status):
            end_listing = {}
            end_usage = workspace_usage(self._workspace, self._ws_files, end_listing)
        return Observation(
            stop=stop,
            wait_status=reaped.wait_status,
            cpu_time_s=reaped.cpu_time_s,
            maxrss_bytes=reaped.maxrss_bytes,
            maxrss_floor_bytes=reaped.maxrss_floor_bytes,
            stdout=bytes(bufs[out_fd]),
            stderr=bytes(bufs[err_fd]),
            stdout_truncated=truncated[out_fd],
            stderr_truncated=truncated[err_fd],
            duration_s=ended - started,
            swept=swept,
            workspace_allowance=(self._ws_bytes, self._ws_files),
            end_usage=end_usage,
            ready=ready,
            setup_error=setup_error,
            end_listing=end_listing,
            figure_data=bytes(figures),
            figure_cut=figure_cut,
        )
