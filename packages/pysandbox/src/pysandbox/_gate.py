"""The AST gate: the single place where pysandbox calls astguard.

Everything astguard-specific (the policy, the check, the run-time rules the child's guards
enforce) goes through this module, so the rest of the package does not depend on astguard's
internals.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from types import CodeType

import astguard

__all__ = [
    "GateOutcome",
    "ModuleRules",
    "check_source",
    "compile_checked",
    "module_rules",
    "runtime_policy",
]


@dataclass(frozen=True)
class ModuleRules:
    """What the child's import guard needs to mirror the static allow-list.

    Attributes:
        allowed: Module names (and packages) user code may import.
        denied: Names refused even below an allowed package (the longest prefix decides).
        allowed_dunders: Dunder attribute names the run-time attribute guard lets through.
        forbidden_attributes: Names refused on any object (frame, code, generator and
            traceback internals, process/network factories, string-driven reflection helpers).
        module_forbidden: Names refused on modules (process APIs).
        static_forbidden_attributes: Names refused on every object when written in source
            (without the run-time-only ones): what code generated at run time may not read.
        format_router: The builtin name routed ``.format`` calls use (astguard's), bound to
            the child's safe formatter.
        denied_module_attributes: ``module.attribute`` pairs refused.
        receiver_router: The builtin name routed private-attribute receivers use (astguard's,
            when the policy switches AG309 on; empty otherwise), bound to the child's
            receiver guard.
        receiver_bases: The library bases (``module.name``) that guard accepts in a
            receiver's class besides builtins and the code's own classes (astguard's).
    """

    allowed: frozenset[str]
    denied: frozenset[str]
    allowed_dunders: frozenset[str]
    forbidden_attributes: frozenset[str] = frozenset()
    module_forbidden: frozenset[str] = frozenset()
    static_forbidden_attributes: frozenset[str] = frozenset()
    format_router: str = ""
    denied_module_attributes: frozenset[str] = frozenset()
    receiver_router: str = ""
    receiver_bases: frozenset[str] = frozenset()


@dataclass(frozen=True)
class GateOutcome:
    """Result of the AST gate.

    Attributes:
        ok: True when the code may run.
        violations: astguard's ``Violation`` objects, in source order.
    """

    ok: bool
    violations: tuple[astguard.Violation, ...]


def runtime_policy(policy: astguard.Policy | None, extra_modules: Iterable[str]) -> astguard.Policy:
    """Return astguard's policy for sandboxed runs.

    The given policy (or astguard's safe default) with ``extra_modules`` added and the flags
    set that tell astguard the run-time attribute guard is installed (pysandbox installs
    guarded ``getattr``/``setattr``/``delattr``/``hasattr`` in the child) and that
    ``.format`` calls are routed through the child's safe formatter (:func:`compile_checked`).

    Args:
        policy: An ``astguard.Policy`` or ``None`` for the default.
        extra_modules: Module names to allow in addition.

    Returns:
        The policy to check with.

    Raises:
        TypeError: ``policy`` is not an ``astguard.Policy``.
    """
    if policy is None:
        policy = astguard.Policy()
    if not isinstance(policy, astguard.Policy):
        raise TypeError(f"policy must be an astguard.Policy, not {type(policy).__name__}")
    extra = tuple(extra_modules)
    if extra:
        policy = policy.with_modules(*extra)
    return policy.with_runtime_attribute_guard().with_runtime_format_guard()


def compile_checked(source: str, filename: str, *, receivers: bool = False) -> CodeType:
    """Compile source the gate accepted, routing ``.format`` calls (astguard's rewrite).

    A last top-level expression statement becomes an assignment to
    :data:`pysandbox.child._values.RESULT_NAME` (a name no source can spell), whose value the
    child sends as the run's ``result``.

    Args:
        source: Code :func:`check_source` accepted with the policy of :func:`runtime_policy`.
        filename: The file name for the code object.
        receivers: Also route the receivers of private attributes (``self._x``) through the
            child's receiver guard (astguard's ``route_private_receivers``): when the policy
            switches AG309 on (:attr:`ModuleRules.receiver_router` set).

    Returns:
        The code object.

    Raises:
        SyntaxError, ValueError, RecursionError, MemoryError, OverflowError: As ``compile``.
    """
    from pysandbox.child._values import RESULT_NAME

    tree = astguard.route_format_calls(ast.parse(source, filename, "exec"))
    if receivers:
        tree = astguard.route_private_receivers(tree)
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        store = ast.Name(id=RESULT_NAME, ctx=ast.Store())
        tree.body[-1] = ast.copy_location(ast.Assign(targets=[store], value=last.value), last)
        ast.fix_missing_locations(tree)
    return compile(tree, filename, "exec", dont_inherit=True)


def module_rules(policy: astguard.Policy) -> ModuleRules:
    """Ask astguard for the rules the child's run-time guards enforce.

    The child runs ``python -I -S`` and cannot import astguard, so the rules travel to it as
    data in its configuration; every value comes from the policy (none is kept here).

    Args:
        policy: The policy from :func:`runtime_policy`.

    Returns:
        The rules the child enforces at run time: the static checker's import rule, its dunder
        allow-list, the names it refuses on every object (with the run-time-only ones, since
        the names are computed) and on modules.
    """
    return ModuleRules(
        allowed=frozenset(policy.allowed_modules),
        denied=frozenset(policy.denied_modules),
        allowed_dunders=frozenset(policy.allowed_dunder_attributes),
        forbidden_attributes=policy.forbidden_attributes(dynamic=True),
        module_forbidden=policy.module_forbidden_attributes,
        static_forbidden_attributes=policy.forbidden_attributes(dynamic=False),
        format_router=astguard.FORMAT_ROUTER if policy.runtime_format_guard else "",
        denied_module_attributes=frozenset(policy.denied_module_attributes),
        receiver_router=astguard.RECEIVER_ROUTER if policy.refuse_private_attributes else "",
        receiver_bases=astguard.RECEIVER_BASES if policy.refuse_private_attributes else frozenset(),
    )


def check_source(source: str, policy: astguard.Policy) -> GateOutcome:
    """Run astguard on ``source``.

    Args:
        source: The user's code.
        policy: The policy from :func:`runtime_policy`.

    Returns:
        The gate's outcome; never raises for bad code.
    """
    result = astguard.check(source, policy)
    return GateOutcome(ok=bool(result.ok), violations=tuple(result.violations))
