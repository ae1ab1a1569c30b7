from __future__ import annotations

import dataclasses
import importlib.util
import pathlib
from typing import Any

import pytest

from pysandbox import DATASCIENCE, RunResult, Sandbox, _abi
from pysandbox._launch import SpawnLauncher
from pysandbox._limits import Limits
from pysandbox._probe import probe_kernel
from pysandbox.runner import TESTING_KERNEL_ONLY_ENV

#: The package folder (``packages/pysandbox``: ``harness/``), for tests in any folder.
PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[1]
#: The repository checkout (``redteam/``); absent from an unpacked sdist.
REPO_ROOT = PACKAGE_DIR.parents[1]
#: The red-team corpora and findings: the sdist's copy (``tests/data/redteam``), else the
#: repository's ``redteam/`` (their one home).
_SDIST_REDTEAM = PACKAGE_DIR / "tests" / "data" / "redteam"
REDTEAM_DIR = _SDIST_REDTEAM if _SDIST_REDTEAM.is_dir() else REPO_ROOT / "redteam"
KERNEL = probe_kernel()
#: The kernel layers ``@pytest.mark.kernel(...)`` can name, and whether this machine has each.
KERNEL_LAYERS = {"landlock": KERNEL.landlock_abi >= 1, "seccomp": KERNEL.seccomp}
# ``kernel`` marks a test that needs the kernel; the layers it names are required: ``conftest``
# skips the test where one is missing (``kernel_skip_reason``).
needs_landlock = pytest.mark.kernel("landlock")
needs_seccomp = pytest.mark.kernel("seccomp")
needs_kernel = pytest.mark.kernel("landlock", "seccomp")


def kernel_skip_reason(layers: tuple[object, ...]) -> str | None:
    """Why a test marked ``kernel(*layers)`` cannot run here, or ``None`` when it can.

    Args:
        layers: The marker's arguments: names from :data:`KERNEL_LAYERS` (none: the test
            needs no particular layer, it only exercises the kernel's answers).

    Returns:
        ``"Landlock unavailable"``, ``"seccomp unavailable"`` or ``"kernel layers
        unavailable"`` (more than one named), or ``None``.

    Raises:
        ValueError: A name that is not a kernel layer (a typo would never skip).
    """
    unknown = [layer for layer in layers if layer not in KERNEL_LAYERS]
    if unknown:
        raise ValueError(f"pytest.mark.kernel takes {sorted(KERNEL_LAYERS)}, not {unknown}")
    if all(KERNEL_LAYERS[str(layer)] for layer in layers):
        return None
    if len(layers) > 1:
        return "kernel layers unavailable"
    return "Landlock unavailable" if layers == ("landlock",) else "seccomp unavailable"


def kernel_only_sandbox(
    monkeypatch: pytest.MonkeyPatch, workspace: pathlib.Path, **kwargs: Any
) -> Sandbox:
    """``Sandbox(workspace, _testing_kernel_only=True, **kwargs)``: no AST gate, no Python guards.

    ``PYSANDBOX_TESTING_KERNEL_ONLY=1`` is set for the construction only (the mode reads it
    there) and removed again, so that no other test sees it.
    """
    monkeypatch.setenv(TESTING_KERNEL_ONLY_ENV, "1")
    try:
        return Sandbox(workspace, _testing_kernel_only=True, **kwargs)
    finally:
        monkeypatch.delenv(TESTING_KERNEL_ONLY_ENV)


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


# -- the data-science profile's regressions (tests/regressions/test_redteam_2026_12_03_*) --
#: The data-science profile's modules that are not installed (its tests skip without them).
MISSING = [name for name in DATASCIENCE.extra_modules if importlib.util.find_spec(name) is None]
needs_stack = pytest.mark.skipif(
    bool(MISSING),
    reason=f"the data-science stack is not installed ({MISSING}); "
    "install 'secure-pysandbox[datascience]'",
)
#: A data-science run's limits in those tests: the profile's memory, a 30 s time-out.
LIMITS = dataclasses.replace(Limits(), memory_bytes=DATASCIENCE.memory_bytes, timeout_s=30.0)

#: Defines ``attempt(fn)``: prints ``refused <type> <message>`` or ``reached <type>``.
ATTEMPT = """
def attempt(fn):
    try:
        value = fn()
    except Exception as exc:
        print('refused', type(exc).__name__, exc)
    else:
        print('reached', type(value).__name__)
"""
