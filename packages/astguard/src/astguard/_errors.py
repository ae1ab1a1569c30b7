"""The exception tree of astguard, rooted in :class:`AstGuardError`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from astguard._result import CheckResult, Violation

__all__ = ["AstGuardError", "UnsafeCodeError"]


class AstGuardError(Exception):
    """Base class of every exception astguard raises on purpose."""


class UnsafeCodeError(AstGuardError):
    """Raised by :func:`astguard.ensure_safe` when the checker refuses the source.

    Attributes:
        result: The full :class:`~astguard.CheckResult`.
        violations: The violations, in source order (same as ``result.violations``).
        filename: The name the source was checked under.
    """

    def __init__(self, result: CheckResult) -> None:
        self.result = result
        self.violations: tuple[Violation, ...] = result.violations
        self.filename = result.filename
        super().__init__(str(self))

    def __str__(self) -> str:
        count = len(self.violations)
        noun = "violation" if count == 1 else "violations"
        lines = [f"{self.filename}: refused by astguard ({count} {noun})"]
        lines.extend(f"  {v}" for v in self.violations)
        return "\n".join(lines)
