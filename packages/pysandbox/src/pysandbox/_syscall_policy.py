"""The seccomp allow-list: every system call a confined child may make, and how the others fail.

One declarative table (:data:`POLICY`), read by the assembler in :mod:`pysandbox._seccomp` for
every architecture (names are looked up in :mod:`pysandbox._abi`; a name an architecture does
not have, such as ``open`` on aarch64, is skipped there). Nothing outside this table passes:

- **ALLOW**: the call passes.
- **EPERM**: a known-dangerous family; the call fails with ``EPERM`` (``PermissionError``).
- **ENOSYS**: every call not listed, and the calls listed as ENOSYS on purpose: glibc and
  CPython fall back to an older call only on ``ENOSYS`` (``clone3`` -> ``clone``,
  ``openat2``, ``epoll_pwait2``, ...). (``rseq`` passes: glibc aborts a new thread whose
  registration fails once the main thread registered before the filter.)
- an argument rule (:class:`ArgRule`): the call passes in one form only; the other forms get
  the rule's errno (``EPERM``; ``ENOTTY`` for ``ioctl`` requests, as for a descriptor that is
  not a terminal).

The list was built from evidence: ``strace -f`` over the benign corpus and the suite's ordinary
runs (3.10-3.13 and Debian's ``python3``), plus the standard library's documented needs (sqlite3
locking, ``os.pread``/``pwrite``, ``fdatasync``, ``getrandom``, ``futex``, ...). The
data-science stack (numpy, pandas, matplotlib) is traced apart; an entry made for it says so in
its family's name ("the data-science stack"), and the suite checks that such an entry names
only calls the stack alone makes. Run with ``Sandbox(..., seccomp_debug=True)`` to have a
refused call named on stderr.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

__all__ = [
    "ALLOW",
    "ENOSYS",
    "EPERM",
    "FAMILIES",
    "NEG_PGID_PLACEHOLDER",
    "PID_PLACEHOLDER",
    "POLICY",
    "ArgRule",
    "Cond",
]

#: Stand-in for the child's own pid; the child patches it in before loading (``os.getpid()``).
PID_PLACEHOLDER = 0x7FFFFFFE  # above any pid_max (2**22); never -1
#: Stand-in for minus the child's process-group id as 32 bits (``kill(-pgid, sig)``).
NEG_PGID_PLACEHOLDER = 0x7FFFFFFD

ALLOW = "allow"
EPERM = "eperm"
ENOSYS = "enosys"


@dataclass(frozen=True)
class Cond:
    """One test on the low 32 bits of a system-call argument.

    Attributes:
        arg: Argument index (0-5).
        op: ``"eq"`` (equals one of ``values``), ``"set"`` (any bit of ``values[0]`` set),
            ``"clear"`` (no bit of ``values[0]`` set), ``"null"`` (the full 64-bit argument
            is 0).
        values: The values (pids may be :data:`PID_PLACEHOLDER`/:data:`NEG_PGID_PLACEHOLDER`).
    """

    arg: int
    op: str
    values: tuple[int, ...] = ()


@dataclass(frozen=True)
class ArgRule:
    """A call allowed only when every condition holds; otherwise it fails with ``errno``.

    Attributes:
        conds: Conditions, all required (AND).
        errno: The error number of the refused forms.
        why: One line for the capability report.
    """

    conds: tuple[Cond, ...]
    errno: int
    why: str


_SELF = (0, PID_PLACEHOLDER)  # pid 0 means the caller for these calls

_CLONE_THREAD = 0x00010000
#: CLONE_NEWTIME | NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_CLONE_NAMESPACES = (
    0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
) | (0x20000000 | 0x40000000)
_AF_UNIX = 1
_PRIO_PROCESS = 0

#: ioctl requests a child may make (asm-generic/ioctls.h, the same on x86-64 and aarch64).
IOCTLS = {
    "TCGETS": 0x5401,
    "TIOCGPGRP": 0x540F,
    "TIOCGWINSZ": 0x5413,
    "FIONREAD": 0x541B,
    "FIONBIO": 0x5421,
    "FIONCLEX": 0x5450,
    "FIOCLEX": 0x5451,
}
#: fcntl commands a child may make: descriptors, status flags, record locks (sqlite3), reading
#: a pipe's size. Refused: F_SETOWN/F_SETOWN_EX/F_SETSIG (signals aimed at other processes),
#: F_SETLEASE, F_NOTIFY (watching directories outside the workspace), F_ADD_SEALS, and
#: F_SETPIPE_SZ (pipe buffers of up to fs.pipe-max-size each: kernel memory no rlimit counts).
FCNTLS = {
    "F_DUPFD": 0,
    "F_GETFD": 1,
    "F_SETFD": 2,
    "F_GETFL": 3,
    "F_SETFL": 4,
    "F_GETLK": 5,
    "F_SETLK": 6,
    "F_SETLKW": 7,
    "F_GETOWN": 9,
    "F_GETSIG": 11,
    "F_GETOWN_EX": 16,
    "F_OFD_GETLK": 36,
    "F_OFD_SETLK": 37,
    "F_OFD_SETLKW": 38,
    "F_GETLEASE": 1025,
    "F_DUPFD_CLOEXEC": 1030,
    "F_GETPIPE_SZ": 1032,
    "F_GET_SEALS": 1034,
}
#: prctl options a child may use: reading its own state and capabilities, naming threads and
#: mappings. Refused (EPERM): PR_SET_MM, PR_SET_DUMPABLE, PR_SET_PTRACER, PR_SET_SECCOMP, ...
PRCTLS = {
    "PR_GET_DUMPABLE": 3,
    "PR_SET_NAME": 15,
    "PR_GET_NAME": 16,
    "PR_GET_SECCOMP": 21,
    "PR_CAPBSET_READ": 23,
    "PR_GET_NO_NEW_PRIVS": 39,
    "PR_CAP_AMBIENT": 47,  # reads (IS_SET); raising needs permitted capabilities: none left
    "PR_SET_VMA": 0x53564D41,
}


def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split())


#: The families, each with its action and rationale, in the order the report lists them.
#: ``(family, action, names, rationale)``; ``action`` is ALLOW, EPERM or ENOSYS.
FAMILIES: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    (
        "file I/O on open descriptors",
        ALLOW,
        _names(
            "read write readv writev pread64 pwrite64 preadv pwritev preadv2 pwritev2 lseek "
            "close dup dup2 dup3 pipe pipe2 fstat fstatfs ftruncate fsync fdatasync "
            "fallocate fadvise64 flock sendfile copy_file_range splice tee sync_file_range "
            "fgetxattr flistxattr getdents64 close_range"
        ),
        "the interpreter's own I/O; Landlock decides which files can be opened",
    ),
    (
        "paths (Landlock governs them)",
        ALLOW,
        _names(
            "open openat creat stat lstat newfstatat statx statfs access faccessat faccessat2 "
            "getcwd chdir fchdir mkdir mkdirat rmdir unlink unlinkat rename renameat renameat2 "
            "link linkat symlink symlinkat readlink readlinkat utimensat utime "
            "utimes mknod mknodat umask"
        ),
        "every path right (read, write, create, remove, link, rename, make) is a Landlock "
        "right, checked against the workspace and the read-only roots",
    ),
    (
        "memory",
        ALLOW,
        _names("brk mmap munmap mprotect mremap madvise msync mincore"),
        "the allocator and lazy dlopen of lib-dynload (PROT_EXEC stays possible); "
        "RLIMIT_AS/DATA bound it",
    ),
    (
        "threads and synchronisation",
        ALLOW,
        _names(
            "futex set_robust_list get_robust_list set_tid_address sched_yield exit "
            "exit_group sched_getaffinity getcpu membarrier rseq"
        ),
        "threading, concurrent.futures, asyncio's executor; rseq must pass: glibc aborts a new "
        "thread whose rseq registration fails once the main thread has one (seen in the "
        "traces: 'Fatal glibc error: rseq registration failed')",
    ),
    (
        "signals to oneself",
        ALLOW,
        _names(
            "rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigtimedwait "
            "rt_sigsuspend sigaltstack pause restart_syscall getitimer setitimer alarm"
        ),
        "handlers, masks and timers of the process itself (faulthandler, signal.alarm)",
    ),
    (
        "POSIX timers",
        EPERM,
        _names("timer_create timer_settime timer_gettime timer_getoverrun timer_delete"),
        "a timer's signal is named behind a pointer the filter cannot read: a SIGCONT timer "
        "continues a stopped session between calls (red team 2026-12-04); CPython and the "
        "data-science stack use setitimer/alarm, never these (absent from every trace)",
    ),
    (
        "time",
        ALLOW,
        _names(
            "clock_gettime clock_getres clock_nanosleep nanosleep gettimeofday time "
            "timerfd_create timerfd_settime timerfd_gettime"
        ),
        "clocks and sleeping",
    ),
    (
        "readiness and events",
        ALLOW,
        _names(
            "epoll_create epoll_create1 epoll_ctl epoll_wait epoll_pwait poll ppoll select "
            "pselect6 eventfd eventfd2"
        ),
        "selectors and asyncio",
    ),
    (
        "local socket pairs",
        ALLOW,
        _names("recvfrom getsockname getpeername getsockopt shutdown"),
        "asyncio's self-pipe; only socketpair(AF_UNIX) can make a socket",
    ),
    (
        "socket options",
        EPERM,
        _names("setsockopt"),
        "SO_SNDBUF/SO_RCVBUF would raise a socket pair's buffers to 2 x net.core.wmem_max each "
        "(memory no rlimit counts); nothing the standard library does on a socket pair needs it",
    ),
    (
        "identity and accounting (read-only)",
        ALLOW,
        _names(
            "getpid gettid getppid getuid geteuid getgid getegid getgroups getresuid "
            "getresgid getpgrp getpgid getsid getrlimit getrusage times uname sysinfo "
            "getpriority getrandom capget"
        ),
        "os.getpid, resource.getrusage, random and secrets",
    ),
    (
        "fall-back calls (ENOSYS on purpose)",
        ENOSYS,
        _names("clone3 openat2 epoll_pwait2"),
        "glibc and CPython fall back only on ENOSYS: clone3 -> clone (whose flags seccomp can "
        "read), openat2 -> openat, epoll_pwait2 -> epoll_pwait",
    ),
    (
        "NUMA memory policy (ENOSYS on purpose; the data-science stack)",
        ENOSYS,
        _names("mbind"),
        "numpy's OpenBLAS binds the buffer it maps (32 MiB) with mbind(MPOL_PREFERRED, NULL) and "
        "ignores the result (traced in spawn runs: harness/traced-syscalls-datascience.json); "
        "ENOSYS is what a kernel without NUMA answers, so placement stays the kernel's and the "
        "memory-policy code stays closed; listed so that seccomp_debug runs do not trap it",
    ),
    (
        "process creation and program execution",
        EPERM,
        _names("fork vfork execve execveat"),
        "no process may be created: the run's process group is the whole run",
    ),
    (
        "network sockets and descriptor passing",
        EPERM,
        _names("socket connect bind listen accept accept4 sendmsg recvmsg sendmmsg recvmmsg"),
        "no socket can be created (socketpair AF_UNIX aside), none reached, and no "
        "descriptor passed",
    ),
    (
        "SysV IPC",
        EPERM,
        _names(
            "shmget shmat shmdt shmctl msgget msgsnd msgrcv msgctl semget semop semctl semtimedop"
        ),
        "neither Landlock nor rlimits govern it: other users' segments, memory that "
        "outlives the run (F03, F03b)",
    ),
    (
        "POSIX message queues",
        EPERM,
        _names("mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr"),
        "a host-wide namespace outside the workspace that outlives the run",
    ),
    (
        "memfd",
        EPERM,
        _names("memfd_create memfd_secret"),
        "memory that RLIMIT_DATA/AS do not count (F05)",
    ),
    (
        "kernel attack surface",
        EPERM,
        _names(
            "add_key request_key keyctl userfaultfd io_uring_setup io_uring_enter "
            "io_uring_register bpf perf_event_open personality modify_ldt iopl ioperm "
            "kexec_load kexec_file_load init_module finit_module delete_module uselib "
            "lookup_dcookie seccomp"
        ),
        "keyrings, userfaultfd, io_uring, bpf, perf, personality, LDT, modules",
    ),
    (
        "namespaces and mounts",
        EPERM,
        _names(
            "unshare setns mount umount2 pivot_root chroot open_tree open_tree_attr "
            "move_mount fsopen fsconfig fsmount fspick mount_setattr statmount listmount "
            "quotactl quotactl_fd swapon swapoff acct"
        ),
        "namespaces and the old and new mount APIs",
    ),
    (
        "file handles",
        EPERM,
        _names("name_to_handle_at open_by_handle_at"),
        "open_by_handle_at bypasses path checks",
    ),
    (
        "other processes",
        EPERM,
        _names(
            "ptrace process_vm_readv process_vm_writev pidfd_open pidfd_getfd "
            "pidfd_send_signal process_madvise process_mrelease kcmp migrate_pages "
            "move_pages sched_setscheduler sched_setparam sched_setattr ioprio_set"
        ),
        "debugging, memory, descriptors, signals (a pidfd cannot be checked) and "
        "scheduling of other processes",
    ),
    (
        "truncating by path",
        EPERM,
        _names("truncate"),
        "Landlock checks truncate(2) only from ABI 3 (Linux 6.2; Debian 12 has ABI 2): by path it "
        "could empty any file the server's user may write; ftruncate on a descriptor opened for "
        "writing (Landlock-checked) is what file objects use",
    ),
    (
        "file metadata and attributes",
        EPERM,
        _names(
            "chmod fchmod fchmodat fchmodat2 chown fchown lchown fchownat setxattr "
            "lsetxattr fsetxattr removexattr lremovexattr fremovexattr setxattrat "
            "removexattrat getxattr lgetxattr listxattr llistxattr getxattrat listxattrat "
            "file_getattr file_setattr inotify_add_watch fanotify_init fanotify_mark"
        ),
        "Landlock has no rights for modes, owners and attributes, and path-based reads of "
        "attributes or watches would reach outside the workspace",
    ),
    (
        "host-wide state",
        EPERM,
        _names(
            "setrlimit sethostname setdomainname settimeofday clock_settime adjtimex "
            "clock_adjtime vhangup syslog reboot"
        ),
        "limits, names and clocks a root child could change",
    ),
)

#: The argument rules (name -> rule).
ARG_RULES: dict[str, ArgRule] = {
    "clone": ArgRule(
        (Cond(0, "clear", (_CLONE_NAMESPACES,)), Cond(0, "set", (_CLONE_THREAD,))),
        errno.EPERM,
        "threads only (CLONE_THREAD set, no CLONE_NEW* flag)",
    ),
    "socketpair": ArgRule((Cond(0, "eq", (_AF_UNIX,)),), errno.EPERM, "AF_UNIX only"),
    # A connected AF_UNIX datagram socket can still send to another address: no address.
    "sendto": ArgRule((Cond(4, "null"),), errno.EPERM, "no destination address"),
    "kill": ArgRule(
        (Cond(0, "eq", (0, PID_PLACEHOLDER, NEG_PGID_PLACEHOLDER)),),
        errno.EPERM,
        "own pid, 0 or minus own process group only",
    ),
    "tkill": ArgRule((Cond(0, "eq", (PID_PLACEHOLDER,)),), errno.EPERM, "own main thread"),
    "tgkill": ArgRule((Cond(0, "eq", (PID_PLACEHOLDER,)),), errno.EPERM, "own process only"),
    "rt_sigqueueinfo": ArgRule((Cond(0, "eq", _SELF),), errno.EPERM, "own process only"),
    "rt_tgsigqueueinfo": ArgRule(
        (Cond(0, "eq", (PID_PLACEHOLDER,)),), errno.EPERM, "own process only"
    ),
    "sched_setaffinity": ArgRule((Cond(0, "eq", _SELF),), errno.EPERM, "own process only"),
    "setpriority": ArgRule(
        (Cond(0, "eq", (_PRIO_PROCESS,)), Cond(1, "eq", _SELF)),
        errno.EPERM,
        "PRIO_PROCESS on itself only",
    ),
    "prlimit64": ArgRule(
        (Cond(2, "null"), Cond(0, "eq", _SELF)),
        errno.EPERM,
        "reading its own limits only (new_limit NULL)",
    ),
    "ioctl": ArgRule(
        (Cond(1, "eq", tuple(IOCTLS.values())),),
        errno.ENOTTY,
        "requests " + "/".join(IOCTLS) + " only; others ENOTTY",
    ),
    "fcntl": ArgRule(
        (Cond(1, "eq", tuple(FCNTLS.values())),),
        errno.EPERM,
        "descriptor, flag, lock and pipe-size commands only",
    ),
    "prctl": ArgRule(
        (Cond(0, "eq", tuple(PRCTLS.values())),), errno.EPERM, "options " + "/".join(PRCTLS)
    ),
}


def _build() -> dict[str, str | ArgRule]:
    policy: dict[str, str | ArgRule] = {}
    for family, action, names, _why in FAMILIES:
        for name in names:
            if name in policy:  # pragma: no cover - a mistake in this table
                raise ValueError(f"{name} listed twice (again in {family!r})")
            policy[name] = action
    for name, rule in ARG_RULES.items():
        if name in policy:  # pragma: no cover - a mistake in this table
            raise ValueError(f"{name} has an argument rule and a family")
        policy[name] = rule
    return policy


#: Every listed system call -> ALLOW, EPERM, ENOSYS or an :class:`ArgRule`.
POLICY: dict[str, str | ArgRule] = _build()
