"""The fast path (jsonschema-rs): eligibility, hardening, and a differential test against our
own validator over the official suite, edge cases and hypothesis-generated instances.

The fast path only ever decides "valid", so the property checked everywhere is: whenever the
fast path accepts an instance, our validator accepts it too.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _support import data_dir
from datavalidate import (
    CompiledSchema,
    SchemaError,
    SchemaRegistry,
    _fast,
    _json,
    compile,
    parse_json,
    validate_json,
)

SUITE = data_dir("json-schema-test-suite")
FAST_DRAFTS = ("draft6", "draft7", "draft2019-09", "draft2020-12")


def _slow_valid(compiled: Any, instance: object) -> bool:
    return next(_json._iter_errors(compiled, instance), None) is None


def _compiled(schema: Any, draft: str | None = None, *, check_formats: bool = True) -> Any:
    return SchemaRegistry(builtins=False)._compiled(schema, draft, check_formats)


def _suite_cases() -> list[tuple[str, str, Any, list[Any]]]:
    cases = []
    for draft in FAST_DRAFTS:
        folder = SUITE / "tests" / draft
        for path in sorted(folder.glob("**/*.json")):
            text = path.read_text(encoding="utf-8")
            exact = parse_json(text)
            for case, exact_case in zip(json.loads(text), exact, strict=True):
                data = [t["data"] for t in case["tests"]]
                data += [t["data"] for t in exact_case["tests"]]  # Decimals too
                cases.append((draft, f"{path.stem}: {case['description']}", case["schema"], data))
    return cases


def _or_none(function: Any, *args: Any, **kwargs: Any) -> Any:
    """The result, or None when our validator refuses (unknown format, unregistered $ref)."""
    try:
        return function(*args, **kwargs)
    except (SchemaError, ValueError):
        return None


def test_differential_official_suite() -> None:
    eligible = accepted = rejected = 0
    for draft, where, schema, instances in _suite_cases():
        for check_formats in (True, False):
            compiled = _or_none(_compiled, schema, draft, check_formats=check_formats)
            if compiled is None or compiled.fast is None:
                continue
            eligible += 1
            for instance in instances:
                slow = _or_none(_slow_valid, compiled, instance)
                if slow is None:
                    continue
                if compiled.fast.accepts(instance):
                    accepted += 1
                    assert slow, (draft, where, instance, check_formats)
                else:
                    rejected += 1
    print(
        f"\nfast path over the suite: {eligible} eligible schema compilations, "
        f"{accepted} instances accepted fast, {rejected} left to our validator"
    )
    assert eligible > 1500
    assert accepted > 2000


EDGE_INSTANCES: list[Any] = [
    float("nan"),
    float("inf"),
    float("-inf"),
    2**53,
    2**53 + 1,
    -(2**60),
    10**30,
    1e23,
    3e23,
    1.0,
    0.1,
    0.5,
    -0.0,
    Decimal("0.1"),
    Decimal("0.30000000000000001"),
    Decimal("1E+2"),
    Decimal("1e400"),
    Decimal("0.1000000000000000055511151231257827021181583404541015625"),
    [Decimal("0.1"), 0.1],
    [1, 1.0],
    [float("nan"), float("nan")],
    [True, 1],
    [[1], [1.0]],
    [{"a": 0.1}, {"a": Decimal("0.1")}],
    "",
    "a\nb",
    "\u2028",
    "é",
    "\ud800",
    "abc",
    "ABC",
    "a@",
    "bob@example",
    "2024-02-30",
    "12:00:00",
    "xn--X",
    {"a": 1},
    {"1": 2},
    [],
    None,
    True,
]
EDGE_SCHEMAS: list[dict[str, Any]] = [
    {"maximum": 5},
    {"minimum": 0.5, "exclusiveMaximum": 2**53},
    {"multipleOf": 3},
    {"multipleOf": 2.0, "minimum": -100},
    {"type": "integer"},
    {"enum": [1, 0.5, "a", None]},
    {"const": 0.5},
    {"uniqueItems": True},
    {"items": {"uniqueItems": True}},
    {"pattern": "^[a-z]+$"},
    {"pattern": "a.b"},
    {"pattern": "^(?:ab|c)*$", "maxLength": 3},
    {"format": "email"},
    {"format": "date"},
    {"format": "time"},
    {"format": "hostname"},
    {"type": "object", "properties": {"a": {"maximum": 0}}, "unevaluatedProperties": False},
    {"type": "array", "prefixItems": [{"type": "number", "maximum": 1}], "unevaluatedItems": False},
    {"$defs": {"n": {"type": "number", "maximum": 10}}, "items": {"$ref": "#/$defs/n"}},
]


@pytest.mark.parametrize("schema", EDGE_SCHEMAS, ids=[json.dumps(s)[:40] for s in EDGE_SCHEMAS])
def test_differential_edge_cases(schema: dict[str, Any]) -> None:
    compiled = _compiled(schema)
    assert compiled.fast is not None, _fast.ineligible_reason(schema, "draft2020-12")
    for instance in EDGE_INSTANCES:
        if compiled.fast.accepts(instance):
            assert _slow_valid(compiled, instance), (schema, instance)
        assert compile(schema).is_valid(instance) is _slow_valid(compiled, instance)


def test_non_finite_and_inexact_numbers_never_pass_fast() -> None:
    compiled = _compiled({"maximum": 5, "multipleOf": 1})
    assert compiled.fast is not None
    for instance in (float("nan"), float("inf"), 1e23, 10**20, Decimal("1e400")):
        assert not compiled.fast.accepts(instance), instance
    assert compiled.fast.accepts(4)
    # The hardening is what makes it so: raw jsonschema-rs accepts NaN under a maximum.
    assert jsonschema_rs.validator_for({"maximum": 5}).is_valid(float("nan"))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.decimals(allow_nan=False, allow_infinity=False, places=3)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instance=json_values, index=st.integers(min_value=0, max_value=len(EDGE_SCHEMAS) - 1))
def test_differential_hypothesis(instance: Any, index: int) -> None:
    compiled = _compiled(EDGE_SCHEMAS[index])
    assert compiled.fast is not None
    if compiled.fast.accepts(instance):
        assert _slow_valid(compiled, instance), (EDGE_SCHEMAS[index], instance)


@pytest.mark.parametrize(
    "pattern",
    ["^[a-z]+$", "a.b", "^(?:ab|c){2,3}$", "x{2}y{1,}z?", "[A-Z0-9_-]+", "\\.\\*", "é+", "(a|b)*?"],
)
def test_patterns_in_the_shared_subset(pattern: str) -> None:
    assert _fast.ineligible_reason({"pattern": pattern}, "draft2020-12") is None
    assert _fast.ineligible_reason({"patternProperties": {pattern: {}}}, "draft7") is None


@pytest.mark.parametrize(
    "pattern",
    [
        "\\d+",
        "\\w",
        "\\s",
        "\\bword",
        "[\\d]",
        "(?=a)",
        "(?!a)",
        "(?<=a)b",
        "(a)\\1",
        "(?i)abc",
        "\\p{L}",
        "[[:alpha:]]",
        "[a&&b]",
        "[]",
        "a{,3}",
        "{x}",
        "\\u0041",
        "\\x41",
        "(?<name>a)",
        "a}",
    ],
)
def test_patterns_outside_the_subset_are_not_fast(pattern: str) -> None:
    reason = _fast.ineligible_reason({"pattern": pattern}, "draft2020-12")
    assert reason is not None and "subset shared with Rust regex" in reason


@pytest.mark.parametrize(
    ("schema", "draft", "reason"),
    [
        ({"maximum": 0.1}, "draft2020-12", "not exact in an f64"),
        ({"enum": [2**53 + 1]}, "draft2020-12", "not exact in an f64"),
        ({"multipleOf": 0.5}, "draft2020-12", "non-integer multipleOf"),
        ({"$ref": "https://example.com/s"}, "draft2020-12", "not a local JSON Pointer"),
        ({"$ref": "file:///etc/hostname"}, "draft2020-12", "not a local JSON Pointer"),
        ({"$ref": "#anchor", "$defs": {"a": {"$anchor": "anchor"}}}, "draft2020-12", "local"),
        ({"$ref": "#/nowhere"}, "draft2020-12", "not a local JSON Pointer"),
        ({"$dynamicRef": "#x"}, "draft2020-12", "$dynamicRef"),
        ({"properties": {"a": {"$id": "x"}}}, "draft2020-12", "$id below the root"),
        ({"contentMediaType": "application/json"}, "draft7", "contentMediaType"),
        ({"$schema": "https://example.com/meta"}, "draft2020-12", "custom metaschema"),
        ({"type": "integer"}, "draft4", "not in the fast subset"),
    ],
)
def test_schemas_outside_the_subset(schema: dict[str, Any], draft: str, reason: str) -> None:
    found = _fast.ineligible_reason(schema, draft)
    assert found is not None and reason in found


@pytest.mark.parametrize("ref", ["file:///etc/hostname", "http://localhost:1/x.json"])
def test_the_rust_validator_never_fetches(ref: str) -> None:
    # Outside the subset anyway; the retriever makes sure nothing is read even if it were not.
    assert _fast.build({"$ref": ref}, "draft2020-12", check_formats=True) is None
    with pytest.raises(jsonschema_rs.ValidationError, match="never fetches"):
        jsonschema_rs.Draft202012Validator({"$ref": ref}, retriever=_fast._refuse)


def test_formats_go_through_our_checkers() -> None:
    fast = _fast.build({"format": "email"}, "draft2020-12", check_formats=True)
    assert fast is not None
    assert not fast.accepts("a@")
    assert fast.accepts("bob@example")  # ours: one label is a host name
    off = _fast.build({"format": "email"}, "draft2020-12", check_formats=False)
    assert off is not None and off.accepts("a@")


def test_compile_api() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}}
    compiled = compile(schema)
    assert isinstance(compiled, CompiledSchema)
    assert compiled.fast is True
    assert compiled.draft == "draft2020-12"
    assert compiled.is_valid({"n": 3})
    report = compiled.validate({"n": 4})
    assert not report.valid
    assert report.errors[0].instance_location == "/n"
    assert report.to_dict() == validate_json({"n": 4}, schema).to_dict()
    assert compile(schema) is not compiled
    assert compile({"maximum": 0.1}).fast is False  # still validates, on our validator
    assert not compile({"maximum": 0.1}).is_valid(parse_json("0.10000000000000001"))
    assert compile("user").fast is True  # a registered name, self-contained
    assert compile("dataset").fast is False  # its $ref to the user schema is not local
    with pytest.raises(ValueError, match="max_errors"):
        compiled.validate({}, max_errors=-1)
    assert "fast=True" in repr(compiled)


def test_data_jsonschema_rs_cannot_take_goes_to_our_validator() -> None:
    class Text(str):
        __slots__ = ()

    compiled = compile({"type": "object", "additionalProperties": {"type": "string"}})
    assert compiled.fast
    assert compiled.is_valid({"a": Text("x")})  # jsonschema-rs raises on a str subclass
    assert not compiled.is_valid({"a": 1})
    report = compiled.validate({1: "x"})  # a non-str key: jsonschema-rs raises
    assert report.valid
