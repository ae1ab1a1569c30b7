"""Parent supervision: clean environment and descriptors, tree kill, no zombies, wait4."""

from __future__ import annotations

import errno
import os
import pathlib
import threading
import time
from typing import Any

import psutil
import pytest

from pysandbox import Limits, RunResult, RunStatus, Sandbox, _bootstrap, _home
from pysandbox._disk import workspace_usage
from pysandbox._supervisor import sweep_processes
from pysandbox.runner import RUN_ENV
from sandbox_helpers import KERNEL, raw_run

MiB = 1024 * 1024


def _is_zygote(proc: psutil.Process) -> bool:
    try:
        cmdline = proc.cmdline()
        # The zygote runs the one bootstrap stub with two descriptors (payload, control).
        return _bootstrap.STUB in cmdline and len(cmdline) == cmdline.index(_bootstrap.STUB) + 3
    except psutil.Error:
        return False


def no_children_left() -> bool:
    """No process of a run is left (a warm sandbox's zygote itself stays until close())."""
    return not [p for p in psutil.Process().children(recursive=True) if not _is_zygote(p)]


def test_environment_is_allow_listed(
    python_only: Sandbox, monkeypatch: pytest.MonkeyPatch, workspace: pathlib.Path
) -> None:
    monkeypatch.setenv("SANDBOX_CANARY_SECRET", "s3cr3t-value")
    monkeypatch.setenv("CANARY_PROXY", "http://x.invalid:9")
    monkeypatch.setenv("PYTHONPATH", str(workspace))
    result = raw_run(python_only, "import os\nprint(sorted(os.environ.items()))")
    env = dict(eval(result.stdout))
    allowed = {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "TZ", "PYSANDBOX_RUN", *RUN_ENV}
    assert set(env) <= allowed
    assert {name: env[name] for name in RUN_ENV} == dict(RUN_ENV)
    assert env["HOME"] == _home.home_dir() != str(workspace)  # empty, read-only, not the workspace
    assert env["TMPDIR"] == str(workspace)
    assert "s3cr3t" not in result.stdout
    assert "invalid" not in result.stdout


def test_descriptors_stdin_cwd_and_path(python_only: Sandbox, workspace: pathlib.Path) -> None:
    code = (
        "import os, sys\n"
        "import stat\n"
        "fds = sorted(int(fd) for fd in os.listdir('/proc/self/fd'))\n"
        "print(fds[:4])\n"
        "channel = fds[4:]\n"
        "print(len(channel), [stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in channel])\n"
        "try:\n"
        "    os.read(channel[0], 1)\n"
        "except OSError as exc:\n"
        "    print('not readable', exc.errno)\n"
        "print(os.getcwd())\n"
        "print(os.readlink('/proc/self/fd/0'))\n"
        "print(os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid())\n"
        "print(sys.flags.isolated, sys.flags.no_site)\n"
        "print(any(p in ('', '.', os.getcwd()) for p in sys.path))\n"
    )
    result = raw_run(python_only, code, landlock=False, seccomp=False)
    lines = result.stdout.splitlines()
    assert lines[0] == "[0, 1, 2, 3]"  # 3 is the listdir descriptor itself
    # And the figure channel's write end (pysandbox._figures): a pipe to the parent, no more.
    assert lines[1] == "1 [True]"
    assert lines[2] == f"not readable {errno.EBADF}"
    del lines[1:3]
    assert lines[1] == str(workspace)
    assert lines[2] == "/dev/null"
    assert lines[3] == "True True"
    assert lines[4] == "1 1"
    assert lines[5] == "False"


def test_stdin_is_empty(sandbox: Sandbox) -> None:
    code = "try:\n    input()\nexcept EOFError:\n    print('eof')\n"
    result = raw_run(sandbox, code, python_guards=True)
    assert result.stdout == "eof\n"


DAEMON = """
import os, time
pid = os.fork()
if pid == 0:
    if os.fork() == 0:
        os.setsid()
        time.sleep(3)
        open('LATE', 'w').write('x')
        os._exit(0)
    os._exit(0)
os.waitpid(pid, 0)
if os.fork() == 0:
    time.sleep(3)
    open('LATE2', 'w').write('x')
    os._exit(0)
print('spawned', flush=True)
{tail}
"""


@pytest.mark.parametrize("tail", ["", "time.sleep(30)"])
@pytest.mark.slow
def test_tree_kill_catches_daemons(
    python_only: Sandbox, workspace: pathlib.Path, tail: str
) -> None:
    # Kernel layers and Python guards off: the process *can* fork here, so the sweep
    # (session id and environment marker) is what has to find the double-forked daemon.
    code = DAEMON.format(tail=tail)
    result = raw_run(python_only, code, landlock=False, seccomp=False, timeout=1.5)
    assert result.stdout == "spawned\n"
    assert result.status is (RunStatus.TIMEOUT if tail else RunStatus.OK)
    time.sleep(3.5)
    assert not (workspace / "LATE").exists()
    assert not (workspace / "LATE2").exists()
    assert no_children_left()


def test_no_zombies_after_many_runs(sandbox: Sandbox) -> None:
    for _ in range(5):
        sandbox.run("print(1)")
    sandbox.run("while True:\n    pass\n", timeout=0.5)
    me = psutil.Process()
    assert [p for p in me.children(recursive=True) if p.status() == psutil.STATUS_ZOMBIE] == []
    assert no_children_left()


def test_concurrent_runs_do_not_mix_accounting(tmp_path: pathlib.Path) -> None:
    require = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    big = Sandbox(tmp_path / "a", require=require)
    small = Sandbox(tmp_path / "b", require=require)
    results = {}

    def go(name: str, sb: Sandbox, code: str) -> None:
        results[name] = sb.run(code)

    threads = [
        threading.Thread(
            target=go,
            args=(
                "big",
                big,
                "x = bytearray(200 << 20)\nfor i in range(0, len(x), 4096):\n"
                "    x[i] = 1\ni = 0\nwhile i < 3_000_000:\n    i += 1\nprint('big')",
            ),
        ),
        threading.Thread(target=go, args=("small", small, "print('small')")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["big"].stdout == "big\n"
    assert results["small"].stdout == "small\n"
    assert results["big"].peak_memory_bytes > 200 * MiB
    # Mixed accounting would give the small run the big one's 200 MiB. (A spawned child's peak
    # starts from the parent's resident size, which the data-science tests raise above 100 MiB
    # in this process: see Reaped.maxrss_floor_bytes.)
    assert results["small"].peak_memory_bytes < 200 * MiB
    assert results["big"].cpu_time_ms > results["small"].cpu_time_ms


def test_close_kills_running(workspace: pathlib.Path) -> None:
    sb = Sandbox(workspace, require=())
    out: dict[str, RunResult] = {}
    t = threading.Thread(target=lambda: out.setdefault("r", sb.run("while True:\n    pass\n")))
    t.start()
    time.sleep(0.5)
    sb.close()
    t.join(5)
    assert not t.is_alive()
    assert out["r"].status is RunStatus.KILLED
    assert no_children_left()


def test_workspace_usage(tmp_path: pathlib.Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"x" * 1000)
    (tmp_path / "link").symlink_to("/etc")
    size, count = workspace_usage(str(tmp_path), 100)
    assert count == 3
    assert size >= 1000
    assert workspace_usage(str(tmp_path), 1)[1] == 2


def test_sweep_finds_by_marker(tmp_path: pathlib.Path) -> None:
    import subprocess
    import sys

    env = {**os.environ, "PYSANDBOX_RUN": "feedface"}
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], env=env, start_new_session=True
    )
    try:
        time.sleep(0.2)
        assert sweep_processes(-1, "PYSANDBOX_RUN=feedface") == 1
        assert not psutil.pid_exists(proc.pid) or proc.poll() is not None
    finally:
        proc.kill()
        proc.wait()


def test_output_is_decoded_with_backslashreplace(python_only: Sandbox) -> None:
    result = raw_run(python_only, "import sys\nsys.stdout.buffer.write(b'ok\\xff\\n')")
    assert result.stdout == "ok\\xff\n"


def test_limits_object_is_used(workspace: pathlib.Path) -> None:
    sb = Sandbox(workspace, require=(), limits=Limits(timeout_s=2.5))
    assert sb.limits.timeout_s == 2.5
    assert sb.workspace == str(workspace)


def test_child_reaped_elsewhere_is_reported_not_invented(
    python_only: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_wait4 = os.wait4

    def foreign_reaper(pid: int, options: int) -> tuple[int, int, Any]:
        real_wait4(pid, options)  # as a waitpid(-1) SIGCHLD handler elsewhere would
        raise ChildProcessError(10, "No child processes")

    monkeypatch.setattr(os, "wait4", foreign_reaper)
    result = python_only.run("print(1)")
    monkeypatch.undo()
    if python_only.capabilities().execution["mode"] == "warm":
        # The zygote, not this process, is the child's parent: a reaper here cannot steal it.
        assert result.status is RunStatus.OK
        assert result.stdout == "1\n"
        assert no_children_left()
        return
    assert result.status is RunStatus.KILLED
    assert "reaped" in result.detail
    assert no_children_left()
