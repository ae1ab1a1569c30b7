"""The seccomp-bpf allow-list filter, assembled in pure Python (no libseccomp).

The parent builds the program once from the declarative table in
:mod:`pysandbox._syscall_policy`, for the running architecture (x86-64 or aarch64); the
child's bootstrap loads it with ``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)`` after
``PR_SET_NO_NEW_PRIVS``, as the last step of its setup.

The filter follows ``seccomp(2)`` and ``Documentation/userspace-api/seccomp_filter.rst``:

1. the architecture is checked first: any other ``arch`` (i386 through ``int 0x80`` on
   x86-64, AArch32 compat on arm64) kills the process (``SECCOMP_RET_KILL_PROCESS``);
2. on x86-64, numbers with the x32 bit (bit 30) set are refused (``EPERM``);
3. the system-call number is looked up in a binary search tree over the listed numbers;
   a listed call gets its action (allow, ``EPERM``, ``ENOSYS`` or its argument rule), every
   other call ``ENOSYS`` (or, with ``debug``, ``SECCOMP_RET_TRAP`` so that the child's
   ``SIGSYS`` handler names it).
"""

from __future__ import annotations

import errno
import platform
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pysandbox import _abi
from pysandbox import _syscall_policy as _policy

__all__ = [
    "NEG_PGID_PLACEHOLDER",
    "PID_PLACEHOLDER",
    "REFUSED_REASONS",
    "SeccompProgram",
    "build_filters",
    "denied_rules",
    "machine_supported",
]

# --- BPF opcodes (linux/bpf_common.h) ---------------------------------------------------------
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JA = 0x05  # BPF_JMP | BPF_JA (32-bit offset in k)
_JEQ_K = _abi.SECCOMP["BPF_JMP_JEQ_K"]  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

# --- seccomp return values and architecture (linux/seccomp.h, linux/audit.h): see _abi ----
RET_KILL_PROCESS = _abi.SECCOMP["RET_KILL_PROCESS"]
RET_TRAP = _abi.SECCOMP["RET_TRAP"]
RET_ERRNO = _abi.SECCOMP["RET_ERRNO"]
RET_ALLOW = _abi.SECCOMP["RET_ALLOW"]

AUDIT_ARCH_X86_64 = _abi.AUDIT_ARCH["x86_64"]
X32_SYSCALL_BIT = _abi.SECCOMP["X32_SYSCALL_BIT"]

PID_PLACEHOLDER = _policy.PID_PLACEHOLDER
NEG_PGID_PLACEHOLDER = _policy.NEG_PGID_PLACEHOLDER

# struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; }
_OFF_NR = 0
_OFF_ARCH = 4


def _arg_lo(index: int) -> int:
    """Offset of the low 32 bits of syscall argument ``index`` (little-endian)."""
    return 16 + 8 * index


@dataclass(frozen=True)
class SeccompProgram:
    """One assembled classic-BPF program.

    Attributes:
        name: What the filter is for (``"allow-list"``).
        code: The ``struct sock_filter`` array, 8 bytes per instruction, native byte order.
        rules: Human-readable list of the filter's rules (for the capability report).
        machine: The canonical architecture it was built for.
        listed: How many system calls the table names for that architecture.
    """

    name: str
    code: bytes
    rules: tuple[str, ...]
    machine: str = "x86_64"
    listed: int = 0

    @property
    def length(self) -> int:
        """Number of BPF instructions."""
        return len(self.code) // 8


class _Asm:
    """A tiny assembler for classic BPF with forward labels (jumps are 8-bit relative)."""

    def __init__(self) -> None:
        self.ins: list[tuple[int, int | str, int | str, int | str]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.ins)

    def ld(self, offset: int) -> None:
        self.ins.append((_LD_W_ABS, 0, 0, offset))

    def jmp(self, op: int, k: int, jt: int | str, jf: int | str) -> None:
        self.ins.append((op, jt, jf, k))

    def ja(self, target: str) -> None:
        """Unconditional jump (32-bit offset: any distance forward)."""
        self.ins.append((_JA, 0, 0, target))

    def ret(self, value: int) -> None:
        self.ins.append((_RET_K, 0, 0, value))

    def assemble(self) -> bytes:
        out = bytearray()
        for index, (code, jt, jf, k) in enumerate(self.ins):
            rel = [self._rel(index, target) for target in (jt, jf)]
            value = self.labels[k] - index - 1 if isinstance(k, str) else k  # BPF_JA to a label
            out += struct.pack("=HBBI", code, rel[0], rel[1], value & 0xFFFFFFFF)
        return bytes(out)

    def _rel(self, index: int, target: int | str) -> int:
        if isinstance(target, int):
            return target
        offset = self.labels[target] - index - 1
        if not 0 <= offset <= 255:  # pragma: no cover - a programming error in this module
            raise ValueError(f"BPF jump to {target!r} out of range ({offset})")
        return offset


#: Every call the allow-list refuses on purpose, by name, with its family and reason (the
#: families of :mod:`pysandbox._syscall_policy` whose action is not ALLOW). Calls named nowhere
#: are refused too (ENOSYS), without a reason of their own.
REFUSED_REASONS: Mapping[str, str] = MappingProxyType(
    {
        name: f"{family} [{action.upper()}]: {why}"
        for family, action, names, why in _policy.FAMILIES
        if action != _policy.ALLOW
        for name in names
    }
)


def machine_supported(machine: str | None = None) -> bool:
    """Whether the filter can be built for this CPU architecture (x86-64 and aarch64).

    Args:
        machine: ``platform.machine()`` value to check; the running machine when ``None``.

    Returns:
        True when :mod:`pysandbox._abi` has the architecture's system-call table.
    """
    return _abi.canonical_machine(machine) in _abi.SYSCALLS


def _errno_ret(err: int) -> int:
    return RET_ERRNO | (err & 0xFFFF)


_SIMPLE = {
    _policy.ALLOW: RET_ALLOW,
    _policy.EPERM: _errno_ret(errno.EPERM),
    _policy.ENOSYS: _errno_ret(errno.ENOSYS),
}


def _arg_block(asm: _Asm, name: str, rule: _policy.ArgRule) -> None:
    """Emit ``name``'s argument rule: every condition must hold, else its errno."""
    deny = f"deny_{name}"
    for position, cond in enumerate(rule.conds):
        ok = f"ok_{name}_{position}"
        if cond.op == "null":
            asm.ld(_arg_lo(cond.arg))
            asm.jmp(_JEQ_K, 0, 0, deny)
            asm.ld(_arg_lo(cond.arg) + 4)
            asm.jmp(_JEQ_K, 0, 0, deny)
        elif cond.op == "eq":
            asm.ld(_arg_lo(cond.arg))
            for value in cond.values:
                asm.jmp(_JEQ_K, value, ok, 0)
            asm.ja(deny)
        elif cond.op == "set":
            asm.ld(_arg_lo(cond.arg))
            asm.jmp(_JSET_K, cond.values[0], 0, deny)
        elif cond.op == "clear":
            asm.ld(_arg_lo(cond.arg))
            asm.jmp(_JSET_K, cond.values[0], deny, 0)
        else:  # pragma: no cover - a mistake in the policy table
            raise ValueError(f"unknown condition {cond.op!r} for {name}")
        asm.label(ok)
    asm.ret(RET_ALLOW)
    asm.label(deny)
    asm.ret(_errno_ret(rule.errno))


def _tree(asm: _Asm, numbers: list[int], target: dict[int, str], default: str) -> None:
    """A binary search over sorted ``numbers`` (A holds the number); leaves jump to targets."""
    if len(numbers) <= 3:
        for number in numbers:
            asm.jmp(_JEQ_K, number, 0, 1)
            asm.ja(target[number])
        asm.ja(default)
        return
    mid = len(numbers) // 2
    right = f"ge_{numbers[mid]}"
    asm.jmp(_JGE_K, numbers[mid], 0, 1)
    asm.ja(right)
    _tree(asm, numbers[:mid], target, default)
    asm.label(right)
    _tree(asm, numbers[mid:], target, default)


def listed(machine: str | None = None) -> dict[str, str | _policy.ArgRule]:
    """The policy restricted to the names the architecture has (``open`` is x86-64 only, ...).

    Args:
        machine: A ``platform.machine()`` value; the running machine when ``None``.

    Returns:
        name -> action or argument rule.
    """
    table = _abi.syscall_table(machine)
    return {name: action for name, action in _policy.POLICY.items() if name in table}


def _build(machine: str, debug: bool) -> SeccompProgram:
    arch = _abi.canonical_machine(machine)
    assert arch is not None  # noqa: S101 - checked by build_filters
    table = _abi.SYSCALLS[arch]
    policy = listed(machine)
    asm = _Asm()
    asm.ld(_OFF_ARCH)
    asm.jmp(_JEQ_K, _abi.AUDIT_ARCH[arch], 1, 0)
    asm.ret(RET_KILL_PROCESS)
    asm.ld(_OFF_NR)
    if arch == "x86_64":
        asm.jmp(_JGE_K, X32_SYSCALL_BIT, 0, 1)
        asm.ret(_errno_ret(errno.EPERM))
    target: dict[int, str] = {}
    rules: dict[str, _policy.ArgRule] = {}
    for name, action in policy.items():
        if isinstance(action, _policy.ArgRule):
            target[table[name]] = f"rule_{name}"
            rules[name] = action
        else:
            target[table[name]] = f"ret_{action}"
    _tree(asm, sorted(target), target, "ret_default")
    asm.label("ret_default")
    asm.ret(RET_TRAP if debug else _errno_ret(errno.ENOSYS))
    for action, value in _SIMPLE.items():
        asm.label(f"ret_{action}")
        asm.ret(value)
    for name, rule in rules.items():
        asm.label(f"rule_{name}")
        _arg_block(asm, name, rule)
    return SeccompProgram(
        "allow-list" + (" (debug: unlisted calls trap)" if debug else ""),
        asm.assemble(),
        denied_rules(machine),
        arch,
        len(policy),
    )


def denied_rules(machine: str | None = None) -> tuple[str, ...]:
    """Describe the filter's rules, for the capability report.

    Args:
        machine: A ``platform.machine()`` value; the running machine when ``None``.

    Returns:
        One string per rule: the architecture checks, each family with its action, each
        argument rule, and the default.
    """
    arch = _abi.canonical_machine(machine) or "x86_64"
    table = _abi.SYSCALLS.get(arch, {})
    out = [f"architecture other than {arch} (i386/x32 entry, AArch32 compat): kill process"]
    if arch == "x86_64":
        out.append("x32 system calls (bit 30): EPERM")
    for family, action, names, why in _policy.FAMILIES:
        here = [name for name in names if name in table]
        if here:
            out.append(f"{family} [{action.upper()}]: {' '.join(here)} -- {why}")
    for name, rule in _policy.ARG_RULES.items():
        out.append(f"{name}: {rule.why}; otherwise {errno.errorcode[rule.errno]}")
    out.append("every other system call: ENOSYS")
    return tuple(out)


def build_filters(machine: str | None = None, *, debug: bool = False) -> tuple[SeccompProgram, ...]:
    """Assemble the allow-list filter for one architecture.

    Args:
        machine: A ``platform.machine()`` value; the running machine when ``None``.
        debug: Unlisted calls trap (``SIGSYS``, named by the child) instead of ``ENOSYS``.

    Returns:
        A one-element tuple (the child loads the programs in order).

    Raises:
        OSError: The CPU architecture is not supported (see :func:`machine_supported`).
    """
    if not machine_supported(machine):
        raise OSError(
            errno.ENOSYS,
            f"seccomp filters are built for x86-64 and aarch64 only, not "
            f"{machine or platform.machine()}",
        )
    return (_build(machine or platform.machine(), debug),)
