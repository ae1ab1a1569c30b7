"""The AST gate: the single place where pysandbox calls astguard.

Everything astguard-specific (the policy, the check, the allow-list the child's import guard
mirrors) goes through this module, so the rest of the package does not depend on astguard's
internals.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["GateOutcome", "ModuleRules", "check_source", "module_rules", "runtime_policy"]

#: Dunder names the run-time attribute guard lets through (ordinary code uses them).
DEFAULT_ALLOWED_DUNDERS: frozenset[str] = frozenset(
    {
        "__name__",
        "__qualname__",
        "__doc__",
        "__module__",
        "__init__",
        "__repr__",
        "__str__",
        "__len__",
        "__iter__",
        "__next__",
        "__enter__",
        "__exit__",
        "__eq__",
        "__ne__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
        "__hash__",
        "__contains__",
        "__getitem__",
        "__setitem__",
        "__delitem__",
        "__add__",
        "__sub__",
        "__mul__",
        "__truediv__",
        "__floordiv__",
        "__mod__",
        "__neg__",
        "__abs__",
        "__bool__",
        "__call__",
        "__cause__",
        "__context__",
        "__post_init__",
        "__annotations__",
        "__dataclass_fields__",
        "__slots__",
        "__match_args__",
    }
)


@dataclass(frozen=True)
class ModuleRules:
    """What the child's import guard needs to mirror the static allow-list.

    Attributes:
        allowed: Module names (and packages) user code may import.
        denied: Names refused even below an allowed package (the longest prefix decides).
        allowed_dunders: Dunder attribute names the run-time attribute guard lets through.
    """

    allowed: frozenset[str]
    denied: frozenset[str]
    allowed_dunders: frozenset[str]


@dataclass(frozen=True)
class GateOutcome:
    """Result of the AST gate.

    Attributes:
        ok: True when the code may run.
        violations: astguard's ``Violation`` objects, in source order.
    """

    ok: bool
    violations: tuple[Any, ...]


def _astguard() -> Any:
    """Return the astguard module, or ``None`` while its checker API has not landed."""
    import astguard

    return astguard if hasattr(astguard, "check") and hasattr(astguard, "Policy") else None


#: Interim allow-list used only while astguard's ``check`` is not available.
_INTERIM_MODULES: frozenset[str] = frozenset(
    {
        "__future__",
        "abc",
        "asyncio",
        "bisect",
        "collections",
        "contextlib",
        "copy",
        "csv",
        "dataclasses",
        "datetime",
        "decimal",
        "enum",
        "fractions",
        "functools",
        "hashlib",
        "heapq",
        "itertools",
        "json",
        "math",
        "operator",
        "pathlib",
        "random",
        "re",
        "statistics",
        "string",
        "textwrap",
        "time",
        "typing",
    }
)


@dataclass(frozen=True)
class _InterimPolicy:
    allowed_modules: frozenset[str]
    denied_modules: frozenset[str] = frozenset()
    allowed_dunder_attributes: frozenset[str] = frozenset()


@dataclass(frozen=True)
class _InterimViolation:
    rule_id: str
    message: str
    line: int
    col: int
    end_line: int
    end_col: int


def _interim_check(source: str, policy: _InterimPolicy) -> GateOutcome:
    """A deliberately small stand-in (syntax, imports, dunders, dangerous names)."""
    import ast

    from pysandbox._child import module_allowed

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", 1) or 1
        return GateOutcome(False, (_InterimViolation("AG901", str(exc), line, 0, line, 0),))
    found: list[_InterimViolation] = []
    bad_names = {
        "exec",
        "eval",
        "compile",
        "__import__",
        "globals",
        "locals",
        "vars",
        "breakpoint",
        "getattr",
        "setattr",
        "delattr",
    }
    for node in ast.walk(tree):
        pos = (
            getattr(node, "lineno", 1),
            getattr(node, "col_offset", 0),
            getattr(node, "end_lineno", 1) or 1,
            getattr(node, "end_col_offset", 0) or 0,
        )
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.level == 0 else ["."]
        for name in names:
            if not module_allowed(name, policy.allowed_modules, policy.denied_modules):
                found.append(_InterimViolation("AG101", f"import of {name!r}", *pos))
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and node.attr
            not in ("__init__", "__name__", "__class__", "__repr__", "__str__", "__eq__")
        ):
            found.append(_InterimViolation("AG301", f"attribute {node.attr!r}", *pos))
        if isinstance(node, ast.Name) and node.id in bad_names:
            found.append(_InterimViolation("AG201", f"name {node.id!r}", *pos))
    return GateOutcome(not found, tuple(found))


def runtime_policy(policy: Any | None, extra_modules: Iterable[str]) -> Any:
    """Return astguard's policy for sandboxed runs.

    The given policy (or astguard's safe default) with ``extra_modules`` added and the flag
    set that tells astguard the run-time attribute guard is installed (pysandbox installs
    guarded ``getattr``/``setattr``/``delattr``/``hasattr`` in the child).

    Args:
        policy: An ``astguard.Policy`` or ``None`` for the default.
        extra_modules: Module names to allow in addition.

    Returns:
        An ``astguard.Policy``.
    """
    ag = _astguard()
    if ag is None:
        return _InterimPolicy(_INTERIM_MODULES | frozenset(extra_modules))
    result = policy if policy is not None else ag.Policy()
    extra = tuple(extra_modules)
    if extra:
        if hasattr(result, "with_modules"):
            result = result.with_modules(*extra)
        elif hasattr(result, "allow_modules"):
            result = result.allow_modules(*extra)
    return result.with_runtime_attribute_guard()


def module_rules(policy: Any) -> ModuleRules:
    """Extract the import allow-list and dunder allow-list from an astguard policy.

    Args:
        policy: An ``astguard.Policy``.

    Returns:
        The rules the child enforces at run time.
    """
    allowed = _first_set(policy, ("allowed_modules", "modules", "allow_modules"))
    denied = _first_set(policy, ("denied_modules", "blocked_modules", "deny_modules"))
    dunders = _first_set(policy, ("allowed_dunders", "allowed_dunder_attributes", "dunders"))
    return ModuleRules(
        allowed=frozenset(allowed),
        denied=frozenset(denied),
        allowed_dunders=frozenset(dunders) | DEFAULT_ALLOWED_DUNDERS,
    )


def _first_set(obj: Any, names: tuple[str, ...]) -> frozenset[str]:
    for name in names:
        value = getattr(obj, name, None)
        if value is not None and not callable(value):
            return frozenset(str(v) for v in value)
    return frozenset()


def check_source(source: str, policy: Any) -> GateOutcome:
    """Run astguard on ``source``.

    Args:
        source: The user's code.
        policy: The ``astguard.Policy`` from :func:`runtime_policy`.

    Returns:
        The gate's outcome; never raises for bad code.
    """
    ag = _astguard()
    if ag is None or isinstance(policy, _InterimPolicy):
        return _interim_check(source, policy)
    result = ag.check(source, policy)
    return GateOutcome(ok=bool(result.ok), violations=tuple(result.violations))
