"""Warm execution (fork server): same results as spawn, no state across runs, crash handling."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import marshal
import os
import pathlib
import signal
import subprocess
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

import pytest

from pysandbox import EXECUTION_ENV, Limits, RunResult, RunStatus, Sandbox
from pysandbox._launch import SpawnLauncher, ZygoteLauncher
from pysandbox.child import _zygote
from sandbox_helpers import KERNEL, NR, needs_kernel

MiB = 1024 * 1024
REQUIRE = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()
# 256 MiB: a spawned child's peak starts from this test process's (Reaped.maxrss_floor_bytes),
# which the suite's earlier tests raise past 128 MiB on some versions; spawn's memory_limit
# needs its peak above that floor.
LIMITS = Limits(memory_bytes=256 * MiB, output_bytes=4096, timeout_s=10.0)

pytestmark = pytest.mark.skipif(
    not hasattr(os, "pidfd_open"), reason="warm mode needs os.pidfd_open (Linux)"
)


def _make(tmp: pathlib.Path, name: str, execution: str) -> Sandbox:
    ws = tmp / name
    ws.mkdir()
    return Sandbox(ws, limits=LIMITS, require=REQUIRE, execution=execution)


@pytest.fixture
def pair(tmp_path: pathlib.Path) -> Iterator[tuple[Sandbox, Sandbox]]:
    spawn = _make(tmp_path, "spawn", "spawn")
    warm = _make(tmp_path, "warm", "warm")
    with spawn, warm:
        yield spawn, warm


@pytest.fixture
def warm(tmp_path: pathlib.Path) -> Iterator[Sandbox]:
    with _make(tmp_path, "ws", "warm") as sb:
        yield sb


def _fields(result: RunResult) -> dict[str, Any]:
    data = result.to_dict()
    for volatile in ("duration_ms", "cpu_time_ms", "peak_memory_bytes"):
        data.pop(volatile)
    return data


CASES = {
    "ok": ("import json, statistics\nprint(json.dumps(statistics.mean([1, 2, 4])))", None),
    "error": ("def f():\n    return 1 / 0\nf()", None),
    "exit_code": ("raise SystemExit(7)", None),
    "timeout": ("while True:\n    pass", 1.0),
    "memory_limit": (
        "b = []\ntry:\n    while True:\n        b.append(bytearray(1 << 20))\n"
        "except MemoryError:\n    del b\n    raise",
        None,
    ),
    "output_limit": ("while True:\n    print('x' * 1000)", None),
    "rejected": ("import subprocess", None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_result_fields_as_spawn(pair: tuple[Sandbox, Sandbox], case: str) -> None:
    spawn, warm = pair
    code, timeout = CASES[case]
    expected = spawn.run(code, timeout=timeout)
    got = warm.run(code, timeout=timeout)
    assert _fields(got) == _fields(expected)
    assert expected.status.value == case if case != "exit_code" else expected.exit_code == 7
    assert warm.capabilities().execution["mode"] == "warm"


UNCLOSED = {
    # csv.writer on a file never closed: its buffer reaches the disk only at finalization
    "module_level": (
        "import csv\n"
        "f = open('out.csv', 'w', newline='')\n"
        "csv.writer(f).writerows([['id', 'total'], [1, 10]])\n"
    ),
    "then_an_error": (
        "def work():\n"
        "    f = open('out.csv', 'w', newline='')\n"
        "    f.write('id,total\\r\\n1,10\\r\\n')\n"
        "    raise ValueError('after writing')\n"
        "work()\n"
    ),
}


@pytest.mark.parametrize("case", sorted(UNCLOSED))
def test_files_left_open_are_flushed_as_in_spawn(pair: tuple[Sandbox, Sandbox], case: str) -> None:
    for sandbox in pair:
        result = sandbox.run(UNCLOSED[case])
        assert result.status is (RunStatus.ERROR if case == "then_an_error" else RunStatus.OK)
        out = pathlib.Path(sandbox.workspace) / "out.csv"
        assert out.read_bytes() == b"id,total\r\n1,10\r\n", sandbox.capabilities().execution


def test_finalizers_keep_the_guarded_builtins(pair: tuple[Sandbox, Sandbox]) -> None:
    # At the end of a run a finalizer makes dataclasses exec into __main__'s globals; had the
    # namespace lost __builtins__, that exec would install the real ones for later lambdas.
    code = (
        "import dataclasses\n"
        "class Late:\n"
        "    x: int = 0\n"
        "class A:\n"
        "    def __del__(self, dc=dataclasses.dataclass, Late=Late, print=print):\n"
        "        try:\n"
        "            dc(Late)\n"
        "        except Exception:\n"
        "            pass\n"
        "        ga = (lambda: getattr)()\n"
        "        try:\n"
        "            ga(dc, '__glo' + 'bals__')\n"
        "            print('LEAKED')\n"
        "        except AttributeError:\n"
        "            print('guarded')\n"
        "keep = A()\n"
    )
    for sandbox in pair:
        result = sandbox.run(code)
        assert result.status is RunStatus.OK, result
        assert "LEAKED" not in result.stdout
        if sandbox.capabilities().execution["mode"] == "warm":
            assert result.stdout == "guarded\n"


def test_accounting_is_the_childs(warm: Sandbox) -> None:
    result = warm.run("x = bytearray(40 << 20)\nprint(len(x))")
    assert result.stdout == f"{40 << 20}\n"
    assert result.peak_memory_bytes >= 40 * MiB
    assert result.cpu_time_ms > 0


def test_no_state_leaks_across_runs(warm: Sandbox) -> None:
    first = warm.run(
        "import json, decimal, random\n"
        "json.dumps = lambda *a, **k: 'patched'\n"
        "decimal.getcontext().prec = 3\n"
        "random.seed(1)\n"
        "print(json.dumps([1]), decimal.Decimal(1) / 3, random.random())\n"
    )
    if first.status is RunStatus.REJECTED:  # the gate refuses patching a module: try without
        first = warm.run(
            "import decimal, random\ndecimal.getcontext().prec = 3\nrandom.seed(1)\n"
            "print('patched', decimal.Decimal(1) / 3, random.random())\n"
        )
    assert first.status is RunStatus.OK, first
    assert "patched" in first.stdout
    assert "0.333 " in first.stdout
    second = warm.run(
        "import json, decimal, random\n"
        "print(json.dumps([1]), decimal.getcontext().prec, decimal.Decimal(1) / 3)\n"
        "print(random.random())\n"
    )
    assert second.status is RunStatus.OK, second
    line1, line2 = second.stdout.splitlines()
    assert line1 == "[1] 28 0.3333333333333333333333333333"
    third = warm.run("import random\nprint(random.random())")
    # Each child reseeds: no two runs share the zygote's random state, nor run 1's seed.
    assert len({line2, third.stdout.strip(), first.stdout.split()[-1]}) == 3


def test_files_opened_by_a_run_are_not_inherited(warm: Sandbox) -> None:
    first = warm.run("fh = open('kept.txt', 'w')\nfh.write('x')\nprint(fh.fileno())")
    assert first.status is RunStatus.OK, first
    fd = int(first.stdout)
    second = warm.run(
        f"import io\ntry:\n    io.open({fd}, 'r')\nexcept OSError as e:\n    print(e.errno)"
    )
    assert second.stdout.strip() == "9"  # EBADF: nothing of run 1 exists in run 2


def _zygote_of(sb: Sandbox) -> _zygote.Zygote:
    zygote = sb._zygote
    assert zygote is not None
    return zygote


def test_killing_the_zygote_mid_run(warm: Sandbox) -> None:
    assert warm.run("print(1)").stdout == "1\n"
    zygote = _zygote_of(warm)
    first_pid = zygote.pid
    results: list[RunResult] = []
    worker = threading.Thread(target=lambda: results.append(warm.run("while True:\n    pass")))
    worker.start()
    while not any(sup.started for sup in list(warm._active)) and worker.is_alive():
        threading.Event().wait(0.01)
    zygote.kill()
    worker.join(30)
    assert not worker.is_alive()
    (result,) = results
    assert result.status is RunStatus.KILLED
    assert result.detail == "the warm zygote died during the run"
    again = warm.run("print(2)")
    assert again.status is RunStatus.OK
    assert again.stdout == "2\n"
    assert _zygote_of(warm).pid != first_pid


def test_close_stops_the_zygote(tmp_path: pathlib.Path) -> None:
    sb = _make(tmp_path, "ws", "warm")
    assert sb.run("print(1)").status is RunStatus.OK
    zygote = _zygote_of(sb)
    assert zygote.alive()
    sb.close()
    assert not zygote.alive()
    assert sb._zygote is None


def test_fallback_to_spawn_with_reason(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: _zygote.Zygote, timeout_s: float = 30.0) -> None:
        raise _zygote.ZygoteError("no fork server here")

    monkeypatch.setattr(_zygote.Zygote, "start", refuse)
    with _make(tmp_path, "ws", "warm") as sb:
        result = sb.run("print(3)")
        execution = sb.capabilities().execution
    assert result.stdout == "3\n"
    assert execution["requested"] == "warm"
    assert execution["mode"] == "spawn"
    assert execution["reason"] == "no fork server here"
    assert sb.capabilities().to_dict()["execution"]["mode"] == "spawn"


def test_warm_is_the_default_and_spawn_is_chosen_explicitly(tmp_path: pathlib.Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with Sandbox(ws, require=REQUIRE, execution="spawn") as sb:
        assert sb.run("print(1)").stdout == "1\n"
        assert sb.capabilities().execution["mode"] == "spawn"
    # In a fresh interpreter without PYSANDBOX_EXECUTION (the suite's spawn pass sets it).
    probe = (
        "import sys\n"
        "from pysandbox import Sandbox\n"
        "with Sandbox(sys.argv[1], require=tuple(sys.argv[2:])) as sb:\n"
        "    print(sb.run('print(1)').stdout.strip(), sb.capabilities().execution['mode'])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe, str(ws), *REQUIRE],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={k: v for k, v in os.environ.items() if k != EXECUTION_ENV},
    )
    assert proc.stdout.split() == ["1", "warm"]
    with pytest.raises(ValueError, match="execution must be one of"):
        Sandbox(ws, execution="fork")


def _raw_warm(sb: Sandbox, code: str, extra: tuple[str, ...]) -> RunResult:
    """Start the zygote without the Python-level guards (tests only), then run ``code``."""
    config = dataclasses.replace(sb._child_config(), rules=None)
    zygote = sb._warm_zygote(config)
    assert zygote is not None
    return sb._execute(config, code, 10.0, launcher=ZygoteLauncher(zygote))


@needs_kernel
def test_control_socket_is_unreachable(warm: Sandbox) -> None:
    code = (
        "import os, stat, socket\n"
        "fds = []\n"
        "for fd in range(4096):\n"
        "    try:\n"
        "        mode = os.fstat(fd).st_mode\n"
        "        fds.append((fd, stat.S_ISSOCK(mode), stat.S_ISFIFO(mode)))\n"
        "    except OSError:\n"
        "        pass\n"
        "print('fds', fds)\n"
        "for family in (socket.AF_UNIX, socket.AF_INET):\n"
        "    try:\n"
        "        socket.socket(family, socket.SOCK_STREAM)\n"
        "        print('socket allowed')\n"
        "    except PermissionError:\n"
        "        print('socket denied')\n"
    )
    result = _raw_warm(warm, code, ("os", "stat", "socket"))
    assert result.status is RunStatus.OK, result
    lines = result.stdout.splitlines()
    # Only stdio and the figure channel's write end (a pipe) are open (the Landlock ruleset
    # is closed before the code runs); no socket.
    fds = ast.literal_eval(lines[0].removeprefix("fds "))
    assert [fd for fd, _, _ in fds[:3]] == [0, 1, 2]
    assert [(sock, fifo) for _, sock, fifo in fds] == [(False, False)] + [(False, True)] * 3
    assert lines[1:] == ["socket denied", "socket denied"]


@needs_kernel
def test_warm_children_hold_no_capabilities(warm: Sandbox) -> None:
    code = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(sum(libc.prctl(23, cap, 0, 0, 0) == 1 for cap in range(64)))\n"  # CAPBSET_READ
        "print(libc.prctl(47, 1, 0, 0, 0))\n"  # PR_CAP_AMBIENT_IS_SET of cap 0
        "header = (ctypes.c_uint32 * 2)(0x20080522, 0)\n"
        "data = (ctypes.c_uint32 * 6)()\n"
        f"print(libc.syscall({NR['capget']}, header, data), list(data))\n"
    )
    result = _raw_warm(warm, code, ("ctypes",))
    assert result.status is RunStatus.OK, result
    assert result.stdout.splitlines() == ["0", "0", "0 [0, 0, 0, 0, 0, 0]"]


@needs_kernel
def test_connect_is_denied_by_seccomp(warm: Sandbox) -> None:
    code = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"rc = libc.syscall({NR['connect']}, 3, 0, 0)\n"  # connect(3, NULL, 0)
        "print(rc, ctypes.get_errno())\n"
    )
    result = _raw_warm(warm, code, ("ctypes",))
    assert result.status is RunStatus.OK, result
    assert result.stdout.split() == ["-1", "1"]  # EPERM from the filter, not EBADF


def test_runs_do_not_serialise_on_the_zygote(warm: Sandbox) -> None:
    assert warm.run("print(0)").status is RunStatus.OK
    zygote = _zygote_of(warm)
    config = warm._child_config()

    def launch(code: str) -> tuple[_zygote.WarmChild, int]:
        request = {
            "code": code,
            "code_object": compile(code, "<sandbox>", "exec"),
            "rlimits": list(config.rlimits),
            "env": {},
        }
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        setup_r, setup_w = os.pipe()
        figure_r, figure_w = os.pipe()
        try:
            handle = zygote.launch(marshal.dumps(request), out_w, err_w, setup_w, figure_w)
        finally:
            for fd in (out_w, err_w, setup_w, figure_w):
                os.close(fd)
        for fd in (err_r, setup_r, figure_r):
            os.close(fd)
        return handle, out_r

    slow, slow_out = launch("while True:\n    pass")
    fast, fast_out = launch("print(2)")
    try:
        with os.fdopen(fast_out, "rb") as fh:
            assert fh.read() == b"2\n"  # while the first child is still running
        fast_result = fast.reap()
        assert fast_result is not None
        assert os.WIFEXITED(fast_result[0])
        assert os.WEXITSTATUS(fast_result[0]) == 0
    finally:
        slow.kill_group()
        slow_result = slow.reap()
        os.close(slow_out)
    assert slow_result is not None
    assert os.WIFSIGNALED(slow_result[0])


def test_zygote_outlives_the_thread_that_started_it(warm: Sandbox) -> None:
    # PR_SET_PDEATHSIG follows the starting *thread*: the zygote must not depend on it.
    results: list[RunResult] = []
    starter = threading.Thread(target=lambda: results.append(warm.run("print(1)")))
    starter.start()
    starter.join()
    assert results[0].stdout == "1\n"
    pid = _zygote_of(warm).pid
    again = warm.run("print(2)")
    assert again.status is RunStatus.OK
    assert again.stdout == "2\n"
    assert _zygote_of(warm).pid == pid


def test_zygote_dead_before_the_request_is_retried(
    warm: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert warm.run("print(1)").status is RunStatus.OK
    zygote = _zygote_of(warm)
    dead_pid = zygote.pid
    zygote.kill()
    proc = zygote._proc
    assert proc is not None
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # dead, not yet reaped
    calls: list[int] = []
    real_alive = _zygote.Zygote.alive

    def stale_alive(self: _zygote.Zygote) -> bool:
        calls.append(1)
        return True if len(calls) == 1 else real_alive(self)

    monkeypatch.setattr(_zygote.Zygote, "alive", stale_alive)
    result = warm.run("print(3)")
    assert result.status is RunStatus.OK
    assert result.stdout == "3\n"
    assert _zygote_of(warm).pid != dead_pid


@contextlib.contextmanager
def _stopped_zygote(
    warm: Sandbox, monkeypatch: pytest.MonkeyPatch, *, wait_for_ready: bool = False
) -> Iterator[_zygote.Zygote]:
    """The sandbox's zygote, SIGSTOPped (it takes no request) for the block; launches wait 1 s.

    ``wait_for_ready``: stop it only once the ready children it was asked for were forked.
    """
    assert warm.run("print(1)").status is RunStatus.OK
    if wait_for_ready:
        assert len(warm._ready_pids()) == warm._pool.size > 0  # reads their fork reports
    stuck = _zygote_of(warm)
    assert stuck.pid is not None
    monkeypatch.setattr(_zygote.Zygote, "LAUNCH_TIMEOUT_S", 1.0)
    os.kill(stuck.pid, signal.SIGSTOP)
    try:
        yield stuck
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(stuck.pid, signal.SIGCONT)


@pytest.mark.parametrize("forked", [False, True], ids=["requests-pending", "ready-forked"])
def test_a_zygote_that_stops_answering_is_replaced(
    warm: Sandbox, monkeypatch: pytest.MonkeyPatch, forked: bool
) -> None:
    # ready-forked: the ready children (warm mode's default pool) were forked and reported
    # before the zygote stopped; a run that claims one must still not depend on the zygote.
    with _stopped_zygote(warm, monkeypatch, wait_for_ready=forked) as stuck:
        result = warm.run("print(4)")
    assert result.status is RunStatus.OK, result
    assert result.stdout == "4\n"
    assert _zygote_of(warm).pid != stuck.pid
    assert not stuck.alive()


def test_cancelling_a_run_that_was_retried_kills_the_retried_child(
    warm: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    import psutil

    started = pathlib.Path(warm.workspace) / "started"
    code = "import time\nopen('started', 'w').close()\nwhile True:\n    time.sleep(0.05)\n"

    async def main() -> None:
        task = asyncio.ensure_future(warm.arun(code, timeout=60))
        for _ in range(600):  # the first zygote times out; the retry's child starts
            if started.exists():
                break
            await asyncio.sleep(0.025)
        assert started.exists()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with _stopped_zygote(warm, monkeypatch) as stuck:
        asyncio.run(main())
    replacement = _zygote_of(warm)
    assert replacement.pid not in (None, stuck.pid)
    # Only ready children (when the pool is on) may remain: the run's child was killed.
    left = {p.pid for p in psutil.Process(replacement.pid).children()}
    assert left <= set(warm._ready_pids())


def test_environment_matches_spawn_mode(tmp_path: pathlib.Path) -> None:
    code = (
        "import os\nprint(sorted(os.environ))\n"
        "print(os.environ['TMPDIR'] == os.getcwd() != os.environ['HOME'])"
    )
    extra = ("os",)
    outputs = []
    for name, execution in (("s", "spawn"), ("w", "warm")):
        with _make(tmp_path, name, execution) as sb:
            config = sb._child_config()
            assert config.rules is not None
            allowed = config.rules.allowed | set(extra)
            config = dataclasses.replace(
                config, rules=dataclasses.replace(config.rules, allowed=allowed)
            )
            zygote = sb._warm_zygote(config) if execution == "warm" else None
            launcher = ZygoteLauncher(zygote) if zygote is not None else SpawnLauncher()
            result = sb._execute(config, code, 10.0, launcher=launcher)
            assert result.status is RunStatus.OK, result
            outputs.append(result.stdout)
    assert outputs[0] == outputs[1]
    assert "'PYSANDBOX_RUN'" in outputs[0]


def test_reseed_covers_every_listed_generator_with_fresh_material() -> None:
    """The one table: each loaded module's generator gets new OS material per call, in the form
    it takes (numpy's legacy seed: 32-bit words, all of them used); unloaded ones are skipped."""
    from pysandbox.child._generators import GLOBAL_GENERATORS, SEED_BYTES, reseed_global_generators

    seeds: dict[str, list[object]] = {}

    def module(name: str) -> types.SimpleNamespace:
        return types.SimpleNamespace(seed=lambda value: seeds.setdefault(name, []).append(value))

    table = {name: module(name) for name, _, _ in GLOBAL_GENERATORS}
    assert {name for name, _, _ in GLOBAL_GENERATORS} >= {"random", "numpy.random"}
    assert reseed_global_generators(table) == [name for name, _, _ in GLOBAL_GENERATORS]
    assert reseed_global_generators(table) == [name for name, _, _ in GLOBAL_GENERATORS]
    words = seeds["numpy.random"]
    assert all(isinstance(w, list) and len(w) == SEED_BYTES // 4 for w in words)
    assert all(0 <= x < 2**32 for w in words for x in w)  # type: ignore[attr-defined]
    assert words[0] != words[1]
    assert seeds["random"][0] != seeds["random"][1]
    assert reseed_global_generators({"random": table["random"]}) == ["random"]
