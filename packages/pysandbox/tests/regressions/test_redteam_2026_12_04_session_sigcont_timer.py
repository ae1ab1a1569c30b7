"""A session cannot arm a kernel timer that continues it while it is stopped (red team 2026-12-04).

The finding: past the Python layers (here the kernel-only mode, as code past a Python-level
bypass would be), ``timer_create`` with ``SIGEV_SIGNAL`` and ``SIGCONT`` (allowed then as "signals
to oneself"; the signal number sits behind a pointer the seccomp filter cannot read) made the
kernel continue the stopped session: its thread wrote the workspace between calls and during
``Sandbox.exclusive()``. The POSIX timer calls are refused (EPERM) now; ``setitimer`` and
``alarm`` stay (their signal is fixed: SIGALRM/SIGVTALRM/SIGPROF do not continue a stopped
process). Every spelling the child can reach (the glibc wrappers and the raw system calls, on
each clock) is tried. Starts processes: ``e2e``; needs seccomp.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from pysandbox import RunStatus, Sandbox
from sandbox_helpers import kernel_only_sandbox, needs_kernel

pytestmark = [pytest.mark.e2e, needs_kernel]

ARM = r"""
import ctypes, errno, signal, struct
libc = ctypes.CDLL(None, use_errno=True)
ev = ctypes.create_string_buffer(struct.pack("QiiI", 0, signal.SIGCONT, 0, 0) + b"\0" * 44)
tid = ctypes.c_void_p()
answers = []
for clock in (0, 1, 7):  # CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME
    ctypes.set_errno(0)
    answers.append((libc.timer_create(clock, ev, ctypes.byref(tid)), ctypes.get_errno()))
import platform
NR = {"x86_64": 222, "aarch64": 107}[platform.machine()]
ctypes.set_errno(0)
answers.append((libc.syscall(NR, 1, ev, ctypes.byref(tid)), ctypes.get_errno()))
print(answers)
print(all(r == -1 and e == errno.EPERM for r, e in answers))
"""


@pytest.fixture
def sandbox(monkeypatch: pytest.MonkeyPatch, workspace: pathlib.Path) -> Iterator[Sandbox]:
    with kernel_only_sandbox(monkeypatch, workspace, execution="warm", ready_children=0) as sb:
        yield sb


def test_a_run_cannot_create_a_posix_timer(sandbox: Sandbox) -> None:
    result = sandbox.run(ARM)
    assert result.status is RunStatus.OK, result.stderr
    assert result.stdout.splitlines()[-1] == "True", result.stdout


def test_a_session_cannot_arm_a_timer_that_continues_it(
    sandbox: Sandbox, workspace: pathlib.Path
) -> None:
    with sandbox.open_session("timer") as session:
        result = session.run(ARM)
        assert result.status is RunStatus.OK, result.stderr
        assert result.stdout.splitlines()[-1] == "True", result.stdout
        # and the fixed-signal timers stay: SIGALRM does not continue a stopped process
        assert (
            session.run("import signal\nprint(signal.setitimer(signal.ITIMER_REAL, 0))").status
            is RunStatus.OK
        )
