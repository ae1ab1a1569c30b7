"""The :class:`Sandbox`: run untrusted Python in a confined child interpreter."""

from __future__ import annotations
import __future__

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import importlib.util
import marshal
import math
import os
import pathlib
import re
import secrets
import signal
import sys
import sysconfig
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable
from types import CodeType, MappingProxyType
from typing import Any

import astguard
from pysandbox import _abi, _child, _gate, _landlock, _seccomp, _zygote
from pysandbox._capabilities import (
    KERNEL_LAYERS,
    Capabilities,
    KernelProbe,
    LayerInfo,
    probe_kernel,
)
from pysandbox._limits import Limits
from pysandbox._result import RunResult, RunStatus
from pysandbox._supervisor import Outcome, Supervisor, start_usage_entries, workspace_usage
from pysandbox.exceptions import (
    IsolationUnavailable,
    SandboxClosedError,
    SandboxSetupError,
)

__all__ = ["Sandbox"]

_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_ENV_PASSTHROUGH = ("TZ",)
_MARKER_NAME = "PYSANDBOX_RUN"
EXECUTION_MODES = ("spawn", "warm")
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
SOURCE_RULE_ID = "PS001"
#: The bootstrap's source file (compiled by the parent, sent to the child's ``-c`` stub).
_CHILD_SCRIPT = str(pathlib.Path(_child.__file__).resolve())


def _compile_user_code(code: str) -> CodeType | None:
    """Compile the checked source as the child would, or ``None`` to let the child report."""
    try:
        return compile(code, _child.USER_FILENAME, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None


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


_boot_cache: list[CodeType] = []


def _bootstrap_code() -> CodeType:
    """The child's bootstrap, compiled once per process (its frames keep the file name)."""
    if not _boot_cache:
        source = pathlib.Path(_CHILD_SCRIPT).read_text(encoding="utf-8")
        # Compile with the annotations flag instead of executing the future import at run
        # time (one import less per run); the blank line keeps the line numbers.
        future = "from __future__ import annotations\n"
        source = source.replace(future, "\n", 1)
        flags = __future__.annotations.compiler_flag
        _boot_cache.append(compile(source, _CHILD_SCRIPT, "exec", flags, dont_inherit=True))
    return _boot_cache[0]


_boot_bytes: list[bytes] = []


def _payload(config: dict[str, Any]) -> bytes:
    """What the child's stub reads: length, bootstrap code, configuration (marshal dumps)."""
    if not _boot_bytes:
        _boot_bytes.append(marshal.dumps(_bootstrap_code()))
    boot = _boot_bytes[0]
    return len(boot).to_bytes(8, "little") + boot + marshal.dumps(config)


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
        execution: ``"warm"`` (default): a fork server ("zygote") started lazily with the
            same layers forks a fresh child per run and applies every layer after the fork
            (Linux; where the zygote cannot start, runs fall back to spawn and the capability
            report's ``execution`` says why). ``"spawn"``: a fresh ``python -I -S`` per run.
        max_concurrent_runs: How many runs of this sandbox execute at once (default: the CPU
            count); further calls to :meth:`run` block, and :meth:`arun` waits without
            blocking the event loop, until a run ends. Concurrent runs share the workspace
            and its size limits: a run is stopped with ``disk_limit`` when the workspace as a
            whole passes them.

    Raises:
        ValueError: The workspace or an argument is invalid.
        TypeError: An argument has the wrong type.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        limits: Limits | None = None,
        policy: astguard.Policy | None = None,
        require: Iterable[str] = ("landlock", "seccomp"),
        extra_modules: Iterable[str] = (),
        extra_read_paths: Iterable[str | os.PathLike[str]] = (),
        kernel_layers: bool = True,
        execution: str = "warm",
        max_concurrent_runs: int | None = None,
    ) -> None:
        if execution not in EXECUTION_MODES:
            raise ValueError(f"execution must be one of {list(EXECUTION_MODES)}, not {execution!r}")
        if max_concurrent_runs is None:
            max_concurrent_runs = os.cpu_count() or 1
        if isinstance(max_concurrent_runs, bool) or not isinstance(max_concurrent_runs, int):
            raise TypeError("max_concurrent_runs must be an int")
        if max_concurrent_runs < 1:
            raise ValueError(f"max_concurrent_runs must be at least 1, got {max_concurrent_runs}")
        self._max_concurrent_runs = max_concurrent_runs
        self._execution = execution
        self._zygote: _zygote.Zygote | None = None
        self._zygote_reason = ""
        self._zygote_lock = threading.Lock()
        self._limits = limits if limits is not None else Limits()
        if not isinstance(self._limits, Limits):
            raise TypeError(f"limits must be a pysandbox.Limits, not {type(limits).__name__}")
        if isinstance(require, str):
            raise TypeError("require must be an iterable of layer names, not a string")
        self._require = tuple(dict.fromkeys(require))
        unknown = [name for name in self._require if name not in KERNEL_LAYERS]
        if unknown:
            raise ValueError(
                f"unknown layer(s) in require: {unknown}; known: {list(KERNEL_LAYERS)}"
            )
        if not isinstance(kernel_layers, bool):
            raise TypeError("kernel_layers must be a bool")
        self._kernel_layers = kernel_layers
        self._workspace = self._validate_workspace(workspace)
        self._extra_modules = tuple(self._validate_module(name) for name in extra_modules)
        self._sys_path, module_roots = self._locate_modules(self._extra_modules)
        extra_paths = []
        for path in extra_read_paths:
            real = os.path.realpath(os.fspath(path))
            if not pathlib.Path(real).exists():
                raise ValueError(f"extra_read_paths: {os.fspath(path)!r} does not exist")
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
        self._policy = _gate.runtime_policy(policy, self._extra_modules)
        self._rules = _gate.module_rules(self._policy)
        self._closed = False
        self._run_slots = threading.BoundedSemaphore(max_concurrent_runs)
        self._active: set[Supervisor] = set()
        self._active_lock = threading.Lock()
        self._landlock_plan: _landlock.LandlockPlan | None = None
        self._filters: tuple[_seccomp.SeccompProgram, ...] | None = None
        self._caps: Capabilities | None = None
        self._fixed_config: tuple[tuple[bool, bool], dict[str, Any]] | None = None

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
    def _validate_module(name: object) -> str:
        if not isinstance(name, str) or not _MODULE_NAME.match(name):
            raise ValueError(f"extra_modules: {name!r} is not a dotted module name")
        return name

    @staticmethod
    def _locate_modules(names: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        stdlib = _stdlib_roots()
        sys_path: list[str] = []
        roots: list[str] = []
        for name in names:
            top = name.split(".")[0]
            spec = importlib.util.find_spec(top)
            if spec is None:
                raise ValueError(f"extra_modules: module {top!r} is not installed")
            if spec.submodule_search_locations:
                location = os.path.realpath(next(iter(spec.submodule_search_locations)))
                entry = str(pathlib.Path(location).parent)
            elif spec.origin and pathlib.Path(spec.origin).is_absolute():
                location = os.path.realpath(spec.origin)
                entry = str(pathlib.Path(location).parent)
            else:
                continue  # built-in or frozen: importable already
            if any(_overlaps(entry, root) and entry.startswith(root) for root in stdlib):
                continue
            sys_path.append(entry)
            roots.append(location)
        return tuple(dict.fromkeys(sys_path)), tuple(dict.fromkeys(roots))

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
        if mode == "warm" and self._zygote_reason:
            info.update(mode="spawn", reason=self._zygote_reason)
        if mode == "warm":
            zygote = self._zygote
            info["zygote_pid"] = zygote.pid if zygote is not None and zygote.alive() else None
        return MappingProxyType(info)

    def _build_capabilities(self) -> Capabilities:
        probe = verify_kernel(self._read_roots) if self._kernel_layers else probe_kernel()
        lim = self._limits
        layers: list[LayerInfo] = []

        def add(name: str, available: bool, active: bool, reason: str = "", **details: Any) -> None:
            layers.append(LayerInfo(name, available, active, MappingProxyType(details), reason))

        add("ast_gate", True, True, checker="astguard")
        add(
            "isolated_interpreter",
            True,
            True,
            argv=[sys.executable, "-I", "-S", "-X", "utf8", "-c", "<bootstrap stub>"],
            stdin="/dev/null",
            new_session=True,
            env_allow_list=["PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", *_ENV_PASSTHROUGH],
        )
        add(
            "rlimits",
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
        add("open_guard", True, True, workspace=self._workspace)
        add("audit_hook", True, True, immutable_state=True)
        add("import_guard", True, True, allowed_modules=sorted(self._rules.allowed))
        add("attribute_guard", True, True, guarded=["getattr", "setattr", "delattr", "hasattr"])
        off = "" if self._kernel_layers else "kernel layers switched off (kernel_layers=False)"
        ll_active = probe.landlock_abi > 0 and self._kernel_layers
        ll_details: dict[str, Any] = {
            "abi": probe.landlock_abi,
            "verified_in_child": ll_active,
        }
        if probe.landlock_abi > 0:
            ll_details.update(self._plan().describe())
        add(
            "landlock",
            probe.landlock_abi > 0,
            ll_active,
            probe.landlock_reason or off,
            **ll_details,
        )
        sc_active = probe.seccomp and self._kernel_layers
        sc_details: dict[str, Any] = {
            "already_filtered": probe.already_filtered,
            "verified_in_child": sc_active,
        }
        if probe.seccomp:
            filters = self._seccomp_filters()
            sc_details.update(
                filters=[{"name": f.name, "instructions": f.length} for f in filters],
                rules=list(_seccomp.denied_rules()),
            )
        add("seccomp", probe.seccomp, sc_active, probe.seccomp_reason or off, **sc_details)
        add(
            "no_new_privs",
            probe.seccomp or probe.landlock_abi > 0,
            ll_active or sc_active,
            "" if (ll_active or sc_active) else "set only together with a kernel layer",
        )
        add(
            "capabilities",
            probe.seccomp or probe.landlock_abi > 0,
            ll_active or sc_active,
            "" if (ll_active or sc_active) else "dropped only together with a kernel layer",
            dropped=["bounding", "ambient", "effective", "permitted", "inheritable"],
            euid=os.geteuid() if hasattr(os, "geteuid") else None,
        )
        add(
            "supervision",
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
            kernel_layers=self._kernel_layers,
            required=self._require,
            layers=tuple(layers),
            tree_kill=tree_kill,
        )

    def _plan(self) -> _landlock.LandlockPlan:
        if self._landlock_plan is None:
            self._landlock_plan = _landlock.plan(
                probe_kernel().landlock_abi,
                workspace=self._workspace,
                read_only=self._read_roots,
                list_only=self._sys_path,
            )
        return self._landlock_plan

    def _seccomp_filters(self) -> tuple[_seccomp.SeccompProgram, ...]:
        if self._filters is None:
            self._filters = _seccomp.build_filters()
        return self._filters

    def close(self) -> None:
        """Stop every run in progress (killing its process tree) and refuse further runs."""
        self._closed = True
        with self._active_lock:
            active = list(self._active)
        for sup in active:
            sup.kill("cancelled")
        with self._zygote_lock:
            zygote, self._zygote = self._zygote, None
        if zygote is not None:
            zygote.close()

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
        prepared = self._prepare(code, timeout)
        if isinstance(prepared, RunResult):
            return prepared
        return self._execute(prepared)

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
        executor = _executor()
        prepared = await loop.run_in_executor(executor, self._prepare, code, timeout)
        if isinstance(prepared, RunResult):
            return prepared
        future = loop.run_in_executor(executor, self._execute, prepared)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            prepared.cancel()
            if prepared.supervisor.started:
                # Killed above; wait (briefly) until the supervising thread has reaped it.
                with contextlib.suppress(BaseException):
                    await asyncio.shield(future)
            raise

    # -- internals --
    def _prepare(self, code: str, timeout: float | None) -> _Prepared | RunResult:
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
        if size > self._limits.source_bytes:
            violation = {
                "rule_id": SOURCE_RULE_ID,
                "message": f"source is {size} bytes; the limit is {self._limits.source_bytes}",
                "line": 1,
                "col": 0,
                "end_line": 1,
                "end_col": 0,
            }
            return RunResult(RunStatus.REJECTED, violations=(violation,), layers=("ast_gate",))
        gate = _gate.check_source(code, self._policy)
        if not gate.ok:
            return RunResult(RunStatus.REJECTED, violations=gate.violations, layers=("ast_gate",))
        if os.name != "posix":
            raise IsolationUnavailable(
                ("posix",), {"posix": f"pysandbox runs code on POSIX systems only, not {os.name}"}
            )
        missing = caps.missing_required
        if missing:
            raise IsolationUnavailable(missing, {name: caps.layer(name).reason for name in missing})
        config = self._child_config(code, caps)
        warm = self._execution == "warm"

        def build(shrink_only: bool, failed: _zygote.Zygote | None = None) -> _Prepared:
            # ``failed``: a zygote that did not take this run; it is replaced first.
            if failed is not None:
                self._discard_zygote(failed)
            cfg = self._shrink_only_config(config) if shrink_only else config
            zygote = self._warm_launcher(cfg) if warm else None
            plan = self._launch_plan(cfg, deadline, caps, zygote)
            plan.zygote = zygote
            plan.shrink_only = shrink_only
            return plan

        prepared = build(shrink_only=False)
        prepared.build = build
        return prepared

    def _shrink_only_config(self, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` for a workspace already over its limits: the run may not grow it.

        A run can overshoot the limits by what it writes within one poll interval; the runs
        after it are shrink-only, so that overshoots cannot pile up run after run: no file may
        grow (``RLIMIT_FSIZE`` 0) and, where Landlock is active, nothing may be created
        (files, directories, links, renames into new names). Deleting still works.
        """
        import resource  # POSIX only, like _child_config

        rlimits = [
            (kind, 0, 0) if kind == resource.RLIMIT_FSIZE else (kind, soft, hard)
            for kind, soft, hard in config["rlimits"]
        ]
        return {**config, "rlimits": rlimits, "no_create": True}

    # -- warm mode --
    _RUN_KEYS = ("code", "code_object", "rlimits", "no_create")

    def _warm_launcher(self, config: dict[str, Any]) -> _zygote.Zygote | None:
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
            fixed = {k: v for k, v in config.items() if k not in self._RUN_KEYS}
            fixed["env"] = self._base_env()
            fixed["preimport"] = [
                name for name in _PREIMPORT if self._rules.allowed.intersection({name})
            ]
            env = {**self._base_env(), _MARKER_NAME: "zygote-" + secrets.token_hex(8)}
            # cwd "/": the zygote holds nothing in the workspace; each child chdirs there.
            zygote = _zygote.Zygote(fixed, _bootstrap_code(), "/", env)
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
            return zygote

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
            "HOME": self._workspace,
            "TMPDIR": self._workspace,
        }
        for name in _ENV_PASSTHROUGH:
            if name in os.environ:
                env[name] = os.environ[name]
        return env

    def _launch_plan(
        self,
        config: dict[str, Any],
        deadline: float,
        caps: Capabilities,
        zygote: _zygote.Zygote | None = None,
        start_usage: tuple[int, int] | None = None,
    ) -> _Prepared:
        """Wrap a child configuration into a ready-to-start supervised run."""
        marker_value = secrets.token_hex(16)
        env = {**self._base_env(), _MARKER_NAME: marker_value}
        if zygote is not None:
            request = {key: config[key] for key in self._RUN_KEYS if key in config}
            request["env"] = {_MARKER_NAME: marker_value}
            payload = marshal.dumps(request)
        else:
            payload = _payload(config)
        supervisor = Supervisor(
            argv=[sys.executable, "-I", "-S", "-X", "utf8", "-c", _child.STUB],
            env=env,
            cwd=self._workspace,
            payload=payload,
            launcher=zygote.launch if zygote is not None else None,
            deadline_s=deadline,
            output_cap=self._limits.output_bytes,
            workspace=self._workspace,
            workspace_bytes=self._limits.workspace_bytes,
            workspace_files=self._limits.workspace_files,
            marker=f"{_MARKER_NAME}={marker_value}",
            always_sweep=config["seccomp"] is None,
            start_usage=start_usage,
        )
        layers = caps.active_layers
        if config["seccomp"] is None:
            layers = tuple(name for name in layers if name != "seccomp")
        if config["landlock"] is None:
            layers = tuple(name for name in layers if name != "landlock")
        if not config["python_guards"]:
            python = {"open_guard", "audit_hook", "import_guard", "attribute_guard"}
            layers = tuple(name for name in layers if name not in python)
        return _Prepared(supervisor, layers)

    def _child_config(self, code: str, caps: Capabilities) -> dict[str, Any]:
        """The child's configuration for ``code``: a fresh dict (callers may replace keys)."""
        layers = (caps.layer("landlock").active, caps.layer("seccomp").active)
        cached = self._fixed_config
        if cached is None or cached[0] != layers:
            cached = self._fixed_config = (layers, self._build_fixed_config(*layers))
        return {**cached[1], "code": code, "code_object": _compile_user_code(code)}

    def _build_fixed_config(self, landlock_on: bool, seccomp_on: bool) -> dict[str, Any]:
        """Everything of a child's configuration but the code (the same for every run)."""
        lim = self._limits
        import resource  # POSIX only; run() refuses elsewhere before getting here

        rlimits = [
            (resource.RLIMIT_CPU, lim.cpu_time_s, lim.cpu_time_s + 1),
            (resource.RLIMIT_DATA, lim.memory_bytes, lim.memory_bytes),
            (resource.RLIMIT_AS, 2 * lim.memory_bytes, 2 * lim.memory_bytes),
            (resource.RLIMIT_FSIZE, lim.file_size_bytes, lim.file_size_bytes),
            (resource.RLIMIT_NOFILE, lim.open_files, lim.open_files),
            (resource.RLIMIT_CORE, 0, 0),
        ]
        return {
            "workspace": self._workspace,
            "read_roots": list(self._read_roots),
            "list_roots": list(self._sys_path),
            "sys_path": list(self._sys_path),
            "rlimits": rlimits,
            "landlock": self._plan().to_wire() if landlock_on else None,
            "seccomp": [f.code for f in self._seccomp_filters()] if seccomp_on else None,
            "pid_placeholder": _seccomp.PID_PLACEHOLDER,
            "allowed_modules": sorted(self._rules.allowed),
            "denied_modules": sorted(self._rules.denied),
            "allowed_dunders": sorted(self._rules.allowed_dunders),
            "forbidden_attributes": sorted(self._rules.forbidden_attributes),
            "module_forbidden": sorted(self._rules.module_forbidden),
            "denied_module_attributes": sorted(self._rules.denied_module_attributes),
            "python_guards": True,
            "abi": _abi.child_abi(required=landlock_on or seccomp_on),
        }

    def _execute(self, prepared: _Prepared) -> RunResult:
        lim = self._limits
        with self._run_slots:
            if self._closed:
                raise SandboxClosedError
            if prepared.build is not None:
                # Measured once the run holds its slot, so queued runs see what ran before.
                usage = workspace_usage(self._workspace, start_usage_entries(lim.workspace_files))
                if usage[0] > lim.workspace_bytes or usage[1] > lim.workspace_files:
                    prepared.attach(prepared.build(True))
                prepared.supervisor.start_usage = usage
            try:
                try:
                    outcome = self._supervise(prepared)
                except _zygote.ZygoteError:
                    if prepared.build is None or prepared.zygote is None:
                        raise
                    measured = prepared.supervisor.start_usage
                    prepared.attach(prepared.build(prepared.shrink_only, prepared.zygote))
                    prepared.supervisor.start_usage = measured
                    try:
                        outcome = self._supervise(prepared)
                    except _zygote.ZygoteError as exc:
                        raise SandboxSetupError(f"the warm zygote failed twice: {exc}") from exc
            except InterruptedError:
                return RunResult(
                    RunStatus.KILLED, layers=prepared.layers, detail="cancelled before start"
                )
        result = self._decide(outcome, prepared.layers)
        if prepared.shrink_only:
            note = (
                f"the workspace was over its limit of {lim.workspace_bytes} bytes or "
                f"{lim.workspace_files} entries when the run started, so it could not grow "
                "(no file could be written or created): remove files to get back under it"
            )
            result = dataclasses.replace(
                result, detail=f"{result.detail}; {note}" if result.detail else note
            )
        return result

    def _supervise(self, prepared: _Prepared) -> Outcome:
        """Run ``prepared``'s supervisor, tracked so that :meth:`close` can kill it."""
        supervisor = prepared.supervisor
        with self._active_lock:
            self._active.add(supervisor)
        try:
            return supervisor.run()
        finally:
            with self._active_lock:
                self._active.discard(supervisor)

    def _decide(self, o: Outcome, layers: tuple[str, ...]) -> RunResult:
        lim = self._limits
        status_raw = o.wait_status
        exit_code = os.WEXITSTATUS(status_raw) if os.WIFEXITED(status_raw) else None
        sig = os.WTERMSIG(status_raw) if os.WIFSIGNALED(status_raw) else None
        stderr = o.stderr.decode("utf-8", "backslashreplace")
        detail = ""
        if o.reason == "output_limit":
            status, detail = RunStatus.OUTPUT_LIMIT, f"output passed {lim.output_bytes} bytes"
        elif o.reason == "disk_limit":
            status = RunStatus.DISK_LIMIT
            detail = (
                f"workspace passed {lim.workspace_bytes} bytes or {lim.workspace_files} entries"
            )
        elif o.reason == "timeout":
            status, detail = RunStatus.TIMEOUT, "wall-clock deadline reached"
        elif o.reason == "cancelled":
            status, detail = RunStatus.KILLED, "run cancelled"
        elif o.reason == "zygote_died":
            status, detail = RunStatus.KILLED, "the warm zygote died during the run"
        elif o.reason == "reaped_elsewhere":
            status = RunStatus.KILLED
            detail = "the child was reaped by another part of this process (waitpid(-1))"
        elif sig is not None:
            if sig == signal.SIGXCPU or (
                sig == signal.SIGKILL and o.cpu_time_s >= lim.cpu_time_s - 0.05
            ):
                status, detail = RunStatus.TIMEOUT, f"CPU time limit ({lim.cpu_time_s} s) reached"
            elif sig == signal.SIGKILL and o.maxrss_bytes >= 0.9 * lim.memory_bytes:
                status, detail = RunStatus.MEMORY_LIMIT, "killed at the memory limit"
            else:
                status = RunStatus.KILLED
                detail = f"killed by signal {signal.Signals(sig).name}"
                if sig == signal.SIGSYS:
                    detail += " (seccomp)"
        elif exit_code == _child.EXIT_SETUP_FAILED:
            raise SandboxSetupError(stderr.strip() or "no detail")
        elif exit_code == _child.EXIT_MEMORY:
            status, detail = RunStatus.MEMORY_LIMIT, "MemoryError under the memory limit"
        else:
            max_bytes, max_files = o.workspace_allowance
            size, count = workspace_usage(self._workspace, max_files)
            if size > max_bytes or count > max_files:
                status = RunStatus.DISK_LIMIT
                detail = (
                    f"workspace passed {lim.workspace_bytes} bytes or {lim.workspace_files} entries"
                )
            else:
                status = RunStatus.OK if exit_code == 0 else RunStatus.ERROR
        if o.reason == "leftover":
            detail = (detail + "; " if detail else "") + "stray processes killed after exit"
        return RunResult(
            status=status,
            exit_code=exit_code,
            signal=sig,
            stdout=o.stdout.decode("utf-8", "backslashreplace"),
            stderr=stderr,
            stdout_truncated=o.stdout_truncated,
            stderr_truncated=o.stderr_truncated,
            duration_ms=round(o.duration_s * 1000.0, 3),
            cpu_time_ms=round(o.cpu_time_s * 1000.0, 3),
            peak_memory_bytes=o.maxrss_bytes,
            layers=layers,
            detail=detail,
        )


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
            plan = _landlock.plan(probe.landlock_abi, workspace=workspace, read_only=read_roots)
            landlock = plan.to_wire()
        seccomp = [f.code for f in _seccomp.build_filters()] if probe.seccomp else None
        config = {
            "workspace": workspace,
            "read_roots": list(read_roots),
            "sys_path": [],
            "rlimits": [],
            "landlock": landlock,
            "seccomp": seccomp,
            "pid_placeholder": _seccomp.PID_PLACEHOLDER,
            "allowed_modules": [],
            "denied_modules": [],
            "allowed_dunders": [],
            "python_guards": False,
            "abi": _abi.child_abi(),
            "code": _PROBE_CODE,
        }
        supervisor = Supervisor(
            argv=[sys.executable, "-I", "-S", "-X", "utf8", "-c", _child.STUB],
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", _MARKER_NAME: "probe"},
            cwd=workspace,
            payload=_payload(config),
            deadline_s=30.0,
            output_cap=65536,
            workspace=workspace,
            workspace_bytes=1 << 20,
            workspace_files=100,
            marker=f"{_MARKER_NAME}=probe-{os.getpid()}",
            always_sweep=False,
        )
        outcome = supervisor.run()
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


class _Prepared:
    """A checked run, ready to start; its supervisor may be replaced before it starts.

    Replaced when the run turns out to be shrink-only once it holds its slot, or when the warm
    zygote did not take it. :meth:`cancel` reaches whichever supervisor is current.
    """

    __slots__ = (
        "_lock",
        "build",
        "cancelled",
        "layers",
        "shrink_only",
        "supervisor",
        "zygote",
    )

    def __init__(self, supervisor: Supervisor, layers: tuple[str, ...]) -> None:
        self.supervisor = supervisor
        self.layers = layers
        #: Rebuilds the run: ``build(shrink_only, failed_zygote=None) -> _Prepared``.
        self.build: Callable[..., _Prepared] | None = None
        #: The workspace was over its limits at the start: the run may not grow it.
        self.shrink_only = False
        self.zygote: _zygote.Zygote | None = None
        self.cancelled = False
        self._lock = threading.Lock()

    def attach(self, other: _Prepared) -> None:
        """Take ``other``'s supervisor (not started yet); kill it at once if cancelled."""
        with self._lock:
            self.supervisor = other.supervisor
            self.layers = other.layers
            self.zygote = other.zygote
            self.shrink_only = other.shrink_only
            cancelled = self.cancelled
        if cancelled:
            other.supervisor.kill("cancelled")

    def cancel(self) -> None:
        """Kill the current supervisor's run, and any that replaces it later."""
        with self._lock:
            self.cancelled = True
            supervisor = self.supervisor
        supervisor.kill("cancelled")
