"""Result types of a check: :class:`Violation` and :class:`CheckResult`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CheckResult", "Violation"]


@dataclass(frozen=True)
class Violation:
    """One rule hit, with its location in the checked source.

    Lines are 1-based. Columns are 1-based and count characters (not bytes) of the source
    line; ``end_col`` is the column just past the end of the offending node. For a hit inside
    a string (a format template or a string annotation) the location is the whole string.

    Attributes:
        rule_id: The stable rule id (``"AG101"``); see :data:`astguard.RULES`.
        message: What was found and what to do instead.
        line: First line of the offending node.
        col: First column of the offending node.
        end_line: Last line of the offending node.
        end_col: Column just past the end of the offending node.
    """

    rule_id: str
    message: str
    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.line}:{self.col}: {self.rule_id} {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """Return the violation as JSON-compatible data.

        Returns:
            A dict with the keys ``rule_id``, ``message``, ``line``, ``col``, ``end_line``
            and ``end_col``.
        """
        return {
            "rule_id": self.rule_id,
            "message": self.message,
            "line": self.line,
            "col": self.col,
            "end_line": self.end_line,
            "end_col": self.end_col,
        }


@dataclass(frozen=True)
class CheckResult:
    """The outcome of :func:`astguard.check`: every violation found, in source order.

    Attributes:
        ok: True when there is no violation.
        violations: The violations, ordered by line, then column, then rule id.
        filename: The name the source was checked under (used in reports only).
    """

    ok: bool
    violations: tuple[Violation, ...]
    filename: str = "<sandbox>"

    def __str__(self) -> str:
        if self.ok:
            return f"{self.filename}: ok"
        return "\n".join(str(v) for v in self.violations)

    def __bool__(self) -> bool:
        return self.ok

    @property
    def rule_ids(self) -> tuple[str, ...]:
        """The distinct rule ids that were hit, sorted."""
        return tuple(sorted({v.rule_id for v in self.violations}))

    def to_dict(self) -> dict[str, Any]:
        """Return the result as JSON-compatible data.

        Returns:
            A dict with ``ok``, ``filename`` and ``violations`` (a list of
            :meth:`Violation.to_dict` dicts).
        """
        return {
            "ok": self.ok,
            "filename": self.filename,
            "violations": [v.to_dict() for v in self.violations],
        }
