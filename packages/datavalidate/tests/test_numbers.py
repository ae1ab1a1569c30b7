"""Exact numbers: decimal ``multipleOf``, huge integers, f64-exact divisors, refused literals."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from datavalidate import JsonNumberError, is_valid, parse_json, validate_json

# (instance text, divisor): the instance is a multiple of the divisor in decimal arithmetic, and
# binary floating point says it is not (the class of python-jsonschema#810).
DECIMAL_MULTIPLES = [
    ("19.99", 0.01),
    ("0.3", 0.1),
    ("4.35", 0.05),
    ("1.1", 0.1),
    ("0.0075", 0.0001),
    ("123456.78", 0.01),
]
NOT_MULTIPLES = [
    ("19.995", 0.01),
    ("0.31", 0.2),
    ("4.36", 0.05),
    ("0.30000000000000001", 0.1),
    ("1e-7", 0.000001),
]


@pytest.mark.parametrize(("text", "divisor"), DECIMAL_MULTIPLES)
def test_decimal_steps_are_multiples(text: str, divisor: float) -> None:
    schema = {"multipleOf": divisor}
    assert is_valid(parse_json(text), schema)  # exact text
    assert is_valid(float(text), schema)  # an already-parsed float means its shortest repr


def test_ieee_mode_keeps_binary_floating_point() -> None:
    assert not is_valid(19.99, {"multipleOf": 0.01}, numbers="ieee")
    assert not is_valid(parse_json("19.99"), {"multipleOf": 0.01}, numbers="ieee")
    assert is_valid(parse_json("20", numbers="ieee"), {"multipleOf": 0.01}, numbers="ieee")
    with pytest.raises(ValueError, match="numbers must be one of exact, ieee"):
        is_valid(1, {}, numbers="binary")


@pytest.mark.parametrize(("text", "divisor"), NOT_MULTIPLES)
def test_non_multiples_are_reported(text: str, divisor: float) -> None:
    report = validate_json(parse_json(text), {"multipleOf": divisor})
    assert not report.valid
    assert report.errors[0].keyword == "multipleOf"
    assert report.errors[0].value == str(Decimal(text))


@pytest.mark.parametrize("numbers", ["exact", "ieee"])
@pytest.mark.parametrize(
    ("instance", "divisor", "expected"),
    [
        (10**400, 0.3, False),
        (3 * 10**400, 0.3, True),
        (10**5000 + 1, 0.5, True),
        (10**5000 + 1, 0.75, False),
        (-(10**309), 0.125, True),
    ],
    ids=["1e400/0.3", "3e400/0.3", "1e5000+1/0.5", "1e5000+1/0.75", "-1e309/0.125"],
)
def test_huge_integers_with_fractional_divisors_get_a_verdict(
    instance: int, divisor: float, expected: bool, numbers: str
) -> None:
    # jsonschema raises OverflowError ("int too large to convert to float") here (PR #1515).
    got = is_valid(instance, {"multipleOf": divisor}, numbers=numbers)
    if numbers == "exact" or divisor in (0.5, 0.125):  # binary fractions: both modes agree
        assert got is expected
    else:  # binary64 0.3 is not 3/10: no integer is a multiple of it
        assert got is False


@pytest.mark.parametrize(
    ("instance", "divisor", "expected"),
    [
        (2 * 10**23, 1e23, True),  # 1e23 means 10**23, not 99999999999999991611392
        (10**23 + 1, 1e23, False),
        (3 * 2**53, float(2**53), True),
        (3 * 2**53 + 1, float(2**53), False),
        (7 * 10**20, 1e20, True),
        (7 * 10**20 + 10, 1e20, False),
    ],
)
def test_integer_valued_float_divisors_above_2_53_are_exact(
    instance: int, divisor: float, expected: bool
) -> None:
    assert is_valid(instance, {"multipleOf": divisor}) is expected
    assert is_valid(parse_json(str(instance)), {"multipleOf": divisor}) is expected


def test_ieee_mode_loses_precision_above_2_53_as_documented() -> None:
    assert is_valid(3 * 2**53 + 1, {"multipleOf": float(2**53)}, numbers="ieee")


@pytest.mark.parametrize(
    ("text", "schema", "expected"),
    [
        ("0.30000000000000001", {"maximum": 0.3}, False),  # a float would be 0.3 exactly
        ("0.3", {"maximum": 0.3}, True),
        ("0.29999999999999999", {"minimum": 0.3}, False),
        ("0.1", {"exclusiveMaximum": 0.1}, False),
        ("0.10000000000000000001", {"exclusiveMinimum": 0.1}, True),
        (str(10**100 + 1), {"maximum": 1e100}, False),  # 1e100 means 10**100
        (str(10**100), {"maximum": 1e100}, True),
        ("-1e300", {"minimum": -1e300}, True),
    ],
)
def test_bounds_are_exact(text: str, schema: dict[str, Any], expected: bool) -> None:
    assert is_valid(parse_json(text), schema) is expected


@pytest.mark.parametrize(
    ("text", "schema", "expected"),
    [
        ("1.0", {"maximum": 0.5, "exclusiveMaximum": True}, False),
        ("0.5", {"maximum": 0.5, "exclusiveMaximum": True}, False),
        ("0.49999999999999999999", {"maximum": 0.5, "exclusiveMaximum": True}, True),
        ("0.5", {"minimum": 0.5}, True),
    ],
)
def test_draft4_bounds_are_exact(text: str, schema: dict[str, Any], expected: bool) -> None:
    assert is_valid(parse_json(text), schema, draft="4") is expected


@pytest.mark.parametrize(
    "literal", ["-1e999", "1e999", "2e308", "1e-400", "-2.5e-350", "NaN", "Infinity", "-Infinity"]
)
def test_unrepresentable_literals_are_refused(literal: str) -> None:
    with pytest.raises(JsonNumberError) as info:
        parse_json(f'{{"x": [{literal}]}}')
    assert info.value.literal == literal
    assert literal in str(info.value)
    with pytest.raises(JsonNumberError):
        parse_json(literal, numbers="ieee")


@pytest.mark.parametrize("literal", ["1.7976931348623157e308", "5e-324", "-0.0", "0e999", "1E+2"])
def test_literals_in_range_are_kept(literal: str) -> None:
    assert parse_json(literal) == Decimal(literal)


def test_integers_of_any_size_up_to_the_digit_cap() -> None:
    big = 10**4999 + 7
    text = "1" + "0" * 4998 + "7"  # past int()'s 4,300-digit limit of Python 3.11+
    assert parse_json(text) == big
    assert parse_json(f"[-{text}]") == [-big]
    assert is_valid(parse_json(text), {"type": "integer", "minimum": 10**4000})
    report = validate_json(parse_json(f"[{text}]"), {"items": {"maximum": 1e308}})
    assert report.errors[0].value == "<integer of 16607 bits>"
    assert "<integer of 16607 bits> is greater than the maximum" in report.errors[0].message
    # jsonschema's own messages print the instance too: still a report, not a ValueError.
    report = validate_json(
        {"a": [big, "x", big]}, {"properties": {"a": {"items": {"type": "string"}}}}
    )
    assert [e.instance_location for e in report.errors] == ["/a/0", "/a/2"]
    with pytest.raises(JsonNumberError, match="50000 allowed"):
        parse_json("9" * 50_001)


@pytest.mark.parametrize(
    ("text", "draft", "expected"),
    [("1e2", "2020-12", True), ("1.0", "7", True), ("1.5", "2020-12", False), ("1.0", "4", False)],
)
def test_integer_type_of_decimals(text: str, draft: str, expected: bool) -> None:
    assert is_valid(parse_json(text), {"type": "integer"}, draft=draft) is expected
    assert is_valid(parse_json(text), {"type": "number"}, draft=draft)


@pytest.mark.parametrize(
    ("text", "schema", "expected"),
    [
        ("1.10", {"enum": [1.1]}, True),
        ("0.1", {"const": 0.1}, True),
        ("0.1000000000000000055511151231257827", {"const": 0.1}, False),
        ("1", {"enum": [1.0]}, True),
        ("true", {"enum": [1]}, False),
        ('{"a": [1.0]}', {"const": {"a": [1]}}, True),
        ("[0, false]", {"enum": [[False, 0]]}, False),
    ],
)
def test_enum_and_const_compare_exact_values(
    text: str, schema: dict[str, Any], expected: bool
) -> None:
    assert is_valid(parse_json(text), schema) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[1, 1.0]", False),
        ("[0.1, 0.10]", False),
        ("[true, 1]", True),
        ('[{"a": 1}, {"a": 1.0}]', False),
        ("[[1, 2], [1, 2.0]]", False),
        ("[0.1, 0.1000000000000000055511151231257827]", True),
    ],
)
def test_unique_items_with_exact_values(text: str, expected: bool) -> None:
    assert is_valid(parse_json(text), {"uniqueItems": True}) is expected


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_floats_satisfy_no_bound(value: float) -> None:
    for schema in ({"minimum": 0}, {"maximum": 0}, {"multipleOf": 2}):
        report = validate_json(value, schema)
        assert not report.valid
        assert "not a finite number" in report.errors[0].message


def test_report_shows_decimal_values_as_written() -> None:
    report = validate_json(
        parse_json('{"price": 19.995}'), {"properties": {"price": {"multipleOf": 0.01}}}
    )
    assert report.errors[0].value == "19.995"
    assert report.errors[0].instance_location == "/price"


@pytest.mark.parametrize("text", ['{"a": 1, "a": 2}', '[{"x": {"b": 0, "c": 1, "b": 0}}]'])
def test_repeated_keys_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="repeats the key") as info:
        parse_json(text)
    assert not isinstance(info.value, JsonNumberError)
    assert parse_json('{"a": 1, "b": {"a": 2}}') == {"a": 1, "b": {"a": 2}}
