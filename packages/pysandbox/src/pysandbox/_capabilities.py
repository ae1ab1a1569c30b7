"""Capability report: which isolation layers exist here and which a sandbox will use."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pysandbox import _seccomp
from pysandbox._layers import KERNEL_LAYERS, ExecutionMode, Layer

if TYPE_CHECKING:
    from pysandbox._gate import ModuleRules
    from pysandbox._landlock import LandlockPlan
    from pysandbox._limits import Limits
    from pysandbox._probe import KernelProbe
    from pysandbox._seccomp import SeccompProgram

__all__ = ["KERNEL_LAYERS", "Capabilities", "LayerInfo", "report"]


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
            "name": str(self.name),
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
            ``reason`` when warm mode fell back to spawn, and in warm mode the zygote's pid
            and ``ready_children`` (the pool's size).
    """

    platform: str
    python: str
    kernel_layers: bool
    required: tuple[str, ...]
    layers: tuple[LayerInfo, ...]
    tree_kill: str
    execution: Mapping[str, Any] = field(
        default_factory=lambda: MappingProxyType(
            {"requested": ExecutionMode.SPAWN, "mode": ExecutionMode.SPAWN, "reason": ""}
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
            "required": [str(name) for name in self.required],
            "missing_required": [str(name) for name in self.missing_required],
            "layers": {str(info.name): info.to_dict() for info in self.layers},
            "tree_kill": self.tree_kill,
            "execution": {
                key: str(value) if isinstance(value, ExecutionMode) else value
                for key, value in self.execution.items()
            },
        }


def report(
    probe: KernelProbe,
    *,
    limits: Limits,
    workspace: str,
    rules: ModuleRules,
    kernel_layers: bool,
    required: tuple[str, ...],
    plan: Callable[[], LandlockPlan],
    filters: Callable[[], tuple[SeccompProgram, ...]],
    env_allow_list: tuple[str, ...],
) -> Capabilities:
    """Every layer of one sandbox: available, active, details (the capability report).

    Args:
        probe: What the kernel offers (verified in a probe child when kernel layers are on).
        limits: The sandbox's limits.
        workspace: The workspace's real path.
        rules: The run-time rules of the Python-level guards.
        kernel_layers: Whether the sandbox was constructed with kernel layers on.
        required: The layers the sandbox requires.
        plan: Returns the sandbox's Landlock plan (called only when Landlock is available).
        filters: Returns the seccomp programs (called only when seccomp is available).
        env_allow_list: Names of the environment variables a child may receive.

    Returns:
        The report (its ``execution`` is the default; the sandbox fills it in).
    """
    lim = limits
    layers: list[LayerInfo] = []

    def add(name: str, available: bool, active: bool, reason: str = "", **details: Any) -> None:
        layers.append(LayerInfo(name, available, active, MappingProxyType(details), reason))

    add(Layer.AST_GATE, True, True, checker="astguard")
    add(
        Layer.ISOLATED_INTERPRETER,
        True,
        True,
        argv=[sys.executable, "-I", "-S", "-X", "utf8", "-c", "<bootstrap stub>"],
        stdin="/dev/null",
        new_session=True,
        env_allow_list=list(env_allow_list),
    )
    add(
        Layer.RLIMITS,
        True,
        True,
        cpu_time_s=lim.cpu_time_s,
        data_bytes=lim.memory_bytes,
        address_space_bytes=2 * lim.memory_bytes,
        file_size_bytes=lim.file_size_bytes,
        open_files=lim.open_files,
        core_bytes=0,
        nproc="not set: the child shares the caller's uid; seccomp denies process creation",
    )
    add(Layer.OPEN_GUARD, True, True, workspace=workspace)
    add(Layer.AUDIT_HOOK, True, True, immutable_state=True)
    add(Layer.IMPORT_GUARD, True, True, allowed_modules=sorted(rules.allowed))
    add(Layer.ATTRIBUTE_GUARD, True, True, guarded=["getattr", "setattr", "delattr", "hasattr"])
    off = "" if kernel_layers else "kernel layers switched off (kernel_layers=False)"
    ll_active = probe.landlock_abi > 0 and kernel_layers
    ll_details: dict[str, Any] = {
        "abi": probe.landlock_abi,
        "verified_in_child": ll_active,
    }
    if probe.landlock_abi > 0:
        ll_details.update(plan().describe())
    add(
        Layer.LANDLOCK,
        probe.landlock_abi > 0,
        ll_active,
        probe.landlock_reason or off,
        **ll_details,
    )
    sc_active = probe.seccomp and kernel_layers
    sc_details: dict[str, Any] = {
        "already_filtered": probe.already_filtered,
        "verified_in_child": sc_active,
    }
    if probe.seccomp:
        programs = filters()
        sc_details.update(
            filters=[
                {"name": f.name, "instructions": f.length, "listed_calls": f.listed}
                for f in programs
            ],
            rules=list(_seccomp.denied_rules()),
        )
    add(Layer.SECCOMP, probe.seccomp, sc_active, probe.seccomp_reason or off, **sc_details)
    add(
        Layer.NO_NEW_PRIVS,
        probe.seccomp or probe.landlock_abi > 0,
        ll_active or sc_active,
        "" if (ll_active or sc_active) else "set only together with a kernel layer",
    )
    add(
        Layer.CAPABILITIES,
        probe.seccomp or probe.landlock_abi > 0,
        ll_active or sc_active,
        "" if (ll_active or sc_active) else "dropped only together with a kernel layer",
        dropped=["bounding", "ambient", "effective", "permitted", "inheritable"],
        euid=os.geteuid() if hasattr(os, "geteuid") else None,
    )
    add(
        Layer.SUPERVISION,
        True,
        True,
        wall_clock_s=lim.timeout_s,
        output_bytes_per_stream=lim.output_bytes,
        workspace_bytes=lim.workspace_bytes,
        workspace_files=lim.workspace_files,
    )
    tree_kill = "killpg+sweep(session,env-marker)"
    if sc_active:
        tree_kill += "; process creation denied by seccomp"
    return Capabilities(
        platform=f"{sys.platform}/{os.uname().machine if hasattr(os, 'uname') else '?'}",
        python=sys.version.split()[0],
        kernel_layers=kernel_layers,
        required=required,
        layers=tuple(layers),
        tree_kill=tree_kill,
    )
