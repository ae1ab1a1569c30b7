"""JSON text given to the server's tools, parsed by datavalidate (no MCP imports).

One home for what valid JSON is: :func:`datavalidate.parse_json` (duplicate keys, ``NaN`` and
``Infinity`` and out-of-range literals refused, integers up to 50,000 digits, numbers with a
fraction or exponent kept exact as :class:`decimal.Decimal`). This module adds the size limit of
a tool's input and words the failures so they follow the argument's name in a sentence. The
server and its confined workers share it.
"""

from __future__ import annotations

import json
from typing import Any

from datavalidate import JsonNumberError, parse_json

__all__ = ["MAX_INPUT_BYTES", "JsonTextError", "loads_strict"]

MAX_INPUT_BYTES = 16 * 1024 * 1024
"""Largest JSON document or workspace JSON file accepted, in bytes."""


class JsonTextError(ValueError):
    """The text is not acceptable JSON.

    The message follows the argument's name in a sentence (``"is not valid JSON: Expecting
    value at line 1 column 1"``).
    """


def loads_strict(text: str) -> Any:
    """Parse JSON text given to a tool (:func:`datavalidate.parse_json`, exact numbers).

    Args:
        text: The JSON text, at most :data:`MAX_INPUT_BYTES` bytes as UTF-8.

    Returns:
        The value: dicts, lists, str, int, Decimal, bool, None.

    Raises:
        JsonTextError: Too large, not valid JSON (with the line and column), a repeated key, a
            number that cannot be kept exactly (NaN, Infinity, out of a double's range, more
            than 50,000 digits), or nested too deeply.
    """
    if len(text.encode("utf-8", "surrogatepass")) > MAX_INPUT_BYTES:
        raise JsonTextError(f"is larger than {MAX_INPUT_BYTES} bytes")
    try:
        return parse_json(text)
    except json.JSONDecodeError as exc:
        raise JsonTextError(
            f"is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except JsonNumberError as exc:
        raise JsonTextError(f"is not accepted: {exc}") from None
    except ValueError as exc:  # a repeated key, nesting
        raise JsonTextError(f"is not valid JSON: {exc}") from None
