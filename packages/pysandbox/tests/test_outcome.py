"""decide(): every branch of the status table from synthetic observations (no processes)."""

from __future__ import annotations

import signal

import pytest

from pysandbox import Limits, RunStatus, SandboxSetupError
from pysandbox._outcome import Observation, Stop, decide
from pysandbox.child._main import EXIT_SETUP_FAILED

LIMITS = Limits(cpu_time_s=5, memory_bytes=256 * 1024 * 1024)
LAYERS = ("ast_gate", "rlimits")


def exited(code: int) -> int:
    """A raw wait status for a normal exit with ``code``."""
    return (code & 0xFF) << 8


def killed(sig: int) -> int:
    """A raw wait status for a death by ``sig``."""
    return sig


def observe(status: int, **kwargs: object) -> Observation:
    values: dict[str, object] = {
        "stop": None,
        "wait_status": status,
        "cpu_time_s": 0.01,
        "maxrss_bytes": 10 << 20,
        "workspace_allowance": (LIMITS.workspace_bytes, LIMITS.workspace_files),
        "end_usage": (0, 0),
    }
    values.update(kwargs)
    return Observation(**values)  # type: ignore[arg-type]


def test_clean_exit_is_ok_with_the_observed_values() -> None:
    result = decide(
        observe(exited(0), stdout=b"hi\n", stderr=b"", duration_s=0.0123, cpu_time_s=0.004),
        LIMITS,
        LAYERS,
    )
    assert result.status is RunStatus.OK
    assert result.exit_code == 0
    assert result.signal is None
    assert result.stdout == "hi\n"
    assert result.duration_ms == 12.3
    assert result.cpu_time_ms == 4.0
    assert result.peak_memory_bytes == 10 << 20
    assert result.layers == LAYERS
    assert result.detail == ""


def test_non_zero_exit_is_error() -> None:
    result = decide(observe(exited(1), stderr=b"Traceback\xff"), LIMITS, LAYERS)
    assert result.status is RunStatus.ERROR
    assert result.exit_code == 1
    assert result.stderr == "Traceback\\xff"


@pytest.mark.parametrize(
    ("stop", "status", "detail"),
    [
        (Stop.TIMEOUT, RunStatus.TIMEOUT, "wall-clock deadline reached"),
        (Stop.OUTPUT_LIMIT, RunStatus.OUTPUT_LIMIT, f"output passed {LIMITS.output_bytes} bytes"),
        (
            Stop.DISK_LIMIT,
            RunStatus.DISK_LIMIT,
            f"workspace passed {LIMITS.workspace_bytes} bytes or {LIMITS.workspace_files} entries",
        ),
        (Stop.CANCELLED, RunStatus.KILLED, "run cancelled"),
        (Stop.ZYGOTE_DIED, RunStatus.KILLED, "the warm zygote died during the run"),
        (
            Stop.REAPED_ELSEWHERE,
            RunStatus.KILLED,
            "the child was reaped by another part of this process (waitpid(-1))",
        ),
    ],
)
def test_a_stop_of_the_parent_decides(stop: Stop, status: RunStatus, detail: str) -> None:
    result = decide(observe(killed(signal.SIGKILL), stop=stop, end_usage=None), LIMITS, LAYERS)
    assert result.status is status
    assert result.detail == detail
    assert result.signal == signal.SIGKILL


def test_sigxcpu_after_the_cpu_limit_is_the_cpu_limit() -> None:
    # The kernel's clock runs ahead of wait4's: half the limit measured is enough.
    result = decide(observe(killed(signal.SIGXCPU), cpu_time_s=2.5), LIMITS, LAYERS)
    assert result.status is RunStatus.TIMEOUT
    assert result.detail == "CPU time limit (5 s) reached"


@pytest.mark.parametrize("sig", [signal.SIGXCPU, signal.SIGKILL])
def test_a_cpu_signal_without_the_cpu_time_is_killed(sig: int) -> None:
    """F10: a self-sent SIGXCPU (or SIGKILL) is not the CPU limit: the time was not used."""
    result = decide(observe(killed(sig), cpu_time_s=2.4), LIMITS, LAYERS)
    assert result.status is RunStatus.KILLED
    assert result.detail == f"killed by signal {signal.Signals(sig).name}"


def test_sigkill_after_the_cpu_limit_is_the_cpu_limit() -> None:
    result = decide(observe(killed(signal.SIGKILL), cpu_time_s=4.96), LIMITS, LAYERS)
    assert result.status is RunStatus.TIMEOUT


def test_sigkill_near_the_memory_limit_is_memory() -> None:
    rss = int(0.95 * LIMITS.memory_bytes)
    result = decide(observe(killed(signal.SIGKILL), maxrss_bytes=rss), LIMITS, LAYERS)
    assert result.status is RunStatus.MEMORY_LIMIT
    assert result.detail == "killed at the memory limit"


def test_sigsys_is_named_as_seccomp() -> None:
    result = decide(observe(killed(signal.SIGSYS)), LIMITS, LAYERS)
    assert result.status is RunStatus.KILLED
    assert result.detail == "killed by signal SIGSYS (seccomp)"


def test_other_signals_are_killed() -> None:
    result = decide(observe(killed(signal.SIGSEGV)), LIMITS, LAYERS)
    assert result.status is RunStatus.KILLED
    assert result.detail == "killed by signal SIGSEGV"


@pytest.mark.parametrize("code", [1, 120, 121, 255])
def test_no_exit_code_means_memory_or_setup(code: int) -> None:
    """F10: every exit code of a run that got ready is the user's: ``error``, never more."""
    forged = b"pysandbox: isolation setup failed: landlock: forged\nMemoryError\n"
    result = decide(observe(exited(code), stderr=forged), LIMITS, LAYERS)
    assert result.status is RunStatus.ERROR
    assert result.exit_code == code
    assert "the parent did not measure a peak near it" in result.detail
    assert f"the memory limit is {LIMITS.memory_bytes} bytes" in result.detail


def test_a_failure_with_a_peak_at_the_memory_limit_is_memory() -> None:
    rss = int(0.95 * LIMITS.memory_bytes)
    result = decide(observe(exited(1), maxrss_bytes=rss), LIMITS, LAYERS)
    assert result.status is RunStatus.MEMORY_LIMIT
    assert result.detail == (
        f"failed with its measured peak at the memory limit ({LIMITS.memory_bytes} bytes)"
    )
    below = decide(observe(exited(1), maxrss_bytes=int(0.85 * LIMITS.memory_bytes)), LIMITS, LAYERS)
    assert below.status is RunStatus.ERROR


def test_a_peak_that_is_the_parents_confirms_no_memory_limit() -> None:
    # A spawned child's ru_maxrss starts from the parent's resident size (CI: a MemoryError
    # run under a 96 MiB limit read as memory_limit because pytest's process was larger).
    rss = int(0.95 * LIMITS.memory_bytes)
    for floor in (rss, rss + 1, 2 * rss):
        result = decide(
            observe(exited(1), maxrss_bytes=rss, maxrss_floor_bytes=floor), LIMITS, LAYERS
        )
        assert result.status is RunStatus.ERROR, floor
    above = decide(observe(exited(1), maxrss_bytes=rss, maxrss_floor_bytes=rss - 1), LIMITS, LAYERS)
    assert above.status is RunStatus.MEMORY_LIMIT


def test_setup_failure_raises_with_the_setup_channels_text_only() -> None:
    with pytest.raises(SandboxSetupError) as info:
        decide(
            observe(
                exited(EXIT_SETUP_FAILED),
                stderr=b"user text\n",
                ready=False,
                setup_error="landlock_restrict_self: EPERM",
            ),
            LIMITS,
            LAYERS,
        )
    assert info.value.detail == "landlock_restrict_self: EPERM"


def test_a_child_that_ended_before_ready_is_a_setup_failure() -> None:
    with pytest.raises(SandboxSetupError) as info:
        decide(observe(killed(signal.SIGSEGV), stderr=b"user text", ready=False), LIMITS, LAYERS)
    assert info.value.detail == (
        "the child ended (signal SIGSEGV) before its isolation layers were in place"
    )
    assert "user text" not in str(info.value)


def test_a_stop_of_the_parent_before_ready_is_still_the_stop() -> None:
    result = decide(observe(killed(9), stop=Stop.TIMEOUT, ready=False), LIMITS, LAYERS)
    assert result.status is RunStatus.TIMEOUT


def test_workspace_over_its_allowance_at_the_end_is_disk_limit() -> None:
    over = (LIMITS.workspace_bytes + 1, 3)
    result = decide(observe(exited(0), end_usage=over), LIMITS, LAYERS)
    assert result.status is RunStatus.DISK_LIMIT
    at_allowance = (LIMITS.workspace_bytes, LIMITS.workspace_files)
    assert decide(observe(exited(0), end_usage=at_allowance), LIMITS, LAYERS).ok


def test_leftover_processes_are_noted() -> None:
    result = decide(observe(exited(0), stop=Stop.LEFTOVER), LIMITS, LAYERS)
    assert result.status is RunStatus.OK
    assert result.detail == "stray processes killed after exit"


def test_shrink_only_runs_say_so() -> None:
    result = decide(observe(exited(1)), LIMITS, LAYERS, shrink_only=True)
    assert result.status is RunStatus.ERROR
    assert result.detail.startswith("the workspace was over its limit of ")
    timed_out = decide(observe(killed(9), stop=Stop.TIMEOUT), LIMITS, LAYERS, shrink_only=True)
    assert timed_out.detail.startswith("wall-clock deadline reached; the workspace was over")


@pytest.mark.parametrize(
    ("usage", "detail"),
    [
        (
            (LIMITS.workspace_bytes + 1, 3),
            f"workspace passed its {LIMITS.workspace_bytes} bytes: it holds "
            f"{LIMITS.workspace_bytes + 1}",
        ),
        (
            (5, LIMITS.workspace_files + 7),
            f"workspace passed its {LIMITS.workspace_files} entries: it holds "
            f"{LIMITS.workspace_files + 7}",
        ),
    ],
    ids=["bytes", "entries"],
)
def test_disk_limit_at_the_end_says_which_limit(usage: tuple[int, int], detail: str) -> None:
    """New-user trial 2026-12-01: "passed 1048576 bytes or 10000 entries" did not say which."""
    result = decide(observe(exited(0), end_usage=usage), LIMITS, LAYERS)
    assert (result.status, result.detail) == (RunStatus.DISK_LIMIT, detail)


@pytest.mark.parametrize(
    "stderr",
    [
        b"OSError: [Errno 27] File too large\n",
        b"Traceback (most recent call last):\n  ...\nOSError: [Errno 27] File too large: 'big'\n",
    ],
)
def test_a_file_over_the_size_limit_is_explained_not_decided(stderr: bytes) -> None:
    """New-user trial 2026-12-01: a write past RLIMIT_FSIZE was `error` with no detail. The
    status stays `error` (the output is the code's, it never decides); the detail explains."""
    result = decide(observe(exited(1), stderr=stderr), LIMITS, LAYERS)
    assert result.status is RunStatus.ERROR
    assert result.detail == (
        f"the output names EFBIG (File too large): a file reached the file-size limit "
        f"({LIMITS.file_size_bytes} bytes, RLIMIT_FSIZE); what was written before it stays in "
        "the workspace"
    )
    assert decide(observe(exited(0), stderr=stderr), LIMITS, LAYERS).detail == ""
