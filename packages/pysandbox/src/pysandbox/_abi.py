"""The kernel ABI pysandbox speaks: the one home of every system-call number and constant.

System-call numbers per architecture, and the Landlock, seccomp, ``prctl`` and capability
constants.

Standard library only, and free of side effects on import. The parent imports it; the child
(which runs ``python -I -S`` and cannot import pysandbox) receives what it needs as plain data
in its configuration (:func:`child_abi`), so the child never holds a number of its own.

System-call numbers are full name -> number tables per architecture, kept as generated data
in :mod:`pysandbox._abi_tables`: the kernel's ``arch/x86/entry/syscalls/syscall_64.tbl``
(x86-64, the 64-bit ABI without x32) and the generic ``scripts/syscall.tbl`` /
``include/uapi/asm-generic/unistd.h`` as arm64 uses it (no ``open``/``fork``/``stat`` family,
so the legacy names are absent there), up to Linux 6.17's ``file_setattr`` (469). Numbers from
424 on are shared by every architecture. ``tests/test_uapi.py`` checks both tables against
Debian's UAPI headers and the vendored kernel tables. :func:`syscall_table` selects one by
``platform.machine()``.
"""

from __future__ import annotations

import platform
from types import MappingProxyType

from pysandbox import _abi_tables, _wire

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "AUDIT_ARCH",
    "CAPSET_HEADER_VERSION",
    "COMPAT_AUDIT_ARCH",
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

#: ``platform.machine()`` spellings -> the canonical architecture name.
MACHINES: Mapping[str, str] = MappingProxyType(
    {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
)

#: System-call tables, by canonical architecture name.
SYSCALLS: Mapping[str, Mapping[str, int]] = MappingProxyType(
    {
        "x86_64": MappingProxyType(_abi_tables.X86_64),
        "aarch64": MappingProxyType(_abi_tables.AARCH64),
    }
)

#: ``AUDIT_ARCH_*`` (linux/audit.h): the ``arch`` field of ``struct seccomp_data``.
AUDIT_ARCH: Mapping[str, int] = MappingProxyType({"x86_64": 0xC000003E, "aarch64": 0xC00000B7})

#: The 32-bit compat ABI the kernel of each architecture may also run (``AUDIT_ARCH_I386``,
#: reached with ``int 0x80`` on x86-64; ``AUDIT_ARCH_ARM``, AArch32 tasks on arm64): a filter
#: must kill it, since its numbers mean other calls.
COMPAT_AUDIT_ARCH: Mapping[str, int] = MappingProxyType(
    {"x86_64": 0x40000003, "aarch64": 0x40000028}
)

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


def child_abi(machine: str | None = None, *, required: bool = True) -> _wire.ChildAbi:
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
