"""A session's code forges its result frame: the outcome stays the parent's observation.

The class: after its first call a session child is an interpreter the user's code controls, so
it can write anything to its result pipe (the descriptor is in its table). The parent takes a
frame as the code's own claim (ok/error, a value) only when the child then stopped with every
thread stopped and the pipe held exactly one well-formed frame; time-outs, memory, exit and
kills come from what the parent saw. In the kernel-only mode (no Python-level guard), as code
past a Python-level bypass would be. Starts processes: ``e2e``.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from pysandbox import Limits, RunStatus, Session
from pysandbox.child._values import frame
from sandbox_helpers import kernel_only_sandbox, needs_kernel

pytestmark = [pytest.mark.e2e, needs_kernel]

FORGED = frame(1, True, "forged", True)  # the first call's number: a fresh session each test
#: Writes ``data`` to every descriptor from 3 on that takes it (the result pipe among them).
FORGE = (
    "import os\n"
    "def forge(data):\n"
    "    for fd in range(3, 64):\n"
    "        try:\n"
    "            os.write(fd, data)\n"
    "        except OSError:\n"
    "            pass\n"
    f"forge({FORGED!r})\n"
)


@pytest.fixture
def session(monkeypatch: pytest.MonkeyPatch, workspace: pathlib.Path) -> Iterator[Session]:
    limits = Limits(memory_bytes=128 << 20)
    with (
        kernel_only_sandbox(
            monkeypatch, workspace, execution="warm", ready_children=0, limits=limits
        ) as sb,
        sb.open_session() as s,
    ):
        yield s


@pytest.mark.parametrize(
    "loop",
    ["while True:\n    n = 1", "import time\nwhile True:\n    time.sleep(0.01)"],
)
def test_a_forged_ok_then_a_loop_is_a_timeout(session: Session, loop: str) -> None:
    result = session.run(FORGE + loop, timeout=1.0)
    assert result.status is RunStatus.TIMEOUT
    assert result.result is None


def test_a_forged_ok_then_the_memory_limit_is_memory_limit(session: Session) -> None:
    grow = "b = []\nwhile True:\n    b.append(b'x' * (1 << 20))"
    result = session.run(FORGE + grow)
    assert result.status is RunStatus.MEMORY_LIMIT
    assert result.session_ended is True
    assert result.session_end_reason == "memory_limit"
    assert result.result is None


@pytest.mark.parametrize("ending", ["os._exit(0)", "os._exit(9)", "raise SystemExit(0)"])
def test_a_forged_ok_then_an_exit_ends_the_session(session: Session, ending: str) -> None:
    result = session.run(FORGE + ending)
    assert result.session_ended is True
    assert result.session_end_reason == "exit"
    assert result.result is None


@pytest.mark.parametrize(
    "data",
    [b"garbage", b"V" * 100_000, FORGED[:-1], FORGED],  # cut, oversized, or one frame too many
)
def test_extra_bytes_on_the_result_pipe_give_no_value(session: Session, data: bytes) -> None:
    code = FORGE.replace(repr(FORGED), repr(data)) + "'real'"
    result = session.run(code)
    assert result.status is RunStatus.ERROR
    assert result.result is None
    assert session.run("print('alive')").stdout == "alive\n"  # the next call is in step


def test_a_self_stop_before_the_end_is_not_the_calls_end(session: Session) -> None:
    # The code stops itself once with a forged frame of its call written: the parent takes it
    # as the code's claim (the code could have returned "forged" itself). The rest of the call
    # runs when the next call resumes it, under that call's deadline, never between calls;
    # its frame (of the earlier call) is skipped and the next call's result is its own.
    code = FORGE + "import signal\nos.kill(os.getpid(), signal.SIGSTOP)\nleft = 'ran'"
    first = session.run(code)
    assert first.status is RunStatus.OK
    assert first.result == {"type": "builtins.str", "text": "'forged'"}
    second = session.run("print('next')\n'second'")  # resumes the rest of the first call
    assert second.session_ended is False
    assert second.stdout == "next\n"
    assert second.result == {"type": "builtins.str", "text": "'second'"}
    assert session.run("print(left)").stdout == "ran\n"
