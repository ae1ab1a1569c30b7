"""The names of the isolation layers and of the execution modes: their one home.

Both are ``str`` enums: a member compares equal to its value and serializes as it
(``json.dumps(Layer.LANDLOCK) == '"landlock"'``), so reports and settings that carry the plain
strings keep working, while code names the member.
"""

from __future__ import annotations

import enum
import os

__all__ = ["EXECUTION_ENV", "KERNEL_LAYERS", "ExecutionMode", "Layer", "default_execution"]


class Layer(str, enum.Enum):
    """One isolation layer of a run, as the capability report names it (outermost first)."""

    #: The astguard AST gate, before anything runs.
    AST_GATE = "ast_gate"
    #: A fresh ``python -I -S`` (or a fork of the zygote) in its own session, clean environment.
    ISOLATED_INTERPRETER = "isolated_interpreter"
    #: ``setrlimit``: CPU time, data, address space, file size, open files, core.
    RLIMITS = "rlimits"
    #: ``open()`` confined to the workspace and the read-only roots.
    OPEN_GUARD = "open_guard"
    #: The audit hook (``sys.addaudithook``).
    AUDIT_HOOK = "audit_hook"
    #: The import guard (the policy's allow-list).
    IMPORT_GUARD = "import_guard"
    #: The guarded ``getattr``/``setattr``/``delattr``/``hasattr`` builtins.
    ATTRIBUTE_GUARD = "attribute_guard"
    #: Landlock (Linux file-system confinement).
    LANDLOCK = "landlock"
    #: seccomp-bpf (Linux system-call filter).
    SECCOMP = "seccomp"
    #: ``PR_SET_NO_NEW_PRIVS``, set together with a kernel layer.
    NO_NEW_PRIVS = "no_new_privs"
    #: Capabilities dropped, together with a kernel layer.
    CAPABILITIES = "capabilities"
    #: The parent's supervision: deadline, output caps, workspace size, process-tree kill.
    SUPERVISION = "supervision"
    #: Pysandbox's own tests only: no AST gate and no Python-level guards.
    TESTING_KERNEL_ONLY = "testing_kernel_only"

    def __str__(self) -> str:
        return self.value


#: Layers that only the kernel can provide; ``require`` may name these.
KERNEL_LAYERS: tuple[Layer, ...] = (Layer.LANDLOCK, Layer.SECCOMP)

#: The Python-level layers (``Sandbox(_testing_kernel_only=True)`` switches these off).
PYTHON_LEVEL_LAYERS: frozenset[Layer] = frozenset(
    {
        Layer.AST_GATE,
        Layer.OPEN_GUARD,
        Layer.AUDIT_HOOK,
        Layer.IMPORT_GUARD,
        Layer.ATTRIBUTE_GUARD,
    }
)


class ExecutionMode(str, enum.Enum):
    """How a sandbox starts the child of a run."""

    #: A fork server (the zygote) forks a fresh, fully confined child per run (the default).
    WARM = "warm"
    #: A fresh ``python -I -S`` per run; warm's fallback where the zygote cannot start.
    SPAWN = "spawn"

    def __str__(self) -> str:
        return self.value


#: The environment variable that, when set, is the execution mode of a sandbox configured
#: without one (``Sandbox(...)`` without ``execution=``, ``SandboxConfig()``); an explicit mode
#: always wins. pysandbox's test suite runs its spawn pass with it.
EXECUTION_ENV = "PYSANDBOX_EXECUTION"


def default_execution() -> ExecutionMode:
    """The execution mode of a sandbox configured without one.

    Returns:
        ``ExecutionMode($PYSANDBOX_EXECUTION)`` when the variable is set (read at each call),
        else :attr:`ExecutionMode.WARM`.

    Raises:
        ValueError: ``PYSANDBOX_EXECUTION`` is set to something other than a mode's value (the
            empty string and other spellings included): a typo never silently runs another
            mode.
    """
    value = os.environ.get(EXECUTION_ENV)
    if value is None:
        return ExecutionMode.WARM
    if value not in tuple(ExecutionMode):
        modes = [str(mode) for mode in ExecutionMode]
        raise ValueError(f"{EXECUTION_ENV} must be one of {modes} when set, not {value!r}")
    return ExecutionMode(value)
