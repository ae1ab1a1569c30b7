"""What the tools of one server process share: the libraries' objects, the gate, the counters."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import logging
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar, cast

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

import astguard
from datavalidate import SchemaRegistry, default_registry
from mcp_secure_sandbox.concurrency import (
    ADMISSION_BOUND,
    RUN_WAIT_GRACE_S,
    AdmissionQueue,
    Busy,
    Progress,
    WorkspaceGate,
)
from mcp_secure_sandbox.observability import CallTimer, LoopLag, Metrics, TraceLog
from mcp_secure_sandbox.principals import current_principal
from mcp_secure_sandbox.profiles import install_hint
from mcp_secure_sandbox.sessions import registry_for
from mcp_secure_sandbox.settings import ConfigError, Settings
from mcp_secure_sandbox.store_handle import StoreHandle
from mcp_secure_sandbox.workers import WorkerPool
from pysandbox import KERNEL_LAYERS, PROFILES, ExclusiveTimeout, Sandbox
from wsnapshot import (
    SafeWorkspace,
    SnapshotStore,
    StoreUnavailable,
    WorkspaceServedElsewhere,
    parse_s3_url,
)

__all__ = ["FENCE_CHECK_S", "ServerState"]

#: Seconds between two checks of an ``s3://`` snapshot store's fence by the calls that do not
#: reach the store themselves (:meth:`ServerState._check_fence`); a snapshot call checks it
#: every time.
FENCE_CHECK_S = 5.0

log = logging.getLogger("mcp_secure_sandbox")
_T = TypeVar("_T")


class ServerState:
    """The sandbox, snapshot store, workspace helper and schema registry of one server.

    Args:
        settings: Prepared settings (directories exist and were validated).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        profile = PROFILES.get(settings.profile)
        if profile is not None:
            missing = [m for m in profile.extra_modules if importlib.util.find_spec(m) is None]
            if missing:
                raise ValueError(
                    f"--profile {profile.name}: {', '.join(missing)} not installed in the "
                    f"server's environment; install them: {install_hint(profile)}"
                )
        default_policy = astguard.Policy()
        for name in settings.extra_modules:
            if default_policy.reaches_system(name):
                log.warning(
                    "--extra-modules %s: this module reaches the system; only the kernel layers "
                    "confine it now",
                    name,
                )
        self.policy = default_policy.with_modules(*settings.extra_modules)
        if profile is not None:  # its checker rules (the data-science profile's AG309)
            self.policy = profile.policy_for(self.policy)
        # One call builds the sandbox's configuration (pysandbox validates it; settings_from_args
        # checked it once already): limits, layers, modules, execution, concurrency, pool.
        config = settings.sandbox_config(self.policy)
        self.limits = config.limits
        self.sandbox = Sandbox.from_config(settings.workspace, config)
        #: The sessions (``create_session``): handles bound to principals, over the sandbox.
        self.sessions = registry_for(self.sandbox, settings)
        #: An ``s3://`` store, which may be unreachable (then the server serves without it).
        self.store_handle: StoreHandle | None = None
        url = settings.snapshots_url
        if url is not None:  # S3: settings.snapshots holds the local state
            self.store_handle = StoreHandle(
                lambda: SnapshotStore(settings.workspace, url, state_dir=settings.snapshots),
                url,
                parse_s3_url(url)[0],
                str(settings.snapshots),
            )
            # It answers every SnapshotStore attribute the server uses (the open store's).
            self.store = cast("SnapshotStore", self.store_handle)
        else:
            self.store = SnapshotStore(settings.workspace, settings.snapshots)
        self.workspace = SafeWorkspace(settings.workspace)
        self._fence_checked = -math.inf  # when _check_fence last asked the store (monotonic s)
        self.registry: SchemaRegistry = default_registry()
        self.gate = WorkspaceGate()
        heavy = {
            "run": settings.max_concurrent_runs,
            "validation": settings.worker_pool_size,
            "snapshot": 1,
            "export": settings.max_concurrent_exports,
        }
        self.admission = AdmissionQueue(
            heavy,
            settings.queue_length,
            self.gate,
            # Observability has threads of its own: never behind a workspace read.
            threads={**heavy, "light": 4, "metrics": 2, "status": 1},
        )
        self.workers = WorkerPool(
            size=settings.worker_pool_size,
            deadline_s=settings.worker_deadline_s,
            memory_bytes=settings.worker_memory_bytes,
            workspace=settings.workspace,
            require_kernel_layers=bool(settings.require_layers),
        )
        # Diffs load two manifests of up to 100,000 entries, or scan and hash the workspace:
        # a worker of their own, read-only on the store and the workspace (one diff at a time,
        # the "snapshot" admission).
        # The worker has no network: an S3 store mirrors the manifests a diff needs into its
        # local state directory first (``SnapshotStore.mirror_for_reader``), which it reads.
        self.diff_workers = WorkerPool(
            size=1,
            deadline_s=settings.diff_deadline_s,
            memory_bytes=settings.diff_memory_bytes,
            workspace=settings.workspace,
            store=Path(
                self.store.store_dir if self.store.backend == "local" else settings.snapshots
            ),
            require_kernel_layers=bool(settings.require_layers),
            too_expensive="the snapshots are too large to compare",
        )
        self.metrics = Metrics()
        self.loop_lag = LoopLag()
        self.traces = TraceLog()
        self.timer = CallTimer.from_environment()

    def check_isolation(self) -> list[str]:
        """Check the kernel layers once, at start-up; return a warning for each missing one.

        Each layer is probed on its own (pysandbox), so one blocked layer does not hide the
        other. A missing layer that ``--require-layers`` names would refuse every run: that
        is a configuration error now, not a tool error on each call.

        Returns:
            One line per kernel layer that is unavailable but not required (also logged).

        Raises:
            ConfigError: A required layer is unavailable (which, why, which setting).
        """
        caps = self.sandbox.capabilities()
        warnings: list[str] = []
        for name in caps.missing_required:
            reason = caps.layer(name).reason or "unavailable"
            raise ConfigError(
                f"--require-layers: the {name} layer is unavailable here ({reason}); every run "
                f"would be refused. Make {name} available, or leave it out of --require-layers "
                "(SANDBOX_REQUIRE_LAYERS; 'none' accepts Python-level isolation only, unsafe)"
            )
        for name in KERNEL_LAYERS:
            info = caps.layer(name)
            if not info.active:
                warnings.append(
                    f"isolation layer {name} is unavailable ({info.reason or 'off'}); runs go "
                    "without it (not in --require-layers)"
                )
                log.warning("%s", warnings[-1])
        return warnings

    def close(self) -> None:
        """Close the sessions, stop the runs in progress, kill the workers, release the sandbox."""
        self.sessions.close_all()
        self.workers.close()
        self.diff_workers.close()
        self.sandbox.close()

    async def aclose(self) -> None:
        """Like :meth:`close`, waiting for the workers to end."""
        await self.workers.aclose()
        await self.diff_workers.aclose()
        self.close()

    def run_wait_s(self, timeout: float) -> float:
        """The longest wait of a run of ``timeout`` seconds for its turn, in seconds."""
        return timeout + RUN_WAIT_GRACE_S

    @property
    def run_bound(self) -> str:
        """A run's wait bound, as its busy answer names it."""
        return f"its timeout_sec + {RUN_WAIT_GRACE_S:g} s"

    @property
    def wait_bound(self) -> str:
        """The wait bound of every other call, as busy answers name it."""
        return f"{ADMISSION_BOUND}, {self.settings.admission_wait_s:g} s"

    def queue_progress(self, ctx: Context) -> Progress:
        """A :data:`~mcp_secure_sandbox.concurrency.Progress` sending MCP progress to ``ctx``.

        Without a progress token from the caller nothing is sent (the SDK's no-op). The
        progress values stay below 1 and increase with each notification, so a run's own
        progress (elapsed seconds, from 2 s) continues them; the message gives the position.
        """
        sent = 0
        length = self.settings.queue_length

        async def report(ahead: int) -> None:
            nonlocal sent
            calls = "call" if ahead == 1 else "calls"
            await ctx.report_progress(
                sent / (sent + 1),
                None,
                f"waiting for its turn: {ahead} {calls} queued ahead (queue of {length})",
            )
            sent += 1

        return report

    def refuse_if_inconsistent(self, what: str) -> None:
        """Refuse ``what`` (a run, a snapshot) while the workspace is marked inconsistent.

        Raises:
            ToolError: Naming the failed restore and the remedy.
        """
        reason = self.store.inconsistent
        if reason is not None:
            raise ToolError(
                f"{what} refused: the workspace is inconsistent: {reason}; restore a snapshot "
                "with restore_state_snapshot to repair it (list_state_snapshots gives the ids), "
                "or repair it by hand on the host and run `wsnapshot state --clear`"
            )

    def exclusively(self, operation: Callable[[], _T]) -> _T:
        """Run ``operation`` (a restore) with the workspace held by pysandbox, in this thread.

        Called from a worker thread, with the workspace gate held exclusively:
        :meth:`pysandbox.Sandbox.exclusive` waits (at most the admission wait) until no
        process of a run is alive (a run cancelled by its client leaves the gate at once but
        its process tree is reaped a moment later), keeps new runs out, stops the parked
        processes, drains the ready children and, however ``operation`` ends, invalidates the
        workspace manifest (the next run measures the workspace again).

        Args:
            operation: What to do while the workspace is held.

        Returns:
            What ``operation`` returned.

        Raises:
            Busy: A run's process was still alive after the wait; ``operation`` did not start.
        """
        try:
            with self.sandbox.exclusive(wait_s=self.settings.admission_wait_s):
                return operation()
        except ExclusiveTimeout:
            raise Busy(
                "busy, retry: a run's processes are still being stopped; the restore did not "
                "start (call again in a few seconds)"
            ) from None

    def timeout_for(self, timeout_sec: float | None) -> float:
        """Return the time-out of a call in seconds, applying the default and the maximum.

        Raises:
            ToolError: ``timeout_sec`` is not a positive number or exceeds the maximum.
        """
        if timeout_sec is None:
            return self.settings.default_timeout_s
        if not timeout_sec > 0:
            raise ToolError(f"timeout_sec must be a positive number of seconds, got {timeout_sec}")
        if timeout_sec > self.settings.max_timeout_s:
            raise ToolError(
                f"timeout_sec {timeout_sec} exceeds the server's maximum of "
                f"{self.settings.max_timeout_s} seconds"
            )
        return float(timeout_sec)

    @asynccontextmanager
    async def instrument(self, tool: str) -> AsyncIterator[dict[str, str]]:
        """Time one tool call, count it, and leave a trace; yields a dict for the status.

        The count, the trace and the log line are made just after the call (the event loop runs
        them once the call's task yields), off the path of its answer.

        A :class:`ToolError` (a wrong call) is counted as an error and logged at WARNING; a
        cancellation (the client cancelled the call) is traced as ``cancelled`` at INFO; any
        other exception is logged with its traceback on stderr and re-raised. The log line
        names the call's principal (``principal=NAME``, ``-`` when none is known:
        :func:`~mcp_secure_sandbox.principals.current_principal`), and the call is counted for
        it in the metrics; the trace does not name it, since ``sandbox://logs`` is read by every
        principal.
        """
        started = time.perf_counter()
        principal = current_principal() or "-"
        outcome: dict[str, str] = {"status": "ok", "message": ""}
        level = "INFO"
        try:
            await self._check_fence()
            yield outcome
        except Busy as exc:
            outcome["status"], outcome["message"], level = "busy", str(exc), "WARNING"
            raise ToolError(str(exc)) from None
        except ToolError as exc:
            if outcome["status"] in ("ok", "valid", "invalid"):
                outcome["status"] = "invalid_arguments"
            outcome["message"], level = str(exc), "WARNING"
            raise
        except anyio.get_cancelled_exc_class():
            # The client cancelled the call (or went away): not a failure of the tool.
            outcome["status"], outcome["message"] = "cancelled", f"{tool} cancelled"
            raise
        except BaseException as exc:
            outcome["status"], outcome["message"], level = "failed", type(exc).__name__, "ERROR"
            log.exception("tool %s failed", tool)
            raise
        finally:
            elapsed_ms = (time.perf_counter() - started) * 1000
            # Counted, traced and logged off the answer's path: the loop runs this as soon as
            # the call's task yields (at the latest when its answer goes to the transport).
            asyncio.get_running_loop().call_soon(
                functools.partial(
                    self._account,
                    tool,
                    elapsed_ms,
                    level,
                    outcome["status"],
                    outcome["message"],
                    principal=principal,
                )
            )

    @property
    def store_error(self) -> str | None:
        """Why the workspace is not being saved now (``s3://`` unreachable), or ``None``."""
        return None if self.store_handle is None else self.store_handle.error

    def health(self) -> str | None:
        """Why this server cannot serve (``/healthz`` fails with it), or ``None``.

        Set once another server took the workspace's ``s3://`` snapshot store over.
        """
        return self.store.served_elsewhere

    async def _check_fence(self) -> None:
        """Refuse every call once another server took the ``s3://`` store over.

        At most every :data:`FENCE_CHECK_S` seconds, a call first checks the store's fence
        (one request; an unreachable store does not stop the call): so a call that changes
        only the workspace (a run, a file write) is not acknowledged long after the workspace
        moved to another server.

        Raises:
            ToolError: The workspace is served elsewhere ("this workspace is now served
                elsewhere; snapshots since T were not saved").
        """
        store = self.store
        if store.backend == "local":
            return
        now = time.monotonic()
        if store.served_elsewhere is None and now - self._fence_checked >= FENCE_CHECK_S:
            self._fence_checked = now
            try:
                await anyio.to_thread.run_sync(
                    store.check_fence, limiter=self.admission.limiter("light")
                )
            except WorkspaceServedElsewhere:
                pass
            except StoreUnavailable as exc:
                log.warning("cannot check the snapshot store's fence: %s", exc)
        reason = store.served_elsewhere
        if reason is not None:
            raise ToolError(reason)

    def _account(
        self,
        tool: str,
        elapsed_ms: float,
        level: str,
        status: str,
        message: str,
        *,
        principal: str,
    ) -> None:
        """Count one call of ``tool``, trace it and log it (see :meth:`instrument`)."""
        self.metrics.record_call(tool, elapsed_ms, error=level != "INFO", principal=principal)
        self.traces.add(
            tool=tool,
            message=(message or f"{tool} {status}")[:300],
            level=level,
            duration_ms=elapsed_ms,
            status=status,
        )
        log.log(
            logging.getLevelName(level),
            "%s principal=%s status=%s %.1f ms",
            tool,
            principal,
            status,
            elapsed_ms,
        )
