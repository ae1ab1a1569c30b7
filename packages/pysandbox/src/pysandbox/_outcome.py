"""From what the supervisor observed to the :class:`~pysandbox.RunResult`: a pure function.

:class:`Stop` says why the parent ended a run (or how it lost the child); :class:`Observation`
is everything the supervisor saw; :func:`decide` maps one to the result, without processes, so
that every branch of the status table is a unit test.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import signal
from dataclasses import dataclass

from pysandbox._disk import Listing
from pysandbox._limits import Limits
from pysandbox._result import RunResult, RunStatus
from pysandbox.exceptions import SandboxSetupError

__all__ = ["CPU_SHARE", "MEMORY_PEAK_SHARE", "Observation", "Stop", "decide"]

#: A death by SIGXCPU or SIGKILL is the CPU limit only if ``wait4`` measured at least this
#: share of ``cpu_time_s``. Not all of it: the kernel enforces ``RLIMIT_CPU`` on its
#: tick-sampled clock, which runs ahead of the precise time ``wait4`` reports (measured on a
#: busy 2-core VM: SIGXCPU at 0.82 s of a 1 s limit, 1.76 s of 2 s).
CPU_SHARE = 0.5
#: A failure is the memory limit only with a measured peak RSS of at least this share of
#: ``memory_bytes``.
MEMORY_PEAK_SHARE = 0.9


class Stop(enum.Enum):
    """Why the parent stopped a run, or how it lost the child (``None``: the child exited)."""

    #: The wall-clock deadline passed.
    TIMEOUT = "timeout"
    #: stdout or stderr passed its cap.
    OUTPUT_LIMIT = "output_limit"
    #: The workspace passed its byte or entry limit while the run went on.
    DISK_LIMIT = "disk_limit"
    #: :meth:`~pysandbox.Sandbox.close` or a cancelled ``arun`` killed the run.
    CANCELLED = "cancelled"
    #: The child exited but something else still held its pipes (stray processes killed).
    LEFTOVER = "leftover"
    #: The warm zygote died during the run (the child died with it; no accounting).
    ZYGOTE_DIED = "zygote_died"
    #: Another part of this process reaped the child (``waitpid(-1)``; no accounting).
    REAPED_ELSEWHERE = "reaped_elsewhere"


@dataclass(frozen=True)
class Observation:
    """What the parent observed about one child.

    Attributes:
        stop: Why the parent stopped the run, or ``None``.
        wait_status: Raw status from ``wait4``.
        cpu_time_s: User plus system CPU seconds of the child.
        maxrss_bytes: Peak resident set size of the child, bytes.
        maxrss_floor_bytes: A peak at or below this is not the child's own (a spawned child's
            ``ru_maxrss`` starts from the parent's resident size), so it confirms no memory
            limit; 0 when every byte of the peak is the child's.
        stdout: Captured bytes (at most the cap).
        stderr: Captured bytes (at most the cap).
        stdout_truncated: More than the cap was written to stdout.
        stderr_truncated: More than the cap was written to stderr.
        duration_s: Wall-clock seconds from start to exit.
        swept: Number of stray processes killed by the sweep.
        workspace_allowance: ``(bytes, entries)`` the run could use before ``disk_limit``:
            the limits, or what the workspace already held at the start if that was more.
        end_usage: ``(bytes, entries)`` of the workspace measured after the child exited on
            its own (``None`` when it did not, or was stopped).
        ready: The child said on its setup channel that every layer was in place (the
            user's code could run); ``False``: it failed or ended before.
        setup_error: The reason the child wrote on its setup channel when its setup failed
            (the bootstrap's own text: the user's code had not started), or ``""``.
        end_listing: The regular files the end walk saw (with ``end_usage``), or ``None``.
        figure_data: What the parent kept of the figure channel (:mod:`pysandbox._figures`).
        figure_cut: More bytes were written to the figure channel than kept.
    """

    stop: Stop | None
    wait_status: int
    cpu_time_s: float
    maxrss_bytes: int
    maxrss_floor_bytes: int = 0
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_s: float = 0.0
    swept: int = 0
    workspace_allowance: tuple[int, int] = (0, 0)
    end_usage: tuple[int, int] | None = None
    ready: bool = True
    setup_error: str = ""
    end_listing: Listing | None = None
    figure_data: bytes = b""
    figure_cut: bool = False


_STOPS: dict[Stop, RunStatus] = {
    Stop.OUTPUT_LIMIT: RunStatus.OUTPUT_LIMIT,
    Stop.DISK_LIMIT: RunStatus.DISK_LIMIT,
    Stop.TIMEOUT: RunStatus.TIMEOUT,
    Stop.CANCELLED: RunStatus.KILLED,
    Stop.ZYGOTE_DIED: RunStatus.KILLED,
    Stop.REAPED_ELSEWHERE: RunStatus.KILLED,
}


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return str(sig)


def _disk_detail(o: Observation, limits: Limits) -> str:
    """Which of the workspace's limits the run passed, when the end usage says so."""
    if o.end_usage is not None:
        size, count = o.end_usage
        max_bytes, max_files = o.workspace_allowance
        if size > max_bytes:
            return f"workspace passed its {max_bytes} bytes: it holds {size}"
        if count > max_files:
            return f"workspace passed its {max_files} entries: it holds {count}"
    return f"workspace passed {limits.workspace_bytes} bytes or {limits.workspace_files} entries"


def decide(
    o: Observation, limits: Limits, layers: tuple[str, ...], *, shrink_only: bool = False
) -> RunResult:
    """The result of a run from what was observed (no I/O).

    Only the parent's own observations decide a status: its stops, the setup channel (closed
    before the user's code starts), and what ``wait4`` measured. The user's code can exit
    with any status or signal itself, so none of those means anything on its own: a CPU
    limit needs the CPU time actually used, a memory limit a peak near the limit.

    Args:
        o: The supervisor's observation.
        limits: The sandbox's limits (for the details).
        layers: Names of the layers that were active for this run.
        shrink_only: The run started with the workspace over its limits (said in the detail).

    Returns:
        The run's result.

    Raises:
        SandboxSetupError: The child did not report on its setup channel that every layer
            was in place (the user's code never ran); the detail is what the bootstrap wrote
            there, never the run's output.
    """
    status_raw = o.wait_status
    exit_code = os.WEXITSTATUS(status_raw) if os.WIFEXITED(status_raw) else None
    sig = os.WTERMSIG(status_raw) if os.WIFSIGNALED(status_raw) else None
    stderr = o.stderr.decode("utf-8", "backslashreplace")
    disk = _disk_detail(o, limits)
    details = {
        Stop.OUTPUT_LIMIT: f"output passed {limits.output_bytes} bytes",
        Stop.DISK_LIMIT: disk,
        Stop.TIMEOUT: "wall-clock deadline reached",
        Stop.CANCELLED: "run cancelled",
        Stop.ZYGOTE_DIED: "the warm zygote died during the run",
        Stop.REAPED_ELSEWHERE: (
            "the child was reaped by another part of this process (waitpid(-1))"
        ),
    }
    # A peak no higher than the floor (a spawned child's ru_maxrss starts from the parent's
    # resident size) is not the child's own: it confirms nothing.
    near_memory = (
        o.maxrss_bytes >= MEMORY_PEAK_SHARE * limits.memory_bytes
        and o.maxrss_bytes > o.maxrss_floor_bytes
    )
    detail = ""
    if o.stop in _STOPS:
        status, detail = _STOPS[o.stop], details[o.stop]
    elif not o.ready:
        ended = f"exit status {exit_code}" if sig is None else f"signal {_signal_name(sig)}"
        raise SandboxSetupError(
            o.setup_error or f"the child ended ({ended}) before its isolation layers were in place"
        )
    elif sig is not None:
        if sig in (signal.SIGXCPU, signal.SIGKILL) and (
            o.cpu_time_s >= CPU_SHARE * limits.cpu_time_s
        ):
            status, detail = RunStatus.TIMEOUT, f"CPU time limit ({limits.cpu_time_s} s) reached"
        elif sig == signal.SIGKILL and near_memory:
            status, detail = RunStatus.MEMORY_LIMIT, "killed at the memory limit"
        else:
            status = RunStatus.KILLED
            detail = f"killed by signal {_signal_name(sig)}"
            if sig == signal.SIGSYS:
                detail += " (seccomp)"
    elif exit_code != 0 and near_memory:
        status = RunStatus.MEMORY_LIMIT
        detail = f"failed with its measured peak at the memory limit ({limits.memory_bytes} bytes)"
    else:
        max_bytes, max_files = o.workspace_allowance
        size, count = o.end_usage if o.end_usage is not None else (0, 0)
        if size > max_bytes or count > max_files:
            status, detail = RunStatus.DISK_LIMIT, disk
        else:
            status = RunStatus.OK if exit_code == 0 else RunStatus.ERROR
            if exit_code != 0 and "MemoryError" in stderr[-2000:]:
                detail = (
                    f"the output names a MemoryError; the memory limit is {limits.memory_bytes} "
                    f"bytes of data ({2 * limits.memory_bytes} of address space), but the "
                    "parent did not measure a peak near it: a single allocation larger than "
                    "the limit is refused at once, before any of it is used; allocate less at "
                    "a time, or raise the limit (Limits.memory_bytes)"
                )
            elif exit_code != 0 and "[Errno 27]" in stderr[-2000:]:
                # The output is the code's: it explains, never decides (the status stands).
                detail = (
                    f"the output names EFBIG (File too large): a file reached the file-size "
                    f"limit ({limits.file_size_bytes} bytes, RLIMIT_FSIZE); what was written "
                    "before it stays in the workspace"
                )
    if o.stop is Stop.LEFTOVER:
        detail = (detail + "; " if detail else "") + "stray processes killed after exit"
    result = RunResult(
        status=status,
        exit_code=exit_code,
        signal=sig,
        stdout=o.stdout.decode("utf-8", "backslashreplace"),
        stderr=stderr,
        stdout_truncated=o.stdout_truncated,
        stderr_truncated=o.stderr_truncated,
        duration_ms=round(o.duration_s * 1000.0, 3),
        cpu_time_ms=round(o.cpu_time_s * 1000.0, 3),
        peak_memory_bytes=o.maxrss_bytes,
        layers=layers,
        detail=detail,
    )
    if shrink_only:
        note = (
            f"the workspace was over its limit of {limits.workspace_bytes} bytes or "
            f"{limits.workspace_files} entries when the run started, so it could not grow "
            "(no file could be written or created): remove files to get back under it"
        )
        result = dataclasses.replace(
            result, detail=f"{result.detail}; {note}" if result.detail else note
        )
    return result
