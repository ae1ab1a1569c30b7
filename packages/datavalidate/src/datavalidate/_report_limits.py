"""How many errors a report lists: the default and the bound (one home for both reports).

A report keeps the errors it lists in memory (and a caller often sends them on), while it counts
every error; an unbounded ``max_errors`` over a large hostile file would keep millions. The
CSV and JSON reports, the command line and the MCP server take both numbers from here.
"""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_ERRORS", "MAX_ERRORS_LIMIT", "check_max_errors"]

DEFAULT_MAX_ERRORS = 100
"""Errors a report lists when the caller does not say (``max_errors``' default)."""
MAX_ERRORS_LIMIT = 1000
"""Most errors a report may be asked to list (``max_errors``' upper bound)."""


def check_max_errors(value: object, *, option: str = "max_errors") -> int:
    """Return ``value`` when it is a valid ``max_errors``: an integer from 0 to the bound.

    Args:
        value: What the caller gave.
        option: How the caller spells the option, for the message (``--max-errors``).

    Returns:
        ``value``, an ``int`` from 0 to :data:`MAX_ERRORS_LIMIT`.

    Raises:
        ValueError: Not an integer (``bool`` included), negative, or above the bound; the
            message names the option, the range and that the counts cover every error.
    """
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_ERRORS_LIMIT:
        return value
    raise ValueError(
        f"{option} must be an integer from 0 to {MAX_ERRORS_LIMIT:,} (how many errors are "
        f"listed; error_count counts them all), not {value!r}"
    )
