"""Readers for the sources of the system-call tables (a test utility, and the generator's).

- :func:`x86_64_header`: ``asm/unistd_64.h`` (Debian's ``linux-libc-dev``), plain
  ``#define __NR_name number`` lines.
- :func:`generic_header`: ``asm-generic/unistd.h`` as arm64 includes it (Debian's
  ``linux-libc-dev-arm64-cross``), with its ``#if``/``#ifdef`` blocks evaluated for arm64
  (``__BITS_PER_LONG == 64``, no ``__SYSCALL_COMPAT``, the ``__ARCH_WANT_*`` macros of arm64's
  ``asm/unistd.h``) and its ``__NR3264_*`` indirection resolved the way the header itself does
  (``#define __NR_newfstatat __NR3264_fstatat``).
- :func:`kernel_table`: the kernel's ``*.tbl`` format (``number abi name [entry points]``),
  keeping the ABIs asked for.

Every reader raises :class:`ValueError` on a line it does not understand, so a changed header
format fails loudly instead of yielding a short table.
"""

from __future__ import annotations

import os
import pathlib
import re

__all__ = [
    "AARCH64_HEADER",
    "AARCH64_WANT",
    "VENDORED",
    "X86_64_HEADER",
    "generic_header",
    "kernel_table",
    "x86_64_header",
]

X86_64_HEADER = pathlib.Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
AARCH64_HEADER = pathlib.Path("/usr/aarch64-linux-gnu/include/asm-generic/unistd.h")
#: The arm64 ``asm/unistd.h`` beside the generic header: it defines the ``__ARCH_WANT_*`` macros.
AARCH64_ARCH_HEADER = pathlib.Path("/usr/aarch64-linux-gnu/include/asm/unistd.h")
#: The vendored kernel tables (see ``data/linux-syscalls/README.md``).
VENDORED = pathlib.Path(__file__).resolve().parent / "data" / "linux-syscalls"

#: What arm64's ``asm/unistd.h`` defines before including the generic header (Linux 6.1-6.18).
AARCH64_WANT = frozenset(
    {
        "__ARCH_WANT_RENAMEAT",
        "__ARCH_WANT_NEW_STAT",
        "__ARCH_WANT_SET_GET_RLIMIT",
        "__ARCH_WANT_TIME32_SYSCALLS",
        "__ARCH_WANT_SYS_CLONE3",
        "__ARCH_WANT_MEMFD_SECRET",
    }
)

_DEFINE = re.compile(r"^#define\s+(__NR(?:3264)?_\w+)\s+(\S+)\s*$")
_NOT_SYSCALLS = {"__NR_syscalls", "__NR_arch_specific_syscall"}
_CONDITION_TOKEN = re.compile(
    r"\s*(?:(defined)\s*\(\s*(\w+)\s*\)|(\|\||&&|==|!=|!|\(|\))|(\d+)|(\w+))"
)


def x86_64_header(path: os.PathLike[str] | str = X86_64_HEADER) -> dict[str, int]:
    """``{name: number}`` from an x86-64 ``asm/unistd_64.h``.

    Raises:
        ValueError: A ``#define __NR_`` line whose value is not a number.
        OSError: The file cannot be read.
    """
    table: dict[str, int] = {}
    for line in pathlib.Path(path).read_text(encoding="utf-8").splitlines():
        match = _DEFINE.match(line.strip())
        if match is None:
            continue
        name, value = match.groups()
        if not value.isdigit():
            raise ValueError(f"{path}: unexpected value in {line!r}")
        table[name.removeprefix("__NR_")] = int(value)
    return table


def arm64_wanted(path: os.PathLike[str] | str = AARCH64_ARCH_HEADER) -> frozenset[str]:
    """The ``__ARCH_WANT_*`` macros arm64's ``asm/unistd.h`` defines (read from the file)."""
    text = pathlib.Path(path).read_text(encoding="utf-8")
    return frozenset(re.findall(r"^#define\s+(__ARCH_WANT_\w+)\s*$", text, flags=re.M))


def _condition(expr: str, defined: frozenset[str], values: dict[str, int]) -> bool:
    """Evaluate a preprocessor condition of the forms the generic header uses.

    Supports ``defined(X)``, ``!``, ``&&``, ``||``, ``==``, ``!=``, parentheses, integers and
    macros with known integer values (others read as 0, as in the C preprocessor).
    """
    tokens: list[tuple[str, object]] = []
    pos = 0
    expr = expr.strip()
    while pos < len(expr):
        match = _CONDITION_TOKEN.match(expr, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"cannot parse preprocessor condition {expr!r}")
        pos = match.end()
        if match.group(1):
            tokens.append(("num", int(match.group(2) in defined)))
        elif match.group(3):
            tokens.append(("op", match.group(3)))
        elif match.group(4):
            tokens.append(("num", int(match.group(4))))
        else:
            tokens.append(("num", values.get(match.group(5), 0)))
    index = 0

    def peek() -> object:
        return tokens[index][1] if index < len(tokens) and tokens[index][0] == "op" else None

    def primary() -> int:
        nonlocal index
        if index >= len(tokens):
            raise ValueError(f"truncated preprocessor condition {expr!r}")
        kind, value = tokens[index]
        index += 1
        if kind == "num":
            assert isinstance(value, int)
            return value
        if value == "!":
            return int(not primary())
        if value == "(":
            result = disjunction()
            if peek() != ")":
                raise ValueError(f"unbalanced parentheses in {expr!r}")
            index += 1
            return result
        raise ValueError(f"unexpected {value!r} in {expr!r}")

    def comparison() -> int:
        nonlocal index
        left = primary()
        while peek() in ("==", "!="):
            op = peek()
            index += 1
            right = primary()
            left = int(left == right) if op == "==" else int(left != right)
        return left

    def conjunction() -> int:
        nonlocal index
        left = comparison()
        while peek() == "&&":
            index += 1
            right = comparison()
            left = int(bool(left) and bool(right))
        return left

    def disjunction() -> int:
        nonlocal index
        left = conjunction()
        while peek() == "||":
            index += 1
            right = conjunction()
            left = int(bool(left) or bool(right))
        return left

    result = disjunction()
    if index != len(tokens):
        raise ValueError(f"trailing tokens in preprocessor condition {expr!r}")
    return bool(result)


def generic_header(
    path: os.PathLike[str] | str = AARCH64_HEADER,
    *,
    defined: frozenset[str] = AARCH64_WANT,
    bits_per_long: int = 64,
) -> dict[str, int]:
    """``{name: number}`` from ``asm-generic/unistd.h`` as a 64-bit architecture sees it.

    Args:
        path: The header.
        defined: Macros defined before the include (arm64's ``__ARCH_WANT_*``).
        bits_per_long: ``__BITS_PER_LONG``.

    Returns:
        Every ``__NR_name`` the header defines under those conditions, with ``__NR3264_*``
        values resolved; ``__NR_syscalls`` and ``__NR_arch_specific_syscall`` left out.

    Raises:
        ValueError: An unbalanced ``#if``, an unknown directive form or an unresolved value.
    """
    macros: dict[str, int | str] = {}
    stack: list[tuple[bool, bool]] = []  # (this branch active, some branch already taken)
    values = {"__BITS_PER_LONG": bits_per_long}
    lines = pathlib.Path(path).read_text(encoding="utf-8").splitlines()
    for raw in lines:
        line = raw.strip()
        if not line.startswith("#"):
            continue
        directive = line[1:].strip()
        parent_active = all(active for active, _ in stack)
        if directive.startswith(("ifdef ", "ifndef ")):
            keyword, name = directive.split(None, 1)
            name = name.strip()
            is_defined = name in defined or name in macros or name in values
            taken = is_defined if keyword == "ifdef" else not is_defined
            stack.append((taken, taken))
        elif directive.startswith(("if ", "if(")):
            taken = _condition(directive[2:], defined | set(macros), values)
            stack.append((taken, taken))
        elif directive.startswith("elif"):
            raise ValueError(f"{path}: #elif is not handled ({raw!r})")
        elif directive == "else" or directive.startswith("else "):
            if not stack:
                raise ValueError(f"{path}: #else without #if")
            _, taken = stack.pop()
            stack.append((not taken, True))
        elif directive.startswith("endif"):
            if not stack:
                raise ValueError(f"{path}: #endif without #if")
            stack.pop()
        elif directive.startswith("define") and parent_active:
            match = _DEFINE.match("#" + directive)
            if match is not None:
                name, value = match.groups()
                macros[name] = int(value) if value.isdigit() else value
        # #include, #undef, comments and non-__NR defines do not affect the numbers.
    if stack:
        raise ValueError(f"{path}: {len(stack)} unterminated #if blocks")
    table: dict[str, int] = {}
    for name, defined_as in macros.items():
        if not name.startswith("__NR_") or name in _NOT_SYSCALLS:
            continue
        value, seen = defined_as, {name}
        while isinstance(value, str):
            if value in seen or value not in macros:
                raise ValueError(f"{path}: cannot resolve {name} = {value}")
            seen.add(value)
            value = macros[value]
        table[name.removeprefix("__NR_")] = value
    return table


def kernel_table(path: os.PathLike[str] | str, abis: frozenset[str]) -> dict[str, int]:
    """``{name: number}`` from a kernel ``*.tbl`` file, keeping the ABIs in ``abis``.

    Raises:
        ValueError: A malformed line, or a name or number given twice for the kept ABIs.
    """
    table: dict[str, int] = {}
    for raw in pathlib.Path(path).read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) < 3 or not fields[0].isdigit():
            raise ValueError(f"{path}: malformed line {raw!r}")
        number, abi, name = int(fields[0]), fields[1], fields[2]
        if abi not in abis:
            continue
        if name in table or number in table.values():
            raise ValueError(f"{path}: {name} ({number}) given twice")
        table[name] = number
    return table
