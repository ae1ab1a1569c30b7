"""Landlock (Linux 5.13+) constants, probing and rule planning for the child's bootstrap.

The parent decides every rule; the child only opens the paths and issues the three system
calls (``landlock_create_ruleset``, ``landlock_add_rule``, ``landlock_restrict_self``). Rights
are masked to the running kernel's ABI version as the kernel documentation
(``Documentation/userspace-api/landlock.rst``) prescribes.
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from pysandbox import _abi, _wire
from pysandbox.child import _main as _child

__all__ = [
    "LandlockPlan",
    "fs_rights_for_abi",
    "landlock_abi",
    "plan",
]

CREATE_RULESET_VERSION = _abi.LANDLOCK["CREATE_RULESET_VERSION"]

# Filesystem rights (linux/landlock.h, kept in _abi).
EXECUTE = _abi.LANDLOCK["ACCESS_FS_EXECUTE"]
WRITE_FILE = _abi.LANDLOCK["ACCESS_FS_WRITE_FILE"]
READ_FILE = _abi.LANDLOCK["ACCESS_FS_READ_FILE"]
READ_DIR = _abi.LANDLOCK["ACCESS_FS_READ_DIR"]
REMOVE_DIR = _abi.LANDLOCK["ACCESS_FS_REMOVE_DIR"]
REMOVE_FILE = _abi.LANDLOCK["ACCESS_FS_REMOVE_FILE"]
MAKE_CHAR = _abi.LANDLOCK["ACCESS_FS_MAKE_CHAR"]
MAKE_DIR = _abi.LANDLOCK["ACCESS_FS_MAKE_DIR"]
MAKE_REG = _abi.LANDLOCK["ACCESS_FS_MAKE_REG"]
MAKE_SOCK = _abi.LANDLOCK["ACCESS_FS_MAKE_SOCK"]
MAKE_FIFO = _abi.LANDLOCK["ACCESS_FS_MAKE_FIFO"]
MAKE_BLOCK = _abi.LANDLOCK["ACCESS_FS_MAKE_BLOCK"]
MAKE_SYM = _abi.LANDLOCK["ACCESS_FS_MAKE_SYM"]
REFER = _abi.LANDLOCK["ACCESS_FS_REFER"]
TRUNCATE = _abi.LANDLOCK["ACCESS_FS_TRUNCATE"]
IOCTL_DEV = _abi.LANDLOCK["ACCESS_FS_IOCTL_DEV"]

FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV

# Network rights (ABI 4) and scopes (ABI 6).
NET_BIND_TCP = _abi.LANDLOCK["ACCESS_NET_BIND_TCP"]
NET_CONNECT_TCP = _abi.LANDLOCK["ACCESS_NET_CONNECT_TCP"]
SCOPE_ABSTRACT_UNIX_SOCKET = _abi.LANDLOCK["SCOPE_ABSTRACT_UNIX_SOCKET"]
SCOPE_SIGNAL = _abi.LANDLOCK["SCOPE_SIGNAL"]

READ_ONLY = READ_FILE | READ_DIR
#: The workspace: everything except creating FIFOs, sockets and device nodes, and executing.
READ_WRITE = (
    WRITE_FILE
    | READ_FILE
    | READ_DIR
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SYM
    | REFER
    | TRUNCATE
)

_NAMES = {
    EXECUTE: "execute",
    WRITE_FILE: "write_file",
    READ_FILE: "read_file",
    READ_DIR: "read_dir",
    REMOVE_DIR: "remove_dir",
    REMOVE_FILE: "remove_file",
    MAKE_CHAR: "make_char",
    MAKE_DIR: "make_dir",
    MAKE_REG: "make_reg",
    MAKE_SOCK: "make_sock",
    MAKE_FIFO: "make_fifo",
    MAKE_BLOCK: "make_block",
    MAKE_SYM: "make_sym",
    REFER: "refer",
    TRUNCATE: "truncate",
    IOCTL_DEV: "ioctl_dev",
}

#: Files outside the interpreter's tree that Python itself may read after confinement.
SYSTEM_FILES: tuple[str, ...] = (
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/dev/urandom",
)
#: Read-only system library trees (shared libraries, zoneinfo).
SYSTEM_DIRS: tuple[str, ...] = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/share/zoneinfo")


def fs_rights_for_abi(abi: int) -> int:
    """All filesystem rights the given Landlock ABI version knows (the ``handled_access_fs``).

    Args:
        abi: Landlock ABI version (1 or more).

    Returns:
        Bit mask of ``LANDLOCK_ACCESS_FS_*`` rights.
    """
    rights = EXECUTE | WRITE_FILE | READ_FILE | READ_DIR | REMOVE_DIR | REMOVE_FILE  # ABI 1
    rights |= MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def rights_names(mask: int) -> list[str]:
    """Names of the rights set in ``mask``, lowest bit first."""
    return [name for bit, name in _NAMES.items() if mask & bit]


_abi_cache: list[int] = []


def landlock_abi() -> int:
    """Probe the kernel's Landlock ABI version without restricting anything.

    Returns:
        The ABI version, or 0 when Landlock is unavailable (not Linux, disabled, or blocked).
    """
    if _abi_cache:
        return _abi_cache[0]
    abi = 0
    if sys.platform.startswith("linux") and _abi.canonical_machine() is not None:
        create_ruleset = _abi.syscall_table()["landlock_create_ruleset"]
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.syscall.restype = ctypes.c_long
            abi = max(0, int(libc.syscall(create_ruleset, None, 0, CREATE_RULESET_VERSION)))
        except (OSError, AttributeError):  # pragma: no cover - exotic libc
            abi = 0
    _abi_cache.append(abi)
    return abi


#: Rules sharing a parent directory and rights that :meth:`LandlockPlan.describe` shows as one
#: ``<parent>/*`` entry with their count (the plan grants the standard library file by file).
DESCRIBE_GROUP_AT = 8


@dataclass(frozen=True)
class LandlockPlan:
    """Everything the child needs to build and enforce its ruleset.

    Attributes:
        abi: Kernel ABI version the plan targets.
        handled_fs: ``handled_access_fs`` mask.
        handled_net: ``handled_access_net`` mask (0 below ABI 4).
        scoped: ``scoped`` mask (0 below ABI 6).
        rules: ``(path, rights)`` pairs; a rule for a non-directory is masked to file rights
            by the child.
    """

    abi: int
    handled_fs: int
    handled_net: int
    scoped: int
    rules: tuple[tuple[str, int], ...]

    def to_wire(self) -> _wire.LandlockWire:
        """Encode for the child's configuration (:class:`pysandbox._wire.LandlockWire`)."""
        return {
            "abi": self.abi,
            "fs": self.handled_fs,
            "net": self.handled_net,
            "scoped": self.scoped,
            "rules": [(path, rights) for path, rights in self.rules],
        }

    def describe(self, *, every_rule: bool = False) -> dict[str, object]:
        """A JSON-compatible description for the capability report.

        Args:
            every_rule: List each rule. By default the rules that share a parent directory
                and their rights, :data:`DESCRIBE_GROUP_AT` or more of them (the standard
                library's and ``lib-dynload``'s entries, a rule each), are one entry
                ``{"path": "<parent>/*", "rights": [...], "count": N}``; the others are
                ``{"path", "rights"}``, in the plan's order.

        Returns:
            ``abi``, ``handled_fs``, ``tcp_denied``, ``scoped``, ``rule_count`` (the rules the
            child adds) and ``rules``.
        """
        groups: dict[tuple[str, int], list[str]] = {}
        for path, mask in self.rules:
            groups.setdefault((str(Path(path).parent), mask), []).append(path)
        rules: list[dict[str, object]] = []
        for path, mask in self.rules:
            parent = str(Path(path).parent)
            siblings = groups[(parent, mask)]
            if every_rule or len(siblings) < DESCRIBE_GROUP_AT:
                rules.append({"path": path, "rights": rights_names(mask)})
            elif path == siblings[0]:
                rules.append(
                    {
                        "path": f"{parent.rstrip('/')}/*",
                        "rights": rights_names(mask),
                        "count": len(siblings),
                    }
                )
        return {
            "abi": self.abi,
            "handled_fs": rights_names(self.handled_fs),
            "tcp_denied": bool(self.handled_net),
            "scoped": {
                "abstract_unix_socket": bool(self.scoped & SCOPE_ABSTRACT_UNIX_SOCKET),
                "signal": bool(self.scoped & SCOPE_SIGNAL),
            },
            "rule_count": len(self.rules),
            "rules": rules,
        }


def _is_dir(path: str | Path) -> bool:
    """Whether ``path`` is a directory this process can reach (no error on EACCES).

    A directory this process may not search (a non-root server whose interpreter lies in a
    private home) is simply not there for its children, which run as the same user.
    """
    try:
        return Path(path).is_dir()
    except OSError:
        return False


def _exists(path: str | Path) -> bool:
    """Whether ``path`` exists for this process (no error on EACCES; see :func:`_is_dir`)."""
    try:
        return Path(path).exists()
    except OSError:
        return False


def _dynload_dirs() -> frozenset[str]:
    """The directories of the interpreter's extension modules (``lib-dynload``)."""
    import sysconfig

    dirs = [Path(sysconfig.get_paths()["platstdlib"]) / "lib-dynload"]
    dirs.extend(Path(entry) for entry in sys.path if entry and "lib-dynload" in entry)
    return frozenset(os.path.realpath(d) for d in dirs if _is_dir(d))


def _beneath(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _read_rules(root: str, hidden: frozenset[str]) -> list[tuple[str, int]]:
    """Read-only rules for ``root`` that leave out the extension modules no run may load.

    Landlock rules only add rights, so a tree holding ``lib-dynload`` is granted entry by entry:
    listing (``READ_DIR``) on each directory on the way down, read rights on every other entry,
    and in ``lib-dynload`` every file except the interpreter and test/example modules of
    :func:`pysandbox.child._main.refused_module` (``_xxsubinterpreters``, ``_testcapi``, ...).

    Args:
        root: A real path granted read-only.
        hidden: Real paths of the extension-module directories.

    Returns:
        ``(path, rights)`` rules (rights before masking to the ABI).
    """
    inside = [d for d in hidden if _beneath(d, root)]
    if not inside:
        return [(root, READ_ONLY)]
    rules = [(root, READ_DIR)]
    entries = sorted(Path(root).iterdir())
    if root in hidden:
        for entry in entries:
            if not _child.refused_module(entry.name.split(".", 1)[0]):
                rules.append((str(entry), READ_ONLY))
        return rules
    for entry in entries:
        path = str(entry)
        real = os.path.realpath(path)
        if any(_beneath(d, real) for d in inside):
            if _is_dir(entry) and real == path:
                rules.extend(_read_rules(real, hidden))
            continue  # a link to (or above) an extension directory: reached by its real path
        if any(_beneath(real, d) for d in inside):
            continue
        rules.append((path, READ_ONLY))
    return rules


def plan(
    abi: int, *, workspace: str, read_only: tuple[str, ...], list_only: tuple[str, ...] = ()
) -> LandlockPlan:
    """Compute the ruleset for one sandbox.

    Args:
        abi: Kernel ABI version (from :func:`landlock_abi`), at least 1.
        workspace: Real path of the workspace (read-write without FIFO/socket/device creation).
        read_only: Real paths granted read-only (interpreter, standard library, extra paths);
            paths that do not exist are skipped.
        list_only: Directories whose entries may be listed but whose files may not be read
            (``sys.path`` entries holding an extra module: the import system lists them).

    Returns:
        The plan, with rights masked to ``abi``.
    """
    handled = fs_rights_for_abi(abi)
    rules: list[tuple[str, int]] = []
    added: set[tuple[str, int]] = set()
    seen: set[str] = set()
    candidates = [*read_only, *SYSTEM_DIRS, *SYSTEM_FILES]
    hidden = _dynload_dirs()
    for path in candidates:
        real = os.path.realpath(path)
        if real in seen or not _exists(real):
            continue
        seen.add(real)
        for rule_path, rights in _read_rules(real, hidden):
            rule = (rule_path, rights & handled)
            if rule not in added:  # lib-dynload: on sys.path and beneath the standard library
                added.add(rule)
                rules.append(rule)
    for path in list_only:
        real = os.path.realpath(path)
        if real not in seen and _is_dir(real):
            seen.add(real)
            rules.append((real, READ_DIR & handled))
    rules.append(("/dev/null", (READ_FILE | WRITE_FILE) & handled))
    rules.append((workspace, READ_WRITE & handled))
    return LandlockPlan(
        abi=abi,
        handled_fs=handled,
        handled_net=(NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0,
        scoped=(SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0,
        rules=tuple(rules),
    )
