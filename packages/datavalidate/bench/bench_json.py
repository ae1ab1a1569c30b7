"""JSON benchmark: validating 10,000 small instances against one cached schema.

Rows, in one run (CPU seconds, best of 5):
- ``jsonschema`` pre-built validator, called directly (``iter_errors``): the baseline;
- ``datavalidate.validate_json`` with the schema object (cache hit by content) and by name;
- ``jsonschema.validate`` called each time (re-checks the schema every call; timed on the
  first 1,000 instances and scaled to 10,000, as it is about 200x slower);
- fastjsonschema and jsonschema-rs as reference rows (``bench`` dependency group; a row says
  "unavailable" when the package is not installed).

Targets (issue 5): validate_json >= 0.8x the pre-built validator's throughput and >= 10x
``jsonschema.validate``. Prints the numbers; exits 0 unless it crashes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import jsonschema

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
    try:
        import jsonschema_rs

        rs = jsonschema_rs.validator_for(SCHEMA)

        def run_rs() -> None:
            for item in data:
                assert rs.is_valid(item)

        rows.append(("jsonschema-rs (reference)", best_of(5, run_rs)))
    except ImportError:
        rows.append(("jsonschema-rs (reference)", None))

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


if __name__ == "__main__":
    main()
