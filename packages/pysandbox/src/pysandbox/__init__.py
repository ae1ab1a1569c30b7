"""pysandbox: run untrusted Python with layered isolation.

Layers: an AST gate (astguard), a fresh isolated interpreter, rlimits, Python-level guards,
Landlock and seccomp (Linux), and parent supervision with process-tree kill and output caps.
"""

from pysandbox.__about__ import __version__
from pysandbox._bounds import Bound, bound_of
from pysandbox._capabilities import Capabilities, LayerInfo
from pysandbox._layers import (
    EXECUTION_ENV,
    KERNEL_LAYERS,
    ExecutionMode,
    Layer,
    default_execution,
)
from pysandbox._limits import Limits
from pysandbox._result import RunResult, RunStatus
from pysandbox._sandbox_config import SandboxConfig
from pysandbox._session import Session, SessionEnd
from pysandbox._worker_confinement import WorkerConfinement, confine_worker
from pysandbox.exceptions import (
    IsolationUnavailable,
    SandboxClosedError,
    SandboxError,
    SandboxSetupError,
    SessionEndedError,
    SessionsNeedWarmMode,
)
from pysandbox.profiles import DATASCIENCE, DEFAULT, PROFILES, Profile
from pysandbox.runner import READY_CHILDREN, READY_MAX_IDLE_S, READY_MIN_IDLE_S, Sandbox

__all__ = [
    "DATASCIENCE",
    "DEFAULT",
    "EXECUTION_ENV",
    "KERNEL_LAYERS",
    "PROFILES",
    "READY_CHILDREN",
    "READY_MAX_IDLE_S",
    "READY_MIN_IDLE_S",
    "Bound",
    "Capabilities",
    "ExecutionMode",
    "IsolationUnavailable",
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
    "SessionEnd",
    "SessionEndedError",
    "SessionsNeedWarmMode",
    "WorkerConfinement",
    "__version__",
    "bound_of",
    "confine_worker",
    "default_execution",
]
