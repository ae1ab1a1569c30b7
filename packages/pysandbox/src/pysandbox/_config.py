"""The child's configuration: one typed value, built once per sandbox by :func:`build`.

Everything a confined child needs besides its code: the workspace and read-only roots, the
rlimits, the Landlock plan and seccomp programs (or ``None`` when that layer is off), the
run-time rules of the Python-level guards, the environment and the ABI data. The
:class:`~pysandbox.Sandbox` builds it once; the capability probe builds its own through the
same :func:`build`. :meth:`ChildConfig.wire` and :meth:`ChildConfig.run_request` turn it into
the messages declared in :mod:`pysandbox._wire` (plain, ``marshal``-compatible data) that cross
to the child or the zygote.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import CodeType, MappingProxyType

from pysandbox import _abi, _figures, _gate, _seccomp, _wire
from pysandbox._gate import ModuleRules
from pysandbox._landlock import LandlockPlan
from pysandbox._layers import PYTHON_LEVEL_LAYERS, Layer
from pysandbox._limits import Limits
from pysandbox.child import _main as _child

__all__ = ["MARKER_NAME", "RUN_KEYS", "ChildConfig", "build", "compile_user_code", "rlimits"]

#: Name of the environment variable that marks every process of a run (for the sweep).
MARKER_NAME = "PYSANDBOX_RUN"
#: Keys of a run's configuration that differ between runs (their declaration:
#: :class:`pysandbox._wire.RunPart`); the zygote holds the others.
RUN_KEYS: frozenset[str] = _wire.RunPart.__required_keys__ | _wire.RunPart.__optional_keys__


def rlimits(limits: Limits) -> tuple[tuple[int, int, int], ...]:
    """The ``(resource, soft, hard)`` triples of ``limits``, in the order the child sets them.

    Args:
        limits: The sandbox's limits.

    Returns:
        CPU (hard one second above soft), data, address space (twice the data limit), file
        size, open files and core size (0).
    """
    import resource  # POSIX only; run() refuses elsewhere before getting here

    return (
        (resource.RLIMIT_CPU, limits.cpu_time_s, limits.cpu_time_s + 1),
        (resource.RLIMIT_DATA, limits.memory_bytes, limits.memory_bytes),
        (resource.RLIMIT_AS, 2 * limits.memory_bytes, 2 * limits.memory_bytes),
        (resource.RLIMIT_FSIZE, limits.file_size_bytes, limits.file_size_bytes),
        (resource.RLIMIT_NOFILE, limits.open_files, limits.open_files),
        (resource.RLIMIT_CORE, 0, 0),
    )


def compile_user_code(code: str, *, receivers: bool = False) -> CodeType | None:
    """Compile the checked source as the child would, or ``None`` to let the child report.

    ``receivers``: route private-attribute receivers through the child's receiver guard
    (:func:`pysandbox._gate.compile_checked`; the child binds it when its rules name it).
    """
    try:
        return _gate.compile_checked(code, _child.USER_FILENAME, receivers=receivers)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None


@dataclass(frozen=True)
class ChildConfig:
    """Everything a child needs except its code.

    Attributes:
        workspace: Real path of the workspace (the child's working directory).
        read_roots: Real paths the child may read.
        list_roots: Directories the child may list but not read (``sys.path`` entries).
        sys_path: Entries appended to the child's ``sys.path``.
        rlimits: ``(resource, soft, hard)`` triples.
        landlock: The Landlock plan, or ``None`` when Landlock is off.
        seccomp: The stacked seccomp programs, or ``None`` when seccomp is off.
        rules: The run-time rules of the Python-level guards, or ``None``: guards off (the
            capability probe only; every sandbox run has them).
        env: The child's environment without its run marker.
        abi: :func:`pysandbox._abi.child_abi` data for this machine.
        no_create: Shrink-only: nothing may be created in the workspace.
        native_extensions: Extra modules ship native code: the Python-level guards allow the
            events of :data:`pysandbox.child._main.NATIVE_ALLOWED_EVENTS` (the kernel layers are
            required then).
        seccomp_debug: The seccomp program traps unlisted calls and the child names them.
        preload: Modules imported before the child enters the workspace: by the warm zygote
            once (its working directory is ``/``), by a spawn-mode child before its ``chdir``
            (a library that reads configuration from the working directory at import,
            matplotlib's ``matplotlibrc``, never sees one a run left in the workspace).
    """

    workspace: str
    read_roots: tuple[str, ...]
    list_roots: tuple[str, ...]
    sys_path: tuple[str, ...]
    rlimits: tuple[tuple[int, int, int], ...]
    landlock: LandlockPlan | None
    seccomp: tuple[_seccomp.SeccompProgram, ...] | None
    rules: ModuleRules | None
    env: Mapping[str, str]
    abi: _wire.ChildAbi
    no_create: bool = False
    native_extensions: bool = False
    seccomp_debug: bool = False
    preload: tuple[str, ...] = ()

    def _syscall_names(self) -> dict[int, str]:
        """Map each system-call number of this machine to its name (for the debug reporter)."""
        return {number: name for name, number in _abi.syscall_table().items()}

    @property
    def python_guards(self) -> bool:
        """Whether the Python-level guards are installed."""
        return self.rules is not None

    def layers(self, active: tuple[str, ...]) -> tuple[str, ...]:
        """The names in ``active`` (the sandbox's active layers) that this configuration uses."""
        off: set[str] = set()
        if self.seccomp is None:
            off.add(Layer.SECCOMP)
        if self.landlock is None:
            off.add(Layer.LANDLOCK)
        if self.rules is None:  # the AST gate runs in the parent, before any child
            off.update(PYTHON_LEVEL_LAYERS - {Layer.AST_GATE})
        return tuple(name for name in active if name not in off)

    def shrink_only(self) -> ChildConfig:
        """This configuration for a workspace already over its limits: the run may not grow it.

        A run can overshoot the limits by what it writes within one poll interval; the runs
        after it are shrink-only, so that overshoots cannot pile up run after run: no file may
        grow (``RLIMIT_FSIZE`` 0) and, where Landlock is active, nothing may be created
        (files, directories, links, renames into new names). Deleting still works.
        """
        import resource  # POSIX only, like rlimits()

        limits = tuple(
            (kind, 0, 0) if kind == resource.RLIMIT_FSIZE else (kind, soft, hard)
            for kind, soft, hard in self.rlimits
        )
        return dataclasses.replace(self, rlimits=limits, no_create=True)

    def wire(
        self,
        code: str,
        code_object: CodeType | None,
        *,
        setup_fd: int = -1,
        figure_fd: int = -1,
    ) -> _wire.ChildConfig:
        """The whole configuration of one spawn-mode run as plain data for the child.

        Args:
            code: The checked source.
            code_object: Its code object, or ``None`` (the child compiles the source).
            setup_fd: Write end of the run's setup channel, as the child sees it (-1: none).
            figure_fd: Write end of the run's figure channel, as the child sees it (-1: none).

        Returns:
            The :class:`pysandbox._wire.ChildConfig` of a child started in ``/``
            (``enter_workspace``).
        """
        # mypy cannot see that the optional keys may be absent from the ** parts.
        cfg: _wire.ChildConfig = {
            **self._fixed,
            **self._run_part(code, code_object),  # type: ignore[typeddict-item]
            "setup_fd": setup_fd,
            "figure_fd": figure_fd,
            "enter_workspace": True,
        }
        return cfg

    def fixed_wire(self) -> _wire.ChildFixed:
        """The part every run shares, as plain data (the zygote's start configuration).

        Returns:
            A new dict (the caller may add keys); its values are shared and must not change.
        """
        fixed: _wire.ChildFixed = {**self._fixed}
        return fixed

    @functools.cached_property
    def _fixed(self) -> _wire.ChildFixed:
        """The shared part, computed once per configuration (sorted lists, plans, programs)."""
        rules = self.rules
        cfg: _wire.ChildFixed = {
            "workspace": self.workspace,
            "read_roots": list(self.read_roots),
            "list_roots": list(self.list_roots),
            "sys_path": list(self.sys_path),
            "landlock": self.landlock.to_wire() if self.landlock is not None else None,
            "seccomp": [f.code for f in self.seccomp] if self.seccomp is not None else None,
            "pid_placeholder": _seccomp.PID_PLACEHOLDER,
            "pgid_placeholder": _seccomp.NEG_PGID_PLACEHOLDER,
            # seccomp_debug: the child names a trapped system call (number -> name).
            "seccomp_names": self._syscall_names() if self.seccomp_debug else None,
            "allowed_modules": sorted(rules.allowed) if rules else [],
            "denied_modules": sorted(rules.denied) if rules else [],
            "allowed_dunders": sorted(rules.allowed_dunders) if rules else [],
            "forbidden_attributes": sorted(rules.forbidden_attributes) if rules else [],
            "static_forbidden_attributes": (
                sorted(rules.static_forbidden_attributes) if rules else []
            ),
            "module_forbidden": sorted(rules.module_forbidden) if rules else [],
            "denied_module_attributes": sorted(rules.denied_module_attributes) if rules else [],
            "format_router": rules.format_router if rules else "",
            "receiver_router": rules.receiver_router if rules else "",
            "receiver_bases": sorted(rules.receiver_bases) if rules else [],
            "python_guards": rules is not None,
            "native_extensions": self.native_extensions,
            "preload": list(self.preload),
            # The figure channel's caps (figures, bytes); its descriptor comes per run.
            "figure_caps": list(_figures.channel_caps()),
            "abi": {
                "nr": dict(self.abi["nr"]),
                "prctl": dict(self.abi["prctl"]),
                "landlock": dict(self.abi["landlock"]),
                "seccomp": dict(self.abi["seccomp"]),
                "capset_version": self.abi["capset_version"],
            },
        }
        return cfg

    def run_request(self, code: str, code_object: CodeType | None, marker: str) -> _wire.RunRequest:
        """What the zygote receives for one run: the code, the limits and the run marker."""
        request: _wire.RunRequest = {
            **self._run_part(code, code_object),  # type: ignore[typeddict-item]  # see wire()
            "env": {MARKER_NAME: marker},
        }
        return request

    def _run_part(self, code: str, code_object: CodeType | None) -> _wire.RunPart:
        part: _wire.RunPart = {
            "code": code,
            "code_object": code_object,
            "rlimits": list(self.rlimits),
        }
        if self.no_create:
            part["no_create"] = True
        return part


def build(
    *,
    workspace: str,
    read_roots: tuple[str, ...],
    sys_path: tuple[str, ...] = (),
    list_roots: tuple[str, ...] | None = None,
    limits: Limits | None,
    rules: ModuleRules | None,
    landlock: LandlockPlan | None,
    seccomp: tuple[_seccomp.SeccompProgram, ...] | None,
    env: Mapping[str, str],
    native_extensions: bool = False,
    seccomp_debug: bool = False,
    preload: tuple[str, ...] = (),
) -> ChildConfig:
    """Build a child configuration (the one builder: sandboxes and the capability probe).

    Args:
        workspace: Real path of the workspace.
        read_roots: Real paths the child may read.
        sys_path: ``sys.path`` entries of extra modules.
        list_roots: Directories the child may list but not read; ``None``: ``sys_path``.
        limits: The rlimits to apply, or ``None`` for none (the probe).
        rules: The guards' run-time rules, or ``None`` for no Python-level guards (the probe).
        landlock: The Landlock plan, or ``None`` for Landlock off.
        seccomp: The seccomp programs, or ``None`` for seccomp off.
        env: The child's environment without its run marker.
        native_extensions: Extra modules ship native code (see :class:`ChildConfig`).
        seccomp_debug: ``seccomp`` was built with ``debug=True``; the child names trapped
            calls.
        preload: Modules imported before the child enters the workspace (see
            :class:`ChildConfig`).

    Returns:
        The configuration.

    Raises:
        pysandbox._abi.UnsupportedMachineError: A kernel layer is on and this machine has no
            system-call table.
    """
    kernel = landlock is not None or seccomp is not None
    return ChildConfig(
        workspace=workspace,
        read_roots=tuple(read_roots),
        list_roots=tuple(sys_path if list_roots is None else list_roots),
        sys_path=tuple(sys_path),
        rlimits=rlimits(limits) if limits is not None else (),
        landlock=landlock,
        seccomp=seccomp,
        rules=rules,
        env=MappingProxyType(dict(env)),
        abi=_abi.child_abi(required=kernel),
        native_extensions=native_extensions,
        seccomp_debug=seccomp_debug and seccomp is not None,
        preload=tuple(preload),
    )
