r"""The fast path: ``jsonschema-rs`` decides valid instances of schemas in an eligible subset.

A schema is eligible when ``jsonschema-rs`` gives every instance it accepts the verdict our
validator gives (the differential tests check this over the official suite, edge cases and
generated instances). Only "valid" is taken from it; an instance it rejects is validated again
by our validator, which writes the report. Eligibility is decided from the schema alone:

* drafts 6, 7, 2019-09 and 2020-12 with their standard metaschemas (draft 4's ``integer``
  differs), no ``$vocabulary``, no ``$dynamicRef``/``$recursiveRef``, no ``$id`` below the root,
  and only local ``$ref``\s (``#`` or ``#/...`` JSON Pointers) to places this module walks:
  a retriever that refuses every URI is installed as well (``jsonschema-rs`` fetches ``file://``
  and network references by default);
* ``pattern`` and ``patternProperties`` only in a subset whose meaning is the same in Rust's
  linear-time ``regex`` engine (``pattern_options=RegexOptions()``; the default engine
  backtracks) and under our RE2 policy: literals, ``.``, escaped punctuation, classes of literal
  characters and ranges, groups ``(...)`` ``(?:...)``, ``|``, ``^``, ``$`` and the quantifiers
  ``* + ? {n} {n,} {n,m}``, lazy or not. No ``\d \w \s \b`` (Unicode in Rust, ASCII or
  ECMA-specific here), no escapes of letters or digits, no look-around or back-references;
* formats only through our own checkers (:data:`datavalidate._formats.FORMATS`), never
  ``jsonschema-rs``'s built-in ones;
* every number in the schema exact in an f64 (an ``int`` within ±2**53; a ``float`` whose
  shortest ``repr`` is its binary value: ``0.5``, ``3.0``, not ``0.1``), and ``multipleOf`` an
  integer;
* no ``contentEncoding``/``contentMediaType``/``contentSchema``.

The copy handed to ``jsonschema-rs`` is also *hardened*, which can only make it stricter: where
a subschema has a numeric keyword it must see a JSON value (``jsonschema-rs`` reads NaN and
infinities as no JSON type at all, which every bound would ignore) within ±2**53 (so
``multipleOf`` never meets a float beyond exact integers); items of a ``uniqueItems`` array
must be strings, booleans, nulls or integers within ±2**53 (equality of other numbers and of
nested values is left to our validator). Both guards sit in ``allOf`` under ``not``/``type``,
so they add no annotations for ``unevaluatedProperties``/``unevaluatedItems``.

This does not bound a hostile schema's work; the server's workers do.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any, cast

import jsonschema_rs

from datavalidate._formats import FORMATS
from datavalidate._keywords import subschemas

__all__ = ["FastValidator", "build", "ineligible_reason"]

_LIMIT = 2**53
_NUMERIC = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_REFUSED_KEYWORDS = (
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
    "$recursiveAnchor",
    "$vocabulary",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
)
_CLASSES: dict[str, Any] = {
    "draft6": jsonschema_rs.Draft6Validator,
    "draft7": jsonschema_rs.Draft7Validator,
    "draft2019-09": jsonschema_rs.Draft201909Validator,
    "draft2020-12": jsonschema_rs.Draft202012Validator,
}
_STANDARD_METASCHEMAS = frozenset(
    {
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    }
)
_ANY_JSON = ["null", "boolean", "object", "array", "number", "string"]
_NUMBER_GUARD = {"type": _ANY_JSON, "minimum": -_LIMIT, "maximum": _LIMIT}
_UNIQUE_GUARD = {
    "not": {
        "contains": {
            "not": {
                "anyOf": [
                    {"type": ["string", "boolean", "null"]},
                    {"type": "integer", "minimum": -_LIMIT, "maximum": _LIMIT},
                ]
            }
        }
    }
}
_PUNCTUATION = frozenset("\\^$.|?*+()[]{}-/")


def _refuse(uri: str) -> Any:
    raise ValueError(f"the fast path never fetches {uri!r}")


class FastValidator:
    """A ``jsonschema-rs`` validator of a hardened copy of an eligible schema.

    Args:
        native: The ``jsonschema-rs`` validator.
    """

    def __init__(self, native: Any) -> None:
        self.native = native

    def accepts(self, instance: object) -> bool:
        """Whether the instance is valid for sure (``False`` means: ask our validator)."""
        try:
            return bool(self.native.is_valid(instance))
        except Exception:  # unsupported data, or a format checker that raised: ask our validator
            return False


def _pattern_is_plain(pattern: str) -> bool:
    """Whether a pattern is in the subset that means the same in Rust ``regex`` and RE2."""
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= n or pattern[i + 1] not in _PUNCTUATION:
                return False
            i += 2
        elif ch == "[":
            end = _class_end(pattern, i)
            if end < 0:
                return False
            i = end + 1
        elif ch == "{":
            end = pattern.find("}", i)
            body = pattern[i + 1 : end] if end > 0 else ""
            low, _, high = body.partition(",")
            if not low.isdigit() or not low.isascii() or (high and not high.isdigit()):
                return False
            i = end + 1
        elif ch == "(":
            if pattern.startswith("(?", i) and not pattern.startswith("(?:", i):
                return False
            i += 3 if pattern.startswith("(?:", i) else 1
        elif ch in "]}":
            return False
        else:
            i += 1
    return True


def _class_end(pattern: str, start: int) -> int:
    """The index of the ``]`` closing a class of literals and ranges, or -1."""
    i = start + 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):  # "[]" / "[^]": ECMA and Rust disagree
        return -1
    while i < len(pattern):
        ch = pattern[i]
        if ch == "]":
            return i
        if ch == "\\":
            if i + 1 >= len(pattern) or pattern[i + 1] not in _PUNCTUATION:
                return -1
            i += 2
        elif ch == "[" or (ch in "&~-" and pattern.startswith(ch * 2, i)):
            return -1  # nested classes and set operations are Rust syntax only
        else:
            i += 1
    return -1


def _exact_number(value: object) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return -_LIMIT <= value <= _LIMIT
    if isinstance(value, float):
        return math.isfinite(value) and Fraction(Decimal(repr(value))) == Fraction(value)
    return True


def _numbers(node: object) -> Iterator[object]:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, (int, float)):
            yield item


def _local_target(ref: str) -> str | None:
    """The JSON Pointer a local ``$ref`` names (``None`` when it is not ``#`` or ``#/...``)."""
    if ref == "#":
        return ""
    if not ref.startswith("#/") or "%" in ref:
        return None
    return ref[1:]


def ineligible_reason(schema: Any, draft: str) -> str | None:
    """Why a schema cannot take the fast path, or ``None`` when it can.

    Args:
        schema: A schema that passed our metaschema check.
        draft: The draft our validator uses (``"draft2020-12"``...).
    """
    if draft not in _CLASSES:
        return f"{draft} is not in the fast subset"
    if isinstance(schema, bool):
        return None
    meta = schema.get("$schema")
    if meta is not None and str(meta).rstrip("#") not in _STANDARD_METASCHEMAS:
        return "a custom metaschema"
    if not all(_exact_number(v) for v in _numbers(schema)):
        return "a number that is not exact in an f64"
    places = dict(subschemas(schema))
    for where, node in places.items():
        for keyword in _REFUSED_KEYWORDS:
            if keyword in node:
                return f"{keyword} at {where or '/'}"
        if where and "$id" in node:
            return f"$id below the root at {where}"
        ref = node.get("$ref")
        if ref is not None:
            target = _local_target(ref) if isinstance(ref, str) else None
            if target is None or target not in places:
                return f"a $ref that is not a local JSON Pointer to a subschema at {where}"
        divisor = node.get("multipleOf")
        if divisor is not None and not (
            isinstance(divisor, int) or (isinstance(divisor, float) and divisor.is_integer())
        ):
            return f"a non-integer multipleOf at {where}"
        pattern = node.get("pattern")
        if isinstance(pattern, str) and not _pattern_is_plain(pattern):
            return f"pattern {pattern!r} outside the subset shared with Rust regex"
        for key in node.get("patternProperties") or ():
            if not _pattern_is_plain(str(key)):
                return f"patternProperties key {key!r} outside the subset shared with Rust regex"
    return None


def _harden(schema: Any) -> Any:
    hardened = copy.deepcopy(schema)
    if isinstance(hardened, bool):
        return hardened
    for _, found in list(subschemas(hardened)):  # walk first: the guards are not walked
        node = cast("dict[str, Any]", found)  # a deep copy: every object is a dict
        guards: list[Any] = []
        if any(keyword in node for keyword in _NUMERIC):
            guards.append(_NUMBER_GUARD)
        if node.get("uniqueItems") is True:
            guards.append(_UNIQUE_GUARD)
        if guards:
            existing = node.get("allOf")
            node["allOf"] = [*(existing if isinstance(existing, list) else []), *guards]
    return hardened


def _format_check(check: Any) -> Any:
    def checker(value: str) -> bool:
        return bool(check(value))

    return checker


_RS_FORMATS = {name: _format_check(check) for name, check in FORMATS.items()}


def build(schema: Any, draft: str, *, check_formats: bool) -> FastValidator | None:
    """A fast validator for an eligible schema; ``None`` when it is not eligible.

    Args:
        schema: A schema that passed our metaschema and pattern checks.
        draft: Our draft name.
        check_formats: Whether formats are asserted (through our checkers).
    """
    if ineligible_reason(schema, draft) is not None:
        return None
    try:
        native = _CLASSES[draft](
            _harden(schema),
            formats=_RS_FORMATS,
            validate_formats=check_formats,
            ignore_unknown_formats=not check_formats,
            retriever=_refuse,
            pattern_options=jsonschema_rs.RegexOptions(),
        )
    except (ValueError, TypeError, jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError):
        return None  # something jsonschema-rs does not take: our validator does it all
    return FastValidator(native)
