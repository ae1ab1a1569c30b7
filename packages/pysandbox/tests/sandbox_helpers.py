from __future__ import annotations

import dataclasses

import pytest

from pysandbox import RunResult, Sandbox, _abi
from pysandbox._launch import SpawnLauncher
from pysandbox._probe import probe_kernel

KERNEL = probe_kernel()
needs_landlock = pytest.mark.skipif(KERNEL.landlock_abi < 1, reason="Landlock unavailable")
needs_seccomp = pytest.mark.skipif(not KERNEL.seccomp, reason="seccomp unavailable")
needs_kernel = pytest.mark.skipif(
    KERNEL.landlock_abi < 1 or not KERNEL.seccomp, reason="kernel layers unavailable"
)


def raw_run(
    sb: Sandbox,
    code: str,
    *,
    landlock: bool = True,
    seccomp: bool = True,
    python_guards: bool = False,
    extra_allowed: tuple[str, ...] = (),
    timeout: float = 10.0,
) -> RunResult:
    """Run ``code`` without the AST gate, choosing layers one by one (tests only).

    This reaches the same child bootstrap as ``Sandbox.run``; it exists so that each layer
    can be shown to stop an attack on its own.
    """
    config = sb._child_config()
    assert config.rules is not None
    rules = dataclasses.replace(config.rules, allowed=config.rules.allowed | set(extra_allowed))
    config = dataclasses.replace(
        config,
        landlock=config.landlock if landlock else None,
        seccomp=config.seccomp if seccomp else None,
        rules=rules if python_guards else None,
    )
    return sb._execute(config, code, timeout, launcher=SpawnLauncher())


#: The system-call table of this machine (x86-64's where it has none: the seccomp tests that
#: use it are skipped there, since the filters are assembled for x86-64 only).
NR = dict(_abi.SYSCALLS[_abi.canonical_machine() or "x86_64"])

LIBC_PRELUDE = f"""
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {NR!r}
def sc(nr, *args):
    ctypes.set_errno(0)
    args = (NR[nr] if isinstance(nr, str) else nr, *args)
    rc = libc.syscall(*[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return rc, ctypes.get_errno()
PP = os.getppid()
def buf():
    return ctypes.byref((ctypes.c_ulong * 16)())
def show(name, res):
    rc, err = res
    print(name, 'ok' if rc >= 0 else errno.errorcode.get(err, err))
"""
