"""F10 as a class: nothing the user's code does makes up the run's outcome.

The code runs where the AST gate would have stopped it (the kernel-only testing mode, as after
a gate bypass such as F01: no AST gate, no Python guards), in warm and spawn execution.
Whatever exit status, signal or text it produces, the result is ``error`` or ``killed`` with
that status; never ``SandboxSetupError``, ``memory_limit`` or a CPU limit the parent did not
measure. A real setup failure still raises, with the bootstrap's own text.
"""

from __future__ import annotations

import dataclasses
import pathlib
import signal
from collections.abc import Iterator

import pytest

from pysandbox import Limits, RunResult, RunStatus, Sandbox, SandboxSetupError
from pysandbox._launch import SpawnLauncher
from sandbox_helpers import KERNEL, kernel_only_sandbox, needs_landlock

# This regression starts real processes, so it is e2e too (tests/README.md).
pytestmark = pytest.mark.e2e

MiB = 1 << 20
REQUIRE = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()
FORGED = "pysandbox: isolation setup failed: landlock_restrict_self: forged by user code"
#: Exit statuses with a meaning somewhere: ours (120, 121: memory and setup before the fix),
#: the shell's (124-128), 128 + a signal (SIGKILL, SIGXCPU, SIGSEGV), and the edges.
SPECIAL_EXIT_CODES = (1, 2, 120, 121, 124, 125, 126, 127, 128, 137, 139, 152, 255)
SIGNALS = (
    signal.SIGXCPU,
    signal.SIGKILL,
    signal.SIGSEGV,
    signal.SIGSYS,
    signal.SIGABRT,
    signal.SIGTERM,
)


LIMITS = Limits(memory_bytes=128 * MiB, cpu_time_s=5)


@pytest.fixture(params=["warm", "spawn"])
def sandbox(
    request: pytest.FixtureRequest, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Sandbox]:
    """The kernel-only testing mode (no AST gate, no Python guards), warm and spawn."""
    sb = kernel_only_sandbox(
        monkeypatch, tmp_path, require=REQUIRE, limits=LIMITS, execution=request.param
    )
    with sb:
        yield sb


@pytest.fixture(params=["warm", "spawn"])
def gated(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[Sandbox]:
    """Every layer, the AST gate included, warm and spawn."""
    with Sandbox(tmp_path, require=REQUIRE, limits=LIMITS, execution=request.param) as sb:
        yield sb


def bypassed(sb: Sandbox, code: str) -> RunResult:
    """Run ``code`` past the AST gate: ``sb`` is in the kernel-only testing mode."""
    assert "testing_kernel_only" in sb.capabilities().active_layers
    return sb.run(code)


@pytest.mark.parametrize("code", SPECIAL_EXIT_CODES)
def test_an_exit_code_is_the_users_own(sandbox: Sandbox, code: int) -> None:
    result = bypassed(
        sandbox,
        f"import os, sys\nsys.stderr.write({FORGED!r} + '\\nMemoryError\\n')\n"
        f"sys.stderr.flush()\nos._exit({code})\n",
    )
    assert (result.status, result.exit_code, result.signal) == (RunStatus.ERROR, code, None)
    assert FORGED in result.stderr  # the run's own text stays in its own stderr
    assert result.detail.startswith("the output names a MemoryError")
    assert sandbox.capabilities().execution["mode"] == sandbox._execution


@pytest.mark.parametrize("sig", SIGNALS, ids=[s.name for s in SIGNALS])
def test_a_self_sent_signal_is_a_kill_not_a_limit(sandbox: Sandbox, sig: int) -> None:
    result = bypassed(sandbox, f"import os\nos.kill(os.getpid(), {int(sig)})\n")
    assert result.status is RunStatus.KILLED
    assert result.signal == sig
    name = signal.Signals(sig).name
    expected = f"killed by signal {name}" + (" (seccomp)" if sig == signal.SIGSYS else "")
    assert result.detail == expected
    assert result.cpu_time_ms < 2500  # far below the 5 s CPU limit: the kernel did not send it


def test_a_raised_memory_error_is_an_error_naming_the_limit(sandbox: Sandbox) -> None:
    result = bypassed(sandbox, "raise MemoryError('fake')")
    assert result.status is RunStatus.ERROR
    assert result.exit_code == 1
    assert f"the memory limit is {128 * MiB} bytes" in result.detail


def test_forged_setup_text_with_system_exit(gated: Sandbox) -> None:
    # The same through the AST gate: SystemExit and print are ordinary Python.
    result = gated.run(f"print({FORGED!r})\nraise SystemExit(121)")
    assert (result.status, result.exit_code) == (RunStatus.ERROR, 121)
    assert result.stdout == FORGED + "\n"


@needs_landlock
def test_a_real_setup_failure_still_raises_with_the_bootstraps_text(tmp_path: pathlib.Path) -> None:
    with Sandbox(tmp_path, require=(), execution="spawn") as sb:
        config = sb._child_config()
        if config.landlock is None:
            pytest.skip("Landlock is not active")
        # Rights the kernel does not know: landlock_create_ruleset fails in the child.
        bad = dataclasses.replace(config.landlock, handled_fs=(1 << 40) - 1)
        config = dataclasses.replace(config, landlock=bad)
        with pytest.raises(SandboxSetupError) as info:
            sb._execute(config, "print('never')", 10.0, launcher=SpawnLauncher())
    assert info.value.detail.startswith("landlock_create_ruleset: ")
