"""pysandbox: run untrusted Python with layered isolation.

Layers: an AST gate (astguard), a fresh isolated interpreter, rlimits, Python-level guards,
Landlock and seccomp (Linux), and parent supervision with process-tree kill and output caps.
"""

from typing import TYPE_CHECKING, Any

from pysandbox.__about__ import __version__
from pysandbox._bounds import Bound, bound_of
from pysandbox._capabilities import Capabilities, LayerInfo
from pysandbox._exclusive import (
    EXCLUSIVE_WAIT_S,
    STOP_WAIT_S,
    ExclusiveReport,
    WorkspaceCoordinator,
)
from pysandbox._layers import (
    EXECUTION_ENV,
    KERNEL_LAYERS,
    ExecutionMode,
    Layer,
    default_execution,
)
from pysandbox._limits import Limits
from pysandbox._registry import SessionInfo, SessionRegistry
from pysandbox._result import RunResult, RunStatus
from pysandbox._sandbox_config import SandboxConfig
from pysandbox._session import DESCRIPTION_MAX as SESSION_DESCRIPTION_MAX
from pysandbox._session import Session, SessionEnd
from pysandbox._worker_confinement import WorkerConfinement, confine_worker
from pysandbox.exceptions import (
    ExclusiveTimeout,
    IsolationUnavailable,
    JobError,
    SandboxClosedError,
    SandboxError,
    SandboxSetupError,
    SessionBudgetExceeded,
    SessionEndedError,
    SessionsNeedWarmMode,
    TooManySessions,
    UnknownSession,
    WorkerLimitExceeded,
    WorkerProtocolError,
    WorkerStartError,
)
from pysandbox.profiles import DATASCIENCE, DEFAULT, PROFILES, Profile
from pysandbox.runner import READY_CHILDREN, READY_MAX_IDLE_S, READY_MIN_IDLE_S, Sandbox

if TYPE_CHECKING:
    from pysandbox._confined_pool import AsyncConfinedPool, ConfinedPool

__all__ = [
    "DATASCIENCE",
    "DEFAULT",
    "EXCLUSIVE_WAIT_S",
    "EXECUTION_ENV",
    "KERNEL_LAYERS",
    "PROFILES",
    "READY_CHILDREN",
    "READY_MAX_IDLE_S",
    "READY_MIN_IDLE_S",
    "SESSION_DESCRIPTION_MAX",
    "STOP_WAIT_S",
    "AsyncConfinedPool",
    "Bound",
    "Capabilities",
    "ConfinedPool",
    "ExclusiveReport",
    "ExclusiveTimeout",
    "ExecutionMode",
    "IsolationUnavailable",
    "JobError",
    "Layer",
    "LayerInfo",
    "Limits",
    "Profile",
    "RunResult",
    "RunStatus",
    "Sandbox",
    "SandboxClosedError",
    "SandboxConfig",
    "SandboxError",
    "SandboxSetupError",
    "Session",
    "SessionBudgetExceeded",
    "SessionEnd",
    "SessionEndedError",
    "SessionInfo",
    "SessionRegistry",
    "SessionsNeedWarmMode",
    "TooManySessions",
    "UnknownSession",
    "WorkerConfinement",
    "WorkerLimitExceeded",
    "WorkerProtocolError",
    "WorkerStartError",
    "WorkspaceCoordinator",
    "__version__",
    "bound_of",
    "confine_worker",
    "default_execution",
]


def __getattr__(name: str) -> Any:
    """The confined pools, imported on first use (a pool's worker never imports anyio)."""
    if name in ("AsyncConfinedPool", "ConfinedPool"):
        from pysandbox import _confined_pool  # lazy: anyio costs a worker address space

        return getattr(_confined_pool, name)
    raise AttributeError(f"module 'pysandbox' has no attribute {name!r}")
