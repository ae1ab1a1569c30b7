"""The workspace coordinator without processes: /proc parsing, run counting, bounds, refusals."""

from __future__ import annotations

import os
import pathlib
import threading

import pytest

from pysandbox import (
    ExclusiveTimeout,
    SandboxClosedError,
    WorkspaceCoordinator,
    _exclusive,
)

#: Field 22 (the start time) is index 19 of the fields after the command name.
_TAIL = b" ".join([b"S", *(str(n).encode() for n in range(4, 22)), b"777", b"0", b"0"])


def _held(coordinator: WorkspaceCoordinator) -> bool:
    """Read afresh each time (mypy would narrow the property from an earlier assert)."""
    return coordinator.held


@pytest.mark.parametrize(
    "comm",
    [
        b"python",
        b"a) R 1 2",  # a forged state and fields after a ')'
        b") T 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 123456",  # a forged start time
        b"x)\n)(",  # newlines and unbalanced parentheses
        b"(((",
        b"",
    ],
)
def test_the_stat_line_is_split_after_the_last_parenthesis_whatever_the_command_name(
    comm: bytes,
) -> None:
    fields = _exclusive._stat_fields(b"4242 (" + comm + b") " + _TAIL + b"\n")
    assert fields[0] == b"S"
    assert int(fields[19]) == 777


@pytest.mark.parametrize("line", [b"", b"4242 python S 1", b"4242 (x) S 1 2 3"])
def test_a_malformed_stat_line_is_refused(line: bytes) -> None:
    with pytest.raises(ValueError, match="malformed"):
        _exclusive._stat_fields(line)


def test_this_process_start_time_and_thread_states_are_read() -> None:
    start = _exclusive.process_start_time(os.getpid())
    stat = pathlib.Path(f"/proc/{os.getpid()}/stat").read_bytes()
    assert start == int(stat.rsplit(b")", 1)[1].split()[19])
    states = _exclusive.thread_states(os.getpid())
    assert states is not None
    assert states  # one letter per thread (threads of other tests may come and go)
    assert "R" in states  # this thread, reading


def test_a_missing_process_has_no_start_time_nor_states() -> None:
    assert _exclusive.process_start_time(2**31 - 1) is None
    assert _exclusive.thread_states(2**31 - 1) is None


@pytest.mark.parametrize(
    ("states", "stopped", "gone"),
    [
        (["T"], True, False),
        (["T", "t", "T"], True, False),
        (["T", "Z"], True, False),  # a zombie leader runs nothing; the rest is stopped
        (["T", "S"], False, False),  # one thread still runs
        (["R"], False, False),
        (["D", "T"], False, False),
        (["Z"], False, True),
        ([], False, True),
    ],
)
def test_stopped_means_every_thread_that_can_run_is_stopped(
    states: list[str], stopped: bool, gone: bool
) -> None:
    assert _exclusive._stopped(states) is stopped
    assert _exclusive._gone(states) is gone


def test_a_run_in_progress_keeps_the_workspace_and_the_timeout_says_so() -> None:
    coordinator = WorkspaceCoordinator()
    assert coordinator.enter_run()
    with pytest.raises(ExclusiveTimeout) as info, coordinator.exclusive(wait_s=0):
        pytest.fail("the block ran with a run in progress")
    assert (info.value.wait_s, info.value.runs_in_progress) == (0.0, 1)
    assert "runs are still in progress" in str(info.value)
    assert "nothing was stopped or changed" in str(info.value)
    assert not _held(coordinator)  # released: runs enter again
    assert coordinator.enter_run()
    assert coordinator.runs_in_progress == 2
    coordinator.leave_run()
    coordinator.leave_run()
    with coordinator.exclusive(wait_s=0) as report:
        assert _held(coordinator)
        assert report == _exclusive.ExclusiveReport()
    assert not _held(coordinator)


def test_a_second_exclusive_operation_waits_for_the_first_then_times_out() -> None:
    coordinator = WorkspaceCoordinator()
    with coordinator.exclusive(wait_s=0):
        with pytest.raises(ExclusiveTimeout) as info, coordinator.exclusive(wait_s=0):
            pytest.fail("two exclusive operations at once")
        assert "another exclusive operation" in info.value.reason
        assert _held(coordinator)  # the first still holds it
    assert not _held(coordinator)


def test_new_runs_wait_while_the_workspace_is_held_and_enter_after() -> None:
    coordinator = WorkspaceCoordinator()
    waiting = threading.Event()
    entered: list[bool] = []

    def cancelled() -> bool:
        waiting.set()  # asked only from inside the wait
        return False

    def run() -> None:
        entered.append(coordinator.enter_run(cancelled))

    with coordinator.exclusive(wait_s=0):
        thread = threading.Thread(target=run)
        thread.start()
        assert waiting.wait(30)
        assert coordinator.runs_in_progress == 0
        assert entered == []
    thread.join(30)
    assert entered == [True]
    assert coordinator.runs_in_progress == 1


def test_a_run_cancelled_while_waiting_is_not_counted() -> None:
    coordinator = WorkspaceCoordinator()
    with coordinator.exclusive(wait_s=0):
        assert coordinator.enter_run(lambda: True) is False
    assert coordinator.runs_in_progress == 0


def test_closing_wakes_waiting_runs_and_refuses_runs_parks_and_holds() -> None:
    coordinator = WorkspaceCoordinator()
    raised: list[type[BaseException]] = []
    waiting = threading.Event()

    def cancelled() -> bool:
        waiting.set()
        return False

    def run() -> None:
        try:
            coordinator.enter_run(cancelled)
        except SandboxClosedError as exc:
            raised.append(type(exc))

    with coordinator.exclusive(wait_s=0):
        thread = threading.Thread(target=run)
        thread.start()
        assert waiting.wait(30)
        coordinator.close()
        thread.join(30)
    assert raised == [SandboxClosedError]
    with pytest.raises(SandboxClosedError):
        coordinator.enter_run()
    with pytest.raises(SandboxClosedError), coordinator.exclusive():
        pytest.fail("held after close")
    with pytest.raises(SandboxClosedError):
        coordinator.park(2**31 - 1)


@pytest.mark.parametrize("pid", [0, -1, 1, os.getpid()], ids=["0", "-1", "1", "own-pid"])
def test_park_refuses_pids_that_would_signal_groups_init_or_this_process(pid: int) -> None:
    with pytest.raises(ValueError, match="cannot be parked"):
        WorkspaceCoordinator().park(pid)


@pytest.mark.parametrize("pid", [True, 12.0, "123", None])
def test_park_refuses_what_is_not_an_int(pid: object) -> None:
    with pytest.raises(TypeError, match="pid must be an int"):
        WorkspaceCoordinator().park(pid)  # type: ignore[arg-type]


def test_park_refuses_a_missing_process_and_unpark_says_whether_it_was_parked() -> None:
    coordinator = WorkspaceCoordinator()
    with pytest.raises(ProcessLookupError, match="no process"):
        coordinator.park(2**31 - 1)
    assert coordinator.parked == ()
    assert coordinator.unpark(2**31 - 1) is False


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"wait_s": -1}, ValueError),
        ({"wait_s": float("nan")}, ValueError),
        ({"wait_s": float("inf")}, ValueError),
        ({"stop_wait_s": -0.5}, ValueError),
        ({"wait_s": True}, TypeError),
        ({"stop_wait_s": "1"}, TypeError),
    ],
)
def test_exclusive_refuses_waits_that_are_not_finite_seconds(
    kwargs: dict[str, object], error: type[Exception]
) -> None:
    coordinator = WorkspaceCoordinator()
    with pytest.raises(error), coordinator.exclusive(**kwargs):  # type: ignore[arg-type]
        pytest.fail("held with an invalid wait")
    assert not _held(coordinator)
