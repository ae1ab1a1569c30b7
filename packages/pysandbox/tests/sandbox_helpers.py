from __future__ import annotations

import pytest

from pysandbox import RunResult, Sandbox
from pysandbox._capabilities import probe_kernel

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
    caps = sb.capabilities()
    config = sb._child_config(code, caps)
    if not landlock:
        config["landlock"] = None
    if not seccomp:
        config["seccomp"] = None
    config["python_guards"] = python_guards
    config["allowed_modules"] = sorted({*config["allowed_modules"], *extra_allowed})
    prepared = sb._launch_plan(config, timeout, caps)
    return sb._execute(prepared)


LIBC_PRELUDE = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(*args):
    ctypes.set_errno(0)
    rc = libc.syscall(*[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return rc, ctypes.get_errno()
PP = os.getppid()
def buf():
    return ctypes.byref((ctypes.c_ulong * 16)())
def show(name, res):
    rc, err = res
    print(name, 'ok' if rc >= 0 else errno.errorcode.get(err, err))
"""
