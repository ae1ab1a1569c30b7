"""The kernel ABI pysandbox speaks: the one home of every system-call number and constant.

System-call numbers per architecture, and the Landlock, seccomp, ``prctl`` and capability
constants.

Standard library only, and free of side effects on import. The parent imports it; the child
(which runs ``python -I -S`` and cannot import pysandbox) receives what it needs as plain data
in its configuration (:func:`child_abi`), so the child never holds a number of its own.

System-call numbers are name -> number tables per architecture, following the kernel's
``arch/x86/entry/syscalls/syscall_64.tbl`` (x86-64) and ``include/uapi/asm-generic/unistd.h``
(aarch64: the generic table, which has no ``open``/``fork``/``stat`` family, so the legacy
names are absent there). Numbers from 424 on are shared by every architecture. The tables hold
the names pysandbox uses now; :func:`syscall_table` selects one by ``platform.machine()``.
"""

from __future__ import annotations

import platform
from types import MappingProxyType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "AUDIT_ARCH",
    "CAPSET_HEADER_VERSION",
    "LANDLOCK",
    "MACHINES",
    "PRCTL",
    "SECCOMP",
    "SYSCALLS",
    "UnsupportedMachineError",
    "canonical_machine",
    "child_abi",
    "syscall_table",
]

#: The unified numbers (Linux 5.1+), the same on x86-64 and aarch64.
_COMMON: dict[str, int] = {
    "pidfd_send_signal": 424,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "pidfd_open": 434,
    "clone3": 435,
    "pidfd_getfd": 438,
    "process_madvise": 440,
    "mount_setattr": 442,
    "quotactl_fd": 443,
    "landlock_create_ruleset": 444,
    "landlock_add_rule": 445,
    "landlock_restrict_self": 446,
    "process_mrelease": 448,
    "fchmodat2": 452,
    "statmount": 457,
    "listmount": 458,
    "setxattrat": 463,
    "removexattrat": 466,
}

#: x86-64 (``arch/x86/entry/syscalls/syscall_64.tbl``, the 64-bit ABI).
_X86_64: dict[str, int] = {
    "ioctl": 16,
    "socket": 41,
    "connect": 42,
    "bind": 49,
    "listen": 50,
    "socketpair": 53,
    "clone": 56,
    "fork": 57,
    "vfork": 58,
    "execve": 59,
    "kill": 62,
    "fcntl": 72,
    "chmod": 90,
    "fchmod": 91,
    "chown": 92,
    "fchown": 93,
    "lchown": 94,
    "ptrace": 101,
    "syslog": 103,
    "capget": 125,
    "capset": 126,
    "rt_sigqueueinfo": 129,
    "uselib": 134,
    "personality": 135,
    "setpriority": 141,
    "sched_setparam": 142,
    "sched_setscheduler": 144,
    "vhangup": 153,
    "modify_ldt": 154,
    "pivot_root": 155,
    "prctl": 157,
    "adjtimex": 159,
    "setrlimit": 160,
    "chroot": 161,
    "acct": 163,
    "settimeofday": 164,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "sethostname": 170,
    "setdomainname": 171,
    "iopl": 172,
    "ioperm": 173,
    "init_module": 175,
    "delete_module": 176,
    "quotactl": 179,
    "setxattr": 188,
    "lsetxattr": 189,
    "fsetxattr": 190,
    "removexattr": 197,
    "lremovexattr": 198,
    "fremovexattr": 199,
    "tkill": 200,
    "sched_setaffinity": 203,
    "lookup_dcookie": 212,
    "clock_settime": 227,
    "tgkill": 234,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "ioprio_set": 251,
    "inotify_add_watch": 254,
    "migrate_pages": 256,
    "fchownat": 260,
    "fchmodat": 268,
    "unshare": 272,
    "move_pages": 279,
    "rt_tgsigqueueinfo": 297,
    "perf_event_open": 298,
    "fanotify_init": 300,
    "fanotify_mark": 301,
    "prlimit64": 302,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "clock_adjtime": 305,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "finit_module": 313,
    "sched_setattr": 314,
    "seccomp": 317,
    "kexec_file_load": 320,
    "bpf": 321,
    "execveat": 322,
    "userfaultfd": 323,
    **_COMMON,
}

#: aarch64 (``include/uapi/asm-generic/unistd.h``). No chmod, chown, lchown, fork, vfork,
#: uselib, modify_ldt, iopl or ioperm: the generic table never had them.
_AARCH64: dict[str, int] = {
    "setxattr": 5,
    "lsetxattr": 6,
    "fsetxattr": 7,
    "removexattr": 14,
    "lremovexattr": 15,
    "fremovexattr": 16,
    "lookup_dcookie": 18,
    "fcntl": 25,
    "inotify_add_watch": 27,
    "ioctl": 29,
    "ioprio_set": 30,
    "umount2": 39,
    "mount": 40,
    "pivot_root": 41,
    "chroot": 51,
    "fchmod": 52,
    "fchmodat": 53,
    "fchownat": 54,
    "fchown": 55,
    "vhangup": 58,
    "quotactl": 60,
    "acct": 89,
    "capget": 90,
    "capset": 91,
    "personality": 92,
    "unshare": 97,
    "kexec_load": 104,
    "init_module": 105,
    "delete_module": 106,
    "clock_settime": 112,
    "syslog": 116,
    "ptrace": 117,
    "sched_setparam": 118,
    "sched_setscheduler": 119,
    "sched_setaffinity": 122,
    "kill": 129,
    "tkill": 130,
    "tgkill": 131,
    "rt_sigqueueinfo": 138,
    "setpriority": 140,
    "reboot": 142,
    "sethostname": 161,
    "setdomainname": 162,
    "setrlimit": 164,
    "prctl": 167,
    "settimeofday": 170,
    "adjtimex": 171,
    "socket": 198,
    "socketpair": 199,
    "bind": 200,
    "listen": 201,
    "connect": 203,
    "add_key": 217,
    "request_key": 218,
    "keyctl": 219,
    "clone": 220,
    "execve": 221,
    "swapon": 224,
    "swapoff": 225,
    "migrate_pages": 238,
    "move_pages": 239,
    "rt_tgsigqueueinfo": 240,
    "perf_event_open": 241,
    "prlimit64": 261,
    "fanotify_init": 262,
    "fanotify_mark": 263,
    "name_to_handle_at": 264,
    "open_by_handle_at": 265,
    "clock_adjtime": 266,
    "setns": 268,
    "process_vm_readv": 270,
    "process_vm_writev": 271,
    "kcmp": 272,
    "finit_module": 273,
    "sched_setattr": 274,
    "seccomp": 277,
    "bpf": 280,
    "execveat": 281,
    "userfaultfd": 282,
    "kexec_file_load": 294,
    **_COMMON,
}

#: Further names of the seccomp allow-list (pysandbox._syscall_policy), numbers from the UAPI
#: headers (x86_64 asm/unistd_64.h; asm-generic/unistd.h for aarch64) and, from 451 on, the
#: kernel's common table. Unified numbers first, then each architecture's own.
_COMMON_ALLOW_LIST: dict[str, int] = {
    "close_range": 436,
    "openat2": 437,
    "faccessat2": 439,
    "epoll_pwait2": 441,
    "memfd_secret": 447,
    "getxattrat": 464,
    "listxattrat": 465,
    "open_tree_attr": 467,
    "file_getattr": 468,
    "file_setattr": 469,
}

_X86_64_ALLOW_LIST: dict[str, int] = {
    "read": 0,
    "write": 1,
    "open": 2,
    "close": 3,
    "stat": 4,
    "fstat": 5,
    "lstat": 6,
    "poll": 7,
    "lseek": 8,
    "mmap": 9,
    "mprotect": 10,
    "munmap": 11,
    "brk": 12,
    "rt_sigaction": 13,
    "rt_sigprocmask": 14,
    "rt_sigreturn": 15,
    "pread64": 17,
    "pwrite64": 18,
    "readv": 19,
    "writev": 20,
    "access": 21,
    "pipe": 22,
    "select": 23,
    "sched_yield": 24,
    "mremap": 25,
    "msync": 26,
    "mincore": 27,
    "madvise": 28,
    "shmget": 29,
    "shmat": 30,
    "shmctl": 31,
    "dup": 32,
    "dup2": 33,
    "pause": 34,
    "nanosleep": 35,
    "getitimer": 36,
    "alarm": 37,
    "setitimer": 38,
    "getpid": 39,
    "sendfile": 40,
    "accept": 43,
    "sendto": 44,
    "recvfrom": 45,
    "sendmsg": 46,
    "recvmsg": 47,
    "shutdown": 48,
    "getsockname": 51,
    "getpeername": 52,
    "setsockopt": 54,
    "getsockopt": 55,
    "exit": 60,
    "uname": 63,
    "semget": 64,
    "semop": 65,
    "semctl": 66,
    "shmdt": 67,
    "msgget": 68,
    "msgsnd": 69,
    "msgrcv": 70,
    "msgctl": 71,
    "flock": 73,
    "fsync": 74,
    "fdatasync": 75,
    "truncate": 76,
    "ftruncate": 77,
    "getcwd": 79,
    "chdir": 80,
    "fchdir": 81,
    "rename": 82,
    "mkdir": 83,
    "rmdir": 84,
    "creat": 85,
    "link": 86,
    "unlink": 87,
    "symlink": 88,
    "readlink": 89,
    "umask": 95,
    "gettimeofday": 96,
    "getrlimit": 97,
    "getrusage": 98,
    "sysinfo": 99,
    "times": 100,
    "getuid": 102,
    "getgid": 104,
    "geteuid": 107,
    "getegid": 108,
    "getppid": 110,
    "getpgrp": 111,
    "getgroups": 115,
    "getresuid": 118,
    "getresgid": 120,
    "getpgid": 121,
    "getsid": 124,
    "rt_sigpending": 127,
    "rt_sigtimedwait": 128,
    "rt_sigsuspend": 130,
    "sigaltstack": 131,
    "utime": 132,
    "mknod": 133,
    "statfs": 137,
    "fstatfs": 138,
    "getpriority": 140,
    "gettid": 186,
    "getxattr": 191,
    "lgetxattr": 192,
    "fgetxattr": 193,
    "listxattr": 194,
    "llistxattr": 195,
    "flistxattr": 196,
    "time": 201,
    "futex": 202,
    "sched_getaffinity": 204,
    "epoll_create": 213,
    "getdents64": 217,
    "set_tid_address": 218,
    "restart_syscall": 219,
    "semtimedop": 220,
    "fadvise64": 221,
    "timer_create": 222,
    "timer_settime": 223,
    "timer_gettime": 224,
    "timer_getoverrun": 225,
    "timer_delete": 226,
    "clock_gettime": 228,
    "clock_getres": 229,
    "clock_nanosleep": 230,
    "exit_group": 231,
    "epoll_wait": 232,
    "epoll_ctl": 233,
    "utimes": 235,
    "mq_open": 240,
    "mq_unlink": 241,
    "mq_timedsend": 242,
    "mq_timedreceive": 243,
    "mq_notify": 244,
    "mq_getsetattr": 245,
    "openat": 257,
    "mkdirat": 258,
    "mknodat": 259,
    "newfstatat": 262,
    "unlinkat": 263,
    "renameat": 264,
    "linkat": 265,
    "symlinkat": 266,
    "readlinkat": 267,
    "faccessat": 269,
    "pselect6": 270,
    "ppoll": 271,
    "set_robust_list": 273,
    "get_robust_list": 274,
    "splice": 275,
    "tee": 276,
    "sync_file_range": 277,
    "utimensat": 280,
    "epoll_pwait": 281,
    "timerfd_create": 283,
    "eventfd": 284,
    "fallocate": 285,
    "timerfd_settime": 286,
    "timerfd_gettime": 287,
    "accept4": 288,
    "eventfd2": 290,
    "epoll_create1": 291,
    "dup3": 292,
    "pipe2": 293,
    "preadv": 295,
    "pwritev": 296,
    "recvmmsg": 299,
    "sendmmsg": 307,
    "getcpu": 309,
    "renameat2": 316,
    "getrandom": 318,
    "memfd_create": 319,
    "membarrier": 324,
    "copy_file_range": 326,
    "preadv2": 327,
    "pwritev2": 328,
    "statx": 332,
    "rseq": 334,
}

_AARCH64_ALLOW_LIST: dict[str, int] = {
    "getxattr": 8,
    "lgetxattr": 9,
    "fgetxattr": 10,
    "listxattr": 11,
    "llistxattr": 12,
    "flistxattr": 13,
    "getcwd": 17,
    "eventfd2": 19,
    "epoll_create1": 20,
    "epoll_ctl": 21,
    "epoll_pwait": 22,
    "dup": 23,
    "dup3": 24,
    "flock": 32,
    "mknodat": 33,
    "mkdirat": 34,
    "unlinkat": 35,
    "symlinkat": 36,
    "linkat": 37,
    "renameat": 38,
    "statfs": 43,
    "fstatfs": 44,
    "truncate": 45,
    "ftruncate": 46,
    "fallocate": 47,
    "faccessat": 48,
    "chdir": 49,
    "fchdir": 50,
    "openat": 56,
    "close": 57,
    "pipe2": 59,
    "getdents64": 61,
    "lseek": 62,
    "read": 63,
    "write": 64,
    "readv": 65,
    "writev": 66,
    "pread64": 67,
    "pwrite64": 68,
    "preadv": 69,
    "pwritev": 70,
    "sendfile": 71,
    "pselect6": 72,
    "ppoll": 73,
    "splice": 76,
    "tee": 77,
    "readlinkat": 78,
    "newfstatat": 79,
    "fstat": 80,
    "fsync": 82,
    "fdatasync": 83,
    "sync_file_range": 84,
    "timerfd_create": 85,
    "timerfd_settime": 86,
    "timerfd_gettime": 87,
    "utimensat": 88,
    "exit": 93,
    "exit_group": 94,
    "set_tid_address": 96,
    "futex": 98,
    "set_robust_list": 99,
    "get_robust_list": 100,
    "nanosleep": 101,
    "getitimer": 102,
    "setitimer": 103,
    "timer_create": 107,
    "timer_gettime": 108,
    "timer_getoverrun": 109,
    "timer_settime": 110,
    "timer_delete": 111,
    "clock_gettime": 113,
    "clock_getres": 114,
    "clock_nanosleep": 115,
    "sched_getaffinity": 123,
    "sched_yield": 124,
    "restart_syscall": 128,
    "sigaltstack": 132,
    "rt_sigsuspend": 133,
    "rt_sigaction": 134,
    "rt_sigprocmask": 135,
    "rt_sigpending": 136,
    "rt_sigtimedwait": 137,
    "rt_sigreturn": 139,
    "getpriority": 141,
    "getresuid": 148,
    "getresgid": 150,
    "times": 153,
    "getpgid": 155,
    "getsid": 156,
    "getgroups": 158,
    "uname": 160,
    "getrlimit": 163,
    "getrusage": 165,
    "umask": 166,
    "getcpu": 168,
    "gettimeofday": 169,
    "getpid": 172,
    "getppid": 173,
    "getuid": 174,
    "geteuid": 175,
    "getgid": 176,
    "getegid": 177,
    "gettid": 178,
    "sysinfo": 179,
    "mq_open": 180,
    "mq_unlink": 181,
    "mq_timedsend": 182,
    "mq_timedreceive": 183,
    "mq_notify": 184,
    "mq_getsetattr": 185,
    "msgget": 186,
    "msgctl": 187,
    "msgrcv": 188,
    "msgsnd": 189,
    "semget": 190,
    "semctl": 191,
    "semtimedop": 192,
    "semop": 193,
    "shmget": 194,
    "shmctl": 195,
    "shmat": 196,
    "shmdt": 197,
    "accept": 202,
    "getsockname": 204,
    "getpeername": 205,
    "sendto": 206,
    "recvfrom": 207,
    "setsockopt": 208,
    "getsockopt": 209,
    "shutdown": 210,
    "sendmsg": 211,
    "recvmsg": 212,
    "brk": 214,
    "munmap": 215,
    "mremap": 216,
    "mmap": 222,
    "fadvise64": 223,
    "mprotect": 226,
    "msync": 227,
    "mincore": 232,
    "madvise": 233,
    "accept4": 242,
    "recvmmsg": 243,
    "sendmmsg": 269,
    "renameat2": 276,
    "getrandom": 278,
    "memfd_create": 279,
    "membarrier": 283,
    "copy_file_range": 285,
    "preadv2": 286,
    "pwritev2": 287,
    "statx": 291,
    "rseq": 293,
}

_X86_64.update(_X86_64_ALLOW_LIST, **_COMMON_ALLOW_LIST)
_AARCH64.update(_AARCH64_ALLOW_LIST, **_COMMON_ALLOW_LIST)

#: ``platform.machine()`` spellings -> the canonical architecture name.
MACHINES: Mapping[str, str] = MappingProxyType(
    {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
)

#: System-call tables, by canonical architecture name.
SYSCALLS: Mapping[str, Mapping[str, int]] = MappingProxyType(
    {"x86_64": MappingProxyType(_X86_64), "aarch64": MappingProxyType(_AARCH64)}
)

#: ``AUDIT_ARCH_*`` (linux/audit.h): the ``arch`` field of ``struct seccomp_data``.
AUDIT_ARCH: Mapping[str, int] = MappingProxyType({"x86_64": 0xC000003E, "aarch64": 0xC00000B7})

#: seccomp (linux/seccomp.h) and its x86-64 specifics.
SECCOMP: Mapping[str, int] = MappingProxyType(
    {
        "SET_MODE_FILTER": 1,
        "GET_ACTION_AVAIL": 2,
        "MODE_FILTER": 2,
        "RET_KILL_PROCESS": 0x80000000,
        "RET_TRAP": 0x00030000,
        "RET_ERRNO": 0x00050000,
        "RET_ALLOW": 0x7FFF0000,
        "X32_SYSCALL_BIT": 0x40000000,
        "BPF_JMP_JEQ_K": 0x15,  # the opcode whose ``k`` the child patches with its pid
        "SIGINFO_SYSCALL_OFFSET": 24,  # si_syscall in siginfo_t (SIGSYS), 64-bit Linux
    }
)

#: ``prctl`` options (linux/prctl.h).
PRCTL: Mapping[str, int] = MappingProxyType(
    {
        "PR_SET_PDEATHSIG": 1,
        "PR_SET_SECCOMP": 22,
        "PR_CAPBSET_DROP": 24,
        "PR_SET_MM": 35,
        "PR_SET_NO_NEW_PRIVS": 38,
        "PR_CAP_AMBIENT": 47,
        "PR_CAP_AMBIENT_CLEAR_ALL": 4,
    }
)

#: ``_LINUX_CAPABILITY_VERSION_3`` (linux/capability.h), the ``capset`` header version.
CAPSET_HEADER_VERSION = 0x20080522

#: Landlock (linux/landlock.h): the ruleset version flag, the rule type and the rights.
LANDLOCK: Mapping[str, int] = MappingProxyType(
    {
        "CREATE_RULESET_VERSION": 1,
        "RULE_PATH_BENEATH": 1,
        "ACCESS_FS_EXECUTE": 1 << 0,
        "ACCESS_FS_WRITE_FILE": 1 << 1,
        "ACCESS_FS_READ_FILE": 1 << 2,
        "ACCESS_FS_READ_DIR": 1 << 3,
        "ACCESS_FS_REMOVE_DIR": 1 << 4,
        "ACCESS_FS_REMOVE_FILE": 1 << 5,
        "ACCESS_FS_MAKE_CHAR": 1 << 6,
        "ACCESS_FS_MAKE_DIR": 1 << 7,
        "ACCESS_FS_MAKE_REG": 1 << 8,
        "ACCESS_FS_MAKE_SOCK": 1 << 9,
        "ACCESS_FS_MAKE_FIFO": 1 << 10,
        "ACCESS_FS_MAKE_BLOCK": 1 << 11,
        "ACCESS_FS_MAKE_SYM": 1 << 12,
        "ACCESS_FS_REFER": 1 << 13,  # ABI 2
        "ACCESS_FS_TRUNCATE": 1 << 14,  # ABI 3
        "ACCESS_FS_IOCTL_DEV": 1 << 15,  # ABI 5
        "ACCESS_NET_BIND_TCP": 1 << 0,  # ABI 4
        "ACCESS_NET_CONNECT_TCP": 1 << 1,  # ABI 4
        "SCOPE_ABSTRACT_UNIX_SOCKET": 1 << 0,  # ABI 6
        "SCOPE_SIGNAL": 1 << 1,  # ABI 6
    }
)

#: The system calls the child makes itself (the rest are numbers inside seccomp filters).
_CHILD_SYSCALLS = (
    "prlimit64",
    "capset",
    "landlock_create_ruleset",
    "landlock_add_rule",
    "landlock_restrict_self",
)


class UnsupportedMachineError(OSError):
    """The CPU architecture has no system-call table here, so the kernel layers cannot load."""


def canonical_machine(machine: str | None = None) -> str | None:
    """The canonical architecture name (``"x86_64"``, ``"aarch64"``), or ``None`` if unknown.

    Args:
        machine: A ``platform.machine()`` value; the running machine when ``None``.
    """
    return MACHINES.get((machine or platform.machine()).lower())


def syscall_table(machine: str | None = None) -> Mapping[str, int]:
    """The name -> number table of one architecture.

    Args:
        machine: A ``platform.machine()`` value; the running machine when ``None``.

    Returns:
        The read-only table.

    Raises:
        UnsupportedMachineError: No table for that machine (the kernel layers need one).
    """
    arch = canonical_machine(machine)
    if arch is None:
        raise UnsupportedMachineError(
            f"pysandbox knows the system-call numbers of {sorted(SYSCALLS)} only, not "
            f"{machine or platform.machine()!r}: the kernel layers (Landlock, seccomp) cannot "
            "be loaded here"
        )
    return SYSCALLS[arch]


def child_abi(machine: str | None = None, *, required: bool = True) -> dict[str, object]:
    """What the child's bootstrap needs from this module, as ``marshal``-compatible data.

    Args:
        machine: A ``platform.machine()`` value; the running machine when ``None``.
        required: ``False`` when no kernel layer is active: an unknown machine then gets no
            system-call numbers (``"nr"`` empty) instead of an error.

    Returns:
        ``{"nr": {name: number}, "prctl": {...}, "landlock": {...}, "seccomp": {...},
        "capset_version": int}``.

    Raises:
        UnsupportedMachineError: No table for that machine.
    """
    if required or canonical_machine(machine) is not None:
        table = syscall_table(machine)
        numbers = {name: table[name] for name in _CHILD_SYSCALLS}
    else:
        numbers = {}
    return {
        "nr": numbers,
        "prctl": dict(PRCTL),
        "landlock": dict(LANDLOCK),
        "seccomp": dict(SECCOMP),
        "capset_version": CAPSET_HEADER_VERSION,
    }
