"""JSON benchmark: validating 10,000 small instances against one cached schema.

Rows, in one run (CPU seconds, best of 5):
- ``jsonschema`` pre-built validator, called directly (``iter_errors``): the baseline;
- ``datavalidate.validate_json`` with the schema object (cache hit by content) and by name;
- ``jsonschema.validate`` called each time (re-checks the schema every call; timed on the
  first 1,000 instances and scaled to 10,000, as it is about 200x slower);
- fastjsonschema and jsonschema-rs as reference rows (``bench`` dependency group; a row says
  "unavailable" when the package is not installed).

Targets (issue 5): validate_json >= 0.8x the pre-built validator's throughput and >= 10x
``jsonschema.validate``.

Then the fast path (issue 16): ``datavalidate.compile(schema).is_valid`` on three schema shapes
(an object, an object with ``pattern``s, an array of ``$ref``'d objects with ``enum``) and
valid instances, against a pre-built ``jsonschema`` validator's ``is_valid`` (target >= 30x) and
a raw ``jsonschema_rs.validator_for(schema).is_valid`` (target: within 3x).

Prints the numbers; exits 0 unless it crashes.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from typing import Any

import jsonschema
import jsonschema_rs

import datavalidate
from datavalidate import SchemaRegistry, validate_json

COUNT = 10_000
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["id", "name", "tags"],
    "properties": {
        "id": {"type": "integer", "minimum": 1},
        "name": {"type": "string", "minLength": 1, "maxLength": 50},
        "score": {"type": "number", "minimum": 0, "maximum": 100},
        "active": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
    },
    "additionalProperties": False,
}


def instances() -> list[dict[str, Any]]:
    rng = random.Random(7)
    return [
        {
            "id": i + 1,
            "name": f"item {i}",
            "score": round(rng.random() * 100, 2),
            "active": rng.random() < 0.5,
            "tags": [f"t{j}" for j in range(rng.randrange(4))],
        }
        for i in range(COUNT)
    ]


def best_of(runs: int, action: Callable[[], None]) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.process_time()
        action()
        best = min(best, time.process_time() - started)
    return best


def main() -> None:
    data = instances()
    registry = SchemaRegistry(builtins=False)
    registry.register("bench", SCHEMA)
    prebuilt = jsonschema.Draft202012Validator(SCHEMA)
    validate_json(data[0], SCHEMA, registry=registry)  # warm the cache

    def run_prebuilt() -> None:
        for item in data:
            assert not list(prebuilt.iter_errors(item))

    def run_ours_object() -> None:
        for item in data:
            assert validate_json(item, SCHEMA, registry=registry).valid

    def run_ours_name() -> None:
        for item in data:
            assert validate_json(item, "bench", registry=registry).valid

    each_count = 1_000  # about 4 ms a call: measured on the first 1,000, rate extrapolated

    def run_validate_each() -> None:
        for item in data[:each_count]:
            jsonschema.validate(item, SCHEMA)

    rows: list[tuple[str, float | None]] = [
        ("jsonschema pre-built validator", best_of(5, run_prebuilt)),
        ("datavalidate.validate_json(schema object)", best_of(5, run_ours_object)),
        ("datavalidate.validate_json(registered name)", best_of(5, run_ours_name)),
        ("jsonschema.validate each call", best_of(1, run_validate_each) * COUNT / each_count),
    ]
    try:
        import fastjsonschema

        compiled = fastjsonschema.compile(SCHEMA)

        def run_fast() -> None:
            for item in data:
                compiled(item)

        rows.append(("fastjsonschema (reference)", best_of(5, run_fast)))
    except ImportError:
        rows.append(("fastjsonschema (reference)", None))
    rs = jsonschema_rs.validator_for(SCHEMA)

    def run_rs() -> None:
        for item in data:
            assert rs.is_valid(item)

    rows.append(("jsonschema-rs (reference)", best_of(5, run_rs)))

    print(f"JSON benchmark: {COUNT:,} small instances, one schema (CPU seconds, best of 5)")
    for label, seconds in rows:
        if seconds is None:
            print(f"  {label:45s} unavailable (not installed: `bench` group)")
        else:
            print(f"  {label:45s} {COUNT / seconds:>10,.0f}/s  ({seconds:.3f} s)")
    base = rows[0][1]
    each = rows[3][1]
    assert base is not None and each is not None
    for label, seconds in rows[1:3]:
        assert seconds is not None
        ratio = base / seconds
        met = "met" if ratio >= 0.8 else "MISSED"
        print(f"  {label}: {ratio:.2f}x the pre-built validator (target >= 0.8x: {met})")
        speedup = each / seconds
        met = "met" if speedup >= 10 else "MISSED"
        print(f"  {label}: {speedup:.1f}x jsonschema.validate (target >= 10x: {met})")


PATTERN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["code", "sku"],
    "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"},
        "sku": {"type": "string", "pattern": "^(?:[a-z]+-)*[a-z]+$", "maxLength": 40},
        "qty": {"type": "integer", "minimum": 0, "multipleOf": 1},
    },
    "patternProperties": {"^x-[a-z]+$": {"type": "string"}},
    "additionalProperties": False,
}
ARRAY_SCHEMA: dict[str, Any] = {
    "$defs": {
        "line": {
            "type": "object",
            "required": ["kind", "amount"],
            "properties": {
                "kind": {"enum": ["debit", "credit"]},
                "amount": {"type": "integer", "exclusiveMinimum": 0},
                "note": {"type": ["string", "null"]},
            },
        }
    },
    "type": "array",
    "items": {"$ref": "#/$defs/line"},
    "maxItems": 20,
}


def shaped_instances() -> list[tuple[str, dict[str, Any] | bool, list[Any]]]:
    rng = random.Random(11)
    objects = instances()[:2000]
    patterned = [
        {
            "code": f"AB-{i:04d}",
            "sku": "red-shirt-xl"[: rng.randrange(3, 12)].strip("-") or "x",
            "qty": i,
            "x-note": "ok",
        }
        for i in range(2000)
    ]
    arrays = [
        [
            {"kind": rng.choice(["debit", "credit"]), "amount": rng.randrange(1, 999), "note": None}
            for _ in range(rng.randrange(1, 6))
        ]
        for _ in range(2000)
    ]
    return [
        ("object", SCHEMA, objects),
        ("pattern", PATTERN_SCHEMA, patterned),
        ("array+$ref", ARRAY_SCHEMA, arrays),
    ]


def fast_path() -> None:
    print("fast path: compile(schema).is_valid on valid instances (CPU seconds, best of 3)")
    for name, schema, data in shaped_instances():
        compiled = datavalidate.compile(schema)
        raw = jsonschema.validators.validator_for(schema)(schema)
        rs = jsonschema_rs.validator_for(schema)
        assert all(compiled.is_valid(item) for item in data), name

        def run(check: Callable[[Any], bool], items: list[Any] = data) -> None:
            for item in items:
                assert check(item)

        ours, theirs, native = (
            best_of(3, functools.partial(run, check))
            for check in (compiled.is_valid, raw.is_valid, rs.is_valid)
        )
        per = 1e6 / len(data)
        vs_raw, vs_rs = theirs / ours, ours / native
        print(
            f"  {name:11s} fast={compiled.fast}: datavalidate {ours * per:6.2f} us, "
            f"jsonschema {theirs * per:6.2f} us, jsonschema-rs {native * per:5.2f} us; "
            f"{vs_raw:5.1f}x jsonschema (target >= 30x: {'met' if vs_raw >= 30 else 'MISSED'}), "
            f"{vs_rs:.2f}x jsonschema-rs's time (target <= 3x: "
            f"{'met' if vs_rs <= 3 else 'MISSED'})"
        )


if __name__ == "__main__":
    main()
    fast_path()
