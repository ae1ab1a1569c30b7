"""astguard: a static safety checker for untrusted Python.

``check(source)`` parses the source once and walks the AST once, returning every rule hit as a
:class:`Violation` with a stable rule id. ``Policy`` says what is allowed; ``Policy()`` is the
safe default. The policy has one home, here: a runner (pysandbox) and the server ask
astguard rather than keep copies. Run-time guards reuse :func:`is_module_allowed`,
:func:`is_forbidden_attribute`, :func:`is_dunder_allowed`, :func:`forbidden_attributes` and
:func:`module_forbidden_attributes`; :func:`reaches_system` says which modules reach the
system; :data:`DEFAULT_MAX_SOURCE_BYTES` is the one source-size limit (``Policy.max_source_bytes``).
"""

from __future__ import annotations

from astguard.__about__ import __version__
from astguard._checker import ALLOWED_NODE_TYPES, check
from astguard._errors import AstGuardError, UnsafeCodeError
from astguard._policy import (
    DEFAULT_MAX_SOURCE_BYTES,
    Policy,
    forbidden_attributes,
    is_dunder_allowed,
    is_forbidden_attribute,
    is_module_allowed,
    module_forbidden_attributes,
    reaches_system,
)
from astguard._result import CheckResult, Violation
from astguard._route import (
    FORMAT_ROUTER,
    RECEIVER_BASES,
    RECEIVER_ROUTER,
    route_format_calls,
    route_private_receivers,
)
from astguard._rules import RULES, Rule, rule_table_markdown

__all__ = [
    "ALLOWED_NODE_TYPES",
    "DEFAULT_MAX_SOURCE_BYTES",
    "FORMAT_ROUTER",
    "RECEIVER_BASES",
    "RECEIVER_ROUTER",
    "RULES",
    "AstGuardError",
    "CheckResult",
    "Policy",
    "Rule",
    "UnsafeCodeError",
    "Violation",
    "__version__",
    "check",
    "ensure_safe",
    "forbidden_attributes",
    "is_dunder_allowed",
    "is_forbidden_attribute",
    "is_module_allowed",
    "module_forbidden_attributes",
    "reaches_system",
    "route_format_calls",
    "route_private_receivers",
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
