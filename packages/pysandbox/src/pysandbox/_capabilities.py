"""Capability report: which isolation layers exist here and which a sandbox will use."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["KERNEL_LAYERS", "Capabilities", "LayerInfo"]

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
