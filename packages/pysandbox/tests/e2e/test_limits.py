"""rlimits and parent-enforced limits; each status of the DESIGN.md table is reached."""

from __future__ import annotations

import pathlib

import pytest

from pysandbox import Limits, RunStatus, Sandbox
from sandbox_helpers import KERNEL, raw_run

MiB = 1024 * 1024


def make(workspace: pathlib.Path, **limits: float) -> Sandbox:
    require = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()
    return Sandbox(workspace, require=require, limits=Limits(**limits))  # type: ignore[arg-type]


def _host_peak_bytes() -> int:
    """This process's own peak resident size (a spawned child's ``ru_maxrss`` starts there)."""
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def test_memory_limit(workspace: pathlib.Path) -> None:
    # Memory used up to the limit: the parent measures the peak near it (wait4).
    sb = make(workspace, memory_bytes=128 * MiB)
    floor = _host_peak_bytes()
    result = sb.run("blocks = []\nwhile True:\n    blocks.append(b'\\x01' * (1 << 20))\n")
    if sb.capabilities().execution["mode"] == "spawn" and floor >= 0.9 * 128 * MiB:
        # A spawned child's ru_maxrss starts from the host's own peak (vfork then exec keeps
        # the old hiwater mark): once the host peaked above the limit, a child's peak cannot
        # confirm the limit, and the run is an error naming it (as for a refused allocation).
        # Seen in a full suite whose test process passed 128 MiB (2026-12-04).
        assert result.status is RunStatus.ERROR, (floor, result.peak_memory_bytes)
        assert UNCONFIRMED_MEMORY in result.detail, result.detail
        return
    assert result.status is RunStatus.MEMORY_LIMIT, (floor, result.peak_memory_bytes, result.detail)
    assert result.exit_code == 1
    assert "MemoryError" in result.stderr
    assert 0.9 * 128 * MiB <= result.peak_memory_bytes < 2 * 128 * MiB
    assert result.detail.endswith(f"at the memory limit ({128 * MiB} bytes)")


UNCONFIRMED_MEMORY = f"the memory limit is {128 * MiB} bytes of data ({256 * MiB} of address space)"


def test_memory_limit_big_single_allocation(workspace: pathlib.Path) -> None:
    # Refused at once by RLIMIT_AS: nothing the parent can measure, so an error naming the limit.
    sb = make(workspace, memory_bytes=128 * MiB)
    result = sb.run("x = bytearray(4 << 30)\n")
    assert result.status is RunStatus.ERROR
    assert result.exit_code == 1
    assert UNCONFIRMED_MEMORY in result.detail


def test_user_raised_memory_error_is_an_error(workspace: pathlib.Path) -> None:
    # F10: a MemoryError the code raises itself claims nothing: the parent measured no peak.
    result = make(workspace, memory_bytes=128 * MiB).run("raise MemoryError('fake')")
    assert result.status is RunStatus.ERROR
    assert UNCONFIRMED_MEMORY in result.detail


def test_cpu_limit(workspace: pathlib.Path) -> None:
    sb = make(workspace, cpu_time_s=1, timeout_s=20)
    result = sb.run("while True:\n    pass\n")
    assert result.status is RunStatus.TIMEOUT
    assert result.signal in (9, 24)
    assert result.cpu_time_ms >= 500  # rusage granularity: SIGXCPU may land a tick early
    assert "CPU" in result.detail


def test_file_size_limit(workspace: pathlib.Path) -> None:
    sb = make(workspace, file_size_bytes=1 * MiB)
    code = "with open('big.bin', 'wb') as fh:\n    fh.write(b'x' * (2 << 20))\n"
    result = sb.run(code)
    assert result.status is RunStatus.ERROR
    assert "File too large" in result.stderr
    assert (workspace / "big.bin").stat().st_size <= MiB


def test_open_files_limit(workspace: pathlib.Path) -> None:
    sb = make(workspace, open_files=20)
    code = "fs = []\nfor i in range(50):\n    fs.append(open('f%d' % i, 'w'))\n"
    result = sb.run(code)
    assert result.status is RunStatus.ERROR
    assert "Too many open files" in result.stderr


def test_core_dumps_off_and_limits_in_force(workspace: pathlib.Path) -> None:
    sb = make(workspace, open_files=33, cpu_time_s=7)
    code = (
        "import resource\n"
        "names = ('RLIMIT_CORE', 'RLIMIT_NOFILE', 'RLIMIT_CPU', 'RLIMIT_DATA', 'RLIMIT_FSIZE')\n"
        "for name in names:\n"
        "    print(name, resource.getrlimit(getattr(resource, name)))\n"
    )
    result = raw_run(sb, code)
    assert result.stdout.splitlines() == [
        "RLIMIT_CORE (0, 0)",
        "RLIMIT_NOFILE (33, 33)",
        "RLIMIT_CPU (7, 8)",
        f"RLIMIT_DATA ({512 * MiB}, {512 * MiB})",
        f"RLIMIT_FSIZE ({64 * MiB}, {64 * MiB})",
    ]


def test_rlimits_stay_on_without_kernel_layers(workspace: pathlib.Path) -> None:
    sb = Sandbox(workspace, require=(), kernel_layers=False, limits=Limits(memory_bytes=96 * MiB))
    result = sb.run("x = bytearray(1 << 30)\n")
    assert result.status is RunStatus.ERROR
    assert "MemoryError" in result.stderr
    assert f"the memory limit is {96 * MiB} bytes" in result.detail


def test_output_limit_stdout(workspace: pathlib.Path) -> None:
    sb = make(workspace, output_bytes=10_000)
    result = sb.run("while True:\n    print('A' * 100)\n")
    assert result.status is RunStatus.OUTPUT_LIMIT
    assert result.stdout_truncated
    assert not result.stderr_truncated
    assert len(result.stdout.encode()) == 10_000
    assert set(result.stdout.replace("\n", "")) == {"A"}


def test_output_limit_stderr_traceback_flood(workspace: pathlib.Path) -> None:
    sb = make(workspace, output_bytes=64 * 1024)
    result = sb.run("raise RuntimeError('E' * 50_000_000)\n")
    assert result.status is RunStatus.OUTPUT_LIMIT
    assert result.stderr_truncated
    assert len(result.stderr.encode()) == 64 * 1024


def test_output_exactly_at_cap_is_not_truncated(workspace: pathlib.Path) -> None:
    sb = make(workspace, output_bytes=1000)
    result = sb.run("print('x' * 999)")
    assert result.status is RunStatus.OK
    assert not result.stdout_truncated
    assert len(result.stdout) == 1000


def test_disk_limit_bytes(workspace: pathlib.Path) -> None:
    sb = make(workspace, workspace_bytes=4 * MiB, file_size_bytes=2 * MiB, timeout_s=20)
    code = (
        "chunk = b'\\0' * (1 << 20)\n"
        "i = 0\n"
        "while True:\n"
        "    try:\n"
        "        with open('fill%d.bin' % i, 'wb') as fh:\n"
        "            while True:\n"
        "                fh.write(chunk)\n"
        "    except OSError:\n"
        "        i += 1\n"
    )
    result = sb.run(code)
    assert result.status is RunStatus.DISK_LIMIT


def test_disk_limit_files(workspace: pathlib.Path) -> None:
    sb = make(workspace, workspace_files=50, timeout_s=20)
    result = sb.run("i = 0\nwhile True:\n    open('f%d' % i, 'w').close()\n    i += 1\n")
    assert result.status is RunStatus.DISK_LIMIT


def test_disk_limit_checked_at_exit(workspace: pathlib.Path) -> None:
    sb = make(workspace, workspace_files=5)
    result = sb.run("for i in range(10):\n    open('f%d' % i, 'w').close()\n")
    assert result.status is RunStatus.DISK_LIMIT


@pytest.mark.parametrize("value", [0, -1])
def test_limits_must_be_positive(value: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        Limits(output_bytes=value)


def test_over_full_workspace_can_still_be_cleaned(workspace: pathlib.Path) -> None:
    for i in range(8):
        (workspace / f"old{i}").write_text("x")
    sb = make(workspace, workspace_files=5)
    result = sb.run("import pathlib\nfor p in pathlib.Path('.').glob('old*'):\n    p.unlink()\n")
    assert result.status is RunStatus.OK, result.detail
    assert list(workspace.iterdir()) == []
    # ...but it may not grow further. (Written outside a run: the sandbox is told, so that
    # the next run measures again instead of reusing the last run's manifest.)
    for i in range(8):
        (workspace / f"old{i}").write_text("x")
    sb.invalidate_workspace_manifest()
    result = sb.run("open('one-more', 'w').close()")
    if sb.capabilities().layer("landlock").active:  # creation refused by the kernel
        assert result.status is RunStatus.ERROR, result
        assert "PermissionError" in result.stderr
    else:  # stopped by the parent's poll
        assert result.status is RunStatus.DISK_LIMIT, result
    assert not (workspace / "one-more").exists() or result.status is RunStatus.DISK_LIMIT
    assert "over its limit" in result.detail


def test_overshoots_do_not_pile_up_across_runs(workspace: pathlib.Path) -> None:
    sb = make(workspace, workspace_bytes=1 * MiB, file_size_bytes=8 * MiB)
    # One write overshoots the limit between two polls: the run is stopped, its file stays.
    first = sb.run("open('f0.bin', 'wb').write(b'x' * (5 << 20))")
    assert first.status is RunStatus.DISK_LIMIT
    # The kill may land inside the one 5 MiB write (a poll sees it over the limit): what
    # stays is past the limit and at most what was written, and no later run may add to it.
    overshoot = (workspace / "f0.bin").stat().st_size
    assert 1 * MiB < overshoot <= 5 * MiB
    # The workspace is over its limit: later runs cannot grow any file.
    for i in range(1, 4):
        later = sb.run(f"open('f{i}.bin', 'wb').write(b'x' * (5 << 20))")
        assert later.status in (RunStatus.ERROR, RunStatus.DISK_LIMIT), later
        refused = ("File too large", "Permission denied")  # RLIMIT_FSIZE 0; Landlock
        assert any(r in later.stderr for r in refused) or later.status is RunStatus.DISK_LIMIT
        assert "over its limit" in later.detail
    total = sum(p.stat().st_size for p in workspace.iterdir())
    assert total == overshoot
    # Nor can they add entries (directories cost disk too).
    mkdirs = sb.run(
        "import pathlib\ni = 0\nwhile True:\n    pathlib.Path('d%d' % i).mkdir()\n    i += 1\n"
    )
    assert mkdirs.status in (RunStatus.ERROR, RunStatus.DISK_LIMIT), mkdirs
    if sb.capabilities().layer("landlock").active:
        assert not any(p.name.startswith("d") for p in workspace.iterdir())
    # Cleaning up is still possible, and afterwards runs write normally again.
    cleaned = sb.run("import pathlib\nfor p in pathlib.Path('.').glob('f*.bin'):\n    p.unlink()\n")
    assert cleaned.status is RunStatus.OK, cleaned
    after = sb.run("open('small.txt', 'w').write('ok')")
    assert after.status is RunStatus.OK
    assert after.detail == ""
    assert (workspace / "small.txt").read_text() == "ok"


def test_a_directory_that_cannot_be_listed_counts_as_over_every_limit(
    workspace: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from pysandbox import _disk

    (workspace / "a.txt").write_bytes(b"12345")
    hidden = workspace / "hidden"
    hidden.mkdir()
    (hidden / "big.bin").write_bytes(b"x" * 100)
    entries = (workspace / "a.txt", hidden, hidden / "big.bin")
    expected = sum(max(p.stat().st_size, p.stat().st_blocks * 512) for p in entries)
    assert _disk.workspace_usage(str(workspace), 100) == (expected, 3)
    # As the server's own user, code can mkdir(mode=0o300): the server then cannot list it
    # (root always can, so the denial is simulated here).
    real_scandir = os.scandir
    hidden_ino = hidden.stat().st_ino

    def scandir(fd: int) -> object:
        if os.fstat(fd).st_ino == hidden_ino:
            raise PermissionError(13, "Permission denied")
        return real_scandir(fd)

    monkeypatch.setattr(os, "scandir", scandir)
    size, _ = _disk.workspace_usage(str(workspace), 100)
    assert size == _disk.UNMEASURABLE_BYTES


def test_queued_runs_see_the_overshoot_of_the_run_before(workspace: pathlib.Path) -> None:
    import asyncio

    require = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()
    sb = Sandbox(
        workspace,
        require=require,
        limits=Limits(workspace_bytes=1 * MiB, file_size_bytes=8 * MiB),
        max_concurrent_runs=1,
    )

    async def main() -> list[RunStatus]:
        runs = [sb.arun(f"open('f{i}.bin', 'wb').write(b'x' * (5 << 20))") for i in range(5)]
        return [r.status for r in await asyncio.gather(*runs)]

    try:
        statuses = asyncio.run(main())
    finally:
        sb.close()
    assert all(s in (RunStatus.DISK_LIMIT, RunStatus.ERROR) for s in statuses), statuses
    # Queued runs were measured when their turn came: only the first could write (the kill
    # may land inside its one 5 MiB write, so the overshoot is past the limit, at most 5 MiB).
    sizes = sorted(p.stat().st_size for p in workspace.iterdir())
    assert 1 * MiB < sizes[-1] <= 5 * MiB
    assert sum(sizes[:-1]) == 0, sizes


def test_space_reserved_without_changing_the_size_counts(workspace: pathlib.Path) -> None:
    import ctypes
    import os

    from pysandbox import _disk

    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(workspace / "ghost", os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        keep_size = 1  # FALLOC_FL_KEEP_SIZE
        if libc.fallocate(fd, keep_size, ctypes.c_long(0), ctypes.c_long(8 * MiB)) != 0:
            pytest.skip(f"fallocate: errno {ctypes.get_errno()}")
    finally:
        os.close(fd)
    assert (workspace / "ghost").stat().st_size == 0
    size, count = _disk.workspace_usage(str(workspace), 10)
    assert count == 1
    assert size >= 8 * MiB
