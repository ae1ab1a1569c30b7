"""``unique`` and ``primaryKey`` in bounded memory: keyed digests of logical values, and a cap."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest

from datavalidate import ERROR_CODES, CsvReport, validate_csv


def repeats(report: CsvReport) -> list[tuple[int | None, str | None]]:
    return [(e.row, e.value) for e in report.errors if e.code == "unique-error"]


@pytest.mark.parametrize(
    ("field", "values", "repeated_rows"),
    [
        ({"type": "number"}, ["1", "1.0", "1e0", "2", "0.1", "1e-1"], [3, 4, 7]),
        ({"type": "number"}, ["-0", "0", "0.0", "NaN", "NaN", "INF", "+INF"], [3, 4, 6, 8]),
        ({"type": "integer"}, ["017", "17", "+17", "-17"], [3, 4]),
        ({"type": "number"}, ["10000000000000000", "1e16", "1.0000000000000001e16"], [3, 4]),
        ({"type": "boolean"}, ["true", "1", "false"], [3]),
        ({"type": "date", "format": "%d/%m/%Y"}, ["01/02/2024", "1/2/2024", "02/01/2024"], [3]),
        ({"type": "datetime"}, ["2024-01-01T01:00:00+01:00", "2024-01-01T00:00:00Z"], [3]),
        ({"type": "string"}, ["a", "A", "a ", "a"], [5]),
    ],
)
def test_unique_compares_logical_values(
    field: dict[str, Any], values: list[str], repeated_rows: list[int]
) -> None:
    text = "v\n" + "".join(f"{v}\n" for v in values)
    report = validate_csv(text, constraints={"v": {**field, "unique": True}})
    assert [row for row, _ in repeats(report)] == repeated_rows


def test_primary_key_compares_logical_values() -> None:
    text = "a,b\n1,x\n1.0,x\n1,y\n2,x\n"
    schema = {
        "fields": [{"name": "a", "type": "number"}, {"name": "b", "type": "string"}],
        "primaryKey": ["a", "b"],
    }
    assert repeats(validate_csv(text, table_schema=schema)) == [(3, "1.0, x")]


def test_primary_key_parts_do_not_run_together() -> None:
    text = "a,b\nab,c\na,bc\n"
    schema = {"fields": [{"name": "a"}, {"name": "b"}], "primaryKey": ["a", "b"]}
    assert validate_csv(text, table_schema=schema).valid


@pytest.mark.parametrize("cap", [1, 5, 37])
def test_a_cap_on_remembered_values_is_a_clear_error(cap: int) -> None:
    text = "id\n" + "".join(f"{i}\n" for i in range(100)) + "0\n"
    report = validate_csv(
        text, constraints={"id": {"type": "integer", "unique": True}}, max_unique_values=cap
    )
    assert [(e.code, e.row) for e in report.errors] == [("unique-limit", cap + 2)]
    assert f"more than {cap:,} distinct values" in report.errors[0].message
    assert "max_unique_values" in report.errors[0].message
    assert "unique-limit" in ERROR_CODES
    full = validate_csv(text, constraints={"id": {"type": "integer", "unique": True}})
    assert [(e.code, e.row) for e in full.errors] == [("unique-error", 102)]


def test_the_cap_is_shared_by_the_unique_columns() -> None:
    text = "a,b\n" + "".join(f"{i},{i}\n" for i in range(10))
    schema = {
        "fields": [
            {"name": "a", "type": "integer", "constraints": {"unique": True}},
            {"name": "b", "type": "integer", "constraints": {"unique": True}},
        ],
    }
    report = validate_csv(text, table_schema=schema, max_unique_values=15)
    # Column a remembers its 10 values, b its first 5 (rows 2-6); b's 6th is the 16th.
    assert [(e.code, e.row, e.column) for e in report.errors] == [("unique-limit", 7, "b")]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10"])
def test_cap_must_be_a_positive_integer(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_unique_values must be a positive integer"):
        validate_csv("a\n1\n", max_unique_values=bad)


def _peak(text: str, constraints: dict[str, Any]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        report = validate_csv(text, constraints=constraints)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert report.valid
    return peak


def test_memory_per_unique_value_does_not_depend_on_its_length() -> None:
    rows = 20_000
    short = "v\n" + "".join(f"{i}\n" for i in range(rows))
    long = "v\n" + "".join(f"{i:0>8}{'x' * 400}\n" for i in range(rows))
    unique = {"v": {"unique": True}}
    growth_short = _peak(short, unique) - _peak(short, {"v": "string"})
    growth_long = _peak(long, unique) - _peak(long, {"v": "string"})
    # A digest per value (about 100 bytes), whatever the text: 400-character values would cost
    # over 450 bytes each if they were kept.
    assert growth_long / rows < 200, growth_long / rows
    assert growth_short / rows < 200, growth_short / rows
