"""astguard: a static safety checker for untrusted Python.

``check(source)`` parses the source once and walks the AST once, returning every rule hit as a
:class:`Violation` with a stable rule id. ``Policy`` says what is allowed; ``Policy()`` is the
safe default. The run-time guards of a runner (pysandbox) reuse :func:`is_module_allowed` and
:func:`is_forbidden_attribute` so that static and run-time decisions agree.
"""

from __future__ import annotations

from astguard.__about__ import __version__
from astguard._checker import ALLOWED_NODE_TYPES, check
from astguard._errors import AstGuardError, UnsafeCodeError
from astguard._policy import (
    ALLOWED_DUNDER_ATTRIBUTES,
    ALLOWED_DUNDER_NAMES,
    DEFAULT_ALLOWED_MODULES,
    DEFAULT_DENIED_MODULES,
    DEFINABLE_DUNDERS,
    DENIED_BUILTINS,
    DENIED_MODULE_ATTRIBUTES,
    DYNAMIC_DENIED_ATTRIBUTES,
    FORBIDDEN_ATTRIBUTES,
    FORBIDDEN_NAMES,
    FUTURE_FEATURES,
    MODULE_NAME_ATTRIBUTES,
    REFLECTION_BUILTINS,
    SPAWN_ATTRIBUTES,
    SPAWN_MODULE_ATTRIBUTES,
    STDLIB_MODULE_NAMES,
    WRITE_DENIED_ATTRIBUTES,
    Policy,
    is_forbidden_attribute,
    is_module_allowed,
)
from astguard._result import CheckResult, Violation
from astguard._rules import RULES, Rule, rule_table_markdown

__all__ = [
    "ALLOWED_DUNDER_ATTRIBUTES",
    "ALLOWED_DUNDER_NAMES",
    "ALLOWED_NODE_TYPES",
    "DEFAULT_ALLOWED_MODULES",
    "DEFAULT_DENIED_MODULES",
    "DEFINABLE_DUNDERS",
    "DENIED_BUILTINS",
    "DENIED_MODULE_ATTRIBUTES",
    "DYNAMIC_DENIED_ATTRIBUTES",
    "FORBIDDEN_ATTRIBUTES",
    "FORBIDDEN_NAMES",
    "FUTURE_FEATURES",
    "MODULE_NAME_ATTRIBUTES",
    "REFLECTION_BUILTINS",
    "RULES",
    "SPAWN_ATTRIBUTES",
    "SPAWN_MODULE_ATTRIBUTES",
    "STDLIB_MODULE_NAMES",
    "WRITE_DENIED_ATTRIBUTES",
    "AstGuardError",
    "CheckResult",
    "Policy",
    "Rule",
    "UnsafeCodeError",
    "Violation",
    "__version__",
    "check",
    "ensure_safe",
    "is_forbidden_attribute",
    "is_module_allowed",
    "rule_table_markdown",
]


def ensure_safe(
    source: str | bytes, policy: Policy | None = None, *, filename: str = "<sandbox>"
) -> CheckResult:
    """Check ``source`` like :func:`check` and raise when anything is refused.

    Args:
        source: The Python source text (``bytes`` are decoded as Python does).
        policy: What to allow; None means ``Policy()``.
        filename: The name to report the source under.

    Returns:
        The (clean) :class:`CheckResult`.

    Raises:
        UnsafeCodeError: If there is at least one violation; it carries the full result.
        TypeError: If ``source`` or ``policy`` has the wrong type.
    """
    result = check(source, policy, filename=filename)
    if not result.ok:
        raise UnsafeCodeError(result)
    return result
