"""A sandbox's configuration: one frozen value, validated once, each bound next to its field.

:class:`SandboxConfig` holds everything a :class:`~pysandbox.Sandbox` is built from except its
workspace (a path the sandbox resolves and checks against the file system). Its checks are the
value checks (types, bounds, names); what needs the file system or the policy's rules (where a
module's distribution lives, whether it ships native code, whether a preload is allowed, whether
a read path exists) the sandbox checks when it is built.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import astguard
from pysandbox import _pool
from pysandbox._bounds import Bound, bounded, bounded_factory, check_fields
from pysandbox._layers import KERNEL_LAYERS, ExecutionMode, Layer, default_execution
from pysandbox._limits import Limits

if TYPE_CHECKING:
    from pysandbox.profiles import Profile

__all__ = ["SandboxConfig"]

_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_KERNEL_NAMES = [str(layer) for layer in KERNEL_LAYERS]


def _module_names(what: str, names: object) -> tuple[str, ...]:
    """``names`` as a tuple of dotted module names, in order, without repeats."""
    if isinstance(names, (str, bytes)) or not isinstance(names, Iterable):
        raise TypeError(f"{what} must be an iterable of module names, not a string")
    out: list[str] = []
    for name in names:
        if not isinstance(name, str) or not _MODULE_NAME.match(name):
            raise ValueError(f"{what}: {name!r} is not a dotted module name")
        out.append(name)
    return tuple(dict.fromkeys(out))


def _cpu_count() -> int:
    return os.cpu_count() or 1


@dataclass(frozen=True)
class SandboxConfig:
    """Everything a :class:`~pysandbox.Sandbox` is built from, but its workspace.

    Build it once (``SandboxConfig(...)``, or :meth:`for_profile`) and pass it to
    :meth:`Sandbox.from_config <pysandbox.Sandbox.from_config>`; ``Sandbox(workspace,
    **keywords)`` builds one from its keywords. The values are checked when it is built
    (iterables become tuples, layer and mode names their enums); bounds are declared with the
    fields (``pysandbox.bound_of(SandboxConfig, "ready_max_idle_s")``).

    Attributes:
        limits: Resource limits of every run (see :class:`~pysandbox.Limits`).
        policy: An ``astguard.Policy``; ``None`` for astguard's safe default.
        require: Kernel layers without which a run is refused with
            :class:`~pysandbox.IsolationUnavailable` (default both, :data:`KERNEL_LAYERS`);
            ``()`` accepts Python-level isolation and rlimits only: UNSAFE against hostile code.
        extra_modules: Importable modules beyond the policy (dotted names).
        extra_read_paths: Extra paths the code may read (read-only); they must exist.
        kernel_layers: ``False`` switches Landlock and seccomp off (the red-team comparison
            run only).
        execution: :class:`~pysandbox.ExecutionMode` (``"warm"`` or ``"spawn"``); default
            ``$PYSANDBOX_EXECUTION`` when set, else ``"warm"`` (``pysandbox.default_execution``).
        max_concurrent_runs: How many runs execute at once, at least 1 (default: the CPU count).
        preload: Modules imported before a run enters its workspace (each must be allowed).
        ready_children: Warm mode: how many confined children wait for code, at least 0
            (default ``READY_CHILDREN``, 2; 0 switches the pool off).
        ready_max_idle_s: Seconds a ready child may wait before it is replaced, finite, at
            least ``READY_MIN_IDLE_S`` (0.1; default ``READY_MAX_IDLE_S``, 60).
        seccomp_debug: A system call outside the allow-list traps and is named on stderr
            instead of failing with ``ENOSYS`` (diagnosis only).

    Raises:
        TypeError: A value has the wrong type (a string where an iterable of names is due, a
            ``bool`` or ``float`` where an ``int`` is).
        ValueError: A value is out of its bounds; an unknown layer; a module name that is not
            a dotted name; an unknown execution mode.
    """

    limits: Limits = field(default_factory=Limits)
    policy: astguard.Policy | None = None
    require: tuple[Layer, ...] = KERNEL_LAYERS
    extra_modules: tuple[str, ...] = ()
    extra_read_paths: tuple[str, ...] = ()
    kernel_layers: bool = True
    execution: ExecutionMode = field(default_factory=default_execution)
    max_concurrent_runs: int = bounded_factory(_cpu_count, Bound(int, minimum=1))
    preload: tuple[str, ...] = ()
    ready_children: int = bounded(_pool.READY_CHILDREN, Bound(int, minimum=0))
    ready_max_idle_s: float = bounded(
        _pool.READY_MAX_IDLE_S, Bound(float, minimum=_pool.READY_MIN_IDLE_S)
    )
    seccomp_debug: bool = False

    def __post_init__(self) -> None:
        def put(name: str, value: object) -> None:
            object.__setattr__(self, name, value)

        if not isinstance(self.limits, Limits):
            raise TypeError(f"limits must be a pysandbox.Limits, not {type(self.limits).__name__}")
        if self.policy is not None and not isinstance(self.policy, astguard.Policy):
            raise TypeError(f"policy must be an astguard.Policy, not {type(self.policy).__name__}")
        require: object = self.require
        if isinstance(require, (str, bytes)) or not isinstance(require, Iterable):
            raise TypeError("require must be an iterable of layer names, not a string")
        names = tuple(dict.fromkeys(require))
        unknown = [name for name in names if name not in KERNEL_LAYERS]
        if unknown:
            raise ValueError(f"unknown layer(s) in require: {unknown}; known: {_KERNEL_NAMES}")
        put("require", tuple(Layer(name) for name in names))
        put("extra_modules", _module_names("extra_modules", self.extra_modules))
        put("preload", _module_names("preload", self.preload))
        paths: object = self.extra_read_paths
        if isinstance(paths, (str, bytes)) or not isinstance(paths, Iterable):
            raise TypeError("extra_read_paths must be an iterable of paths, not a string")
        put("extra_read_paths", tuple(os.fspath(path) for path in paths))
        for flag in ("kernel_layers", "seccomp_debug"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{flag} must be a bool")
        if self.execution not in tuple(ExecutionMode):
            modes = [str(mode) for mode in ExecutionMode]
            raise ValueError(f"execution must be one of {modes}, not {self.execution!r}")
        put("execution", ExecutionMode(self.execution))
        check_fields(self)
        put("ready_max_idle_s", float(self.ready_max_idle_s))

    @property
    def requires_kernel_layers(self) -> bool:
        """Both kernel layers on and required: what native extension modules need."""
        return self.kernel_layers and set(KERNEL_LAYERS) <= set(self.require)

    @classmethod
    def for_profile(
        cls,
        profile: Profile,
        *,
        limits: Limits | None = None,
        extra_modules: Iterable[str] = (),
        **options: object,
    ) -> SandboxConfig:
        """A configuration for ``profile``: its modules, preload, memory default and layers.

        Args:
            profile: A profile (:data:`pysandbox.PROFILES`, :data:`pysandbox.DEFAULT`).
            limits: The limits; ``None`` for the defaults with the profile's ``memory_bytes``.
                Given limits are taken as they are (an explicit memory limit wins).
            extra_modules: Modules allowed beyond the profile's (after them).
            **options: Any other field of :class:`SandboxConfig`; ``require`` defaults to
                :data:`KERNEL_LAYERS` and must include the profile's ``required_layers``;
                ``policy`` gets the profile's checker rules (:meth:`Profile.policy_for`).

        Returns:
            The configuration.

        Raises:
            ValueError: ``require`` lacks a layer the profile requires; a field is invalid.
            TypeError: A field has the wrong type, or ``options`` names a field twice.
        """
        if limits is None:
            limits = Limits(memory_bytes=profile.memory_bytes)
        policy = options.pop("policy", None)
        config = cls(
            limits=limits,
            policy=profile.policy_for(policy),  # type: ignore[arg-type]
            extra_modules=(*profile.extra_modules, *_module_names("extra_modules", extra_modules)),
            preload=options.pop("preload", profile.preload),  # type: ignore[arg-type]
            **options,  # type: ignore[arg-type]
        )
        missing = [str(n) for n in profile.required_layers if n not in config.require]
        if missing or (profile.required_layers and not config.kernel_layers):
            raise ValueError(
                f"profile {profile.name!r} allows native extension modules: it needs the kernel "
                f"layers on and required (require={_KERNEL_NAMES}; missing: {missing})"
            )
        return config
