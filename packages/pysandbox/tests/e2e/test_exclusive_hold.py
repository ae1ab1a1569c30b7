"""``Sandbox.exclusive``: runs waited for, parked processes stopped, a snapshot and a restore.

The parked process is an ordinary process of the test (as a session's would be): it renames a
tree back and forth in the workspace, as fast as it can, the whole time.
"""

from __future__ import annotations

import logging
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from pysandbox import ExclusiveTimeout, RunStatus, Sandbox, _exclusive
from wsnapshot import SnapshotStore

pytestmark = pytest.mark.skipif(
    not hasattr(os, "pidfd_open"), reason="parking needs os.pidfd_open (Linux)"
)

#: The tree the parked process renames between ``a`` and ``b`` (and a counter it rewrites).
TREE = ("f0.txt", "d1/f1.txt", "d1/d2/f2.txt", "d1/d2/d3/f3.txt")
RENAMER = """
import os, sys
os.chdir(sys.argv[1])
i = 0
while True:
    os.rename("a", "b")
    os.rename("b/d1", "b/e1")
    os.rename("b/e1", "b/d1")
    os.rename("b", "a")
    i += 1
    with open("count.tmp", "w") as fh:
        fh.write(str(i))
    os.replace("count.tmp", "count")
"""
SLEEPER = "import time\nwhile True:\n    time.sleep(0.01)\n"


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait for ``condition`` (a bound for a stuck machine, not a measurement)."""
    deadline = time.monotonic() + 60
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"never happened: {what}")
        time.sleep(0.005)


def _all_stopped(pid: int) -> bool:
    states = _exclusive.thread_states(pid)
    return bool(states) and all(s in "Tt" for s in states or ())


@pytest.fixture
def processes() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(code: str, *args: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", code, *args])
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


@pytest.fixture
def plain(workspace: pathlib.Path) -> Iterator[Sandbox]:
    with Sandbox(workspace, require=(), execution="spawn") as sb:
        yield sb


def _count(workspace: pathlib.Path) -> int:
    try:
        return int((workspace / "count").read_text() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def test_a_renaming_process_is_stopped_for_an_exact_snapshot_and_a_repairing_restore(
    workspace: pathlib.Path,
    tmp_path: pathlib.Path,
    plain: Sandbox,
    processes: Callable[..., subprocess.Popen[bytes]],
) -> None:
    for name in TREE:
        (workspace / "a" / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / "a" / name).write_text(name)
    store = SnapshotStore(workspace, tmp_path / "store")
    renamer = processes(RENAMER, str(workspace))
    _until(lambda: _count(workspace) > 10, "the renamer renames")
    plain.park(renamer.pid)

    with plain.exclusive(wait_s=5, stop_wait_s=10) as report:
        assert report.stopped == (renamer.pid,)
        assert (report.already_stopped, report.killed, report.skipped) == ((), (), ())
        assert _all_stopped(renamer.pid)
        frozen = _count(workspace)
        info = store.create("under the renamer")
        assert store.diff(info.id).is_empty  # exact: nothing moved while it was taken
        assert _count(workspace) == frozen
    entries = {entry.path for entry in store.get(info.id).entries}
    tops = {path.split("/")[0] for path in entries} & {"a", "b"}
    assert len(tops) == 1  # one whole tree, under one name
    top = tops.pop()
    inner = [path.split("/", 1)[1] for path in entries if path.startswith(top + "/")]
    files = {"d1" + p[2:] if p.startswith("e1") else p for p in inner}  # d1 may be e1 now
    assert set(TREE) <= files  # every file of the tree, none lost mid-rename

    # Continued at the end: it renames again, and the workspace moves away from the snapshot.
    assert not _all_stopped(renamer.pid)
    _until(lambda: _count(workspace) > frozen + 10, "the renamer continues")
    assert plain.coordinator.parked == (renamer.pid,)

    with plain.exclusive(wait_s=5, stop_wait_s=10) as report:
        assert report.stopped == (renamer.pid,)
        assert _all_stopped(renamer.pid)
        restored = store.restore(info.id)
        assert store.diff(info.id).is_empty  # repaired, and nothing undid it
        assert _count(workspace) == frozen
    assert restored.snapshot_id == info.id
    assert not _all_stopped(renamer.pid)


def test_a_holder_found_stopped_stays_stopped(
    plain: Sandbox, processes: Callable[..., subprocess.Popen[bytes]]
) -> None:
    stopped, running = processes(SLEEPER), processes(SLEEPER)
    os.kill(stopped.pid, signal.SIGSTOP)
    _until(lambda: _all_stopped(stopped.pid), "SIGSTOP took effect")
    plain.park(stopped.pid)
    plain.park(running.pid)
    for _ in range(2):  # and again: nothing continued it in between
        with plain.exclusive(stop_wait_s=10) as report:
            assert report.already_stopped == (stopped.pid,)
            assert report.stopped == (running.pid,)
            assert _all_stopped(stopped.pid) and _all_stopped(running.pid)
        assert _all_stopped(stopped.pid)
        assert not _all_stopped(running.pid)
    assert plain.coordinator.parked == (stopped.pid, running.pid)


def test_a_holder_not_confirmed_stopped_is_killed_unparked_and_reported(
    plain: Sandbox,
    processes: Callable[..., subprocess.Popen[bytes]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    stubborn, ordinary = processes(SLEEPER), processes(SLEEPER)
    plain.park(stubborn.pid)
    plain.park(ordinary.pid)
    real = _exclusive.thread_states

    def never_stopped(pid: int) -> list[str] | None:  # its stop is never observed
        states = real(pid)
        return ["R"] if pid == stubborn.pid and states else states

    monkeypatch.setattr(_exclusive, "thread_states", never_stopped)
    with (
        caplog.at_level(logging.WARNING, logger="pysandbox"),
        plain.exclusive(stop_wait_s=0.05) as report,
    ):
        assert report.killed == (stubborn.pid,)
        assert report.stopped == (ordinary.pid,)
        assert stubborn.wait(30) == -signal.SIGKILL  # dead before the block runs
    assert f"parked process {stubborn.pid} was not confirmed stopped" in caplog.text
    assert plain.coordinator.parked == (ordinary.pid,)
    assert ordinary.poll() is None


@pytest.mark.parametrize("how", ["start time changed", "gone"])
def test_a_reused_or_vanished_pid_is_never_signalled(
    how: str,
    plain: Sandbox,
    processes: Callable[..., subprocess.Popen[bytes]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = processes(SLEEPER)
    plain.park(other.pid)
    if how == "gone":
        other.kill()
        other.wait()
    else:  # the pid now names another process: a later start time
        real = _exclusive.process_start_time

        def reused(pid: int) -> int | None:
            start = real(pid)
            return start + 1 if pid == other.pid and start is not None else start

        monkeypatch.setattr(_exclusive, "process_start_time", reused)
    with plain.exclusive(stop_wait_s=10) as report:
        assert report.skipped == (other.pid,)
        assert (report.stopped, report.killed, report.already_stopped) == ((), (), ())
        if how != "gone":
            assert not _all_stopped(other.pid)  # never sent SIGSTOP
    assert plain.coordinator.parked == ()
    if how != "gone":
        assert other.poll() is None


def test_runs_are_waited_for_and_the_manifest_is_invalidated(
    sandbox: Sandbox, workspace: pathlib.Path
) -> None:
    results: list[RunStatus] = []
    thread = threading.Thread(
        target=lambda: results.append(sandbox.run("while True: pass", timeout=2).status)
    )
    thread.start()
    _until(lambda: sandbox.runs_in_progress == 1, "the run started")
    with pytest.raises(ExclusiveTimeout) as info, sandbox.exclusive(wait_s=0):
        pytest.fail("held with a run in progress")
    assert info.value.runs_in_progress == 1
    generation = sandbox._disk_generation
    with sandbox.exclusive(wait_s=60):
        assert results == [RunStatus.TIMEOUT]  # ended, and reaped, before the block ran
        assert sandbox.runs_in_progress == 0
        assert sandbox._ready_pids() == []
    assert sandbox._disk_generation > generation
    thread.join(30)
    assert sandbox.run("print(6 * 7)").stdout == "42\n"
