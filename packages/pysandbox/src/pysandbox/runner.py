"""The :class:`Sandbox`: run untrusted Python in a confined child interpreter.

The sandbox's lifecycle: validate the workspace and settings, report the layers, build the
child configuration once, check each run (source size, AST gate, required layers), hold a run
slot, launch (warm zygote or spawn), supervise, decide, close. How a run flows is described in
the package's README ("How a run flows").
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import marshal
import math
import os
import pathlib
import secrets
import sys
import sysconfig
import threading
import weakref
from collections.abc import Iterable, Iterator
from types import CodeType, MappingProxyType
from typing import Any

import astguard
from pysandbox import (
    _config,
    _distributions,
    _figures,
    _gate,
    _home,
    _landlock,
    _matplotlib,
    _pool,
    _seccomp,
    _session,
    _wire,
)
from pysandbox._capabilities import Capabilities, LayerInfo, report
from pysandbox._config import MARKER_NAME, ChildConfig
from pysandbox._disk import Listing, changed_files, workspace_usage
from pysandbox._exclusive import (
    EXCLUSIVE_WAIT_S,
    STOP_WAIT_S,
    ExclusiveReport,
    WorkspaceCoordinator,
)
from pysandbox._launch import Launcher, RunSpec, SpawnLauncher, ZygoteLauncher
from pysandbox._layers import KERNEL_LAYERS, PYTHON_LEVEL_LAYERS, ExecutionMode, Layer
from pysandbox._limits import Limits
from pysandbox._outcome import Observation, Stop, decide
from pysandbox._probe import probe_kernel, verify_kernel
from pysandbox._result import RunResult, RunStatus
from pysandbox._sandbox_config import SandboxConfig
from pysandbox._supervisor import Supervisor, start_usage_entries
from pysandbox.child import _main as _child
from pysandbox.child import _zygote
from pysandbox.exceptions import (
    IsolationUnavailable,
    SandboxClosedError,
    SandboxSetupError,
)

__all__ = ["READY_CHILDREN", "READY_MAX_IDLE_S", "READY_MIN_IDLE_S", "Sandbox"]

READY_CHILDREN = _pool.READY_CHILDREN
READY_MAX_IDLE_S = _pool.READY_MAX_IDLE_S
READY_MIN_IDLE_S = _pool.READY_MIN_IDLE_S

_ENV_PASSTHROUGH = ("TZ",)
#: In the environment of every run (warm and spawn) and of the zygote before it preloads:
#: native libraries read them once at load. One thread each (BLAS and OpenMP pools would make
#: the zygote multi-threaded, and fork() of a threaded process is unsafe), two malloc arenas.
RUN_ENV = MappingProxyType(
    {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2"}
)
#: The environment variable that must be ``1`` for ``Sandbox(_testing_kernel_only=True)``.
TESTING_KERNEL_ONLY_ENV = "PYSANDBOX_TESTING_KERNEL_ONLY"
#: The kernel layers' names, as messages list them.
_KERNEL_NAMES = [str(layer) for layer in KERNEL_LAYERS]
#: Standard-library modules the warm zygote imports before forking (only those the policy
#: allows; each run's import guard still decides what the code may import).
_PREIMPORT = (
    "json",
    "csv",
    "statistics",
    "math",
    "re",
    "collections",
    "itertools",
    "functools",
    "datetime",
    "decimal",
    "fractions",
    "random",
    "string",
    "textwrap",
    "heapq",
    "bisect",
    "operator",
    "dataclasses",
    "enum",
    "typing",
    "traceback",
    "linecache",
)
#: The rule id of pysandbox's own refusals of a source before the AST gate (its size, or the
#: size of its compiled form), reported as an ``astguard.Violation`` on line 1.
SOURCE_RULE_ID = "PS001"


def _source_violation(message: str) -> astguard.Violation:
    """A :data:`SOURCE_RULE_ID` refusal: the whole source, line 1, column 0."""
    return astguard.Violation(
        rule_id=SOURCE_RULE_ID, message=message, line=1, col=0, end_line=1, end_col=0
    )


_executor_cache: list[concurrent.futures.ThreadPoolExecutor] = []
_executor_lock = threading.Lock()


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    """Threads for ``arun``: runs waiting for their sandbox never hold the loop's default pool."""
    with _executor_lock:
        if not _executor_cache:
            _executor_cache.append(
                concurrent.futures.ThreadPoolExecutor(
                    max_workers=64, thread_name_prefix="pysandbox"
                )
            )
        return _executor_cache[0]


def _stdlib_roots() -> tuple[str, ...]:
    roots = {os.path.realpath(sysconfig.get_paths()["stdlib"])}
    for entry in sys.path:
        if entry and "lib-dynload" in entry:
            roots.add(os.path.realpath(entry))
    return tuple(sorted(roots))


def _forbidden_workspaces() -> list[pathlib.Path]:
    homes = {pathlib.Path.home()}
    with contextlib.suppress(KeyError, ImportError):
        import pwd

        homes.add(pathlib.Path(pwd.getpwuid(os.getuid()).pw_dir))  # POSIX only
    return [pathlib.Path(os.path.realpath(h)) for h in homes]


def _overlaps(a: str, b: str) -> bool:
    pa, pb = pathlib.PurePosixPath(a), pathlib.PurePosixPath(b)
    return pa == pb or pa in pb.parents or pb in pa.parents


class Sandbox:
    """Run untrusted Python code confined to one workspace directory.

    Layers, outermost first: the astguard AST gate; a fresh child process in its own session
    with a clean environment (forked from a warm zygote, or a new ``python -I -S``); rlimits;
    Python-level guards (confined ``open()``, an audit hook, an import guard, guarded attribute
    builtins); Landlock and seccomp (Linux); parent supervision (deadline, output caps,
    workspace size, process-tree kill).

    The keywords are those of :class:`~pysandbox.SandboxConfig` (``Sandbox(workspace, **kw)``
    builds one, which checks them); :meth:`from_config` takes one built already.

    Args:
        workspace: Existing directory the code may read and write (its current directory).
            Refused: ``/``, a home directory, or anything overlapping the interpreter, the
            standard library or a read-only path.
        limits: Resource limits (see :class:`~pysandbox.Limits`).
        policy: An ``astguard.Policy``; ``None`` for astguard's safe default.
        require: Kernel layers without which :meth:`run` refuses with
            :class:`~pysandbox.IsolationUnavailable`. ``require=()`` accepts Python-level
            isolation and rlimits only: UNSAFE against hostile code.
        extra_modules: Importable modules beyond the policy (added to the allow-list; their
            installation directory becomes importable and read-only readable).
        extra_read_paths: Extra paths the code may read (read-only).
        kernel_layers: ``False`` switches Landlock and seccomp off (for the red-team
            comparison run only). rlimits and Python-level guards stay on.
        execution: ``None`` (default): :func:`pysandbox.default_execution`, which is
            ``$PYSANDBOX_EXECUTION`` when set, else ``"warm"``. ``"warm"``: a fork server
            ("zygote") started lazily with the same layers forks a fresh child per run and
            applies every layer after the fork (Linux; where the zygote cannot start, runs fall
            back to spawn and the capability report's ``execution`` says why). ``"spawn"``: a
            fresh ``python -I -S`` per run.
        preload: Modules imported before a run enters its workspace (each must be allowed:
            on the policy's allow-list or in ``extra_modules``): once by the warm zygote,
            before forking (it then checks that it still has exactly one thread), and by each
            spawn-mode child before its ``chdir``. matplotlib, when allowed, is always
            imported so (it reads ``matplotlibrc`` from the working directory).
        ready_children: Warm mode: how many children the zygote keeps forked and confined
            (every layer applied) for the sandbox's own configuration, waiting for code
            (default :data:`READY_CHILDREN`, 2; 0 switches the pool off). Each serves one
            run and is never reused; a shrink-only run never gets one; a claim first checks
            that the zygote answers (a stuck zygote is replaced before the code is sent);
            :meth:`invalidate_workspace_manifest`, :meth:`discard_ready_children` and
            :meth:`close` empty the pool. Ready children
            count in the memory and process budgets: up to ``max_concurrent_runs +
            ready_children`` children exist at once, each under ``limits.memory_bytes``.
        ready_max_idle_s: Seconds a ready child may wait before it is replaced (default
            :data:`READY_MAX_IDLE_S`, 60; at least 0.1): a timer replaces it even when no run
            comes.
        seccomp_debug: For diagnosis: a system call outside the seccomp allow-list traps
            instead of failing with ``ENOSYS``; the child writes ``pysandbox: system call NAME
            is not allowed in the sandbox`` to stderr and the run ends ``killed`` by
            ``SIGSYS``. Not for production (the reporter runs Python code in a signal handler).
        _testing_kernel_only: FOR PYSANDBOX'S OWN TESTS, NEVER FOR USE: no AST gate and no
            Python-level guards, so that native payloads reach the kernel layers (which stay
            on, with the limits). Honoured only when ``os.environ`` has
            ``PYSANDBOX_TESTING_KERNEL_ONLY=1`` when the sandbox is constructed; the
            capability report and every result name the ``testing_kernel_only`` layer.
        max_concurrent_runs: How many runs of this sandbox execute at once (default: the CPU
            count); further calls to :meth:`run` block, and :meth:`arun` waits without
            blocking the event loop, until a run ends. Concurrent runs share the workspace
            and its size limits: a run is stopped with ``disk_limit`` when the workspace as a
            whole passes them.

    Extra modules are allowed by distribution: the distributions providing them and their
    dependency closure become readable (see :mod:`pysandbox._distributions`). When one of them
    ships native extension modules the Python-level layers are no barrier, so both kernel
    layers must be on and required. When matplotlib is among them, its font cache is built
    once per process into a directory children may only read (``MPLCONFIGDIR``). ``HOME`` is
    an empty directory of the process that children may only read (:mod:`pysandbox._home`);
    ``TMPDIR`` is the workspace.

    Raises:
        ValueError: The workspace or an argument is invalid; an extra module's distribution
            cannot be allowed (no ``RECORD``, a dependency missing), or ships native code while
            the kernel layers are off or not required; ``_testing_kernel_only`` without
            ``PYSANDBOX_TESTING_KERNEL_ONLY=1`` in the environment, or with kernel layers off;
            ``execution`` not given and ``PYSANDBOX_EXECUTION`` set to an unknown mode.
        TypeError: An argument has the wrong type.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        limits: Limits | None = None,
        policy: astguard.Policy | None = None,
        require: Iterable[str] = KERNEL_LAYERS,
        extra_modules: Iterable[str] = (),
        extra_read_paths: Iterable[str | os.PathLike[str]] = (),
        kernel_layers: bool = True,
        execution: str | None = None,
        max_concurrent_runs: int | None = None,
        preload: Iterable[str] = (),
        ready_children: int = READY_CHILDREN,
        ready_max_idle_s: float = READY_MAX_IDLE_S,
        seccomp_debug: bool = False,
        _testing_kernel_only: bool = False,
    ) -> None:
        options: dict[str, Any] = {}
        if max_concurrent_runs is not None:
            options["max_concurrent_runs"] = max_concurrent_runs
        if execution is not None:  # else SandboxConfig's default: pysandbox.default_execution()
            options["execution"] = execution
        config = SandboxConfig(
            limits=limits if limits is not None else Limits(),
            policy=policy,
            require=require,  # type: ignore[arg-type]  # SandboxConfig checks and converts
            extra_modules=extra_modules,  # type: ignore[arg-type]
            extra_read_paths=extra_read_paths,  # type: ignore[arg-type]
            kernel_layers=kernel_layers,
            preload=preload,  # type: ignore[arg-type]
            ready_children=ready_children,
            ready_max_idle_s=ready_max_idle_s,
            seccomp_debug=seccomp_debug,
            **options,
        )
        self._setup(workspace, config, _testing_kernel_only)

    @classmethod
    def from_config(cls, workspace: str | os.PathLike[str], config: SandboxConfig) -> Sandbox:
        """A sandbox for ``workspace`` built from a configuration validated already.

        Args:
            workspace: As for :class:`Sandbox`.
            config: The sandbox's configuration (see :class:`~pysandbox.SandboxConfig`).

        Returns:
            The sandbox.

        Raises:
            TypeError: ``config`` is not a :class:`~pysandbox.SandboxConfig`.
            ValueError: As for :class:`Sandbox`: the workspace, an extra module's distribution,
                native code without the kernel layers, a preload the policy does not allow,
                a read path that does not exist.
        """
        if not isinstance(config, SandboxConfig):
            raise TypeError(
                f"config must be a pysandbox.SandboxConfig, not {type(config).__name__}"
            )
        sandbox = cls.__new__(cls)
        sandbox._setup(workspace, config, False)
        return sandbox

    def _setup(
        self, workspace: str | os.PathLike[str], config: SandboxConfig, kernel_only: object
    ) -> None:
        """Build the sandbox from its validated configuration (the file-system checks)."""
        if kernel_only is not False:
            if os.environ.get(TESTING_KERNEL_ONLY_ENV) != "1" or kernel_only is not True:
                raise ValueError(
                    f"_testing_kernel_only is for pysandbox's own tests and needs "
                    f"{TESTING_KERNEL_ONLY_ENV}=1 in the environment"
                )
            if config.kernel_layers is not True:
                raise ValueError("_testing_kernel_only keeps the kernel layers: kernel_layers=True")
        self._kernel_only = kernel_only is True
        self._sandbox_config = config
        self._seccomp_debug = config.seccomp_debug
        self._max_concurrent_runs = config.max_concurrent_runs
        self._execution = config.execution
        self._zygote: _zygote.Zygote | None = None
        self._zygote_reason = ""
        self._zygote_lock = threading.Lock()
        self._limits = config.limits
        self._require = config.require
        self._kernel_layers = config.kernel_layers
        self._workspace = self._validate_workspace(workspace)
        self._extra_modules = config.extra_modules
        self._grants = self._locate_modules(self._extra_modules)
        self._sys_path = self._grants.sys_path
        module_roots = self._grants.read_roots
        if self._grants.native and not config.requires_kernel_layers:
            names = ", ".join(f"{n} {v}" for n, v in self._grants.distributions)
            raise ValueError(
                f"extra_modules: the distributions allowed ({names}) ship native extension "
                "modules, which make the Python-level layers no barrier: they are allowed only "
                f"with the kernel layers on and required (require={_KERNEL_NAMES}, "
                "kernel_layers=True)"
            )
        dist_names = {n for n, _ in self._grants.distributions}
        self._mpl_dir = _matplotlib.config_dir() if "matplotlib" in dist_names else None
        if self._mpl_dir is not None:
            module_roots = (*module_roots, self._mpl_dir)
        self._home = _home.home_dir()
        module_roots = (*module_roots, self._home)
        extra_paths = []
        for path in config.extra_read_paths:
            real = os.path.realpath(path)
            if not pathlib.Path(real).exists():
                raise ValueError(f"extra_read_paths: {path!r} does not exist")
            extra_paths.append(real)
        self._read_roots = tuple(
            dict.fromkeys([*_stdlib_roots(), *module_roots, *extra_paths, *_landlock.SYSTEM_DIRS])
        )
        for root in (
            *self._read_roots,
            os.path.realpath(sys.prefix),
            os.path.realpath(sys.base_prefix),
        ):
            if _overlaps(self._workspace, os.path.realpath(root)):
                raise ValueError(
                    f"workspace {self._workspace!r} overlaps {root!r} (interpreter, library or "
                    "read-only path): choose a dedicated directory"
                )
        self._policy = _gate.runtime_policy(config.policy, self._extra_modules)
        self._pool = _pool.ReadyPool(
            config.ready_children if config.execution == ExecutionMode.WARM else 0,
            config.ready_max_idle_s,
            _pool.max_code_bytes(self._policy.max_source_bytes),
        )
        self._max_compiled_bytes = _pool.max_compiled_bytes(self._policy.max_source_bytes)
        self._rules = _gate.module_rules(self._policy)
        # AG309's exempt `self._x` checked at run time too (the child's receiver guard)
        self._routes_receivers = bool(self._rules.receiver_router) and not self._kernel_only
        self._preload = config.preload
        for name in self._preload:
            if not _child.module_allowed(name, self._rules.allowed, self._rules.denied):
                raise ValueError(
                    f"preload: module {name!r} is not allowed; add it to extra_modules"
                )
        # matplotlib reads $PWD/matplotlibrc when imported: imported before the chdir always.
        mpl_first = ("matplotlib",) if self._mpl_dir is not None else ()
        self._import_first = tuple(dict.fromkeys((*self._preload, *mpl_first)))
        self._closed = False
        self._coordinator = WorkspaceCoordinator()
        self._run_slots = threading.BoundedSemaphore(config.max_concurrent_runs)
        self._sessions: set[_session.Session] = set()
        self._sessions_lock = threading.Lock()
        self._active: set[Supervisor] = set()
        self._active_lock = threading.Lock()
        self._landlock_plan: _landlock.LandlockPlan | None = None
        self._filters: tuple[_seccomp.SeccompProgram, ...] | None = None
        self._caps: Capabilities | None = None
        self._config: ChildConfig | None = None
        # The workspace manifest: what the walk at the end of the last run measured, reused as
        # the next run's start while nothing else changed the workspace (generation).
        self._disk_lock = threading.Lock()
        self._disk_generation = 0
        self._disk_running = 0
        self._manifest: tuple[int, tuple[int, int], Listing] | None = None

    # -- validation --
    @staticmethod
    def _validate_workspace(workspace: str | os.PathLike[str]) -> str:
        raw: object = os.fspath(workspace)
        if not isinstance(raw, str) or not raw:
            raise TypeError("workspace must be a non-empty str or os.PathLike[str]")
        real = os.path.realpath(raw)
        if not pathlib.Path(real).is_dir():
            raise ValueError(f"workspace {raw!r} is not an existing directory")
        if real == "/":
            raise ValueError("workspace must not be the root directory")
        for home in _forbidden_workspaces():
            if real == str(home):
                raise ValueError(f"workspace must not be a home directory ({real})")
        for system in ("/usr", "/etc", "/proc", "/sys", "/dev", "/bin", "/sbin", "/lib", "/boot"):
            sys_real = os.path.realpath(system)
            if real == sys_real or real.startswith(sys_real + "/"):
                raise ValueError(
                    f"workspace must not be or lie under the system directory {system}"
                )
        return real

    @staticmethod
    def _locate_modules(names: tuple[str, ...]) -> _distributions.Grants:
        """The grants of the extra modules' distributions (standard-library ones need none)."""
        stdlib = _stdlib_roots()
        tops: list[str] = []
        for name in names:
            top = name.split(".")[0]
            origin = _distributions.module_origin(top)
            if origin is None or any(_overlaps(origin, root) for root in stdlib):
                continue  # built in, frozen or standard library: readable already
            tops.append(top)
        return _distributions.resolve(tuple(dict.fromkeys(tops)))

    # -- public API --
    @property
    def workspace(self) -> str:
        """The workspace's real path."""
        return self._workspace

    @property
    def limits(self) -> Limits:
        """The limits applied to every run."""
        return self._limits

    @property
    def config(self) -> SandboxConfig:
        """The sandbox's configuration (validated when it was built)."""
        return self._sandbox_config

    @property
    def max_concurrent_runs(self) -> int:
        """How many runs of this sandbox execute at once."""
        return self._max_concurrent_runs

    def capabilities(self) -> Capabilities:
        """Report every layer: available, active for this sandbox, and details.

        Returns:
            The capability report (cached after the first call).
        """
        if self._caps is None:
            self._caps = self._build_capabilities()
        return dataclasses.replace(self._caps, execution=self._execution_info())

    def _execution_info(self) -> MappingProxyType[str, Any]:
        mode = self._execution
        info: dict[str, Any] = {"requested": mode, "mode": mode, "reason": ""}
        if mode == ExecutionMode.WARM and self._zygote_reason:
            info.update(mode=ExecutionMode.SPAWN, reason=self._zygote_reason)
        if mode == ExecutionMode.WARM:
            zygote = self._zygote
            info["zygote_pid"] = zygote.pid if zygote is not None and zygote.alive() else None
            if info["mode"] == ExecutionMode.WARM:
                info["ready_children"] = self._pool.size
        return MappingProxyType(info)

    def _build_capabilities(self) -> Capabilities:
        probe = verify_kernel(self._read_roots) if self._kernel_layers else probe_kernel()
        caps = report(
            probe,
            limits=self._limits,
            workspace=self._workspace,
            rules=self._rules,
            kernel_layers=self._kernel_layers,
            required=self._require,
            plan=self._plan,
            filters=self._seccomp_filters,
            env_allow_list=tuple(self._base_env()),
        )
        if not self._kernel_only:
            return caps
        off = "off: testing kernel-only mode (_testing_kernel_only=True)"
        layers = [
            dataclasses.replace(info, active=False, reason=off)
            if info.name in PYTHON_LEVEL_LAYERS
            else info
            for info in caps.layers
        ]
        layers.append(
            LayerInfo(
                Layer.TESTING_KERNEL_ONLY,
                True,
                True,
                MappingProxyType({"environment": f"{TESTING_KERNEL_ONLY_ENV}=1"}),
                "FOR TESTING ONLY: no AST gate and no Python-level guards",
            )
        )
        return dataclasses.replace(caps, layers=tuple(layers))

    def _plan(self) -> _landlock.LandlockPlan:
        if self._landlock_plan is None:
            self._landlock_plan = _landlock.plan(
                probe_kernel().landlock_abi,
                workspace=self._workspace,
                read_only=self._read_roots,
                list_only=self._grants.list_roots,
            )
        return self._landlock_plan

    def _seccomp_filters(self) -> tuple[_seccomp.SeccompProgram, ...]:
        if self._filters is None:
            self._filters = _seccomp.build_filters(debug=self._seccomp_debug)
        return self._filters

    @property
    def runs_in_progress(self) -> int:
        """Runs being supervised now; 0 means no process of a run of this sandbox is alive.

        A run leaves this count only after its whole process tree was killed and reaped.

        :meth:`exclusive` waits for the runs (counted until this is 0 for them) before an
        operation that rewrites the workspace: a run's process must not race a restore.
        """
        with self._active_lock:
            return len(self._active)

    def children_rss_bytes(self) -> int:
        """The resident set sizes of the ready children and the runs' children now, in bytes.

        Read from ``/proc/<pid>/status`` (``VmRSS``); a process that ended meanwhile counts 0.
        Sessions are not included (:attr:`pysandbox.Session.rss_bytes`). The ready children's
        pages are mostly the zygote's, shared copy-on-write, so this overstates what they cost.
        Blocking (a few ``/proc`` reads); thread-safe.

        Returns:
            The sum, bytes.
        """
        with self._active_lock:
            runs = [sup.pid for sup in self._active]
        pids = [pid for pid in runs if pid is not None] + self._ready_pids()
        return sum(_session.status_bytes(pid, b"VmRSS") or 0 for pid in pids)

    def invalidate_workspace_manifest(self) -> None:
        """Forget the workspace measurement kept from the end of the last run.

        Each run ends with a walk of the workspace; the next run starts from that measurement
        instead of walking again, as long as nothing else could have changed the workspace.
        Overlapping runs invalidate it themselves; a caller that changes the workspace
        outside a run (writes a file, restores a snapshot) calls this afterwards, so that the
        next run measures again. Thread-safe.

        It also empties the pool of ready children (:meth:`discard_ready_children`): a restore
        may have replaced what they were prepared for.
        """
        with self._disk_lock:
            self._disk_generation += 1
            self._manifest = None
        self._pool.drain()

    def discard_ready_children(self) -> None:
        """Kill the ready children (warm mode); the next runs fork and confine fresh ones.

        For a caller that restored the workspace or changed what the children were prepared
        for. Thread-safe; runs in progress are not affected.
        """
        self._pool.drain()

    @property
    def coordinator(self) -> WorkspaceCoordinator:
        """The workspace's coordinator: this sandbox's runs count in it (see :meth:`exclusive`).

        A caller with calls of its own that start processes in the workspace counts each in
        with :meth:`WorkspaceCoordinator.run`.
        """
        return self._coordinator

    def park(self, pid: int) -> None:
        """Register a long-lived process that can write the workspace (see :meth:`exclusive`).

        Its start time is recorded: if the pid is later reused by another process, that one is
        never signalled (the pid is skipped and unparked).

        Args:
            pid: The process id.

        Raises:
            TypeError: ``pid`` is not an int.
            ValueError: ``pid`` is this process, ``1`` or not positive.
            ProcessLookupError: No process ``pid`` exists.
            PermissionError: This process may not signal ``pid`` (another user's).
            OSError: Not on Linux.
            SandboxClosedError: The sandbox was closed.
        """
        self._coordinator.park(pid)

    def unpark(self, pid: int) -> bool:
        """Forget a parked process (see :meth:`park`).

        Args:
            pid: The process id.

        Returns:
            Whether it was parked.
        """
        return self._coordinator.unpark(pid)

    @contextlib.contextmanager
    def exclusive(
        self, *, wait_s: float = EXCLUSIVE_WAIT_S, stop_wait_s: float = STOP_WAIT_S
    ) -> Iterator[ExclusiveReport]:
        """Hold the workspace exclusively for an operation that rewrites it (a restore).

        On entry: waits (up to ``wait_s``) until no run of this sandbox is in progress (a run
        counts until its whole process tree is reaped), keeps new runs waiting from then on,
        stops every parked process (:meth:`park`: ``SIGSTOP``, then every thread confirmed in
        state ``T``/``t``; one already stopped is left so; one not confirmed within
        ``stop_wait_s`` is killed, unparked and reported) and drains the ready children. On
        exit, however the block ends: invalidates the workspace manifest
        (:meth:`invalidate_workspace_manifest`), continues exactly the processes it stopped,
        and lets the waiting runs start.

        Args:
            wait_s: Most seconds to wait for the runs in progress (and another exclusive
                operation) to end.
            stop_wait_s: Most seconds for the parked processes to be confirmed stopped.

        Yields:
            An :class:`ExclusiveReport`: the pids stopped, found stopped, killed, skipped.

        Raises:
            ExclusiveTimeout: Runs were still in progress after ``wait_s``; nothing was
                stopped, the block did not run.
            SandboxClosedError: The sandbox was closed.
            TypeError, ValueError: A wait is not a finite number of seconds >= 0.
        """
        if self._closed:
            raise SandboxClosedError
        with self._coordinator.exclusive(wait_s=wait_s, stop_wait_s=stop_wait_s) as report:
            try:
                # No run is in progress, so none refills the pool until the hold ends.
                self.discard_ready_children()
                yield report
            finally:
                self.invalidate_workspace_manifest()

    def _start_usage(self) -> tuple[tuple[int, int], int, Listing]:
        """The workspace's ``(bytes, entries)`` for a run starting now, its generation, files.

        The manifest when it is current and no other run is in progress; a walk otherwise.
        The generation is ``-1`` when another run is in progress: this run's end cannot
        leave a manifest. The listing (regular files and their states) is what the run's
        end compares with to tell which files it created or changed.
        """
        with self._disk_lock:
            manifest = self._manifest
            alone = self._disk_running == 0
            reuse = manifest is not None and manifest[0] == self._disk_generation and alone
            self._disk_generation += 1
            generation = self._disk_generation if alone else -1
            self._disk_running += 1
        if reuse and manifest is not None:
            return manifest[1], generation, manifest[2]
        entries = start_usage_entries(self._limits.workspace_files)
        listing: Listing = {}
        return workspace_usage(self._workspace, entries, listing), generation, listing

    def _end_usage(self, generation: int, observation: Observation | None) -> None:
        """Keep the run's end measurement as the manifest if no other run overlapped it.

        It overlapped none if none was in progress when it started and none started (nor was
        the manifest invalidated) since: the generation is still the one it took.
        """
        end = observation.end_usage if observation is not None else None
        listing = observation.end_listing if observation is not None else None
        with self._disk_lock:
            self._disk_running -= 1
            alone = generation == self._disk_generation
            complete = end is not None and end[1] <= self._limits.workspace_files
            keep = alone and complete and end is not None and listing is not None
            self._manifest = (generation, end, listing) if keep and end and listing else None

    def close(self) -> None:
        """Stop every run in progress (killing its process tree) and refuse further runs."""
        self._closed = True
        self._coordinator.close()
        with self._active_lock:
            active = list(self._active)
        for sup in active:
            sup.kill(Stop.CANCELLED)
        with self._sessions_lock:
            sessions = list(self._sessions)
        for session in sessions:
            session.close()
        self._pool.close()
        with self._zygote_lock:
            zygote, self._zygote = self._zygote, None
        if zygote is not None:
            zygote.close()

    def open_session(self, description: str = "") -> _session.Session:
        """Open a session: one confined interpreter whose globals persist across its calls.

        Warm mode only: the session's child is forked by the warm zygote like a run's (the
        preloads, fresh randomness, every layer), lives until :meth:`Session.close
        <pysandbox.Session.close>`, this sandbox's :meth:`close` or a call that ends it, and
        is stopped between calls. See :class:`pysandbox.Session`.

        Args:
            description: The caller's words for it (at most
                :data:`pysandbox._session.DESCRIPTION_MAX` characters).

        Returns:
            The session (a context manager).

        Raises:
            TypeError: ``description`` is not a str.
            ValueError: ``description`` is too long.
            SessionsNeedWarmMode: The sandbox runs in spawn mode (asked for, or the zygote
                could not start).
            IsolationUnavailable: A required layer is not available.
            SandboxSetupError: The session's child could not apply its layers.
            SandboxClosedError: The sandbox was closed.
        """
        return _session.open_session(self, description)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, code: str, *, timeout: float | None = None) -> RunResult:
        """Check and run ``code`` in a fresh confined child; block until it has ended.

        Args:
            code: Python source.
            timeout: Wall-clock limit for this run in seconds; at most ``limits.timeout_s``
                (larger values are clamped to it). ``None`` uses ``limits.timeout_s``.

        Returns:
            The run's result. Outcomes of the code (exceptions, limits, rejection) are results,
            not exceptions.

        Raises:
            TypeError: ``code`` is not a str.
            ValueError: ``timeout`` is not a positive finite number.
            IsolationUnavailable: A required layer is not available.
            SandboxSetupError: The child could not apply its layers.
            SandboxClosedError: The sandbox was closed.
        """
        return self._run(code, timeout, _Cancel())

    async def arun(self, code: str, *, timeout: float | None = None) -> RunResult:
        """Like :meth:`run`, without blocking the event loop.

        If the awaiting task is cancelled, the run's whole process tree is killed and reaped
        before the cancellation propagates.

        Args:
            code: Python source.
            timeout: As for :meth:`run`.

        Returns:
            The run's result.

        Raises:
            TypeError: ``code`` is not a str.
            ValueError: ``timeout`` is not a positive finite number.
            IsolationUnavailable: A required layer is not available.
            SandboxSetupError: The child could not apply its layers.
            SandboxClosedError: The sandbox was closed.
        """
        loop = asyncio.get_running_loop()
        cancel = _Cancel()
        future = loop.run_in_executor(_executor(), self._run, code, timeout, cancel)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            cancel.cancel()
            if cancel.started():
                # Killed above; wait (briefly) until the supervising thread has reaped it.
                with contextlib.suppress(BaseException):
                    await asyncio.shield(future)
            raise

    # -- one run --
    def _run(self, code: str, timeout: float | None, cancel: _Cancel) -> RunResult:
        """Check ``code``, then launch, supervise and decide its run (in the calling thread)."""
        checked = self._check(code, timeout)
        if isinstance(checked, RunResult):
            return checked
        compiled = self._compile(code)
        if isinstance(compiled, RunResult):
            return compiled
        config = self._child_config()
        return self._execute(config, code, checked, cancel, compiled=(compiled,))

    def _compile(self, code: str) -> CodeType | RunResult | None:
        """Compile the checked source as the child would run it.

        Returns:
            The code object; ``None`` when it does not compile (the child reports the error);
            or the result of a refused run (nothing ran): a compiled form over
            :func:`pysandbox._pool.max_compiled_bytes` (constant folding).
        """
        compiled = _config.compile_user_code(code, receivers=self._routes_receivers)
        if compiled is None:
            return None
        size = len(marshal.dumps(compiled))
        if size > self._max_compiled_bytes:
            violation = _source_violation(
                f"the code compiles to {size} bytes; the limit is {self._max_compiled_bytes} "
                "(constant expressions such as 'ab' * 2000 are stored expanded: build large "
                "values at run time, from a variable or in a loop)"
            )
            return RunResult(RunStatus.REJECTED, violations=(violation,), layers=(Layer.AST_GATE,))
        return compiled

    def _check(self, code: str, timeout: float | None) -> float | RunResult:
        """The run's deadline in seconds, or the result of a rejected run (nothing ran)."""
        if self._closed:
            raise SandboxClosedError
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, not {type(code).__name__}")
        deadline = self._limits.timeout_s
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
                raise TypeError("timeout must be a number of seconds")
            if not math.isfinite(timeout) or timeout <= 0:
                raise ValueError(f"timeout must be a positive finite number, got {timeout!r}")
            deadline = min(float(timeout), deadline)
        caps = self.capabilities()
        size = len(code.encode("utf-8", "surrogatepass"))
        if size > self._policy.max_source_bytes:  # astguard's one source-size limit
            violation = _source_violation(
                f"source is {size} bytes; the limit is {self._policy.max_source_bytes}"
            )
            return RunResult(RunStatus.REJECTED, violations=(violation,), layers=(Layer.AST_GATE,))
        gate = _gate.check_source(code, self._policy)
        if not gate.ok and not self._kernel_only:
            return RunResult(
                RunStatus.REJECTED, violations=gate.violations, layers=(Layer.AST_GATE,)
            )
        if os.name != "posix":
            raise IsolationUnavailable(
                ("posix",), {"posix": f"pysandbox runs code on POSIX systems only, not {os.name}"}
            )
        missing = caps.missing_required
        if missing:
            raise IsolationUnavailable(missing, {name: caps.layer(name).reason for name in missing})
        return deadline

    def _child_config(self) -> ChildConfig:
        """The sandbox's child configuration, built once (after the capability report)."""
        if self._config is None:
            caps = self.capabilities()
            landlock_on = caps.layer(Layer.LANDLOCK).active
            seccomp_on = caps.layer(Layer.SECCOMP).active
            self._config = _config.build(
                workspace=self._workspace,
                read_roots=self._read_roots,
                sys_path=self._sys_path,
                list_roots=self._grants.list_roots,
                limits=self._limits,
                rules=None if self._kernel_only else self._rules,
                landlock=self._plan() if landlock_on else None,
                seccomp=self._seccomp_filters() if seccomp_on else None,
                env=self._base_env(),
                native_extensions=self._grants.native,
                seccomp_debug=self._seccomp_debug,
                preload=self._import_first,
            )
        return self._config

    def _execute(
        self,
        config: ChildConfig,
        code: str,
        deadline: float,
        cancel: _Cancel | None = None,
        launcher: Launcher | None = None,
        *,
        compiled: tuple[CodeType | None] | None = None,
    ) -> RunResult:
        """Launch ``code`` under ``config`` once it holds a run slot; supervise; decide.

        ``launcher`` (tests only) replaces the sandbox's own (zygote or spawn); ``compiled``
        holds :meth:`_compile`'s code object (compiled here when not given).
        """
        lim = self._limits
        marker = secrets.token_hex(16)
        supervisor = Supervisor(
            deadline_s=deadline,
            output_cap=lim.output_bytes,
            workspace=self._workspace,
            workspace_bytes=lim.workspace_bytes,
            workspace_files=lim.workspace_files,
            marker=f"{MARKER_NAME}={marker}",
            always_sweep=config.seccomp is None,
            file_size_bytes=lim.file_size_bytes,
        )
        if self._caps is None:
            self.capabilities()  # builds the report (tests call this without _check)
        assert self._caps is not None  # noqa: S101 - built above
        active = self._caps.active_layers
        if cancel is not None and not cancel.attach(supervisor):
            return RunResult(
                RunStatus.KILLED, layers=config.layers(active), detail="cancelled before start"
            )
        with self._run_slots:
            if self._closed:
                raise SandboxClosedError
            # Counted in the coordinator (waiting while the workspace is held exclusively)
            # until its process tree is reaped and the pool refilled.
            if not self._coordinator.enter_run(cancel.cancelled if cancel else None):
                return RunResult(
                    RunStatus.KILLED, layers=config.layers(active), detail="cancelled before start"
                )
            try:
                # Measured once the run holds its slot, so queued runs see what ran before.
                usage, generation, before = self._start_usage()
                observation: Observation | None = None
                try:
                    shrink_only = usage[0] > lim.workspace_bytes or usage[1] > lim.workspace_files
                    if shrink_only:
                        config = config.shrink_only()
                    supervisor.start_usage = usage
                    layers = config.layers(active)
                    ready = None
                    if launcher is None:
                        launcher = self._launcher(config)
                        # Only the sandbox's own configuration: a shrink-only run's is another.
                        if isinstance(launcher, ZygoteLauncher) and config is self._config:
                            ready = self._pool.claim(launcher.zygote, config)
                    if ready is not None:
                        marker = ready.marker  # the child carries it already
                        supervisor.use_marker(f"{MARKER_NAME}={marker}")
                    code_object = (
                        compiled[0]
                        if compiled
                        else _config.compile_user_code(code, receivers=self._routes_receivers)
                    )
                    spec = RunSpec(config, code, code_object, marker)
                    try:
                        if ready is not None:
                            try:
                                observation = self._supervise(
                                    supervisor, _pool.ReadyLauncher(ready, self._pool), spec
                                )
                            except _pool.ZygoteUnresponsive:
                                # The child never got its code: fork afresh on a new zygote.
                                if isinstance(launcher, ZygoteLauncher):
                                    self._discard_zygote(launcher.zygote)
                                launcher = self._launcher(config)
                            except _zygote.ZygoteError:
                                pass  # gone, or the code over its limit: discarded; fork afresh
                            finally:
                                ready.discard()  # unless handed its code (cancelled before it)
                        if observation is None:
                            observation = self._supervise(supervisor, launcher, spec)
                    except _zygote.ZygoteError:
                        if not isinstance(launcher, ZygoteLauncher):
                            raise
                        self._discard_zygote(launcher.zygote)
                        try:
                            observation = self._supervise(supervisor, self._launcher(config), spec)
                        except _zygote.ZygoteError as exc:
                            raise SandboxSetupError(f"the warm zygote failed twice: {exc}") from exc
                except InterruptedError:
                    return RunResult(
                        RunStatus.KILLED, layers=layers, detail="cancelled before start"
                    )
                finally:
                    self._end_usage(generation, observation)
                    if self._pool.size and isinstance(launcher, ZygoteLauncher):
                        self._refill()
            finally:
                self._coordinator.leave_run()
        assert observation is not None  # noqa: S101 - set, or the try above raised
        result = decide(observation, lim, layers, shrink_only=shrink_only)
        if not observation.ready:
            return result  # a setup failure (raised by decide) or nothing ran
        figures, omitted = _figures.parse_frames(observation.figure_data, observation.figure_cut)
        value = _session.one_shot_value(observation.figure_data, result.status)
        changed = (
            changed_files(before, observation.end_listing)
            if observation.end_listing is not None
            else ()
        )
        return dataclasses.replace(
            result, changed_files=changed, figures=figures, figures_omitted=omitted, result=value
        )

    def _supervise(self, supervisor: Supervisor, launcher: Launcher, spec: RunSpec) -> Observation:
        """Run ``supervisor`` on ``launcher``, tracked so that :meth:`close` can kill it."""
        with self._active_lock:
            self._active.add(supervisor)
        try:
            return supervisor.run(launcher, spec)
        finally:
            with self._active_lock:
                self._active.discard(supervisor)

    # -- warm mode --
    def _launcher(self, config: ChildConfig) -> Launcher:
        """The zygote's launcher in warm mode (zygote started lazily), else spawn's."""
        if self._execution == ExecutionMode.WARM:
            zygote = self._warm_zygote(config)
            if zygote is not None:
                return ZygoteLauncher(zygote)
        return _SPAWN

    def _warm_zygote(self, config: ChildConfig) -> _zygote.Zygote | None:
        """The running zygote (started lazily, restarted if it died), or ``None``: spawn."""
        with self._zygote_lock:
            if self._closed:
                raise SandboxClosedError
            if self._zygote_reason:
                return None
            if self._zygote is not None and self._zygote.alive():
                return self._zygote
            if self._zygote is not None:
                self._zygote.close()  # it died: reap it, start another
                self._zygote = None
            fixed: _wire.ZygoteConfig = {
                **config.fixed_wire(),
                "env": self._base_env(),
                "preimport": [
                    name for name in _PREIMPORT if self._rules.allowed.intersection({name})
                ],
                "server_pid": os.getpid(),
            }
            env = {**self._base_env(), MARKER_NAME: "zygote-" + secrets.token_hex(8)}
            # cwd "/": the zygote holds nothing in the workspace; each child chdirs there.
            zygote = _zygote.Zygote(fixed, "/", env)
            try:
                if not sys.platform.startswith("linux"):
                    raise _zygote.ZygoteError("warm mode needs Linux (pidfd, fork server)")
                zygote.start()
            except _zygote.ZygoteError as exc:
                self._zygote_reason = str(exc)
                return None
            self._zygote = zygote
            # A sandbox dropped without close() still stops its zygote.
            weakref.finalize(self, zygote.close)
            weakref.finalize(self, self._pool.close)  # registered last: runs first
            return zygote

    def _refill(self) -> None:
        """Request ready children of the current zygote up to the pool's size (warm mode)."""
        with self._zygote_lock:
            zygote = self._zygote
        if zygote is None or self._config is None or self._closed:
            return
        with contextlib.suppress(_zygote.ZygoteError):  # the next run replaces the zygote
            self._pool.fill(zygote, self._config)

    def _ready_pids(self) -> list[int]:
        """The ready children's pids (tests and diagnosis)."""
        return self._pool.pids()

    def _discard_zygote(self, failed: _zygote.Zygote | None) -> None:
        """Stop ``failed``, a zygote that did not take a request, if it is still the current one.

        The next run starts another; the runs in progress on ``failed`` end as ``killed``.
        """
        with self._zygote_lock:
            if failed is None or self._zygote is not failed:
                return  # spawn mode, or another run replaced it already
            self._zygote = None
        failed.kill()
        failed.close()

    def _base_env(self) -> dict[str, str]:
        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "HOME": self._home,
            "TMPDIR": self._workspace,
            **RUN_ENV,
        }
        if self._mpl_dir is not None:
            env.update(_matplotlib.CONFIG_ENV, MPLCONFIGDIR=self._mpl_dir)
        for name in _ENV_PASSTHROUGH:
            if name in os.environ:
                env[name] = os.environ[name]
        return env


_SPAWN = SpawnLauncher()


class _Cancel:
    """Cancellation of one run, reaching its supervisor once there is one (``arun``)."""

    __slots__ = ("_cancelled", "_lock", "_supervisor")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._supervisor: Supervisor | None = None

    def attach(self, supervisor: Supervisor) -> bool:
        """Bind the run's supervisor; return ``False`` if the run was cancelled already."""
        with self._lock:
            self._supervisor = supervisor
            return not self._cancelled

    def cancel(self) -> None:
        """Kill the run (now, or as soon as its supervisor exists)."""
        with self._lock:
            self._cancelled = True
            supervisor = self._supervisor
        if supervisor is not None:
            supervisor.kill(Stop.CANCELLED)

    def cancelled(self) -> bool:
        """Whether the run was cancelled."""
        with self._lock:
            return self._cancelled

    def started(self) -> bool:
        """Whether the run's child was created."""
        supervisor = self._supervisor
        return supervisor is not None and supervisor.started
