"""Every seccomp rule and errno class, shown in a child with only seccomp (plus rlimits) active.

Landlock is off in these runs, so the signal rules are shown to hold without Landlock's signal
scoping (kernels before 6.12).
"""

from __future__ import annotations

import errno
import os
import pathlib
import struct

import pytest

from pysandbox import RunStatus, Sandbox, _abi
from pysandbox import _seccomp as sc
from sandbox_helpers import LIBC_PRELUDE, needs_seccomp, raw_run

pytestmark = needs_seccomp


PATHS = "DOT = ctypes.c_char_p(b'.')\nNAME = ctypes.c_char_p(b'user.x')\n"


def seccomp_only(sb: Sandbox, body: str) -> list[str]:
    result = raw_run(sb, LIBC_PRELUDE + PATHS + body, landlock=False, seccomp=True)
    assert result.status is RunStatus.OK, result.stderr
    assert "seccomp" in result.layers
    assert "landlock" not in result.layers
    return result.stdout.splitlines()


def unfiltered(sb: Sandbox, body: str) -> list[str]:
    result = raw_run(sb, LIBC_PRELUDE + body, landlock=False, seccomp=False)
    assert result.status is RunStatus.OK, result.stderr
    return result.stdout.splitlines()


@pytest.mark.parametrize(
    ("name", "call", "expected"),
    [
        ("socket_inet", "sc('socket', 2, 1, 0)", "EPERM"),
        ("socket_inet_udp", "sc('socket', 2, 2, 0)", "EPERM"),
        ("socket_inet6", "sc('socket', 10, 1, 0)", "EPERM"),
        ("socket_unix", "sc('socket', 1, 1, 0)", "EPERM"),
        ("socket_netlink", "sc('socket', 16, 3, 0)", "EPERM"),
        (
            "socketpair_inet",
            "sc('socketpair', 2, 1, 0, ctypes.byref((ctypes.c_int * 2)()))",
            "EPERM",
        ),
        ("socketpair_unix", "sc('socketpair', 1, 1, 0, ctypes.byref((ctypes.c_int * 2)()))", "ok"),
        (
            "connect_path",
            "sc('connect', 1, ctypes.c_char_p(b'\\x01\\x00/run/x.sock'), 16)",
            "EPERM",
        ),
        ("bind", "sc('bind', 1, ctypes.c_char_p(b'\\x01\\x00\\x00abc'), 6)", "EPERM"),
        ("listen", "sc('listen', 1, 1)", "EPERM"),
        ("fork", "sc('fork')", "EPERM"),
        ("vfork", "sc('vfork')", "EPERM"),
        ("clone_process", "sc('clone', 17, 0, 0, 0, 0)", "EPERM"),
        ("clone3", "sc('clone3', 0, 0)", "ENOSYS"),
        (
            "clone_thread_newns",
            "sc('clone', 0x00010000 | 0x800 | 0x100 | 0x00020000, 0, 0, 0, 0)",
            "EPERM",
        ),
        ("clone_thread_invalid", "sc('clone', 0x00010000, 0, 0, 0, 0)", "EINVAL"),
        ("inotify_add_watch", "sc('inotify_add_watch', 0, DOT, 0xfff)", "EPERM"),
        ("ptrace_traceme", "sc('ptrace', 0, 0, 0, 0)", "EPERM"),
        ("ptrace_attach_parent", "sc('ptrace', 16, PP, 0, 0)", "EPERM"),
        ("process_vm_readv", "sc('process_vm_readv', PP, 0, 0, 0, 0, 0)", "EPERM"),
        ("process_vm_writev", "sc('process_vm_writev', PP, 0, 0, 0, 0, 0)", "EPERM"),
        ("pidfd_open", "sc('pidfd_open', PP, 0)", "EPERM"),
        ("pidfd_getfd", "sc('pidfd_getfd', 0, 0, 0)", "EPERM"),
        ("pidfd_send_signal", "sc('pidfd_send_signal', 0, 0, 0, 0)", "EPERM"),
        (
            "prlimit_parent",
            "sc('prlimit64', PP, 7, 0, buf())",
            "EPERM",
        ),
        ("prlimit_get_self_zero", "sc('prlimit64', 0, 7, 0, buf())", "ok"),
        (
            "prlimit_self_pid",
            "sc('prlimit64', os.getpid(), 7, 0, buf())",
            "ok",
        ),
        ("setpriority_parent", "sc('setpriority', 0, PP, 0)", "EPERM"),
        ("setpriority_user", "sc('setpriority', 2, 0, 0)", "EPERM"),
        ("setpriority_pgrp", "sc('setpriority', 1, 0, 0)", "EPERM"),
        ("setpriority_self", "sc('setpriority', 0, 0, 5)", "ok"),
        ("setpriority_self_pid", "sc('setpriority', 0, os.getpid(), 6)", "ok"),
        (
            "sched_setaffinity_parent",
            "sc('sched_setaffinity', PP, 8, buf())",
            "EPERM",
        ),
        (
            "sched_setaffinity_self",
            "sc('sched_setaffinity', 0, 8, ctypes.byref(ctypes.c_ulong(1)))",
            "ok",
        ),
        (
            "sched_setscheduler_parent",
            "sc('sched_setscheduler', PP, 0, buf())",
            "EPERM",
        ),
        ("sched_setparam_parent", "sc('sched_setparam', PP, buf())", "EPERM"),
        ("sched_setattr_parent", "sc('sched_setattr', PP, 0, 0)", "EPERM"),
        ("ioprio_set_parent", "sc('ioprio_set', 1, PP, 0)", "EPERM"),
        ("ioprio_set_user", "sc('ioprio_set', 3, 0, 0)", "EPERM"),
        ("kill_parent", "sc('kill', PP, 0)", "EPERM"),
        ("kill_everyone", "sc('kill', -1, 0)", "EPERM"),
        ("kill_self", "sc('kill', os.getpid(), 0)", "ok"),
        ("tgkill_parent", "sc('tgkill', PP, PP, 0)", "EPERM"),
        ("tkill", "sc('tkill', PP, 0)", "EPERM"),
        ("rt_sigqueueinfo_parent", "sc('rt_sigqueueinfo', PP, 0, 0)", "EPERM"),
        (
            "io_uring_setup",
            "sc('io_uring_setup', 1, ctypes.byref((ctypes.c_char * 120)()))",
            "EPERM",
        ),
        ("io_uring_enter", "sc('io_uring_enter', 0, 0, 0, 0, 0, 0)", "EPERM"),
        ("io_uring_register", "sc('io_uring_register', 0, 0, 0, 0)", "EPERM"),
        ("unshare_user", "sc('unshare', 0x10000000)", "EPERM"),
        ("unshare_net", "sc('unshare', 0x40000000)", "EPERM"),
        ("setns", "sc('setns', 0, 0)", "EPERM"),
        ("mount", "sc('mount', 0, 0, 0, 0, 0)", "EPERM"),
        ("umount2", "sc('umount2', ctypes.c_char_p(b'/tmp'), 0)", "EPERM"),
        ("pivot_root", "sc('pivot_root', 0, 0)", "EPERM"),
        ("chroot", "sc('chroot', ctypes.c_char_p(b'/'))", "EPERM"),
        ("fsopen", "sc('fsopen', ctypes.c_char_p(b'tmpfs'), 0)", "EPERM"),
        ("open_tree", "sc('open_tree', -100, ctypes.c_char_p(b'/'), 0)", "EPERM"),
        ("keyctl", "sc('keyctl', 0, 0, 0, 0, 0)", "EPERM"),
        ("add_key", "sc('add_key', 0, 0, 0, 0, 0)", "EPERM"),
        ("request_key", "sc('request_key', 0, 0, 0, 0)", "EPERM"),
        ("bpf", "sc('bpf', 0, 0, 0)", "EPERM"),
        ("mbind_preferred", "sc('mbind', buf(), 4096, 1, 0, 0, 0)", "ENOSYS"),  # OpenBLAS's
        ("perf_event_open", "sc('perf_event_open', 0, 0, -1, -1, 0)", "EPERM"),
        ("userfaultfd", "sc('userfaultfd', 0)", "EPERM"),
        ("kcmp", "sc('kcmp', os.getpid(), PP, 0, 0, 0)", "EPERM"),
        ("personality", "sc('personality', 0xffffffff)", "EPERM"),
        ("x32_abi", "sc(0x40000000 | 39)", "EPERM"),
        ("prlimit_set_self", "sc('prlimit64', 0, 7, buf(), 0)", "EPERM"),
        ("setrlimit", "sc('setrlimit', 7, buf())", "EPERM"),
        ("sched_setscheduler_self", "sc('sched_setscheduler', 0, 1, buf())", "EPERM"),
        ("ioprio_set_self", "sc('ioprio_set', 1, 0, 0)", "EPERM"),
        ("chmod", "sc('chmod', DOT, 0o777)", "EPERM"),
        ("fchmod", "sc('fchmod', 1, 0o777)", "EPERM"),
        ("fchmodat", "sc('fchmodat', -100, DOT, 0o777)", "EPERM"),
        ("fchmodat2", "sc('fchmodat2', -100, DOT, 0o777, 0)", "EPERM"),
        ("chown", "sc('chown', DOT, 0, 0)", "EPERM"),
        ("fchown", "sc('fchown', 1, 0, 0)", "EPERM"),
        ("lchown", "sc('lchown', DOT, 0, 0)", "EPERM"),
        ("fchownat", "sc('fchownat', -100, DOT, 0, 0, 0)", "EPERM"),
        (
            "setxattr",
            "sc('setxattr', DOT, NAME, 0, 0, 0)",
            "EPERM",
        ),
        ("fsetxattr", "sc('fsetxattr', 1, NAME, 0, 0, 0)", "EPERM"),
        ("removexattr", "sc('removexattr', DOT, NAME)", "EPERM"),
        ("sethostname", "sc('sethostname', ctypes.c_char_p(b'x'), 1)", "EPERM"),
        ("settimeofday", "sc('settimeofday', 0, 0)", "EPERM"),
        ("clock_settime", "sc('clock_settime', 0, buf())", "EPERM"),
        ("adjtimex", "sc('adjtimex', buf())", "EPERM"),
        ("fanotify_init", "sc('fanotify_init', 0, 0)", "EPERM"),
        ("vhangup", "sc('vhangup')", "EPERM"),
        ("fcntl_setown", "sc('fcntl', 1, 8, PP)", "EPERM"),
        ("fcntl_setsig", "sc('fcntl', 1, 10, 9)", "EPERM"),
        ("fcntl_setown_ex", "sc('fcntl', 1, 15, buf())", "EPERM"),
        ("fcntl_getfl", "sc('fcntl', 1, 3)", "ok"),
        ("ioctl_fiosetown", "sc('ioctl', 1, 0x8901, buf())", "ENOTTY"),
        ("ioctl_tiocsti", "sc('ioctl', 1, 0x5412, ctypes.c_char_p(b'x'))", "ENOTTY"),
        ("ioctl_setflags", "sc('ioctl', 1, 0x40086602, buf())", "ENOTTY"),
        ("prctl_set_mm", "sc('prctl', 35, 0, 0, 0, 0)", "EPERM"),
        ("prctl_get_dumpable", "sc('prctl', 3, 0, 0, 0, 0)", "ok"),
        # -- the allow-list: unlisted calls get ENOSYS, fall-back calls ENOSYS on purpose --
        ("unlisted_capset", "sc('capset', buf(), buf())", "ENOSYS"),
        ("unlisted_landlock", "sc('landlock_create_ruleset', 0, 0, 1)", "ENOSYS"),
        ("openat2", "sc('openat2', -100, DOT, buf(), 24)", "ENOSYS"),
        ("epoll_pwait2", "sc('epoll_pwait2', 0, buf(), 1, 0, 0, 8)", "ENOSYS"),
        # -- SysV IPC, POSIX message queues, memfd (F03, F05) --
        ("shmget", "sc('shmget', 0, 4096, 0o1600)", "EPERM"),
        ("shmat", "sc('shmat', 0, 0, 0)", "EPERM"),
        ("shmctl", "sc('shmctl', 0, 2, buf())", "EPERM"),
        ("msgget", "sc('msgget', 0, 0o1600)", "EPERM"),
        ("semget", "sc('semget', 0, 1, 0o1600)", "EPERM"),
        ("semop", "sc('semop', 0, buf(), 1)", "EPERM"),
        ("mq_open", "sc('mq_open', ctypes.c_char_p(b'q'), 0o100 | 2, 0o600, 0)", "EPERM"),
        ("memfd_create", "sc('memfd_create', ctypes.c_char_p(b'm'), 0)", "EPERM"),
        ("memfd_secret", "sc('memfd_secret', 0)", "EPERM"),
        # -- new mount and attribute APIs, file handles --
        ("fsmount", "sc('fsmount', 0, 0, 0)", "EPERM"),
        ("move_mount", "sc('move_mount', -100, DOT, -100, DOT, 0)", "EPERM"),
        ("mount_setattr", "sc('mount_setattr', -100, DOT, 0, buf(), 32)", "EPERM"),
        ("open_tree_attr", "sc('open_tree_attr', -100, DOT, 0, 0, 0)", "EPERM"),
        ("file_getattr", "sc('file_getattr', -100, DOT, buf(), 32, 0)", "EPERM"),
        ("file_setattr", "sc('file_setattr', -100, DOT, buf(), 32, 0)", "EPERM"),
        ("getxattr_path", "sc('getxattr', DOT, NAME, 0, 0)", "EPERM"),
        ("name_to_handle_at", "sc('name_to_handle_at', -100, DOT, buf(), buf(), 0)", "EPERM"),
        ("open_by_handle_at", "sc('open_by_handle_at', -100, buf(), 0)", "EPERM"),
        # -- descriptor passing, sockets --
        ("sendmsg", "sc('sendmsg', 1, buf(), 0)", "EPERM"),
        ("recvmsg", "sc('recvmsg', 0, buf(), 0)", "EPERM"),
        ("accept4", "sc('accept4', 0, 0, 0, 0)", "EPERM"),
        # -- signals: own process and group only (kill(0), kill(-pgid)) --
        ("kill_group_zero", "sc('kill', 0, 0)", "ok"),
        ("kill_own_group", "sc('kill', -os.getpgrp(), 0)", "ok"),
        ("kill_parent_group", "sc('kill', -os.getpgid(PP), 0)", "EPERM"),
        ("tgkill_self", "sc('tgkill', os.getpid(), os.getpid(), 0)", "ok"),
        ("tkill_self", "sc('tkill', os.getpid(), 0)", "ok"),
        ("rt_tgsigqueueinfo_parent", "sc('rt_tgsigqueueinfo', PP, PP, 0, buf())", "EPERM"),
        # -- ioctl requests outside the list get ENOTTY; listed ones pass --
        ("ioctl_fioasync", "sc('ioctl', 1, 0x5452, buf())", "ENOTTY"),
        ("ioctl_fionread", "sc('ioctl', 1, 0x541B, buf())", "ok"),
        ("ioctl_fionbio", "sc('ioctl', 1, 0x5421, ctypes.byref(ctypes.c_int(0)))", "ok"),
        ("ioctl_fioclex", "sc('ioctl', 1, 0x5451, 0)", "ok"),
        # -- argument rules --
        ("fcntl_setlease", "sc('fcntl', 1, 1024, 0)", "EPERM"),
        ("fcntl_notify", "sc('fcntl', 1, 1026, 0)", "EPERM"),
        ("fcntl_dupfd_cloexec", "sc('fcntl', 1, 1030, 10)", "ok"),
        ("prctl_set_dumpable", "sc('prctl', 4, 0, 0, 0, 0)", "EPERM"),
        ("prctl_set_name", "sc('prctl', 15, ctypes.c_char_p(b'x'), 0, 0, 0)", "ok"),
        (
            "mmap_exec",
            "sc('mmap', 0, 4096, 1 | 4, 0x02 | 0x20, -1, 0)",
            "ok",
        ),
    ],
)
def test_rule_denies(sandbox: Sandbox, name: str, call: str, expected: str) -> None:
    assert seccomp_only(sandbox, f"show({name!r}, {call})") == [f"{name} {expected}"]


def test_filters_off_would_allow(sandbox: Sandbox) -> None:
    # The same calls succeed (or fail differently) without the filter: the tests above
    # measure the filter, not some other restriction.
    lines = unfiltered(
        sandbox,
        "show('socket_inet', sc('socket', 2, 1, 0))\n"
        "show('prlimit_parent', sc('prlimit64', PP, 7, 0, buf()))\n"
        "show('kill_parent', sc('kill', PP, 0))\n"
        "show('x32_abi', sc(0x40000000 | 39))\n",
    )
    assert lines == ["socket_inet ok", "prlimit_parent ok", "kill_parent ok", "x32_abi ENOSYS"]


def test_python_level_effects(sandbox: Sandbox) -> None:
    body = """
import socket, subprocess, threading
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
except PermissionError as exc:
    print('socket', exc.errno == errno.EPERM)
a, b = socket.socketpair()
a.send(b'x'); print('socketpair', b.recv(1))
try:
    os.fork()
except PermissionError:
    print('fork denied')
try:
    subprocess.run(['/bin/true'])
except PermissionError:
    print('subprocess denied')
try:
    os.execv('/bin/true', ['true'])
except PermissionError as exc:
    print('execve', errno.errorcode[exc.errno])
out = []
t = threading.Thread(target=lambda: out.append(1)); t.start(); t.join()
print('thread', out)
import asyncio
async def main():
    await asyncio.sleep(0)
    return 'asyncio'
print(asyncio.run(main()))
"""
    assert seccomp_only(sandbox, body) == [
        "socket True",
        "socketpair b'x'",
        "fork denied",
        "subprocess denied",
        "execve EPERM",
        "thread [1]",
        "asyncio",
    ]


def test_i386_entry_kills_process(sandbox: Sandbox) -> None:
    # mov eax, 20 (i386 getpid); int 0x80; ret  -- the architecture check kills with SIGSYS.
    body = """
import mmap
code = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])
mem = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
mem.write(code)
addr = ctypes.addressof(ctypes.c_char.from_buffer(mem))
fn = ctypes.CFUNCTYPE(ctypes.c_int)(addr)
print('before', flush=True)
fn()
print('ESCAPED')
"""
    result = raw_run(sandbox, LIBC_PRELUDE + body, landlock=False, seccomp=True)
    assert result.status is RunStatus.KILLED
    assert result.signal == 31  # SIGSYS
    assert result.stdout == "before\n"
    assert "seccomp" in result.detail


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_assembler_shape(machine: str) -> None:
    (program,) = sc.build_filters(machine)
    assert program.name == "allow-list"
    assert len(program.code) % 8 == 0
    assert 100 < program.length < 4096
    first = struct.unpack_from("=HBBI", program.code, 0)
    assert first == (0x20, 0, 0, 4)  # load arch first
    second = struct.unpack_from("=HBBI", program.code, 8)
    assert second == (0x15, 1, 0, _abi.AUDIT_ARCH[machine])
    third = struct.unpack_from("=HBBI", program.code, 16)
    assert third == (0x06, 0, 0, sc.RET_KILL_PROCESS)  # a foreign arch is killed
    fifth = struct.unpack_from("=HBBI", program.code, 32)
    if machine == "x86_64":  # x32 numbers refused right after loading the number
        assert fifth == (0x35, 0, 1, sc.X32_SYSCALL_BIT)
    else:
        assert fifth[0] == 0x35 and fifth[3] != sc.X32_SYSCALL_BIT
    rets = {
        struct.unpack_from("=HBBI", program.code, i)[3]
        for i in range(0, len(program.code), 8)
        if program.code[i] == 0x06
    }
    assert rets == {
        sc.RET_KILL_PROCESS,
        sc.RET_ALLOW,
        sc.RET_ERRNO | errno.EPERM,
        sc.RET_ERRNO | errno.ENOSYS,
        sc.RET_ERRNO | errno.ENOTTY,
    }
    (debug,) = sc.build_filters(machine, debug=True)
    assert sc.RET_TRAP in {
        struct.unpack_from("=HBBI", debug.code, i)[3] for i in range(0, len(debug.code), 8)
    }
    assert any(rule.startswith("every other system call: ENOSYS") for rule in program.rules)


def test_pid_placeholders_patch() -> None:
    from pysandbox.child._kernel import patch_self_pid

    (program,) = sc.build_filters()
    patched = patch_self_pid(program.code, sc.PID_PLACEHOLDER, 4242, sc._JEQ_K)
    patched = patch_self_pid(patched, sc.NEG_PGID_PLACEHOLDER, -4242 & 0xFFFFFFFF, sc._JEQ_K)
    ks = [struct.unpack_from("=HBBI", patched, i)[3] for i in range(0, len(patched), 8)]
    assert sc.PID_PLACEHOLDER not in ks
    assert sc.NEG_PGID_PLACEHOLDER not in ks
    assert 4242 in ks
    assert -4242 & 0xFFFFFFFF in ks
    assert len(patched) == len(program.code)


def test_sendto_only_without_an_address(sandbox: Sandbox) -> None:
    body = """
import socket
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
a.send(b'x')
print('send', b.recv(1))
try:
    a.sendto(b'y', '/dev/log')
except PermissionError as exc:
    print('sendto', errno.errorcode[exc.errno])
"""
    assert seccomp_only(sandbox, body) == ["send b'x'", "sendto EPERM"]


def test_debug_names_the_refused_call(workspace: pathlib.Path) -> None:
    with Sandbox(workspace, seccomp_debug=True, execution="spawn") as sb:
        assert "debug" in sb.capabilities().layer("seccomp").details["filters"][0]["name"]
        result = raw_run(
            sb,
            LIBC_PRELUDE + "print('before', flush=True)\nsc('capset', 0, 0)\nprint('ESCAPED')",
            landlock=False,
            seccomp=True,
        )
    assert result.status is RunStatus.KILLED
    assert result.signal == 31  # SIGSYS
    assert result.stdout == "before\n"
    assert "pysandbox: system call capset is not allowed in the sandbox" in result.stderr
    # Without the debug setting the same call fails with ENOSYS and the run goes on.
    with Sandbox(workspace, execution="spawn") as sb:
        result = raw_run(sb, LIBC_PRELUDE + "show('capset', sc('capset', 0, 0))", seccomp=True)
    assert result.stdout == "capset ENOSYS\n"


def test_debug_answers_a_listed_refusal_as_the_real_filter_does(workspace: pathlib.Path) -> None:
    # mbind is listed ENOSYS on purpose (numpy's OpenBLAS ignores the answer): the debug filter,
    # which traps unlisted calls, must not kill a numpy run over it.
    with Sandbox(workspace, seccomp_debug=True, execution="spawn") as sb:
        body = "show('mbind', sc('mbind', buf(), 4096, 1, 0, 0, 0))\nprint('after')"
        result = raw_run(sb, LIBC_PRELUDE + body, landlock=False, seccomp=True)
    assert (result.status, result.stdout) == (RunStatus.OK, "mbind ENOSYS\nafter\n"), result.stderr


def test_debug_names_the_refused_call_under_every_layer(workspace: pathlib.Path) -> None:
    # The handler runs with the Python guards installed: reading siginfo with
    # ctypes.c_int.from_address raised the refused ctypes.cdata audit event, the name was lost and
    # the trapped call returned its own number (146) to the run.
    code = "import os\nprint('before', flush=True)\nprint(os.sched_get_priority_max(0))\n"
    with Sandbox(workspace, seccomp_debug=True, extra_modules=("os",)) as sb:
        result = sb.run(code)
    assert (result.status, result.signal, result.stdout) == (RunStatus.KILLED, 31, "before\n")
    assert result.stderr.strip() == (
        "pysandbox: system call sched_get_priority_max is not allowed in the sandbox"
    )


def test_capabilities_dropped(sandbox: Sandbox) -> None:
    body = (
        "for line in open('/proc/self/status'):\n"
        "    if line.startswith(('CapEff', 'CapPrm', 'CapBnd', 'CapAmb', 'CapInh', 'NoNewPrivs',"
        " 'Seccomp:')):\n"
        "        print(line.split()[0], line.split()[1])\n"
    )
    lines = sorted(seccomp_only(sandbox, body))
    if os.geteuid() != 0:  # dropping the bounding set needs CAP_SETPCAP; nothing to drop anyway
        lines = [line for line in lines if not line.startswith("CapBnd")]
        lines.insert(1, "CapBnd: 0000000000000000")
    assert lines == [
        "CapAmb: 0000000000000000",
        "CapBnd: 0000000000000000",
        "CapEff: 0000000000000000",
        "CapInh: 0000000000000000",
        "CapPrm: 0000000000000000",
        "NoNewPrivs: 1",
        "Seccomp: 2",
    ]
