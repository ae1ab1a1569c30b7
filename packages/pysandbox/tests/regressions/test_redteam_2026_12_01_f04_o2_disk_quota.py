"""Disk a run holds: the one descriptor-based walker (F04) and unlinked open files (O2).

F04: data below an absolute path longer than ``PATH_MAX`` was skipped by the path-based walk.
O2: a file unlinked while open (or created without a name) keeps its blocks and no walk sees
it. Both as classes, in several spellings, in warm and spawn execution.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
import sys
from collections.abc import Iterator

import pytest

from pysandbox import Limits, RunStatus, Sandbox, _disk, runner
from pysandbox._disk import UNMEASURABLE_BYTES, workspace_usage
from sandbox_helpers import KERNEL, kernel_only_sandbox

# This regression starts real processes, so it is e2e too (tests/README.md).
pytestmark = pytest.mark.e2e

MiB = 1 << 20
PATH_MAX = 4096
REQUIRE = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()


def _deep(root: pathlib.Path, names: list[str], data: bytes) -> None:
    """Create ``root/names[0]/names[1]/.../data.bin`` through descriptors (no long path)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in names:
            os.mkdir(name, dir_fd=fd)
            nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        out = os.open("data.bin", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
        os.write(out, data)
        os.close(out)
    finally:
        os.close(fd)


# -- the walker ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "names",
    [
        ["d" * 250] * 20,  # long names: ~5000 characters below the root
        ["d" * 10] * 450,  # short names, deep: ~5000 characters, more levels than descriptors
    ],
    ids=["long-names", "deep"],
)
def test_data_below_path_max_is_counted(tmp_path: pathlib.Path, names: list[str]) -> None:
    _deep(tmp_path, names, b"x" * 100_000)
    try:
        assert len(str(tmp_path)) + sum(len(n) + 1 for n in names) > PATH_MAX
        size, entries = workspace_usage(str(tmp_path), 10_000)
        assert entries == len(names) + 1
        assert size >= 100_000 + len(names) * 4096 - 4096  # the file and every directory
    finally:
        # shutil.rmtree recurses once per level: remove it here, not in pytest's clean-up.
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(limit + 2 * len(names))
        try:
            shutil.rmtree(tmp_path / names[0])
        finally:
            sys.setrecursionlimit(limit)


def test_hard_links_count_once_and_symlinks_are_not_followed(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 50_000)
    (tmp_path / "sub").mkdir()
    for i in range(5):
        os.link(tmp_path / "a", tmp_path / "sub" / f"l{i}")
    (tmp_path / "usr").symlink_to("/usr")
    size, entries = workspace_usage(str(tmp_path), 100)
    one = _disk.allocated((tmp_path / "a").stat())
    sub = _disk.allocated((tmp_path / "sub").stat())
    link = _disk.allocated(os.lstat(tmp_path / "usr"))
    assert (size, entries) == (one + sub + link, 8)


def test_an_entry_that_cannot_be_opened_counts_as_over(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "f").write_bytes(b"x")
    real_open = os.open

    def refuse(path: str, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if path == "locked":
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", refuse)
    assert workspace_usage(str(tmp_path), 100)[0] == UNMEASURABLE_BYTES


def test_a_missing_workspace_counts_as_over(tmp_path: pathlib.Path) -> None:
    assert workspace_usage(str(tmp_path / "gone"), 100)[0] == UNMEASURABLE_BYTES


# -- runs -----------------------------------------------------------------------------------
LIMITS = Limits(workspace_bytes=2 * MiB, file_size_bytes=8 * MiB, timeout_s=15)


@pytest.fixture(params=["warm", "spawn"])
def sandbox(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[Sandbox]:
    ws = tmp_path / "ws"
    ws.mkdir()
    with Sandbox(
        ws,
        require=REQUIRE,
        limits=LIMITS,
        execution=request.param,
    ) as sb:
        yield sb


@pytest.fixture(params=["warm", "spawn"])
def kernel_only(
    request: pytest.FixtureRequest, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Sandbox]:
    """The testing kernel-only mode: native payloads meet only the kernel layers and limits."""
    ws = tmp_path / "ws"
    ws.mkdir()
    sb = kernel_only_sandbox(
        monkeypatch, ws, require=REQUIRE, limits=LIMITS, execution=request.param
    )
    with sb:
        yield sb


#: F04's spellings: plain allowed code (pathlib), each writing 6 MiB below an absolute path of
#: more than PATH_MAX characters whose relative path is below it.
F04 = {
    "long-names": "n = 200",
    "short-names": "n = 12",
    "one-long-then-short": "n = 250 if not parts else 16",
}
F04_BODY = """
import pathlib
# The relative path stays below PATH_MAX (so open() works), the absolute one passes it.
target = 4100 - len(str(pathlib.Path.cwd()))
parts = []
used = 0
while used < target:
    {spelling}
    k = min(n, target - used)
    parts.append("d" * k)
    used += k + 1
deep = pathlib.Path(*parts)
deep.mkdir(parents=True)
for name in "abc":
    with open(str(deep / name), "wb") as fh:
        for _ in range(2):
            fh.write(b"x" * (1 << 20))
print("written")
"""


@pytest.mark.parametrize("spelling", sorted(F04))
def test_f04_data_below_path_max_is_over_the_limit(sandbox: Sandbox, spelling: str) -> None:
    code = F04_BODY.format(spelling=F04[spelling])
    result = sandbox.run(code)
    assert result.status is RunStatus.DISK_LIMIT, result
    # The next run sees it too (the end-of-run manifest, or a walk): it is shrink-only.
    later = sandbox.run("print(1)")
    assert "over its limit" in later.detail
    assert workspace_usage(sandbox.workspace, 100_000)[0] > LIMITS.workspace_bytes


#: O2's spellings: 6 MiB held in files with no name, then a pause for the parent's polls. The
#: AST gate would refuse some of these modules; they run in the kernel-only testing mode.
O2 = {
    "unlinked-after-open": (
        "import os\nf = open('h.bin', 'wb')\nos.unlink('h.bin')\n"
        "for _ in range(6):\n    f.write(b'x' * (1 << 20))\nf.flush()\n"
    ),
    "tempfile": (
        "import tempfile\nf = tempfile.TemporaryFile(dir='.')\n"
        "for _ in range(6):\n    f.write(b'x' * (1 << 20))\nf.flush()\n"
    ),
    "o-tmpfile": (
        "import os\nfd = os.open('.', os.O_TMPFILE | os.O_RDWR, 0o600)\n"
        "os.posix_fallocate(fd, 0, 6 << 20)\n"
    ),
    "mapped-then-closed": (
        "import mmap, os\nfd = os.open('m.bin', os.O_CREAT | os.O_RDWR, 0o600)\n"
        "os.posix_fallocate(fd, 0, 6 << 20)\nm = mmap.mmap(fd, 4096)\n"
        "os.close(fd)\nos.unlink('m.bin')\n"
    ),
}


@pytest.mark.parametrize("spelling", sorted(O2))
def test_o2_unlinked_open_files_count(kernel_only: Sandbox, spelling: str) -> None:
    code = O2[spelling] + "import time\ntime.sleep(3)\nprint('unnoticed')\n"
    result = kernel_only.run(code)
    assert result.status is RunStatus.DISK_LIMIT, result
    assert "unnoticed" not in result.stdout
    assert workspace_usage(kernel_only.workspace, 100)[1] == 0  # nothing with a name was left


def test_an_unlinked_file_within_the_limit_is_fine(kernel_only: Sandbox) -> None:
    code = (
        "import tempfile, time\nf = tempfile.TemporaryFile(dir='.')\nf.write(b'x' * 100000)\n"
        "f.flush()\ntime.sleep(0.3)\nprint('done')\n"
    )
    result = kernel_only.run(code)
    assert (result.status, result.stdout) == (RunStatus.OK, "done\n")


# -- the manifest ---------------------------------------------------------------------------
@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count the start-of-run walks (the runner's own; the supervisor's polls are apart)."""
    calls: list[str] = []
    real = _disk.workspace_usage

    def counting(
        root: str, max_entries: int, listing: _disk.Listing | None = None
    ) -> tuple[int, int]:
        calls.append(root)
        return real(root, max_entries, listing)

    monkeypatch.setattr(runner, "workspace_usage", counting)
    return calls


def test_a_run_starts_from_the_manifest_of_the_run_before(
    sandbox: Sandbox, walks: list[str]
) -> None:
    assert sandbox.run("open('a', 'w').write('x' * 10)").ok
    assert len(walks) == 1  # the first run walks
    assert sandbox.run("print(open('a').read())").stdout == "x" * 10 + "\n"
    assert len(walks) == 1  # the second starts from the first one's end
    # A change outside a run: the caller says so, and the next run walks again.
    pathlib.Path(sandbox.workspace, "big").write_bytes(b"x" * (3 * MiB))
    sandbox.invalidate_workspace_manifest()
    over = sandbox.run("print(1)")
    assert len(walks) == 2
    assert "over its limit" in over.detail


def test_a_run_that_was_stopped_leaves_no_manifest(sandbox: Sandbox, walks: list[str]) -> None:
    assert sandbox.run("while True:\n    pass", timeout=0.5).status is RunStatus.TIMEOUT
    assert sandbox.run("print(1)").ok
    assert len(walks) == 2


def test_overlapping_runs_leave_no_manifest(
    tmp_path: pathlib.Path, walks: list[str], execution: str
) -> None:
    # Each run waits until the other has started: they overlap for certain.
    meet = (
        "import pathlib, time\npathlib.Path('{me}').touch()\n"
        "while not pathlib.Path('{other}').exists():\n    time.sleep(0.01)\n"
    )
    with Sandbox(tmp_path, require=REQUIRE, execution=execution, max_concurrent_runs=2) as sb:

        async def both() -> None:
            first = sb.arun(meet.format(me="a", other="b"), timeout=5)
            second = sb.arun(meet.format(me="b", other="a"), timeout=5)
            results = await asyncio.gather(first, second)
            assert all(r.ok for r in results), results

        asyncio.run(both())
        assert len(walks) == 2
        assert sb.run("print(1)").ok
        assert len(walks) == 3  # neither of the overlapping runs left one


@pytest.fixture(params=["warm", "spawn"])
def execution(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("persistent", [False, True])
def test_descriptors_that_stay_unreadable_count_as_over(
    sandbox: Sandbox, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, persistent: bool
) -> None:
    # A child's /proc entries are briefly root's while its memory or credentials change;
    # unreadable poll after poll (a child that made itself non-dumpable), they fail closed.
    from pysandbox import _supervisor

    polls: list[int] = []

    def unreadable(pid: int, root: str, device: int, bound: int) -> int:
        polls.append(pid)
        if len(polls) == 4:  # the run goes on until the watch has polled past the blip
            (tmp_path / "ws" / "polled").write_text("4")  # the fixture's workspace
        return UNMEASURABLE_BYTES if persistent or len(polls) == 1 else 0

    monkeypatch.setattr(_supervisor, "unlinked_bytes", unreadable)
    # No clock: the run waits for the fourth poll (a loaded machine polls less often).
    waits = (
        "import time\n"
        "for _ in range(600):\n"
        "    try:\n"
        "        open('polled').close()\n"
        "        break\n"
        "    except FileNotFoundError:\n"
        "        time.sleep(0.05)\n"
        "print('done')"
    )
    result = sandbox.run(waits, timeout=sandbox.limits.timeout_s)
    if persistent:
        assert result.status is RunStatus.DISK_LIMIT, result
        assert len(polls) == 3
    else:
        assert (result.status, result.stdout) == (RunStatus.OK, "done\n")
        assert len(polls) > 3
