"""Sessions: one confined interpreter whose globals persist, stopped between calls.

Each outcome row of SECURITY.md's session table is observed by the parent here: the process
state, ``/proc`` accounting, the exit. Sessions need warm mode, so every sandbox here passes
``execution="warm"`` (and the spawn refusal passes ``execution="spawn"``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from pysandbox import (
    DATASCIENCE,
    Limits,
    RunStatus,
    Sandbox,
    Session,
    SessionEndedError,
    SessionsNeedWarmMode,
)
from pysandbox._session import proc_cpu_seconds, threads_stopped
from sandbox_helpers import KERNEL, kernel_only_sandbox, needs_kernel

MiB = 1 << 20


def _require() -> tuple[str, ...]:
    return ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()


def _sandbox(workspace: pathlib.Path, **kwargs: Any) -> Sandbox:
    kwargs.setdefault("require", _require())
    return Sandbox(workspace, execution="warm", ready_children=0, **kwargs)


@pytest.fixture
def warm(workspace: pathlib.Path) -> Iterator[Sandbox]:
    with _sandbox(workspace, extra_modules=("threading",)) as sb:
        yield sb


@pytest.fixture
def session(warm: Sandbox) -> Iterator[Session]:
    with warm.open_session("tests") as s:
        yield s


def _gone(pid: int) -> bool:
    """The process no longer exists (reaped: no /proc entry)."""
    return not pathlib.Path(f"/proc/{pid}").exists()


# -- state persists --------------------------------------------------------------------------
def test_a_global_of_one_call_is_seen_by_the_next(session: Session) -> None:
    assert session.run("x = 42").status is RunStatus.OK
    result = session.run("print(x + 1)")
    assert result.status is RunStatus.OK
    assert result.stdout == "43\n"
    assert result.session_ended is False
    assert result.session_end_reason is None
    assert session.calls == 2


def test_imports_and_definitions_persist(session: Session) -> None:
    assert session.run("import json\ndef double(v):\n    return 2 * v").ok
    assert session.run("class Box:\n    size = 3").ok
    result = session.run("print(json.dumps([double(Box.size)]))")
    assert result.stdout == "[6]\n"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("x = 5\nx * 2", {"type": "builtins.int", "text": "10"}),
        ("'a' + 'b'", {"type": "builtins.str", "text": "'ab'"}),
        ("[1, 2]", {"type": "builtins.list", "text": "[1, 2]"}),
        (
            "class P:\n    def __repr__(self):\n        return 'P!'\nP()",
            {"type": "__main__.P", "text": "P!"},
        ),
        ("None", None),
        ("x = 1", None),
        ("print(1)", None),  # its value is None
        ("if True:\n    3", None),  # not a top-level expression statement
        ("1 / 0", None),  # failed: no value
    ],
)
def test_the_final_expression_is_the_result(
    session: Session, code: str, expected: dict[str, str] | None
) -> None:
    assert session.run(code).result == expected


@pytest.mark.parametrize(
    "code",
    [
        "list(range(10**6))",  # a builtin container: its first elements only
        "class L(list):\n    pass\nL(range(10**6))",  # a subclass keeps the bound
        "'x' * 10**7",
        "b'x' * 10**7",
        "bytearray(10**7)",
        "{i: i for i in range(10**5)}",
        "[[list(range(1000))] * 1000]",
    ],
)
def test_a_large_value_is_cut_in_the_child(session: Session, code: str) -> None:
    result = session.run(code)
    assert result.status is RunStatus.OK, result.stderr
    assert result.result is not None
    assert len(result.result["text"]) <= 4000
    assert "..." in result.result["text"]  # reprlib's mark of what was left out


def test_a_repr_that_fails_is_a_placeholder(session: Session) -> None:
    code = "class Bad:\n    def __repr__(self):\n        raise ValueError('no')\nBad()"
    result = session.run(code)
    assert result.status is RunStatus.OK
    assert result.result is not None
    assert result.result["type"] == "__main__.Bad"
    assert result.result["text"].startswith("<Bad instance at 0x")  # reprlib's placeholder


def test_a_rejected_call_runs_nothing_and_keeps_the_session(session: Session) -> None:
    assert session.run("y = 1").ok
    rejected = session.run("import subprocess")
    assert rejected.status is RunStatus.REJECTED
    assert rejected.session_ended is False
    assert session.run("print(y)").stdout == "1\n"


def test_an_error_keeps_the_session(session: Session) -> None:
    assert session.run("z = 7").ok
    failed = session.run("def f():\n    raise ValueError('boom')\nf()")
    assert failed.status is RunStatus.ERROR
    assert failed.stderr.endswith("ValueError: boom\n")
    assert "pysandbox" not in failed.stderr  # no frame of the session loop
    assert failed.session_ended is False
    assert session.run("print(z)").stdout == "7\n"


# -- sys.exit ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("code", "status"), [("raise SystemExit", 0), ("raise SystemExit(3)", 3)])
def test_sys_exit_ends_the_session(session: Session, code: str, status: int) -> None:
    pid = session.pid
    result = session.run(code)
    assert result.exit_code == status
    assert result.status is (RunStatus.OK if status == 0 else RunStatus.ERROR)
    assert result.session_ended is True
    assert result.session_end_reason == "exit"
    assert session.ended
    assert session.end_reason == "exit"
    assert _gone(pid)
    with pytest.raises(SessionEndedError, match="exit"):
        session.run("print(1)")


# -- time-outs --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "loop",
    ["while True:\n    n += 1", "while True:\n    n = [n][0]", "for n in iter(int, 1):\n    pass"],
)
def test_a_timeout_interrupts_and_the_session_lives(session: Session, loop: str) -> None:
    assert session.run("n = 0\nkept = 'yes'").ok
    result = session.run(loop, timeout=1.0)
    assert result.status is RunStatus.TIMEOUT
    assert result.session_ended is False
    assert result.stderr.endswith("KeyboardInterrupt\n")
    assert threads_stopped(session.pid)
    assert session.run("print(kept)").stdout == "yes\n"


@pytest.mark.parametrize(
    "code",
    [
        # catches the interrupt and goes on
        "while True:\n    try:\n        while True:\n            n += 1\n"
        "    except KeyboardInterrupt:\n        pass",
        # catches it in a finally that loops
        "try:\n    while True:\n        n += 1\nfinally:\n    while True:\n        n += 1",
    ],
)
def test_a_loop_that_ignores_the_interrupt_is_killed(session: Session, code: str) -> None:
    pid = session.pid
    assert session.run("n = 0").ok
    result = session.run(code, timeout=1.0)
    assert result.status is RunStatus.TIMEOUT
    assert result.session_ended is True
    assert result.session_end_reason == "timeout"
    assert session.end_reason == "timeout"
    assert _gone(pid)


def test_the_cpu_limit_is_raised_per_call(workspace: pathlib.Path) -> None:
    # Each call gets cpu_time_s of CPU: 3 calls of ~0.6 s pass a 1 s limit in sum.
    limits = Limits(cpu_time_s=1, timeout_s=30)
    with _sandbox(workspace, limits=limits) as sb, sb.open_session() as s:
        spin = (
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6:\n    pass"
        )
        for _ in range(3):
            result = s.run(spin)
            assert result.status is RunStatus.OK, result.detail
            assert result.cpu_time_ms >= 500
        result = s.run("while True:\n    pass", timeout=30)
        assert result.status is RunStatus.TIMEOUT
        assert result.session_ended is True
        assert result.session_end_reason == "timeout"
        assert "CPU time limit" in result.detail


# -- memory -----------------------------------------------------------------------------------
def test_growing_20_mib_per_call_ends_at_the_memory_limit(workspace: pathlib.Path) -> None:
    limits = Limits(memory_bytes=128 * MiB)
    with _sandbox(workspace, limits=limits) as sb, sb.open_session() as s:
        assert s.run("chunks = []").ok
        grow = "for _ in range(20):\n    chunks.append(b'x' * (1 << 20))\nlen(chunks)"
        results = []
        for _ in range(12):
            result = s.run(grow)
            results.append(result)
            if result.session_ended:
                break
        *alive, last = results
        assert all(r.status is RunStatus.OK for r in alive)
        assert [r.result for r in alive] == [
            {"type": "builtins.int", "text": str(20 * (i + 1))} for i in range(len(alive))
        ]
        assert last.status is RunStatus.MEMORY_LIMIT
        assert last.session_end_reason == "memory_limit"
        assert last.peak_memory_bytes >= 0.9 * 128 * MiB
        assert s.ended


def test_a_memory_error_below_the_peak_is_an_error_and_the_session_lives(session: Session) -> None:
    # One allocation over the limit is refused at once: the measured peak stays low.
    result = session.run("kept = 1\nb = bytearray(1 << 40)")
    assert result.status is RunStatus.ERROR
    assert "MemoryError" in result.stderr
    assert result.session_ended is False
    assert session.run("print(kept)").stdout == "1\n"


def test_the_peak_is_per_call(session: Session) -> None:
    big = session.run("b = b'x' * (100 << 20)\ndel b")
    small = session.run("y = 1")
    assert big.peak_memory_bytes >= 100 * MiB
    assert small.peak_memory_bytes < big.peak_memory_bytes - 50 * MiB


# -- stopped between calls --------------------------------------------------------------------
THREADS = (
    "import threading\n"
    "def spin():\n"
    "    while True:\n"
    "        pass\n"
    "for _ in range(3):\n"
    "    threading.Thread(target=spin, daemon=True).start()\n"
    "threading.active_count()"
)


def test_every_thread_is_stopped_between_calls(session: Session) -> None:
    assert threads_stopped(session.pid)  # from its creation on
    result = session.run(THREADS)
    assert result.result == {"type": "builtins.int", "text": "4"}
    tasks = list(pathlib.Path(f"/proc/{session.pid}/task").iterdir())
    assert len(tasks) == 4
    for task in tasks:
        stat = (task / "stat").read_bytes()
        assert stat[stat.rfind(b")") + 2 :][:1] in (b"T", b"t")


def test_a_spinning_thread_uses_no_cpu_between_calls(session: Session) -> None:
    assert session.run(THREADS).ok
    before = proc_cpu_seconds(session.pid)
    time.sleep(2.0)  # the interval measured, not asserted
    after = proc_cpu_seconds(session.pid)
    assert before is not None and after is not None
    assert after - before < 0.1
    # The threads run again during the next call (the process is resumed, not replaced).
    result = session.run("import time\ntime.sleep(0.3)\nthreading.active_count()")
    assert result.result == {"type": "builtins.int", "text": "4"}
    assert result.cpu_time_ms > 0  # the spinning threads ran again


def test_a_thread_name_cannot_fake_the_stopped_state(session: Session) -> None:
    # comm is the code's choice: a name with ") T" in it must not read as a state.
    code = (
        "import threading\n"
        "def spin():\n"
        "    while True:\n"
        "        pass\n"
        "threading.Thread(target=spin, daemon=True, name='x) T (y').start()"
    )
    assert session.run(code).ok
    assert threads_stopped(session.pid)


# -- isolation between sessions ---------------------------------------------------------------
def test_two_sessions_do_not_see_each_others_variables(warm: Sandbox) -> None:
    with warm.open_session("a") as a, warm.open_session("b") as b:
        assert a.pid != b.pid
        assert a.run("secret = 'a-only'").ok
        result = b.run("print(secret)")
        assert result.status is RunStatus.ERROR
        assert "NameError" in result.stderr
        assert b.run("print('secret' in dir())").stdout == "False\n"
        assert a.run("print(secret)").stdout == "a-only\n"


@needs_kernel
@pytest.mark.parametrize(
    "probe",
    [
        "os.kill(PID, 0)",
        "os.kill(PID, signal.SIGCONT)",
        "os.kill(-PID, signal.SIGKILL)",
        "open(f'/proc/{PID}/environ', 'rb').read()",
        "open(f'/proc/{PID}/mem', 'rb').read(1)",
        "open(f'/proc/{PID}/maps', 'rb').read()",
        "os.listdir(f'/proc/{PID}/fd')",
    ],
)
def test_a_session_cannot_signal_or_read_another(
    monkeypatch: pytest.MonkeyPatch, workspace: pathlib.Path, probe: str
) -> None:
    # Kernel-only mode: no Python-level guard helps; seccomp and Landlock refuse.
    with (
        kernel_only_sandbox(monkeypatch, workspace, execution="warm", ready_children=0) as sb,
        sb.open_session("a") as a,
        sb.open_session("b") as b,
    ):
        code = (
            f"import os, signal\nPID = {b.pid}\n"
            f"try:\n    {probe}\n    print('reached')\n"
            "except OSError as exc:\n    print('refused', type(exc).__name__)"
        )
        result = a.run(code)
        assert result.status is RunStatus.OK, result.stderr
        assert result.stdout.startswith("refused"), result.stdout
        assert threads_stopped(b.pid)  # still stopped, still alive
        assert b.run("print('alive')").stdout == "alive\n"


# -- ending -----------------------------------------------------------------------------------
def test_close_leaves_no_process(warm: Sandbox) -> None:
    s = warm.open_session()
    assert s.run("import threading\nthreading.Thread(target=lambda: None).start()").ok
    pid = s.pid
    s.close()
    s.close()  # idempotent
    assert s.ended
    assert s.end_reason == "closed"
    assert s.rss_bytes == 0
    assert _gone(pid)
    with pytest.raises(SessionEndedError, match="closed"):
        s.run("print(1)")


def test_sandbox_close_ends_every_session(workspace: pathlib.Path) -> None:
    sb = _sandbox(workspace)
    sessions = [sb.open_session(str(i)) for i in range(3)]
    assert all(s.run("v = 1").ok for s in sessions)
    pids = [s.pid for s in sessions]
    sb.close()
    assert all(s.end_reason == "closed" for s in sessions)
    assert all(_gone(pid) for pid in pids)


def test_a_cancelled_call_kills_the_session(session: Session) -> None:
    pid = session.pid

    async def go() -> None:
        task = asyncio.ensure_future(session.arun("while True:\n    pass", timeout=10))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert session.ended
    assert session.end_reason == "killed"
    assert _gone(pid)


def test_properties(session: Session) -> None:
    assert session.description == "tests"
    assert session.calls == 0
    assert session.created_at == session.last_used_at
    assert session.rss_bytes > 1 * MiB
    assert session.run("pass").ok
    assert session.calls == 1
    assert session.last_used_at >= session.created_at
    assert not session.ended
    assert session.end_reason is None


def test_output_limit_leaves_it_alive(workspace: pathlib.Path) -> None:
    with _sandbox(workspace, limits=Limits(output_bytes=10_000)) as sb, sb.open_session() as s:
        assert s.run("kept = 2").ok
        result = s.run("while True:\n    print('x' * 100)")
        assert result.status is RunStatus.OUTPUT_LIMIT
        assert result.stdout_truncated
        assert len(result.stdout) == 10_000
        assert result.session_ended is False
        assert s.run("print(kept)").stdout == "2\n"


def test_disk_limit_leaves_it_alive(workspace: pathlib.Path) -> None:
    limits = Limits(workspace_bytes=2 * MiB)
    with _sandbox(workspace, limits=limits) as sb, sb.open_session() as s:
        assert s.run("kept = 3").ok
        code = (
            "with open('big', 'wb') as f:\n"
            "    while True:\n        f.write(b'x' * 65536)\n        f.flush()"
        )
        result = s.run(code, timeout=5)
        assert result.status is RunStatus.DISK_LIMIT
        assert result.session_ended is False
        assert s.run("print(kept)").stdout == "3\n"


def test_spawn_mode_is_refused_with_a_clear_message(workspace: pathlib.Path) -> None:
    with (
        Sandbox(workspace, execution="spawn", require=_require()) as sb,
        pytest.raises(SessionsNeedWarmMode, match="sessions need warm mode"),
    ):
        sb.open_session()


@pytest.mark.parametrize(("description", "error"), [(1, TypeError), ("x" * 201, ValueError)])
def test_a_bad_description_is_refused(warm: Sandbox, description: Any, error: type) -> None:
    with pytest.raises(error):
        warm.open_session(description)


def test_one_shot_runs_say_no_session(warm: Sandbox) -> None:
    result = warm.run("print(1)")
    assert result.session_ended is None
    assert result.session_end_reason is None
    assert result.result is None


# -- one-shot runs carry their final value too -------------------------------------------------
@pytest.mark.parametrize("mode", ["warm", "spawn"])
@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("1 + 1", {"type": "builtins.int", "text": "2"}),
        ("import json\njson.dumps({'a': 1})", {"type": "builtins.str", "text": "'{\"a\": 1}'"}),
        ("x = 1", None),
        ("None", None),
        ("1 / 0", None),  # failed: no value
        ("raise SystemExit(0)", None),
    ],
)
def test_a_one_shot_run_has_its_final_value(
    workspace: pathlib.Path, mode: str, code: str, expected: dict[str, str] | None
) -> None:
    with Sandbox(workspace, execution=mode, require=_require()) as sb:
        assert sb.run(code).result == expected


def test_a_one_shot_runs_value_is_bounded_in_the_child(warm: Sandbox) -> None:
    result = warm.run("list(range(10**6))")
    assert result.result is not None
    assert len(result.result["text"]) <= 4000
    assert "..." in result.result["text"]


# -- the data-science stack -------------------------------------------------------------------
STACK_MISSING = [n for n in DATASCIENCE.extra_modules if importlib.util.find_spec(n) is None]


@needs_kernel
@pytest.mark.skipif(bool(STACK_MISSING), reason=f"no data-science stack: {STACK_MISSING}")
def test_a_dataframe_loaded_once_is_aggregated_in_later_calls(workspace: pathlib.Path) -> None:
    limits = Limits(memory_bytes=1024 * MiB, timeout_s=20.0)
    with (
        Sandbox(
            workspace,
            limits=limits,
            extra_modules=DATASCIENCE.extra_modules,
            preload=DATASCIENCE.preload,
            execution="warm",
            ready_children=0,
        ) as sb,
        sb.open_session("pandas") as s,
    ):
        load = (
            "import numpy as np\nimport pandas as pd\n"
            "df = pd.DataFrame({'k': np.arange(10**6) % 7, 'v': np.arange(10**6)})"
        )
        assert s.run(load).ok
        total = s.run("int(df['v'].sum())")
        assert total.result == {"type": "builtins.int", "text": str(sum(range(10**6)))}
        shown = s.run("df")
        assert shown.result is not None
        assert shown.result["type"] in ("pandas.DataFrame", "pandas.core.frame.DataFrame")
        assert len(shown.result["text"].splitlines()) <= 30  # display options: rows cut
        assert "[1000000 rows x 2 columns]" in shown.result["text"]
        array = s.run("np.arange(10**7)")
        assert array.result is not None
        assert len(array.result["text"]) < 200  # numpy's own summary
        grouped = s.run("df.groupby('k')['v'].count().tolist()")
        assert grouped.result is not None
        assert grouped.result["text"].startswith("[142858, 142857")


# -- sessions and the runs' workspace measurement ---------------------------------------------
@pytest.mark.parametrize(
    "write",
    [
        "open('made.txt', 'w').write('x')",
        "import pathlib\npathlib.Path('d').mkdir()\nopen('d/f.txt', 'w').write('x')",
        "open('kept.txt', 'a').write('more')",
    ],
)
def test_a_runs_kept_measurement_does_not_hide_a_session_calls_files(
    warm: Sandbox, workspace: pathlib.Path, write: str
) -> None:
    (workspace / "kept.txt").write_text("k")
    warm.invalidate_workspace_manifest()
    assert warm.run("pass").ok  # its end measurement is kept for the next run
    with warm.open_session() as s:
        assert s.run(write).ok
    result = warm.run("print('next')")
    assert result.ok
    assert result.changed_files == ()  # the session's writes are not this run's


@needs_kernel
@pytest.mark.parametrize("fd", ["os.close(fd)", "os.dup2(os.open('/dev/null', os.O_RDONLY), fd)"])
def test_a_call_that_breaks_its_result_pipe_ends_the_session_without_a_claim(
    monkeypatch: pytest.MonkeyPatch, workspace: pathlib.Path, fd: str
) -> None:
    # Kernel-only: the code reaches its descriptors. Every pipe from 3 on is broken (the
    # result pipe among them, and the code pipe).
    with (
        kernel_only_sandbox(monkeypatch, workspace, execution="warm", ready_children=0) as sb,
        sb.open_session() as s,
    ):
        code = (
            "import os, stat\n"
            "for fd in range(3, 64):\n"
            "    try:\n"
            "        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
            f"            {fd}\n"
            "    except OSError:\n"
            "        pass\n"
            "'claimed'"
        )
        result = s.run(code, timeout=3.0)
        # The child's frame cannot be written: it exits, and the parent sees the exit.
        assert result.result is None
        assert result.session_ended is True
        assert result.session_end_reason == "exit"


@needs_kernel
def test_a_call_that_closes_only_its_result_pipe_ends_the_session_at_once(
    monkeypatch: pytest.MonkeyPatch, workspace: pathlib.Path
) -> None:
    with (
        kernel_only_sandbox(monkeypatch, workspace, execution="warm", ready_children=0) as sb,
        sb.open_session() as s,
    ):
        code = (
            "import os\n"
            "for fd in range(3, 64):\n"
            "    try:\n"
            "        if os.get_blocking(fd) and os.fstat(fd).st_size == 0:\n"
            "            os.write(fd, b'')\n"  # a write end: the figure or the result pipe
            "            os.close(fd)\n"
            "    except OSError:\n"
            "        pass\n"
            "'claimed'"
        )
        result = s.run(code, timeout=5.0)
        assert result.result is None
        assert result.session_end_reason == "exit"  # by its exit, not at the deadline


# -- the workspace's coordinator ---------------------------------------------------------------


WAIT_FOR_GO = """
while True:
    try:
        open('go').close()
        break
    except FileNotFoundError:
        pass
"""


def test_a_session_is_parked_and_its_calls_count_as_runs(warm: Sandbox) -> None:
    """An exclusive operation (a restore) waits for a session call in progress, finds the
    session stopped between calls and leaves it stopped; a call waits while one holds it."""
    import threading

    from pysandbox import ExclusiveTimeout

    with warm.open_session("coordinated") as s:
        assert s.pid in warm.coordinator.parked
        # between calls: held at once, the session found stopped, never continued by it
        with warm.exclusive(wait_s=0) as report:
            assert report.already_stopped == (s.pid,) and report.stopped == ()
            assert threads_stopped(s.pid)
            (pathlib.Path(warm.workspace) / "restored.txt").write_text("written while held")
        assert threads_stopped(s.pid)
        assert s.run("print(open('restored.txt').read())").stdout == "written while held\n"
        # during a call: the exclusive operation cannot start
        started = threading.Event()
        outcome: list[object] = []

        def call() -> None:
            started.set()
            outcome.append(s.run(WAIT_FOR_GO, timeout=30))

        worker = threading.Thread(target=call)
        worker.start()
        started.wait()
        for _ in range(3000):  # the call counts once it holds its slot (a bound, not a timing)
            if warm.coordinator.runs_in_progress or outcome:
                break
            time.sleep(0.01)
        assert warm.coordinator.runs_in_progress == 1, outcome
        with pytest.raises(ExclusiveTimeout), warm.exclusive(wait_s=0):
            pass
        (pathlib.Path(warm.workspace) / "go").write_text("")
        worker.join()
        assert outcome and outcome[0].status is RunStatus.OK  # type: ignore[attr-defined]
        pid = s.pid
    assert pid not in warm.coordinator.parked
