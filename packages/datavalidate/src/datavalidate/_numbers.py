"""Exact numbers for JSON Schema: parsing JSON text, comparing, ``multipleOf``, equality.

A JSON number means the decimal its text spells. Where the text exists it is parsed with
``parse_float=Decimal`` (:func:`parse_json`); a Python ``float`` that arrives already parsed
means its shortest ``repr`` (``0.1`` is one tenth, not the binary fraction nearest to it), so
every number is compared as ``Fraction(Decimal(repr(x)))``. Integers keep every digit.

The keyword functions here replace ``jsonschema``'s ``minimum``, ``maximum``,
``exclusiveMinimum``, ``exclusiveMaximum``, ``multipleOf``, ``enum``, ``const`` and
``uniqueItems`` (the logic and messages follow ``jsonschema`` 4.x, MIT licence, Copyright (c)
2013 Julian Berman; only the arithmetic differs). ``numbers="ieee"`` keeps ``jsonschema``'s
own binary floating point keywords instead.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from jsonschema import ValidationError

from datavalidate.exceptions import JsonNumberError

__all__ = [
    "MAX_INTEGER_DIGITS",
    "NUMBER_MODES",
    "canonical_key",
    "exact",
    "exact_equal",
    "is_digit_limit_error",
    "is_exact_integer",
    "parse_json",
    "printable_ints",
    "to_floats",
]

#: ``numbers=`` settings: ``"exact"`` (decimal meaning, the default) or ``"ieee"`` (binary64).
NUMBER_MODES = ("exact", "ieee")
#: Longest integer literal accepted by :func:`parse_json` (longer ones take quadratic time).
MAX_INTEGER_DIGITS = 50_000
# Decimal exponents beyond this are refused when compared exactly (10**exponent must be built).
_MAX_EXPONENT = 10_000

_Validator = Any
_Errors = Iterator[ValidationError]


def _parse_float(text: str) -> Decimal:
    value = Decimal(text)
    if value:
        as_float = float(value)  # via the text: fast even for an exponent of 10**9
        if math.isinf(as_float) or as_float == 0.0:
            kind, seen = ("overflows", "an infinity") if as_float else ("underflows", "zero")
            raise JsonNumberError(
                text,
                f"it {kind} a 64-bit float (other JSON readers would see {seen}); "
                "write numbers within about 5e-324..1.8e308 in magnitude",
            )
    return value


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits <= 4000:
        return int(text)
    if digits > MAX_INTEGER_DIGITS:
        raise JsonNumberError(
            text, f"an integer of {digits} digits is longer than the {MAX_INTEGER_DIGITS} allowed"
        )
    return int(Decimal(text))  # int() refuses more than 4300 digits on Python 3.11+


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                shown = key if len(key) <= 40 else key[:39] + "\u2026"
                raise ValueError(
                    f"the JSON text repeats the key {shown!r} in one object; readers disagree on "
                    "which value counts, so it is refused"
                )
            seen.add(key)
    return result


def _refuse_constant(name: str) -> Any:
    raise JsonNumberError(name, "NaN and Infinity are not JSON numbers")


def _to_float(text: str) -> float:
    return float(_parse_float(text))


def parse_json(text: str | bytes, *, numbers: str = "exact") -> Any:
    """Parse JSON text keeping every number exact.

    Args:
        text: JSON text (``bytes`` are decoded as UTF-8, UTF-16 or UTF-32 as ``json`` detects).
        numbers: ``"exact"``: literals with a fraction or an exponent become ``Decimal`` (exact);
            ``"ieee"``: they become ``float``. Integers are ``int`` either way.

    Returns:
        The parsed data (``dict``, ``list``, ``str``, ``int``, ``Decimal``/``float``, ``bool``,
        ``None``).

    Raises:
        JsonNumberError: ``NaN``, ``Infinity``, a literal outside the range of a 64-bit float,
            or an integer longer than :data:`MAX_INTEGER_DIGITS` digits.
        ValueError: ``numbers`` is unknown, the text is not JSON (``json.JSONDecodeError``,
            with line and column), an object repeats a key, or it is nested too deeply.
    """
    if numbers not in NUMBER_MODES:
        raise ValueError(f"numbers must be one of {', '.join(NUMBER_MODES)}, not {numbers!r}")
    parse_float: Callable[[str], Any] = _parse_float if numbers == "exact" else _to_float
    try:
        return json.loads(
            text,
            parse_float=parse_float,
            parse_int=_parse_int,
            parse_constant=_refuse_constant,
            object_pairs_hook=_object,
        )
    except RecursionError:
        raise ValueError("the JSON text is nested too deeply") from None


@functools.lru_cache(maxsize=4096)
def _float_exact(value: float) -> Fraction:
    return Fraction(Decimal(repr(value)))


def exact(value: object) -> int | Fraction | None:
    """The exact rational meaning of a JSON number, or ``None`` when it has none.

    ``int`` stays itself; ``float`` means its shortest ``repr``; ``Decimal`` its own value.
    ``None`` for NaN, infinities, and Decimals whose exponent is beyond 10,000 (building
    ``10**exponent`` would hold the caller).
    """
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return _float_exact(value) if math.isfinite(value) else None
    if isinstance(value, Decimal):
        if not value.is_finite() or abs(value.adjusted()) > _MAX_EXPONENT:
            return None
        return Fraction(value)
    if isinstance(value, Fraction):
        return value
    return None


def is_exact_integer(value: object) -> bool:
    """Whether a number (not ``bool``) is integral: ``int``, ``2.0``, ``Decimal("1E+2")``."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, Decimal):
        try:
            return value.is_finite() and value == value.to_integral_value()
        except InvalidOperation:  # pragma: no cover - to_integral_value of a finite Decimal
            return False
    return False


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


def _compare(instance: object, bound: object) -> int | None:
    """-1, 0, 1 as ``instance`` is below, equal to, above ``bound``; None if not comparable."""
    a: int | float | Fraction | None
    b: int | float | Fraction | None
    if type(instance) is int and type(bound) is int:
        a, b = instance, bound
    elif type(instance) is float and type(bound) is float:
        # The shortest repr is monotonic: comparing the floats compares their decimal meanings.
        if not (math.isfinite(instance) and math.isfinite(bound)):
            return None
        a, b = instance, bound
    else:
        a, b = exact(instance), exact(bound)
        if a is None or b is None:
            return None
    return (a > b) - (a < b)


def _shown(value: object) -> str:
    return str(value) if isinstance(value, Decimal) else repr(value)


def _not_finite(instance: object) -> ValidationError:
    return ValidationError(f"{_shown(instance)} is not a finite number that can be compared")


def minimum(validator: _Validator, bound: Any, instance: Any, schema: Any) -> _Errors:
    """``minimum`` (draft 6 and later), exact."""
    if validator.is_type(instance, "number"):
        order = _compare(instance, bound)
        if order is None:
            yield _not_finite(instance)
        elif order < 0:
            yield ValidationError(f"{_shown(instance)} is less than the minimum of {bound!r}")


def maximum(validator: _Validator, bound: Any, instance: Any, schema: Any) -> _Errors:
    """``maximum`` (draft 6 and later), exact."""
    if validator.is_type(instance, "number"):
        order = _compare(instance, bound)
        if order is None:
            yield _not_finite(instance)
        elif order > 0:
            yield ValidationError(f"{_shown(instance)} is greater than the maximum of {bound!r}")


def exclusive_minimum(validator: _Validator, bound: Any, instance: Any, schema: Any) -> _Errors:
    """``exclusiveMinimum`` (draft 6 and later), exact."""
    if validator.is_type(instance, "number"):
        order = _compare(instance, bound)
        if order is None:
            yield _not_finite(instance)
        elif order <= 0:
            yield ValidationError(
                f"{_shown(instance)} is less than or equal to the minimum of {bound!r}"
            )


def exclusive_maximum(validator: _Validator, bound: Any, instance: Any, schema: Any) -> _Errors:
    """``exclusiveMaximum`` (draft 6 and later), exact."""
    if validator.is_type(instance, "number"):
        order = _compare(instance, bound)
        if order is None:
            yield _not_finite(instance)
        elif order >= 0:
            yield ValidationError(
                f"{_shown(instance)} is greater than or equal to the maximum of {bound!r}"
            )


def minimum_draft4(validator: _Validator, bound: Any, instance: Any, schema: Any) -> _Errors:
    """``minimum`` with draft 4's boolean ``exclusiveMinimum``, exact."""
    if validator.is_type(instance, "number"):
        order = _compare(instance, bound)
        strict = bool(schema.get("exclusiveMinimum", False))
        if order is None:
            yield _not_finite(instance)
        elif order < 0 or (strict and order == 0):
            cmp = "less than or equal to" if strict else "less than"
            yield ValidationError(f"{_shown(instance)} is {cmp} the minimum of {bound!r}")


def maximum_draft4(validator: _Validator, bound: Any, instance: Any, schema: Any) -> _Errors:
    """``maximum`` with draft 4's boolean ``exclusiveMaximum``, exact."""
    if validator.is_type(instance, "number"):
        order = _compare(instance, bound)
        strict = bool(schema.get("exclusiveMaximum", False))
        if order is None:
            yield _not_finite(instance)
        elif order > 0 or (strict and order == 0):
            cmp = "greater than or equal to" if strict else "greater than"
            yield ValidationError(f"{_shown(instance)} is {cmp} the maximum of {bound!r}")


def multiple_of(validator: _Validator, divisor: Any, instance: Any, schema: Any) -> _Errors:
    """``multipleOf`` in exact rational arithmetic (``19.99`` is a multiple of ``0.01``)."""
    if not validator.is_type(instance, "number"):
        return
    if type(instance) is int and type(divisor) is int:
        failed = bool(instance % divisor)
    else:
        a, b = exact(instance), exact(divisor)
        if a is None or b is None or not b:
            yield _not_finite(instance)
            return
        failed = (Fraction(a) / b).denominator != 1
    if failed:
        yield ValidationError(f"{_shown(instance)} is not a multiple of {divisor}")


def multiple_of_ieee(validator: _Validator, divisor: Any, instance: Any, schema: Any) -> _Errors:
    """``multipleOf`` in binary64 as ``jsonschema`` decides it, but a verdict for every integer.

    ``jsonschema`` divides an ``int`` by a ``float`` divisor in floating point, which raises
    ``OverflowError`` for integers beyond the float range; those fall back to exact arithmetic
    on the float's binary value.
    """
    if not validator.is_type(instance, "number"):
        return
    if isinstance(divisor, float):
        try:
            quotient = instance / divisor
            failed = int(quotient) != quotient
        except OverflowError:
            failed = (Fraction(instance) / Fraction(divisor)).denominator != 1
    else:
        failed = bool(instance % divisor)
    if failed:
        yield ValidationError(f"{instance!r} is not a multiple of {divisor}")


def canonical_key(value: object) -> object:
    """A hashable key equal for JSON-equal values: ``1 == 1.0``, ``true != 1``, deep.

    Numbers become their exact value (NaN and infinities stay floats, so NaN equals nothing).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return ("const", value)
    if _is_number(value):
        found = exact(value)
        return ("number", found if found is not None else value)
    if isinstance(value, Mapping):
        return ("object", frozenset((k, canonical_key(v)) for k, v in value.items()))
    if isinstance(value, Sequence):
        return ("array", tuple(canonical_key(v) for v in value))
    return ("other", id(value))


def exact_equal(one: object, two: object) -> bool:
    """JSON equality with exact numbers (``0.1 == Decimal("0.1")``, ``true != 1``)."""
    if isinstance(one, str) or isinstance(two, str):
        return one == two
    if _is_number(one) and _is_number(two):
        if type(one) is type(two) and type(one) is not Decimal:
            return one == two
        a, b = exact(one), exact(two)
        return a is not None and a == b
    if isinstance(one, bool) or isinstance(two, bool):
        return one is two
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return one.keys() == two.keys() and all(exact_equal(one[k], two[k]) for k in one)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(map(exact_equal, one, two))
    return one is two or (one is None and two is None)


def enum(validator: _Validator, enums: Any, instance: Any, schema: Any) -> _Errors:
    """``enum`` with exact numbers."""
    if all(not exact_equal(each, instance) for each in enums):
        yield ValidationError(f"{_shorten(instance)} is not one of {enums!r}")


def const(validator: _Validator, expected: Any, instance: Any, schema: Any) -> _Errors:
    """``const`` with exact numbers."""
    if not exact_equal(instance, expected):
        yield ValidationError(f"{expected!r} was expected")


def unique_items(validator: _Validator, unique: Any, instance: Any, schema: Any) -> _Errors:
    """``uniqueItems`` with exact numbers, in linear time (hashing canonical keys)."""
    if unique and validator.is_type(instance, "array"):
        seen: set[object] = set()
        for item in instance:
            key = canonical_key(item)
            if key in seen:
                yield ValidationError(f"{_shorten(instance)} has non-unique elements")
                return
            seen.add(key)


def _shorten(value: object) -> str:
    text = repr(to_floats(value))  # Decimal('19.99') shown as 19.99
    return text if len(text) <= 200 else text[:199] + "\u2026"


def is_number_type(checker: object, instance: object) -> bool:
    """Type ``number``: ``int``, ``float``, ``Decimal`` (not ``bool``)."""
    return _is_number(instance)


def is_integer_type(checker: object, instance: object) -> bool:
    """Type ``integer`` (draft 6 and later): any number with an integral value."""
    return is_exact_integer(instance)


def is_integer_type_draft4(checker: object, instance: object) -> bool:
    """Type ``integer`` in draft 4: an ``int`` only (``1.0`` is a number, not an integer)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


class _BigInt(int):
    """An ``int`` that prints its size instead of its digits.

    ``repr`` of an ``int`` of more than 4,300 digits raises ``ValueError`` on Python 3.11+,
    inside ``jsonschema``'s messages.
    """

    def __repr__(self) -> str:
        return f"<integer of {self.bit_length()} bits>"

    __str__ = __repr__


def is_digit_limit_error(exc: ValueError) -> bool:
    """Whether ``exc`` is Python's refusal to print an ``int`` of too many digits."""
    return "integer string conversion" in str(exc)


def printable_ints(value: Any) -> Any:
    """A copy of JSON data whose ``int`` values of more than 4,000 digits print their size."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _BigInt(value) if value.bit_length() > 13_000 else value
    if isinstance(value, dict):
        return {k: printable_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable_ints(v) for v in value]
    return value


def to_floats(value: Any) -> Any:
    """A copy of JSON data with every ``Decimal`` turned into ``float`` (for ``numbers="ieee"``).

    Returns ``value`` itself when it holds no ``Decimal``.
    """
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        items = {k: to_floats(v) for k, v in value.items()}
        return value if all(items[k] is value[k] for k in value) else items
    if isinstance(value, list):
        converted = [to_floats(v) for v in value]
        return value if all(a is b for a, b in zip(converted, value, strict=True)) else converted
    return value
