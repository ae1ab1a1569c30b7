"""A classic-BPF interpreter for seccomp filters (a test utility).

It evaluates the ``struct sock_filter`` arrays pysandbox assembles (``SeccompProgram.code``:
8 bytes per instruction, ``u16 code, u8 jt, u8 jf, u32 k``, native byte order) on a synthetic
``struct seccomp_data`` and returns the filter's verdict, so the filters of every architecture
can be checked on any machine. It accepts exactly the instructions the kernel's
``seccomp_check_filter`` accepts and checks programs the way ``bpf_check_classic`` does
(length, jump targets, a final return, constant division by zero): a program the kernel would
refuse raises :class:`InvalidProgram` here instead of being evaluated.

Stacked filters are combined as ``seccomp_run_filters`` does: every filter runs, the verdict
with the highest precedence wins (the lowest action as a signed 32-bit number, so
``KILL_PROCESS`` beats ``ERRNO`` beats ``ALLOW``), the most recently loaded first on ties.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ACTIONS",
    "SECCOMP_DATA_SIZE",
    "Instruction",
    "InvalidProgram",
    "SeccompData",
    "Verdict",
    "decode",
    "evaluate",
    "evaluate_stack",
    "run",
]

#: ``SECCOMP_RET_*`` actions (``linux/seccomp.h``), by value.
ACTIONS = {
    0x80000000: "kill_process",
    0x00000000: "kill_thread",
    0x00030000: "trap",
    0x00050000: "errno",
    0x7FC00000: "user_notif",
    0x7FF00000: "trace",
    0x7FFC0000: "log",
    0x7FFF0000: "allow",
}
_ACTION_FULL = 0xFFFF0000
_DATA = 0x0000FFFF
#: ``sizeof(struct seccomp_data)``: int nr, u32 arch, u64 instruction_pointer, u64 args[6].
SECCOMP_DATA_SIZE = 64
_MAX_INSNS = 4096  # BPF_MAXINSNS
_MEMWORDS = 16  # BPF_MEMWORDS
_U32 = 0xFFFFFFFF
_U64 = 0xFFFFFFFFFFFFFFFF

# Instruction classes, sizes, modes, operations (linux/bpf_common.h).
_LD, _LDX, _ST, _STX, _ALU, _JMP, _RET, _MISC = range(8)
_W = 0x00
_IMM, _ABS, _MEM, _LEN = 0x00, 0x20, 0x60, 0x80
_K, _X = 0x00, 0x08
_RET_A = 0x10
_TAX, _TXA = 0x00, 0x80
_ALU_OPS = {0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0}
_JA, _JEQ, _JGT, _JGE, _JSET = 0x00, 0x10, 0x20, 0x30, 0x40


class InvalidProgram(ValueError):
    """The program is one the kernel would refuse to load (with the reason)."""


@dataclass(frozen=True)
class Instruction:
    """One ``struct sock_filter``."""

    code: int
    jt: int
    jf: int
    k: int


@dataclass(frozen=True)
class SeccompData:
    """A ``struct seccomp_data``: what a filter sees of one system call.

    Attributes:
        nr: The system-call number (the kernel's ``int``; bit 30 set for x32 calls).
        arch: An ``AUDIT_ARCH_*`` value.
        instruction_pointer: Where the call was made.
        args: Up to six arguments, as unsigned 64-bit values (negative ints are wrapped).
    """

    nr: int
    arch: int
    instruction_pointer: int = 0
    args: tuple[int, ...] = ()

    def pack(self, byteorder: str = sys.byteorder) -> bytes:
        """The 64-byte structure in ``byteorder`` (``"little"`` on x86-64 and aarch64)."""
        if len(self.args) > 6:
            raise ValueError(f"a system call has at most 6 arguments, not {len(self.args)}")
        args = [a & _U64 for a in self.args] + [0] * (6 - len(self.args))
        prefix = "<" if byteorder == "little" else ">"
        return struct.pack(
            f"{prefix}iIQ6Q",
            self.nr,
            self.arch & _U32,
            self.instruction_pointer & _U64,
            *args,
        )


@dataclass(frozen=True)
class Verdict:
    """What a filter returned.

    Attributes:
        action: ``SECCOMP_RET_ACTION_FULL`` bits (e.g. ``0x00050000`` for errno).
        data: ``SECCOMP_RET_DATA`` bits (the errno for ``errno``).
    """

    action: int
    data: int

    @property
    def name(self) -> str:
        """The action's name (``"allow"``, ``"errno"``, ``"kill_process"``, ...)."""
        return ACTIONS.get(self.action, f"unknown({self.action:#x})")

    def __str__(self) -> str:
        return f"{self.name}({self.data})" if self.name == "errno" else self.name


def decode(code: bytes) -> list[Instruction]:
    """Split a ``sock_filter`` array into instructions and check it as the kernel would.

    Raises:
        InvalidProgram: Empty, too long, not a whole number of instructions, a jump out of
            the program, no return at the end, or an instruction seccomp does not accept.
    """
    if len(code) % 8:
        raise InvalidProgram(f"{len(code)} bytes is not a whole number of instructions")
    count = len(code) // 8
    if not 0 < count <= _MAX_INSNS:
        raise InvalidProgram(f"a program has 1 to {_MAX_INSNS} instructions, not {count}")
    program = [Instruction(*struct.unpack_from("=HBBI", code, 8 * i)) for i in range(count)]
    for pc, ins in enumerate(program):
        _check(pc, ins, count)
    if program[-1].code & 0x07 != _RET:
        raise InvalidProgram("the last instruction is not a return")
    return program


def _check(pc: int, ins: Instruction, count: int) -> None:
    cls, op = ins.code & 0x07, ins.code & 0xF8
    where = f"instruction {pc} ({ins.code:#06x})"
    if cls == _LD:
        if op == (_W | _ABS):
            if ins.k % 4 or ins.k >= SECCOMP_DATA_SIZE:
                raise InvalidProgram(f"{where}: load from offset {ins.k} of seccomp_data")
        elif op == (_W | _MEM):
            if ins.k >= _MEMWORDS:
                raise InvalidProgram(f"{where}: scratch word {ins.k}")
        elif op not in (_W | _LEN, _IMM):
            raise InvalidProgram(f"{where}: load mode seccomp refuses")
    elif cls == _LDX:
        if op == (_W | _MEM):
            if ins.k >= _MEMWORDS:
                raise InvalidProgram(f"{where}: scratch word {ins.k}")
        elif op not in (_W | _LEN, _IMM):
            raise InvalidProgram(f"{where}: load mode seccomp refuses")
    elif cls in (_ST, _STX):
        if ins.code & 0xF8 or ins.k >= _MEMWORDS:
            raise InvalidProgram(f"{where}: store to scratch word {ins.k}")
    elif cls == _ALU:
        alu, src = ins.code & 0xF0, ins.code & 0x08
        if alu not in _ALU_OPS or ins.code & 0x07 != _ALU:
            raise InvalidProgram(f"{where}: unknown ALU operation")
        if alu in (0x30, 0x90) and src == _K and ins.k == 0:
            raise InvalidProgram(f"{where}: division by constant zero")
    elif cls == _JMP:
        jmp = ins.code & 0xF0
        if jmp == _JA:
            if ins.code & 0x08 or pc + 1 + ins.k >= count:
                raise InvalidProgram(f"{where}: jump beyond the program")
        elif jmp in (_JEQ, _JGT, _JGE, _JSET):
            if pc + 1 + max(ins.jt, ins.jf) >= count:
                raise InvalidProgram(f"{where}: jump beyond the program")
        else:
            raise InvalidProgram(f"{where}: unknown jump")
    elif cls == _RET:
        if ins.code & 0xF8 not in (_K, _RET_A):
            raise InvalidProgram(f"{where}: return source seccomp refuses")
    elif ins.code & 0xF8 not in (_TAX, _TXA):  # _MISC, the last class
        raise InvalidProgram(f"{where}: unknown misc operation")


def _alu(op: int, a: int, operand: int) -> int:
    if op == 0x00:
        return (a + operand) & _U32
    if op == 0x10:
        return (a - operand) & _U32
    if op == 0x20:
        return (a * operand) & _U32
    if op == 0x30:
        return a // operand if operand else 0
    if op == 0x40:
        return a | operand
    if op == 0x50:
        return a & operand
    if op == 0x60:
        return (a << operand) & _U32 if operand < 32 else 0
    if op == 0x70:
        return a >> operand if operand < 32 else 0
    if op == 0x80:
        return (-a) & _U32
    if op == 0x90:
        return a % operand if operand else 0
    return a ^ operand  # 0xA0


def run(code: bytes, data: SeccompData) -> int:
    """Run one program on ``data``; return the raw 32-bit return value.

    A division by a zero ``X`` returns 0, as the kernel's classic-BPF conversion does.

    Raises:
        InvalidProgram: See :func:`decode`.
    """
    program = decode(code)
    packet = data.pack()
    a = x = 0
    mem = [0] * _MEMWORDS
    pc = 0
    while True:
        ins = program[pc]
        pc += 1
        cls = ins.code & 0x07
        if cls == _LD:
            mode = ins.code & 0xE0
            if mode == _ABS:
                a = int.from_bytes(packet[ins.k : ins.k + 4], sys.byteorder)
            elif mode == _MEM:
                a = mem[ins.k]
            elif mode == _LEN:
                a = SECCOMP_DATA_SIZE
            else:
                a = ins.k
        elif cls == _LDX:
            mode = ins.code & 0xE0
            x = mem[ins.k] if mode == _MEM else SECCOMP_DATA_SIZE if mode == _LEN else ins.k
        elif cls == _ST:
            mem[ins.k] = a
        elif cls == _STX:
            mem[ins.k] = x
        elif cls == _ALU:
            operand = x if ins.code & 0x08 else ins.k
            a = _alu(ins.code & 0xF0, a, operand)
        elif cls == _JMP:
            jmp = ins.code & 0xF0
            if jmp == _JA:
                pc += ins.k
                continue
            operand = x if ins.code & 0x08 else ins.k
            if jmp == _JEQ:
                taken = a == operand
            elif jmp == _JGT:
                taken = a > operand
            elif jmp == _JGE:
                taken = a >= operand
            else:
                taken = bool(a & operand)
            pc += ins.jt if taken else ins.jf
        elif cls == _RET:
            return a if ins.code & _RET_A else ins.k
        elif ins.code & 0xF8 == _TAX:
            x = a
        else:
            a = x


def _verdict(value: int) -> Verdict:
    return Verdict(value & _ACTION_FULL, value & _DATA)


def evaluate(code: bytes, data: SeccompData) -> Verdict:
    """Run one program on ``data`` and split its return value into action and data."""
    return _verdict(run(code, data))


def _signed(action: int) -> int:
    return action - (1 << 32) if action & 0x80000000 else action


def evaluate_stack(programs: Sequence[bytes], data: SeccompData) -> Verdict:
    """The verdict of filters loaded in the order given (``programs[0]`` first), combined as
    the kernel combines stacked filters.

    Raises:
        ValueError: No program.
        InvalidProgram: See :func:`decode`.
    """
    if not programs:
        raise ValueError("no filter to evaluate")
    best: Verdict | None = None
    for code in reversed(programs):  # the most recently loaded filter runs first
        verdict = evaluate(code, data)
        if best is None or _signed(verdict.action) < _signed(best.action):
            best = verdict
    assert best is not None
    return best
