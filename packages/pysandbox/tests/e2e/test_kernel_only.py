"""The testing kernel-only mode, and native payloads against the kernel layers in it.

``Sandbox(_testing_kernel_only=True)`` (with ``PYSANDBOX_TESTING_KERNEL_ONLY=1``) runs code
without the AST gate and the Python-level guards, so ctypes payloads reach the kernel layers
(Landlock, seccomp, rlimits) exactly as code past a Python-level bypass would: these tests
cannot pass by accident once the Python gadgets are closed.
"""

from __future__ import annotations

import ctypes
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import pytest

from pysandbox import RunStatus, Sandbox, default_execution
from sandbox_helpers import LIBC_PRELUDE, needs_kernel

ENV = "PYSANDBOX_TESTING_KERNEL_ONLY"
_IPC_CREAT, _IPC_RMID = 0o1000, 0
_SHM_KEY = 0x5EAA  # F03b's key; a fresh segment per test run (removed afterwards)


def test_refused_without_the_environment_variable(
    workspace: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(ValueError, match=ENV):
        Sandbox(workspace, _testing_kernel_only=True)
    monkeypatch.setenv(ENV, "yes")
    with pytest.raises(ValueError, match=ENV):
        Sandbox(workspace, _testing_kernel_only=True)
    monkeypatch.setenv(ENV, "1")
    with pytest.raises(ValueError, match="kernel_layers=True"):
        Sandbox(workspace, _testing_kernel_only=True, kernel_layers=False)


@pytest.fixture
def kernel_only(workspace: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    monkeypatch.setenv(ENV, "1")
    sb = Sandbox(workspace, _testing_kernel_only=True)
    monkeypatch.delenv(ENV)  # read at construction only
    with sb:
        yield sb


@needs_kernel
def test_reported_in_capabilities_and_every_result(kernel_only: Sandbox) -> None:
    caps = kernel_only.capabilities()
    assert caps.layer("testing_kernel_only").active
    for name in ("ast_gate", "open_guard", "audit_hook", "import_guard", "attribute_guard"):
        assert not caps.layer(name).active, name
    assert caps.layer("landlock").active and caps.layer("seccomp").active
    result = kernel_only.run("import ctypes\nprint(ctypes.sizeof(ctypes.c_long))")
    assert (result.status, result.stdout) == (RunStatus.OK, "8\n"), result.stderr
    assert "testing_kernel_only" in result.layers
    assert {"landlock", "seccomp", "rlimits"} <= set(result.layers)
    assert "ast_gate" not in result.layers and "audit_hook" not in result.layers


def _native(sb: Sandbox, body: str) -> list[str]:
    result = sb.run(LIBC_PRELUDE + body)
    assert result.status is RunStatus.OK, result.stderr
    assert "testing_kernel_only" in result.layers
    return result.stdout.splitlines()


#: One native call per refused family, with the errno the allow-list gives it.
FAMILIES = [
    ("unlisted", "sc('capset', 0, 0)", "ENOSYS"),
    ("fallback_clone3", "sc('clone3', 0, 0)", "ENOSYS"),
    ("sysv_shm", "sc('shmget', 0, 4096, 0o1600)", "EPERM"),
    ("sysv_msg", "sc('msgget', 0, 0o1600)", "EPERM"),
    ("sysv_sem", "sc('semget', 0, 1, 0o1600)", "EPERM"),
    ("mqueue", "sc('mq_open', ctypes.c_char_p(b'q'), 0o102, 0o600, 0)", "EPERM"),
    ("memfd", "sc('memfd_create', ctypes.c_char_p(b'm'), 0)", "EPERM"),
    ("memfd_secret", "sc('memfd_secret', 0)", "EPERM"),
    ("keyring", "sc('add_key', 0, 0, 0, 0, 0)", "EPERM"),
    ("userfaultfd", "sc('userfaultfd', 0)", "EPERM"),
    ("io_uring", "sc('io_uring_setup', 1, buf())", "EPERM"),
    ("bpf", "sc('bpf', 0, 0, 0)", "EPERM"),
    ("perf", "sc('perf_event_open', 0, 0, -1, -1, 0)", "EPERM"),
    ("personality", "sc('personality', 0xffffffff)", "EPERM"),
    ("unshare", "sc('unshare', 0x10000000)", "EPERM"),
    ("clone_newns", "sc('clone', 0x00010000 | 0x800 | 0x100 | 0x00020000, 0, 0, 0, 0)", "EPERM"),
    ("fork_via_clone", "sc('clone', 17, 0, 0, 0, 0)", "EPERM"),
    ("mount_new_api", "sc('fsopen', ctypes.c_char_p(b'tmpfs'), 0)", "EPERM"),
    ("open_tree_attr", "sc('open_tree_attr', -100, ctypes.c_char_p(b'.'), 0, 0, 0)", "EPERM"),
    ("file_handle", "sc('open_by_handle_at', -100, buf(), 0)", "EPERM"),
    ("ptrace", "sc('ptrace', 16, PP, 0, 0)", "EPERM"),
    ("process_vm", "sc('process_vm_readv', PP, 0, 0, 0, 0, 0)", "EPERM"),
    ("pidfd", "sc('pidfd_open', PP, 0)", "EPERM"),
    ("prlimit_other", "sc('prlimit64', PP, 7, 0, buf())", "EPERM"),
    ("sched_other", "sc('sched_setaffinity', PP, 8, buf())", "EPERM"),
    ("file_setattr", "sc('file_setattr', -100, ctypes.c_char_p(b'.'), buf(), 32, 0)", "EPERM"),
    ("kill_parent", "sc('kill', PP, 0)", "EPERM"),
    ("kill_everyone", "sc('kill', -1, 0)", "EPERM"),
    ("pidfd_send_signal", "sc('pidfd_send_signal', 0, 0, 0, 0)", "EPERM"),
    ("socket", "sc('socket', 2, 2, 0)", "EPERM"),
    ("sendmsg", "sc('sendmsg', 1, buf(), 0)", "EPERM"),
    ("execve", "sc('execve', ctypes.c_char_p(b'/bin/true'), 0, 0)", "EPERM"),
    ("ioctl_tiocsti", "sc('ioctl', 1, 0x5412, ctypes.c_char_p(b'x'))", "ENOTTY"),
]


@needs_kernel
def test_every_refused_family_gets_its_errno(kernel_only: Sandbox) -> None:
    body = "".join(f"show({name!r}, {call})\n" for name, call, _ in FAMILIES)
    lines = _native(kernel_only, body)
    assert lines == [f"{name} {expected}" for name, _, expected in FAMILIES]


_IPC_CALLS: tuple[str, ...] = ("shmat", "shmdt", "shmctl", "msgsnd", "msgrcv", "msgctl")
_IPC_CALLS += ("semop", "semctl", "semtimedop")


@needs_kernel
def test_f03_sysv_ipc_class(kernel_only: Sandbox) -> None:
    """F03: every SysV IPC entry point, with keys and IPC_PRIVATE, is refused (EPERM)."""
    body = """
for key in (0, 0x5eed, 0x5ee0):
    show('shmget', sc('shmget', key, 256 << 20, 0o1000 | 0o600))
    show('msgget', sc('msgget', key, 0o1000 | 0o666))
    show('semget', sc('semget', key, 1, 0o1000 | 0o600))
show('shmat', sc('shmat', 0, 0, 0))
show('shmdt', sc('shmdt', 0))
show('shmctl', sc('shmctl', 0, 2, buf()))
show('msgsnd', sc('msgsnd', 0, buf(), 1, 0x800))
show('msgrcv', sc('msgrcv', 0, buf(), 1, 0, 0x800))
show('msgctl', sc('msgctl', 0, 2, buf()))
show('semop', sc('semop', 0, buf(), 1))
show('semctl', sc('semctl', 0, 0, 2, buf()))
show('semtimedop', sc('semtimedop', 0, buf(), 1, 0))
"""
    lines = _native(kernel_only, body)
    assert lines == ["shmget EPERM", "msgget EPERM", "semget EPERM"] * 3 + [
        f"{name} EPERM" for name in _IPC_CALLS
    ]


@pytest.fixture
def root_segment() -> Iterator[int]:
    """F03b's setup: a root-owned 0600 SysV segment holding a secret (removed afterwards)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create a root-owned segment")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    shmid = libc.shmget(_SHM_KEY, 4096, _IPC_CREAT | 0o600)
    assert shmid >= 0, os.strerror(ctypes.get_errno())
    addr = libc.shmat(shmid, None, 0)
    ctypes.memmove(addr, b"ROOT_0600_SHM_SECRET\0", 21)
    try:
        yield shmid
    finally:
        assert ctypes.string_at(addr, 20) == b"ROOT_0600_SHM_SECRET"  # never overwritten
        libc.shmdt(ctypes.c_void_p(addr))
        libc.shmctl(shmid, _IPC_RMID, None)


def _f03b_body(shmid: int) -> str:
    return f"""
show('shmget_key', sc('shmget', {_SHM_KEY}, 0, 0))
show('shmat_id', sc('shmat', {shmid}, 0, 0))
show('shmctl_stat', sc('shmctl', {shmid}, 2, buf()))
"""


F03B_EXPECTED = ["shmget_key EPERM", "shmat_id EPERM", "shmctl_stat EPERM"]


@needs_kernel
def test_f03b_root_segment_as_root(kernel_only: Sandbox, root_segment: int) -> None:
    """F03b: a root child (capabilities dropped) can neither find, map nor read the segment."""
    assert _native(kernel_only, _f03b_body(root_segment)) == F03B_EXPECTED


_UNPRIVILEGED = """
import json, os, sys
os.environ[{env!r}] = "1"
from pysandbox import Sandbox
with Sandbox(sys.argv[1], _testing_kernel_only=True, execution=sys.argv[2]) as sb:
    result = sb.run(sys.stdin.read())
print(json.dumps(result.to_dict()))
"""


@needs_kernel
def test_f03b_root_segment_as_unprivileged_user(root_segment: int) -> None:
    """The same payload from a sandbox run by an unprivileged user (Debian's python3)."""
    python = "/usr/bin/python3"
    if not pathlib.Path(python).exists() or sys.platform != "linux":
        pytest.skip("needs Debian's /usr/bin/python3")
    import packaging  # pysandbox's one third-party dependency (distribution markers)

    import astguard
    import pysandbox

    paths = [
        str(pathlib.Path(str(m.__file__)).resolve().parent.parent)
        for m in (pysandbox, astguard, packaging)
    ]
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="pysandbox-f03b-", dir="/tmp"))
    try:
        scratch.chmod(0o711)  # traversable by the test user, not listable
        workspace = scratch / "ws"
        workspace.mkdir()
        os.chown(workspace, 65534, 65534)
        proc = subprocess.run(
            [
                python,
                "-c",
                _UNPRIVILEGED.format(env=ENV),
                str(workspace),
                default_execution(),
            ],
            input=LIBC_PRELUDE + _f03b_body(root_segment),
            capture_output=True,
            text=True,
            user=65534,
            group=65534,
            extra_groups=[],
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(paths)},
            timeout=60,
            check=False,
        )
        if proc.returncode != 0 and "Permission denied" in proc.stderr:
            pytest.skip(f"the checkout is not readable by uid 65534: {proc.stderr[-200:]}")
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert result["status"] == "ok", result
        assert "testing_kernel_only" in result["layers"]
        assert result["stdout"].splitlines() == F03B_EXPECTED
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
