"""Capability report: which isolation layers exist here and which a sandbox will use."""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pysandbox import _abi, _landlock, _seccomp

__all__ = ["KERNEL_LAYERS", "Capabilities", "KernelProbe", "LayerInfo", "probe_kernel"]

#: Layers that only the kernel can provide; ``require`` may name these.
KERNEL_LAYERS: tuple[str, ...] = ("landlock", "seccomp")


@dataclass(frozen=True)
class LayerInfo:
    """One isolation layer.

    Attributes:
        name: Layer name (``"landlock"``, ``"seccomp"``, ``"rlimits"``, ...).
        available: The system supports the layer.
        active: Runs of this sandbox use it.
        details: Layer-specific facts (ABI version, rules, limits), JSON-compatible.
        reason: Why the layer is unavailable or inactive (empty when active).
    """

    name: str
    available: bool
    active: bool
    details: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Return the layer as a JSON-compatible dict."""
        return {
            "name": self.name,
            "available": self.available,
            "active": self.active,
            "details": dict(self.details),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Capabilities:
    """Every layer of one :class:`~pysandbox.Sandbox`: available, active, details.

    Attributes:
        platform: ``sys.platform`` and machine, e.g. ``"linux/x86_64"``.
        python: Version of the child interpreter.
        kernel_layers: Whether the sandbox was constructed with kernel layers on.
        required: Layers the sandbox requires (``run`` refuses without them).
        layers: Every layer, outermost first.
        tree_kill: How a run's process tree is killed.
        execution: ``requested`` and effective ``mode`` (``"spawn"`` or ``"warm"``), the
            ``reason`` when warm mode fell back to spawn, and the zygote's pid in warm mode.
    """

    platform: str
    python: str
    kernel_layers: bool
    required: tuple[str, ...]
    layers: tuple[LayerInfo, ...]
    tree_kill: str
    execution: Mapping[str, Any] = field(
        default_factory=lambda: MappingProxyType(
            {"requested": "spawn", "mode": "spawn", "reason": ""}
        )
    )

    def layer(self, name: str) -> LayerInfo:
        """Return the layer called ``name``.

        Args:
            name: A layer name.

        Returns:
            The layer.

        Raises:
            KeyError: No layer has that name.
        """
        for info in self.layers:
            if info.name == name:
                return info
        raise KeyError(name)

    @property
    def active_layers(self) -> tuple[str, ...]:
        """Names of the active layers, outermost first."""
        return tuple(info.name for info in self.layers if info.active)

    @property
    def missing_required(self) -> tuple[str, ...]:
        """Required layers that are not active."""
        return tuple(name for name in self.required if not self.layer(name).active)

    def to_dict(self) -> dict[str, Any]:
        """Return the report as JSON-compatible data."""
        return {
            "platform": self.platform,
            "python": self.python,
            "kernel_layers": self.kernel_layers,
            "required": list(self.required),
            "missing_required": list(self.missing_required),
            "layers": {info.name: info.to_dict() for info in self.layers},
            "tree_kill": self.tree_kill,
            "execution": dict(self.execution),
        }


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
        return False, f"filters are assembled for x86-64 only, not {platform.machine()}", False
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
