"""Confining the current process: a helper worker of a server, not a sandboxed run.

A server that does work on hostile input (validating a JSON Schema, reading an export) in helper
processes confines each helper once, after its imports and before its first job, with the same
kernel layers a run gets, assembled by the same modules: rlimits, ``PR_SET_NO_NEW_PRIVS``,
the capability sets emptied, a Landlock ruleset (read-only everywhere it is granted, writable
only in the directories the caller names) and pysandbox's seccomp filters (no ``execve``, no
process creation, no sockets but ``AF_UNIX`` pairs). There are no Python-level guards: the
worker runs the server's own code, only its input is hostile.
"""

from __future__ import annotations

import os
import resource
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from pysandbox import _abi, _landlock, _seccomp
from pysandbox.child._kernel import (
    Libc,
    apply_rlimits,
    build_landlock_ruleset,
    drop_capabilities,
    load_seccomp,
    restrict_landlock,
)

__all__ = ["WorkerConfinement", "confine_worker"]


@dataclass(frozen=True)
class WorkerConfinement:
    """What :func:`confine_worker` applied.

    Attributes:
        landlock_abi: The Landlock ABI of the ruleset, 0 when Landlock is unavailable.
        seccomp: True when the seccomp filters are loaded.
        read_only: Real paths granted read-only.
        writable: Real paths granted read-write.
    """

    landlock_abi: int
    seccomp: bool
    read_only: tuple[str, ...]
    writable: tuple[str, ...]


def _default_read_roots(installed_code: bool = True) -> tuple[str, ...]:
    """The interpreter's standard library, and with ``installed_code`` every ``sys.path`` entry.

    With ``installed_code`` the interpreter's prefixes too (a virtual environment's whole
    ``site-packages``); without, only the standard library and its extension modules.
    """
    if not installed_code:
        # Not platstdlib itself: in a virtual environment it holds site-packages.
        paths = sysconfig.get_paths()
        roots = {paths["stdlib"], str(Path(paths["platstdlib"]) / "lib-dynload")}
        roots.update(p for p in sys.path if p and "lib-dynload" in p)
    else:
        roots = {sys.prefix, sys.exec_prefix, sys.base_prefix, str(Path(sys.executable).parent)}
        roots.update(p for p in sys.path if p)
    return tuple(sorted(os.path.realpath(r) for r in roots if Path(r).exists()))


def confine_worker(
    *,
    memory_bytes: int,
    cpu_time_s: int,
    read_only: tuple[str, ...] = (),
    writable: tuple[str, ...] = (),
    open_files: int = 64,
    require_kernel_layers: bool = True,
    installed_code: bool = True,
    list_only: tuple[str, ...] = (),
) -> WorkerConfinement:
    """Confine the calling process for good (there is no undoing it).

    Call it in a single-threaded helper process after its imports: Landlock and seccomp apply
    to the calling thread and the threads it starts later.

    Args:
        memory_bytes: ``RLIMIT_AS`` (soft and hard), in bytes: past it allocations fail with
            ``MemoryError``.
        cpu_time_s: ``RLIMIT_CPU`` soft limit in seconds (the hard one a second more): a
            backstop, the caller's deadline is the real bound.
        read_only: Paths readable (files and directories beneath them) besides the interpreter,
            ``sys.path`` and the system libraries.
        writable: Paths readable and writable beneath; empty for a worker that writes nothing.
        open_files: ``RLIMIT_NOFILE``.
        installed_code: Grant every ``sys.path`` entry and the interpreter's prefixes (a
            virtual environment's whole ``site-packages``); ``False``: only the standard
            library, so installed code is readable only where ``read_only`` names it
            (:class:`pysandbox.ConfinedPool` names its distributions' files, by ``RECORD``).
        list_only: Directories that may be listed but whose files are not readable (an
            installation directory holding the granted distributions).
        require_kernel_layers: Refuse (``OSError``) when Landlock or seccomp is unavailable;
            with ``False`` the process goes on with the rlimits and what the kernel offers.

    Returns:
        What was applied.

    Raises:
        OSError: A kernel layer is required and unavailable.
        A kernel step that fails (a ruleset refused, a filter not loaded) ends the process with
        pysandbox's setup-failure exit status 121, a message on stderr: a half-confined worker
        never goes on.
        pysandbox._abi.UnsupportedMachineError: No system-call table for this machine.
    """
    limits = [
        (resource.RLIMIT_AS, memory_bytes, memory_bytes),
        (resource.RLIMIT_CPU, cpu_time_s, cpu_time_s + 1),
        (resource.RLIMIT_NOFILE, open_files, open_files),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_FSIZE, 1 << 30, 1 << 30),
    ]
    apply_rlimits(limits)
    machine_ok = _seccomp.machine_supported()
    if not machine_ok:
        if require_kernel_layers:
            raise OSError(f"no seccomp filter for this machine ({os.uname().machine})")
        return WorkerConfinement(0, False, (), ())
    libc = Libc(_abi.child_abi(required=True))
    abi = _landlock.landlock_abi()
    if abi < 1 and require_kernel_layers:
        raise OSError("Landlock is unavailable on this kernel")
    drop_capabilities(libc)
    readable = tuple(
        sorted({os.path.realpath(p) for p in (*_default_read_roots(installed_code), *read_only)})
    )
    granted_writable = tuple(os.path.realpath(p) for p in writable)
    if abi >= 1:
        handled = _landlock.fs_rights_for_abi(abi)
        rules: list[tuple[str, int]] = []
        for path in (*readable, *_landlock.SYSTEM_DIRS, *_landlock.SYSTEM_FILES):
            if Path(path).exists():
                rules.append((os.path.realpath(path), _landlock.READ_ONLY & handled))
        rules.extend(
            (os.path.realpath(p), _landlock.READ_DIR & handled)
            for p in list_only
            if Path(p).is_dir() and os.path.realpath(p) not in readable
        )
        rules.append(("/dev/null", (_landlock.READ_FILE | _landlock.WRITE_FILE) & handled))
        rules.extend((path, _landlock.READ_WRITE & handled) for path in granted_writable)
        plan = _landlock.LandlockPlan(
            abi=abi,
            handled_fs=handled,
            handled_net=(_landlock.NET_BIND_TCP | _landlock.NET_CONNECT_TCP) if abi >= 4 else 0,
            scoped=(
                (_landlock.SCOPE_ABSTRACT_UNIX_SOCKET | _landlock.SCOPE_SIGNAL) if abi >= 6 else 0
            ),
            rules=tuple(rules),
        )
        restrict_landlock(libc, build_landlock_ruleset(libc, plan.to_wire()))
    filters = _seccomp.build_filters()
    load_seccomp(libc, [p.code for p in filters], _seccomp.PID_PLACEHOLDER)
    return WorkerConfinement(abi, True, readable, granted_writable)
