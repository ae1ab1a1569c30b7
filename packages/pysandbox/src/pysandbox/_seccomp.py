"""seccomp-bpf filters assembled in pure Python (no libseccomp).

The parent builds the programs once; the child's bootstrap loads them with
``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)`` after ``PR_SET_NO_NEW_PRIVS``. Two filters are
stacked: the main deny-list (sockets, process creation, cross-process calls, kernel attack
surface) and a second one that denies ``execve``/``execveat`` once the interpreter is running.

The filters follow ``seccomp(2)`` and ``Documentation/userspace-api/seccomp_filter.rst``: the
architecture is checked first (anything but x86-64 is killed, which also covers the i386
``int 0x80`` entry), x32 system-call numbers are refused, and every rule returns
``SECCOMP_RET_ERRNO`` so user code sees an ordinary ``OSError``.
"""

from __future__ import annotations

import errno
import platform
import struct
from dataclasses import dataclass

from pysandbox import _abi

__all__ = [
    "PID_PLACEHOLDER",
    "SeccompProgram",
    "build_filters",
    "denied_rules",
    "machine_supported",
]

# --- BPF opcodes (linux/bpf_common.h) ---------------------------------------------------------
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = _abi.SECCOMP["BPF_JMP_JEQ_K"]  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

# --- seccomp return values and architecture (linux/seccomp.h, linux/audit.h): see _abi ----
RET_KILL_PROCESS = _abi.SECCOMP["RET_KILL_PROCESS"]
RET_ERRNO = _abi.SECCOMP["RET_ERRNO"]
RET_ALLOW = _abi.SECCOMP["RET_ALLOW"]

AUDIT_ARCH_X86_64 = _abi.AUDIT_ARCH["x86_64"]
X32_SYSCALL_BIT = _abi.SECCOMP["X32_SYSCALL_BIT"]

#: Stand-in for the child's own pid; the child patches it in before loading (``os.getpid()``).
PID_PLACEHOLDER = 0x7FFFFFFE  # above any pid_max (2**22); never -1

# struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; }
_OFF_NR = 0
_OFF_ARCH = 4


def _arg_lo(index: int) -> int:
    """Offset of the low 32 bits of syscall argument ``index`` (little-endian)."""
    return 16 + 8 * index


#: x86-64 system-call numbers (the filters are assembled for x86-64 only, for now).
NR = _abi.SYSCALLS["x86_64"]

#: Denied outright with EPERM (kernel attack surface, namespaces, mounts, other processes).
_DENY_ALWAYS: tuple[str, ...] = (
    "socket",
    "connect",
    "bind",
    "listen",
    "fork",
    "vfork",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_open",
    "pidfd_getfd",
    "pidfd_send_signal",
    "process_madvise",
    "process_mrelease",
    "kcmp",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "statmount",
    "listmount",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "syslog",
    "acct",
    "quotactl",
    "quotactl_fd",
    "open_by_handle_at",
    "name_to_handle_at",
    "personality",
    "modify_ldt",
    "iopl",
    "ioperm",
    "migrate_pages",
    "move_pages",
    "tkill",
    # Scheduling and I/O classes: real-time classes would let a root child starve the host.
    "sched_setscheduler",
    "sched_setparam",
    "sched_setattr",
    "ioprio_set",
    # File metadata: Landlock has no rights for it, and the child may share the server's uid
    # (or be root), so chmod/chown/xattrs could reach files outside the workspace.
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "setxattrat",
    "removexattrat",
    # Host-wide state a root child could change.
    "setrlimit",
    "sethostname",
    "setdomainname",
    "settimeofday",
    "clock_settime",
    "adjtimex",
    "clock_adjtime",
    "vhangup",
    "fanotify_init",
    "fanotify_mark",
    "lookup_dcookie",
    "uselib",
    # Watching paths outside the workspace would leak activity there (Landlock ignores it).
    "inotify_add_watch",
)

#: fcntl commands that would aim SIGIO (or any signal, via F_SETSIG) at another process.
_FCNTL_DENIED = (8, 10, 15)  # F_SETOWN, F_SETSIG, F_SETOWN_EX
#: ioctl requests: SIGIO ownership, terminal input injection, inode flags (immutable files).
_IOCTL_DENIED = (
    0x8901,  # FIOSETOWN
    0x8902,  # SIOCSPGRP
    0x5412,  # TIOCSTI
    0x541C,  # TIOCLINUX
    0x40086602,  # FS_IOC_SETFLAGS
    0x401C5820,  # FS_IOC_FSSETXATTR
)
_PR_SET_MM = _abi.PRCTL["PR_SET_MM"]

#: Allowed only when the given argument (a pid) is 0 or the caller's own pid.
_SELF_ONLY: tuple[tuple[str, int], ...] = (
    ("sched_setaffinity", 0),
    ("kill", 0),
    ("tgkill", 0),
    ("rt_sigqueueinfo", 0),
    ("rt_tgsigqueueinfo", 0),
)

_CLONE_THREAD = 0x00010000
#: CLONE_NEWTIME | NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_CLONE_NAMESPACES = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000
_CLONE_NAMESPACES |= 0x10000000 | 0x20000000 | 0x40000000
_AF_UNIX = 1
_PRIO_PROCESS = 0


@dataclass(frozen=True)
class SeccompProgram:
    """One assembled classic-BPF program.

    Attributes:
        name: What the filter is for (``"main"`` or ``"exec"``).
        code: The ``struct sock_filter`` array, 8 bytes per instruction, native byte order.
        rules: Human-readable list of what the filter denies (for the capability report).
    """

    name: str
    code: bytes
    rules: tuple[str, ...]

    @property
    def length(self) -> int:
        """Number of BPF instructions."""
        return len(self.code) // 8


class _Asm:
    """A tiny assembler for classic BPF with forward labels (jumps are 8-bit relative)."""

    def __init__(self) -> None:
        self.ins: list[tuple[int, int | str, int | str, int]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.ins)

    def ld(self, offset: int) -> None:
        self.ins.append((_LD_W_ABS, 0, 0, offset))

    def jmp(self, op: int, k: int, jt: int | str, jf: int | str) -> None:
        self.ins.append((op, jt, jf, k))

    def ret(self, value: int) -> None:
        self.ins.append((_RET_K, 0, 0, value))

    def assemble(self) -> bytes:
        out = bytearray()
        for index, (code, jt, jf, k) in enumerate(self.ins):
            rel = [self._rel(index, target) for target in (jt, jf)]
            out += struct.pack("=HBBI", code, rel[0], rel[1], k & 0xFFFFFFFF)
        return bytes(out)

    def _rel(self, index: int, target: int | str) -> int:
        if isinstance(target, int):
            return target
        offset = self.labels[target] - index - 1
        if not 0 <= offset <= 255:  # pragma: no cover - a programming error in this module
            raise ValueError(f"BPF jump to {target!r} out of range ({offset})")
        return offset


def machine_supported(machine: str | None = None) -> bool:
    """Whether filters can be built for this CPU architecture (x86-64 only, for now).

    Args:
        machine: ``platform.machine()`` value to check; the running machine when ``None``.

    Returns:
        True on x86-64.
    """
    return _abi.canonical_machine(machine) == "x86_64"


def _header(asm: _Asm) -> None:
    asm.ld(_OFF_ARCH)
    asm.jmp(_JEQ_K, AUDIT_ARCH_X86_64, 1, 0)
    asm.ret(RET_KILL_PROCESS)
    asm.ld(_OFF_NR)
    asm.jmp(_JGE_K, X32_SYSCALL_BIT, 0, 1)
    asm.ret(RET_ERRNO | errno.EPERM)


def _build_main() -> SeccompProgram:
    asm = _Asm()
    _header(asm)
    eperm = RET_ERRNO | errno.EPERM
    # A holds the syscall number between rule blocks; every block ends in a return.
    for position, name in enumerate(_DENY_ALWAYS):
        nxt = f"always{position}"
        asm.jmp(_JEQ_K, NR[name], 0, nxt)
        asm.ret(eperm)
        asm.label(nxt)
    # clone3 keeps its flags in memory, out of seccomp's reach: ENOSYS makes glibc fall back
    # to clone(2), whose flags we can inspect.
    asm.jmp(_JEQ_K, NR["clone3"], 0, "after_clone3")
    asm.ret(RET_ERRNO | errno.ENOSYS)
    asm.label("after_clone3")
    # clone without CLONE_THREAD creates a process, and namespace flags a new namespace:
    # refuse both; plain threads stay possible.
    asm.jmp(_JEQ_K, NR["clone"], 0, "after_clone")
    asm.ld(_arg_lo(0))
    asm.jmp(_JSET_K, _CLONE_NAMESPACES, "deny_clone", 0)
    asm.jmp(_JSET_K, _CLONE_THREAD, 0, "deny_clone")
    asm.ret(RET_ALLOW)
    asm.label("deny_clone")
    asm.ret(eperm)
    asm.label("after_clone")
    # socketpair only for AF_UNIX (asyncio's self-pipe).
    asm.jmp(_JEQ_K, NR["socketpair"], 0, "after_socketpair")
    asm.ld(_arg_lo(0))
    asm.jmp(_JEQ_K, _AF_UNIX, 0, 1)
    asm.ret(RET_ALLOW)
    asm.ret(eperm)
    asm.label("after_socketpair")
    # setpriority(which, who, prio): only PRIO_PROCESS on the caller.
    _self_block(asm, "setpriority", which_arg_value=_PRIO_PROCESS, pid_arg=1, zero_is_self=True)
    # prlimit64(pid, resource, new, old): reading only (new == NULL), and only the caller;
    # a root child could otherwise raise its own hard limits back up.
    asm.jmp(_JEQ_K, NR["prlimit64"], 0, "after_prlimit")
    asm.ld(_arg_lo(2))
    asm.jmp(_JEQ_K, 0, 0, "deny_prlimit64")
    asm.ld(_arg_lo(2) + 4)
    asm.jmp(_JEQ_K, 0, 0, "deny_prlimit64")
    asm.ld(_arg_lo(0))
    asm.jmp(_JEQ_K, 0, "allow_prlimit64", 0)
    asm.jmp(_JEQ_K, PID_PLACEHOLDER, "allow_prlimit64", "deny_prlimit64")
    asm.label("deny_prlimit64")
    asm.ret(eperm)
    asm.label("allow_prlimit64")
    asm.ret(RET_ALLOW)
    asm.label("after_prlimit")
    _value_block(asm, "fcntl", 1, _FCNTL_DENIED)
    _value_block(asm, "ioctl", 1, _IOCTL_DENIED)
    _value_block(asm, "prctl", 0, (_PR_SET_MM,))
    for name, arg in _SELF_ONLY:
        _self_block(
            asm,
            name,
            which_arg_value=None,
            pid_arg=arg,
            zero_is_self=name not in {"tgkill", "rt_tgsigqueueinfo"},
        )
    asm.ret(RET_ALLOW)
    return SeccompProgram("main", asm.assemble(), denied_rules()[:-1])


def _value_block(asm: _Asm, name: str, arg: int, denied: tuple[int, ...]) -> None:
    """Deny ``name`` when the low 32 bits of argument ``arg`` equal one of ``denied``."""
    skip, deny = f"skip_{name}", f"deny_{name}"
    asm.jmp(_JEQ_K, NR[name], 0, skip)
    asm.ld(_arg_lo(arg))
    for value in denied:
        asm.jmp(_JEQ_K, value, deny, 0)
    asm.ret(RET_ALLOW)
    asm.label(deny)
    asm.ret(RET_ERRNO | errno.EPERM)
    asm.label(skip)


def _self_block(
    asm: _Asm, name: str, *, which_arg_value: int | None, pid_arg: int, zero_is_self: bool
) -> None:
    """Allow ``name`` only when its pid argument is 0 (the caller) or the caller's own pid.

    With ``which_arg_value`` set, argument 0 must also equal it (``PRIO_PROCESS``,
    ``IOPRIO_WHO_PROCESS``): the group and user forms would reach other processes.
    """
    skip, allow, deny = f"skip_{name}", f"allow_{name}", f"deny_{name}"
    asm.jmp(_JEQ_K, NR[name], 0, skip)
    if which_arg_value is not None:
        asm.ld(_arg_lo(0))
        asm.jmp(_JEQ_K, which_arg_value, 0, deny)
    asm.ld(_arg_lo(pid_arg))
    if zero_is_self:
        asm.jmp(_JEQ_K, 0, allow, 0)
    asm.jmp(_JEQ_K, PID_PLACEHOLDER, allow, deny)
    asm.label(deny)
    asm.ret(RET_ERRNO | errno.EPERM)
    asm.label(allow)
    asm.ret(RET_ALLOW)
    asm.label(skip)


def _build_exec() -> SeccompProgram:
    asm = _Asm()
    _header(asm)
    asm.jmp(_JEQ_K, NR["execve"], 1, 0)
    asm.jmp(_JEQ_K, NR["execveat"], 0, 1)
    asm.ret(RET_ERRNO | errno.EPERM)
    asm.ret(RET_ALLOW)
    return SeccompProgram("exec", asm.assemble(), ("execve/execveat after start",))


def denied_rules() -> tuple[str, ...]:
    """Describe every rule of the stacked filters, for the capability report.

    Returns:
        One string per rule, in filter order.
    """
    return (
        "non-x86_64 architectures (incl. i386 int 0x80): kill process",
        "x32 system calls: EPERM",
        *(f"{name}: EPERM" for name in _DENY_ALWAYS),
        "clone3: ENOSYS (glibc falls back to clone)",
        "clone without CLONE_THREAD (fork) or with namespace flags: EPERM",
        "socketpair unless AF_UNIX: EPERM",
        "setpriority unless PRIO_PROCESS on self: EPERM",
        "prlimit64 unless reading (new_limit NULL) on self: EPERM",
        "fcntl F_SETOWN/F_SETSIG/F_SETOWN_EX: EPERM",
        "ioctl FIOSETOWN/SIOCSPGRP/TIOCSTI/TIOCLINUX/FS_IOC_SETFLAGS/FS_IOC_FSSETXATTR: EPERM",
        "prctl PR_SET_MM: EPERM",
        *(f"{name} unless aimed at self: EPERM" for name, _ in _SELF_ONLY),
        "execve/execveat after start (second stacked filter): EPERM",
    )


def build_filters() -> tuple[SeccompProgram, ...]:
    """Assemble the stacked filters, to be loaded in this order.

    Returns:
        ``(main, exec)`` programs.

    Raises:
        OSError: The CPU architecture is not supported (see :func:`machine_supported`).
    """
    if not machine_supported():
        raise OSError(
            errno.ENOSYS, f"seccomp filters are built for x86-64 only, not {platform.machine()}"
        )
    return (_build_main(), _build_exec())
