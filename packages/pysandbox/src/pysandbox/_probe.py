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

from pysandbox import _abi, _config, _landlock, _seccomp
from pysandbox._launch import RunSpec, SpawnLauncher
from pysandbox._layers import Layer
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


#: What each layer's probe child runs: it prints "ok" when the layer held.
_PROBE_CODE: dict[Layer, str] = {
    Layer.LANDLOCK: """
try:
    import os
    os.listdir("/")
    print("listing / was allowed")
except PermissionError:
    print("ok")
""",
    Layer.SECCOMP: """
import socket
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    print("socket(AF_INET) was allowed")
except PermissionError:
    print("ok")
""",
}
_verified: dict[tuple[str, ...], KernelProbe] = {}
_verify_lock = threading.Lock()


def verify_kernel(read_roots: tuple[str, ...]) -> KernelProbe:
    """Probe the kernel, then prove each layer on its own in a throwaway child (cached).

    Each kernel layer the kernel offers is applied alone in its own probe child, so that a
    layer that cannot be applied or does not hold (an unusual container profile, a kernel
    that claims support it lacks) is reported unavailable with its own reason, and never
    takes the other layer down with it.

    Args:
        read_roots: Read-only roots for the probe's Landlock ruleset.

    Returns:
        The probe, with each unavailable layer corrected by what its child observed.
    """
    probe = probe_kernel()
    if not (probe.landlock_abi > 0 or probe.seccomp):
        return probe
    with _verify_lock:
        if read_roots in _verified:
            return _verified[read_roots]
        result = probe
        if probe.landlock_abi > 0:
            problem = _probe_child(Layer.LANDLOCK, probe, read_roots)
            if problem is not None:
                result = dataclasses.replace(result, landlock_abi=0, landlock_reason=problem)
        if probe.seccomp:
            problem = _probe_child(Layer.SECCOMP, probe, read_roots)
            if problem is not None:
                result = dataclasses.replace(result, seccomp=False, seccomp_reason=problem)
        _verified[read_roots] = result
        return result


def _probe_child(layer: Layer, probe: KernelProbe, read_roots: tuple[str, ...]) -> str | None:
    """Run ``layer`` alone in a probe child; return why it failed, or ``None`` if it held."""
    with tempfile.TemporaryDirectory(prefix="pysandbox-probe-") as tmp:
        workspace = os.path.realpath(tmp)
        landlock = None
        seccomp = None
        if layer == Layer.LANDLOCK:
            landlock = _landlock.plan(probe.landlock_abi, workspace=workspace, read_only=read_roots)
        else:
            seccomp = _seccomp.build_filters()
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
        spec = RunSpec(config, _PROBE_CODE[layer], None, "probe")
        outcome = supervisor.run(SpawnLauncher(), spec)
    out = outcome.stdout.decode("utf-8", "backslashreplace").strip()
    err = outcome.stderr.decode("utf-8", "backslashreplace").strip()
    if not outcome.ready:
        reason = outcome.setup_error or f"the probe child ended during setup: {err[-300:]}"
        return f"the probe child could not apply it: {reason[:400]}"
    if out == "ok":
        return None
    if out:
        return f"the probe child was not confined by it: {out[:200]}"
    return f"the probe failed: {err[-300:] or 'no output'}"
