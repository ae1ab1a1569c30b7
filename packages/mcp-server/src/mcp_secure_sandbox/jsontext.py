"""Strict JSON text parsing, shared by the server and its confined workers (no MCP imports).

Duplicate keys and NaN/Infinity are errors; integers keep every digit; a decimal number that a
binary double cannot represent exactly is kept as a :class:`decimal.Decimal`, which JSON
Schema's numeric keywords compare exactly.
"""

from __future__ import annotations

import json
import math
import sys
from decimal import Decimal
from typing import Any

__all__ = ["MAX_INPUT_BYTES", "JsonTextError", "loads_strict"]

MAX_INPUT_BYTES = 16 * 1024 * 1024
"""Largest JSON document or workspace JSON file accepted, in bytes."""


class JsonTextError(ValueError):
    """The text is not acceptable JSON.

    The message follows the argument's name in a sentence (``"is not valid JSON: Expecting
    value at line 1 column 1"``).
    """


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (RFC 8259 has no NaN or Infinity)")


def _pairs_no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate object key {key!r}")
        seen[key] = value
    return seen


def _number(text: str) -> float | Decimal:
    """A JSON number with a fraction or exponent: a float when exact, else a Decimal."""
    value = float(text)
    exact = Decimal(text)
    if math.isfinite(value) and Decimal(value) == exact:
        return value
    return exact


def _max_int_digits() -> int:
    """The interpreter's limit on decimal digits of an int (CVE-2020-10735), 4300 by default."""
    getter = getattr(sys, "get_int_max_str_digits", None)
    return int(getter()) if getter is not None else 4300


def loads_strict(text: str) -> Any:
    """Parse JSON text strictly (see the module's description).

    Args:
        text: The JSON text, at most :data:`MAX_INPUT_BYTES` bytes as UTF-8.

    Returns:
        The value: dicts, lists, str, int, float or Decimal, bool, None.

    Raises:
        JsonTextError: Too large, not valid JSON (with the line and column), an integer of
            more digits than the interpreter converts, or nested too deeply.
    """
    if len(text.encode("utf-8", "surrogatepass")) > MAX_INPUT_BYTES:
        raise JsonTextError(f"is larger than {MAX_INPUT_BYTES} bytes")
    try:
        return json.loads(
            text,
            object_pairs_hook=_pairs_no_duplicates,
            parse_constant=_reject_constant,
            parse_float=_number,
        )
    except json.JSONDecodeError as exc:
        raise JsonTextError(
            f"is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except ValueError as exc:
        if "int_max_str_digits" in str(exc) or "integer string conversion" in str(exc):
            raise JsonTextError(
                f"holds an integer of more than {_max_int_digits()} digits; "
                "such numbers are refused (they cost quadratic time to convert)"
            ) from None
        raise JsonTextError(f"is not valid JSON: {exc}") from None
    except RecursionError:
        raise JsonTextError("is nested too deeply") from None
