"""Launchers: start one confined child and hand the supervisor a :class:`ChildHandle`.

Two launchers, one handle shape:

- :class:`SpawnLauncher`: a fresh ``python -I -S`` per run (``subprocess.Popen`` without
  ``preexec_fn``, new session, stdin on ``/dev/null``, only the payload descriptor inherited);
- :class:`ZygoteLauncher`: the run is forked by a warm zygote
  (:class:`pysandbox.child._zygote.Zygote`) that holds the child unreaped until the supervisor
  reaps it through the handle.

The supervisor (:class:`pysandbox._supervisor.Supervisor`) only reads the handle's pipes,
waits on its exit notification, kills and reaps through it.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from types import CodeType
from typing import Any, Protocol

from pysandbox import _bootstrap
from pysandbox._config import MARKER_NAME, ChildConfig
from pysandbox._outcome import Stop
from pysandbox.child import _zygote

__all__ = [
    "ChildHandle",
    "Launcher",
    "Reaped",
    "RunSpec",
    "SpawnLauncher",
    "WarmHandle",
    "ZygoteLauncher",
]


@dataclass(frozen=True)
class RunSpec:
    """One run to launch.

    Attributes:
        config: The child configuration (possibly shrink-only).
        code: The checked source.
        code_object: The source compiled by the parent, or ``None`` (the child compiles it).
        marker: The value of the run's marker variable (for the sweep).
    """

    config: ChildConfig
    code: str
    code_object: CodeType | None
    marker: str


@dataclass(frozen=True)
class Reaped:
    """What reaping a child gave.

    Attributes:
        wait_status: Raw ``wait4`` status (``SIGKILL`` when the child was lost).
        cpu_time_s: User plus system CPU seconds.
        maxrss_bytes: Peak resident set size, bytes.
        lost: How the child was lost (no accounting then), or ``None``.
        maxrss_floor_bytes: A peak at or below this says nothing about the child's own memory:
            a spawned child's ``ru_maxrss`` starts from the parent's resident size when it was
            started (the kernel carries the old memory's high-water mark across ``exec``);
            the parent's peak then, for spawn; 0 for children forked from the small zygote.
    """

    wait_status: int
    cpu_time_s: float
    maxrss_bytes: int
    lost: Stop | None = None
    maxrss_floor_bytes: int = 0


class ChildHandle(Protocol):
    """A started child, as the supervisor sees it."""

    pid: int
    stdout_fd: int
    stderr_fd: int
    #: Read end of the setup channel (:mod:`pysandbox.child._main`): ready, or the setup error.
    setup_fd: int
    #: Read end of the figure channel (:mod:`pysandbox._figures`).
    figure_fd: int

    def exit_fd(self) -> int:
        """Descriptor readable when the child exited, or -1: poll :meth:`has_exited`."""

    def on_exit_fd(self) -> bool:
        """Consume the exit descriptor's event; return whether the child exited."""

    def has_exited(self) -> bool:
        """Whether the child has exited (polling, without reaping)."""

    def kill(self) -> None:
        """SIGKILL the child's process group (the child is unreaped: its ids are its own)."""

    def reap(self) -> Reaped:
        """Reap the child (after :meth:`kill`)."""

    def close(self) -> None:
        """Release the handle's descriptors."""


class Launcher(Protocol):
    """Starts children."""

    def launch(self, spec: RunSpec) -> ChildHandle:
        """Start the run's child.

        Raises:
            OSError: It could not be started (:class:`pysandbox.child._zygote.ZygoteError` for a
                zygote that did not take the run: the caller may retry on a new one).
        """


def _run_env(config: ChildConfig, marker: str) -> dict[str, str]:
    return {**config.env, MARKER_NAME: marker}


class _SpawnHandle:
    def __init__(
        self, proc: subprocess.Popen[bytes], setup_r: int, figure_r: int, rss_floor: int = 0
    ) -> None:
        assert proc.stdout is not None  # noqa: S101 - created with PIPE
        assert proc.stderr is not None  # noqa: S101
        self.proc = proc
        self.pid = proc.pid
        self.stdout_fd = proc.stdout.fileno()
        self.stderr_fd = proc.stderr.fileno()
        self.setup_fd = setup_r
        self.figure_fd = figure_r
        self.rss_floor = rss_floor
        self._pidfd = -1
        if hasattr(os, "pidfd_open"):
            with contextlib.suppress(OSError):
                self._pidfd = os.pidfd_open(proc.pid)

    def exit_fd(self) -> int:
        return self._pidfd

    def on_exit_fd(self) -> bool:
        return True

    def has_exited(self) -> bool:
        """Whether the child has exited, without reaping it (``waitid`` with ``WNOWAIT``)."""
        try:
            info: Any = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # pragma: no cover - already reaped
            return True
        return info is not None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

    def reap(self) -> Reaped:
        try:
            _, status, usage = os.wait4(self.pid, 0)
        except ChildProcessError:
            # Someone else reaped it (a waitpid(-1) SIGCHLD handler in the host program):
            # report a kill without accounting rather than inventing one.
            self.proc.returncode = -signal.SIGKILL
            return Reaped(int(signal.SIGKILL), 0.0, 0, Stop.REAPED_ELSEWHERE)
        self.proc.returncode = (
            -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        )
        scale = 1 if sys.platform == "darwin" else 1024
        return Reaped(
            status,
            usage.ru_utime + usage.ru_stime,
            int(usage.ru_maxrss) * scale,
            maxrss_floor_bytes=self.rss_floor,
        )

    def close(self) -> None:
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1
        for fd in (self.setup_fd, self.figure_fd):
            if fd >= 0:
                os.close(fd)
        self.setup_fd = self.figure_fd = -1
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


class SpawnLauncher:
    """Starts each run as a fresh ``python -I -S`` running the bootstrap (spawn mode)."""

    def launch(self, spec: RunSpec) -> ChildHandle:
        """Start the child with its whole configuration on a sealed payload descriptor.

        Raises:
            OSError: The interpreter could not be started.
        """
        config = spec.config
        setup_r, setup_w = os.pipe2(os.O_CLOEXEC)
        figure_r, figure_w = os.pipe2(os.O_CLOEXEC)
        # Started in "/" (enter_workspace): preloads first, then the chdir.
        wire = config.wire(spec.code, spec.code_object, setup_fd=setup_w, figure_fd=figure_w)
        try:
            cfg_fd = _payload_fd(_bootstrap.payload(_bootstrap.CHILD, wire))
        except BaseException:
            for fd in (setup_r, setup_w, figure_r, figure_w):
                os.close(fd)
            raise
        scale = 1 if sys.platform == "darwin" else 1024
        rss_floor = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * scale
        try:
            proc = subprocess.Popen(
                _bootstrap.argv(cfg_fd),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd="/",
                env=_run_env(config, spec.marker),
                close_fds=True,
                pass_fds=(cfg_fd, setup_w, figure_w),
                start_new_session=True,
            )
        except BaseException:
            os.close(setup_r)
            os.close(figure_r)
            raise
        finally:
            os.close(cfg_fd)
            os.close(setup_w)
            os.close(figure_w)
        return _SpawnHandle(proc, setup_r, figure_r, rss_floor)


def _payload_fd(data: bytes) -> int:
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("pysandbox-config", os.MFD_CLOEXEC)
    else:  # pragma: no cover - non-Linux
        tmp = tempfile.TemporaryFile()  # noqa: SIM115 - the fd outlives the object
        fd = os.dup(tmp.fileno())
        tmp.close()
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class WarmHandle:
    """The supervisor's handle on a child forked by the zygote (its pipes and its pid).

    It is the :class:`ChildHandle` of warm mode: exit, kill and reap go through the zygote's run
    socket (:class:`pysandbox.child._zygote.WarmChild`), which holds the child unreaped until
    :meth:`reap`, so its pid and process-group id cannot be reused meanwhile.

    Args:
        child: The zygote's handle on the forked child (its pid, pidfd and run socket).
        out_r: Read end of the child's stdout pipe.
        err_r: Read end of the child's stderr pipe.
        setup_r: Read end of the setup channel (ready, or the setup error).
        figure_r: Read end of the figure channel (:mod:`pysandbox._figures`).
    """

    def __init__(
        self, child: _zygote.WarmChild, out_r: int, err_r: int, setup_r: int, figure_r: int
    ) -> None:
        self.child = child
        self.pid = child.pid
        self.stdout_fd = out_r
        self.stderr_fd = err_r
        self.setup_fd = setup_r
        self.figure_fd = figure_r

    def exit_fd(self) -> int:
        """The descriptor to poll for the child's exit.

        Returns:
            The run socket's descriptor: readable when the zygote reports the child's exit, or
            at end of file when the zygote died. Never -1.
        """
        return self.child.exit_fd()

    def on_exit_fd(self) -> bool:
        """Consume the event of :meth:`exit_fd` (call it once the descriptor is readable).

        Returns:
            Whether the child has exited; ``True`` too when the zygote died (the child was
            killed with it by ``PR_SET_PDEATHSIG``).
        """
        return self.child.on_readable()

    def has_exited(self) -> bool:  # pragma: no cover - the exit descriptor always exists
        """Whether an exit was already seen on :meth:`exit_fd` (no system call, no reaping).

        Returns:
            ``True`` once :meth:`on_exit_fd` saw the child exit or the zygote die.
        """
        return self.child.exited

    def kill(self) -> None:
        """SIGKILL the child and its process group, synchronously.

        The child stays unreaped (the zygote holds it until :meth:`reap`); when the zygote has
        died only the child's pidfd is signalled, since its ids may have been reused.
        """
        self.child.kill_group()

    def reap(self) -> Reaped:
        """Have the zygote reap the child (after :meth:`kill`) and report its accounting.

        Returns:
            The wait status, CPU seconds and peak RSS (bytes, rounded down to a whole KiB) the
            zygote's ``wait4`` measured; when the zygote died or did not answer, ``SIGKILL`` with no
            accounting and :attr:`Stop.ZYGOTE_DIED`.
        """
        reaped = self.child.reap()
        if reaped is None:
            # The zygote died: PR_SET_PDEATHSIG killed the child; no accounting.
            return Reaped(int(signal.SIGKILL), 0.0, 0, Stop.ZYGOTE_DIED)
        status, cpu, rss = reaped
        return Reaped(status, cpu, (rss // 1024) * 1024)

    def close(self) -> None:
        """Close the read ends of the child's stdout, stderr, setup and figure pipes.

        Call it once, after :meth:`reap` (which closes the run socket and the pidfd).

        Raises:
            OSError: A descriptor was closed already.
        """
        for fd in (self.stdout_fd, self.stderr_fd, self.setup_fd, self.figure_fd):
            os.close(fd)


class ZygoteLauncher:
    """Forks each run's child from one running zygote (warm mode).

    Args:
        zygote: The zygote (started; its layers are fixed by its start configuration).
    """

    def __init__(self, zygote: _zygote.Zygote) -> None:
        self.zygote = zygote

    def launch(self, spec: RunSpec) -> ChildHandle:
        """Send the run to the zygote with fresh stdout and stderr pipes.

        Raises:
            pysandbox.child._zygote.ZygoteError: The zygote is gone or did not take the run.
        """
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        setup_r, setup_w = os.pipe2(os.O_CLOEXEC)
        figure_r, figure_w = os.pipe2(os.O_CLOEXEC)
        try:
            request = spec.config.run_request(spec.code, spec.code_object, spec.marker)
            child = self.zygote.launch(_marshal(request), out_w, err_w, setup_w, figure_w)
        except BaseException:
            for fd in (out_r, err_r, setup_r, figure_r):
                os.close(fd)
            raise
        finally:
            for fd in (out_w, err_w, setup_w, figure_w):
                os.close(fd)
        return WarmHandle(child, out_r, err_r, setup_r, figure_r)


def _marshal(request: Mapping[str, Any]) -> bytes:
    import marshal

    return marshal.dumps(dict(request))
