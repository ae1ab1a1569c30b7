"""Capability probing: what the kernel offers, proven in a throwaway confined child.

:func:`probe_kernel` asks the kernel (without restricting the caller); :func:`verify_kernel`
then applies the layers in a probe child built with the same configuration builder
(:func:`pysandbox._config.build`) and launcher as every run, and demotes a layer that cannot be
applied or does not hold.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import platform
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from pysandbox import _abi, _child, _config, _landlock, _seccomp
from pysandbox._launch import RunSpec, SpawnLauncher
from pysandbox._supervisor import Supervisor

__all__ = ["KernelProbe", "probe_kernel", "verify_kernel"]


@dataclass(frozen=True)
class KernelProbe:
    """What the kernel offers (probed without restricting the caller).

    Attributes:
        landlock_abi: Landlock ABI version, 0 when unavailable.
        landlock_reason: Why Landlock is unavailable.
        seccomp: seccomp filters can be loaded.
        seccomp_reason: Why seccomp is unavailable.
        already_filtered: This process already runs under a seccomp filter (e.g. Docker).
    """

    landlock_abi: int
    landlock_reason: str
    seccomp: bool
    seccomp_reason: str
    already_filtered: bool


_probe_cache: list[KernelProbe] = []


def probe_kernel() -> KernelProbe:
    """Probe Landlock and seccomp once per process (cached).

    Returns:
        The probe result.
    """
    if _probe_cache:
        return _probe_cache[0]
    linux = sys.platform.startswith("linux")
    abi = _landlock.landlock_abi() if linux else 0
    if not linux:
        ll_reason = f"Landlock is a Linux feature; this is {sys.platform}"
    elif _abi.canonical_machine() is None:
        ll_reason = _machine_problem()
    elif abi <= 0:
        ll_reason = "the kernel does not offer Landlock (disabled, too old, or blocked)"
    else:
        ll_reason = ""
    sc_ok, sc_reason, filtered = _probe_seccomp(linux)
    result = KernelProbe(abi, ll_reason, sc_ok, sc_reason, filtered)
    _probe_cache.append(result)
    return result


def _probe_seccomp(linux: bool) -> tuple[bool, str, bool]:
    if not linux:
        return False, f"seccomp is a Linux feature; this is {sys.platform}", False
    if not _seccomp.machine_supported():
        machine = platform.machine()
        return False, f"filters are assembled for x86-64 and aarch64 only, not {machine}", False
    filtered = False
    try:
        with Path("/proc/self/status").open(encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Seccomp:"):
                    filtered = line.split()[1] == "2"
    except OSError:
        pass
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        action = ctypes.c_uint32(_seccomp.RET_ERRNO)
        # seccomp(SECCOMP_GET_ACTION_AVAIL, 0, &action): 0 when filters with ERRNO are supported.
        nr = _abi.syscall_table()["seccomp"]
        rc = libc.syscall(nr, _abi.SECCOMP["GET_ACTION_AVAIL"], 0, ctypes.byref(action))
    except (OSError, AttributeError):  # pragma: no cover - exotic libc
        return False, "libc has no syscall()", filtered
    if rc != 0:
        err = ctypes.get_errno()
        return False, f"seccomp filters unsupported: {os.strerror(err)}", filtered
    return True, "", filtered


def _machine_problem() -> str:
    try:
        _abi.syscall_table()
    except _abi.UnsupportedMachineError as exc:
        return str(exc)
    return ""  # pragma: no cover - only called for an unknown machine


_PROBE_CODE = """
import os, socket
found = []
try:
    os.listdir("/")
    found.append("landlock: listing / was allowed")
except PermissionError:
    pass
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    found.append("seccomp: socket() was allowed")
except PermissionError:
    pass
print("; ".join(found) or "ok")
"""
_verified: dict[tuple[str, ...], KernelProbe] = {}
_verify_lock = threading.Lock()


def verify_kernel(read_roots: tuple[str, ...]) -> KernelProbe:
    """Probe the kernel, then prove the layers in a throwaway child (once per process).

    A layer the kernel offers but that cannot be applied or does not hold (an unusual
    container profile, a kernel that claims support it lacks) is reported unavailable, with
    the child's reason, instead of failing every run later.

    Args:
        read_roots: Read-only roots for the probe's Landlock ruleset.

    Returns:
        The probe, with unavailable layers corrected by what the child observed.
    """
    probe = probe_kernel()
    if not (probe.landlock_abi > 0 or probe.seccomp):
        return probe
    with _verify_lock:
        if read_roots in _verified:
            return _verified[read_roots]
        result = probe
        for _ in range(2):
            problem = _probe_child(result, read_roots)
            if problem is None:
                break
            layer, reason = problem
            if layer == "landlock":
                result = dataclasses.replace(result, landlock_abi=0, landlock_reason=reason)
            else:
                result = dataclasses.replace(result, seccomp=False, seccomp_reason=reason)
            if not (result.landlock_abi > 0 or result.seccomp):
                break
        _verified[read_roots] = result
        return result


def _probe_child(probe: KernelProbe, read_roots: tuple[str, ...]) -> tuple[str, str] | None:
    """Run the probe child; return ``(layer, reason)`` for the first layer that failed."""
    with tempfile.TemporaryDirectory(prefix="pysandbox-probe-") as tmp:
        workspace = os.path.realpath(tmp)
        landlock = None
        if probe.landlock_abi > 0:
            landlock = _landlock.plan(probe.landlock_abi, workspace=workspace, read_only=read_roots)
        seccomp = _seccomp.build_filters() if probe.seccomp else None
        config = _config.build(
            workspace=workspace,
            read_roots=read_roots,
            limits=None,
            rules=None,
            landlock=landlock,
            seccomp=seccomp,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        )
        supervisor = Supervisor(
            deadline_s=30.0,
            output_cap=65536,
            workspace=workspace,
            workspace_bytes=1 << 20,
            workspace_files=100,
            marker=f"{_config.MARKER_NAME}=probe-{os.getpid()}",
            always_sweep=False,
        )
        spec = RunSpec(config, _PROBE_CODE, None, "probe")
        outcome = supervisor.run(SpawnLauncher(), spec)
    out = outcome.stdout.decode("utf-8", "backslashreplace").strip()
    err = outcome.stderr.decode("utf-8", "backslashreplace").strip()
    status = outcome.wait_status
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == _child.EXIT_SETUP_FAILED:
        layer = "landlock" if "landlock" in err else "seccomp"
        return layer, f"the probe child could not apply it: {err[-300:]}"
    if out == "ok":
        return None
    if out.startswith("landlock") and landlock is not None:
        return "landlock", f"the probe child was not confined: {out}"
    if "seccomp" in out and seccomp is not None:
        return "seccomp", f"the probe child was not filtered: {out}"
    return "seccomp" if seccomp is not None else "landlock", f"probe failed: {out or err}"[:400]
