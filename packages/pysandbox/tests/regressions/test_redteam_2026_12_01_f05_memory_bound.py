"""F05 as a class: a run cannot hold more memory than its bound, whatever it holds it in.

The bound of a run's memory is ``RLIMIT_AS`` (twice ``memory_bytes``; SECURITY.md, "Memory").
memfd pages are not counted by ``RLIMIT_AS``/``RLIMIT_DATA`` (they need not be mapped): F05
held 720 MiB under a 512 MiB limit. Each payload here commits memory chunk after chunk in one
of the ways a process can hold it and prints how much it committed; the test checks that
effect (never more than the bound), not an errno. Native payloads, without the AST gate or the
Python guards (the kernel-only testing mode, warm and spawn), so only the kernel layers and the
rlimits stand in the way.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from pysandbox import Limits, RunStatus, Sandbox
from sandbox_helpers import KERNEL, LIBC_PRELUDE, kernel_only_sandbox, needs_kernel

# This regression starts real processes, so it is e2e too (tests/README.md).
pytestmark = pytest.mark.e2e

MiB = 1 << 20
LIMITS = Limits(memory_bytes=64 * MiB, file_size_bytes=32 * MiB, open_files=24)
BOUND = 2 * LIMITS.memory_bytes  # RLIMIT_AS
CHUNK = 16 * MiB

COMMIT = f"""
import mmap
held = 0
fds = []
def commit(fd, how):
    if how == "fallocate":
        os.posix_fallocate(fd, 0, {CHUNK})
    elif how == "write":
        block = b"x" * (1 << 20)
        for _ in range({CHUNK} >> 20):
            os.write(fd, block)
    elif how == "mmap":
        os.ftruncate(fd, {CHUNK})
        m = mmap.mmap(fd, {CHUNK})
        for at in range(0, {CHUNK}, 4096):
            m[at] = 1
        m.close()  # unmapped: no longer in the address space, still in the file
"""
LOOP = f"""
for i in range(64):
    if held > {BOUND + CHUNK}:
        break  # proven: no need to take more of the machine
    try:
        fd = make(i)
        fds.append(fd)
        commit(fd, HOW)
    except (OSError, MemoryError, ValueError) as exc:
        print("stopped:", type(exc).__name__, exc)
        break
    held += {CHUNK}
print("held", held)
"""

MEMFD = {
    "os.memfd_create": "def make(i):\n    return os.memfd_create('m%d' % i)\n",
    "syscall": (
        "def make(i):\n"
        "    rc, err = sc('memfd_create', ctypes.c_char_p(b'm%d' % i), 0)\n"
        "    if rc < 0:\n"
        "        raise OSError(err, os.strerror(err))\n"
        "    return rc\n"
    ),
}


def _held(stdout: str) -> int:
    lines = [line for line in stdout.splitlines() if line.startswith("held ")]
    assert lines, stdout
    return int(lines[-1].split()[1])


@pytest.fixture(params=["warm", "spawn"])
def sandbox(
    request: pytest.FixtureRequest, workspace: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Sandbox]:
    """The kernel-only testing mode (no AST gate, no Python guards), warm and spawn."""
    sb = kernel_only_sandbox(
        monkeypatch, workspace, require=(), limits=LIMITS, execution=request.param
    )
    with sb:
        yield sb


@needs_kernel
@pytest.mark.parametrize("how", ["fallocate", "write", "mmap"])
@pytest.mark.parametrize("make", sorted(MEMFD))
def test_memfd_pages_stay_within_the_bound(sandbox: Sandbox, make: str, how: str) -> None:
    code = LIBC_PRELUDE + COMMIT + MEMFD[make] + f"HOW = {how!r}\n" + LOOP
    result = sandbox.run(code)
    assert _held(result.stdout) <= BOUND, result


@needs_kernel
def test_shared_anonymous_mappings_stay_within_the_bound(sandbox: Sandbox) -> None:
    code = (
        LIBC_PRELUDE
        + COMMIT
        + (
            "maps = []\n"
            "def make(i):\n"
            f"    m = mmap.mmap(-1, {CHUNK}, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)\n"
            f"    for at in range(0, {CHUNK}, 4096):\n"
            "        m[at] = 1\n"
            "    maps.append(m)\n"
            "    return -1\n"
            "def commit(fd, how):\n"
            "    pass\n"
            "HOW = 'mapped'\n"
        )
        + LOOP
    )
    result = sandbox.run(code)
    assert "stopped: " in result.stdout, result
    assert _held(result.stdout) <= BOUND


@needs_kernel
def test_posix_shared_memory_is_out_of_reach(sandbox: Sandbox) -> None:
    name = pathlib.Path("/dev/shm") / f"pysandbox-test-{id(sandbox)}"
    code = (
        LIBC_PRELUDE
        + COMMIT
        + (
            "def make(i):\n"
            f"    return os.open('{name}.%d' % i, os.O_CREAT | os.O_RDWR, 0o600)\n"
            "HOW = 'fallocate'\n"
        )
        + LOOP
    )
    try:
        result = sandbox.run(code)
    finally:
        for leftover in name.parent.glob(name.name + ".*"):
            leftover.unlink()
    if sandbox.capabilities().layer("landlock").active:
        assert "stopped: PermissionError" in result.stdout, result
    assert _held(result.stdout) <= BOUND


@needs_kernel
def test_socket_buffers_stay_within_the_bound(sandbox: Sandbox) -> None:
    # 470 MiB were held this way under a 64 MiB limit on a host whose wmem_max is 4 MiB
    # (the default of 208 KiB would give ~26 MiB); without setsockopt a pair holds ~0.4 MiB.
    code = (
        "import socket\nheld = 0\nkeep = []\n"
        f"for i in range({(LIMITS.open_files - 6) // 2}):\n"
        "    a, b = socket.socketpair()\n"
        "    keep.append((a, b))\n"
        "    for s in (a, b):\n"
        "        try:\n"
        "            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 30)\n"
        "        except OSError:\n"
        "            pass\n"
        "        s.setblocking(False)\n"
        "        try:\n"
        "            while True:\n"
        "                held += s.send(b'x' * 65536)\n"
        "        except BlockingIOError:\n"
        "            pass\n"
        "print('held', held)\n"
    )
    result = sandbox.run(code)
    if pathlib.Path("/proc/sys/net/core/wmem_max").read_text().strip() == "212992":
        pytest.skip("the host's default wmem_max keeps socket buffers small: nothing to show")
    assert _held(result.stdout) <= BOUND, result


@pytest.mark.parametrize("execution", ["warm", "spawn"])
def test_a_refused_single_allocation_is_an_error_naming_the_limit(
    workspace: pathlib.Path, execution: str
) -> None:
    """The status comes from what the parent measured (no peak near the limit): ``error``; the
    detail names the limit, why no peak was seen and the Limits field that raises it."""
    require = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()
    with Sandbox(workspace, require=require, execution=execution) as sb:
        limit = sb.limits.memory_bytes
        for allocation in ("bytearray(10**10)", "b'x' * (10**10)", "[0] * (10**10)"):
            result = sb.run(f"x = {allocation}\n")
            assert result.status is RunStatus.ERROR, (allocation, result.status, result.stderr)
            assert "MemoryError" in result.stderr
            assert f"the memory limit is {limit} bytes of data ({2 * limit} of address " in (
                result.detail
            )
            assert "a single allocation larger than the limit is refused at once" in result.detail
            assert result.detail.endswith("raise the limit (Limits.memory_bytes)")
