"""Table Schema field options, in the full ``table_schema`` form and the short ``constraints``
form: groupChar, decimalChar, bareNumber, trueValues/falseValues, missingValues (schema-level
v1, field-level v2), date/time/datetime format patterns, and NaN against bounds."""

from __future__ import annotations

from typing import Any

import pytest

from datavalidate import CsvReport, validate_csv


def run(field: dict[str, Any], values: list[str], form: str, **schema: Any) -> CsvReport:
    text = "v,other\n" + "".join(f'"{v}",x\n' for v in values)
    if form == "table_schema":
        return validate_csv(text, table_schema={"fields": [{"name": "v", **field}], **schema})
    assert not schema
    return validate_csv(text, constraints={"v": field})


def bad_rows(report: CsvReport) -> list[int]:
    return [e.row - 1 for e in report.errors if e.row is not None]  # 1 = first value


FORMS = ["table_schema", "constraints"]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(
    ("field", "good", "bad"),
    [
        (
            {"type": "number", "groupChar": " ", "decimalChar": ","},
            ["1 234,5", "1234,5", "12 345 678", "-1 000,25", "0,5"],
            ["1.5", "1  234", " 1234", "1 234 ,5", "12,3,4"],
        ),
        (
            {"type": "number", "groupChar": ",", "decimalChar": "."},
            ["1,234.5", "1,000,000", "7", "-3,000.25"],
            ["1,,234", ",123", "123,", "1,23a"],
        ),
        (
            {"type": "number", "groupChar": ".", "decimalChar": ","},
            ["1.234,5", "10.000", "3,25"],
            ["1.,5", "1..234"],
        ),
        (
            {"type": "integer", "groupChar": "'"},
            ["1'000'000", "42", "-1'234"],
            ["1''000", "'12", "1.5"],
        ),
        (
            {"type": "number", "bareNumber": False},
            ["€95", "95%", "EUR 95.5", "-3.5 units", "$1e3"],
            ["EUR", "%", "n/a"],
        ),
        (
            {"type": "integer", "bareNumber": False},
            ["€95", "95%", "EUR -7"],
            ["€9.5", "EUR"],
        ),
        (
            {"type": "number", "bareNumber": False, "groupChar": " ", "decimalChar": ","},
            ["EUR 1 234,5", "1 234,5 €", "95 %"],
            ["EUR 1 234.5"],
        ),
        (
            {"type": "boolean", "trueValues": ["yes", "Y"], "falseValues": ["no", "N"]},
            ["yes", "Y", "no", "N"],
            ["true", "1", "YES", "false"],
        ),
        (
            {"type": "date", "format": "%d/%m/%Y"},
            ["31/12/2024", "01/02/2023", "29/02/2024"],
            ["2024-12-31", "31/13/2024", "29/02/2023"],
        ),
        (
            {"type": "date", "format": "fmt:%Y%m%d"},
            ["20241231", "20230101"],
            ["2024-12-31", "20241301"],
        ),
        (
            {"type": "time", "format": "%H.%M"},
            ["10.30", "23.59", "00.00"],
            ["10:30", "24.00", "10.30.00"],
        ),
        (
            {"type": "datetime", "format": "%d/%m/%Y %H:%M"},
            ["31/12/2024 23:59", "01/01/2024 00:00"],
            ["2024-12-31T23:59:00Z", "31/12/2024"],
        ),
    ],
)
def test_field_options(form: str, field: dict[str, Any], good: list[str], bad: list[str]) -> None:
    report = run(field, good + bad, form)
    assert bad_rows(report) == list(range(len(good) + 1, len(good) + len(bad) + 1)), [
        (e.row, e.value) for e in report.errors
    ]
    assert {e.code for e in report.errors} == {"type-error"}


@pytest.mark.parametrize("form", FORMS)
def test_options_with_constraints(form: str) -> None:
    field = {
        "type": "number",
        "groupChar": " ",
        "decimalChar": ",",
        "constraints": {"minimum": 1000, "maximum": "2 000,5"},
    }
    report = run(field, ["1 234,5", "999,9", "2 000,5", "2 000,6"], form)
    assert [(e.row, e.code) for e in report.errors] == [
        (3, "constraint-error"),
        (5, "constraint-error"),
    ]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(
    ("constraints", "values"),
    [
        ({"minimum": 0}, ["1", "NaN", "2"]),
        ({"maximum": 0}, ["-1", "NaN"]),
        ({"minimum": -1, "maximum": 1}, ["NaN", "0"]),
        ({"minimum": 0}, ["NaN"] * 3),
    ],
)
def test_nan_never_satisfies_a_bound(
    form: str, constraints: dict[str, Any], values: list[str]
) -> None:
    report = run({"type": "number", "constraints": constraints}, values, form)
    nan_rows = [i + 1 for i, v in enumerate(values) if v == "NaN"]
    assert bad_rows(report) == nan_rows
    assert all(e.message == "NaN satisfies no minimum or maximum" for e in report.errors)
    # Without a bound NaN is a number like any other.
    assert run({"type": "number"}, values, form).valid


def test_infinities_compare_as_numbers() -> None:
    report = run({"type": "number", "constraints": {"maximum": 10}}, ["INF", "-INF"], "constraints")
    assert bad_rows(report) == [1]


@pytest.mark.parametrize(
    ("schema_level", "field_level", "values", "missing_rows"),
    [
        (["-"], None, ["-", "", "1"], [2]),  # v1: the schema's list replaces the default [""]
        (["-"], ["n/a"], ["n/a", "-", "1"], [2]),  # v2: the field's list wins
        (None, ["NA", ""], ["NA", "", "x"], []),
        ([{"value": "-", "label": "not asked"}], None, ["-", "1"], []),  # v2 object form
        (None, [{"value": "?", "label": "unknown"}], ["?", "1"], []),
    ],
)
def test_missing_values(
    schema_level: list[Any] | None,
    field_level: list[Any] | None,
    values: list[str],
    missing_rows: list[int],
) -> None:
    field: dict[str, Any] = {"type": "integer", "constraints": {"required": False}}
    if field_level is not None:
        field["missingValues"] = field_level
    schema = {} if schema_level is None else {"missingValues": schema_level}
    report = run(field, values, "table_schema", **schema)
    wrong = [i + 1 for i, v in enumerate(values) if v not in ("", "1") and v not in "-?NAn/a"]
    assert bad_rows(report) == sorted(set(missing_rows) | set(wrong)), [
        (e.row, e.value) for e in report.errors
    ]
    if field_level is not None:  # the short form takes field-level missingValues too
        assert bad_rows(run(field, values, "constraints")) == bad_rows(report)


def test_required_field_with_field_level_missing_values() -> None:
    field = {"type": "string", "missingValues": ["n/a"], "constraints": {"required": True}}
    report = run(field, ["x", "n/a", ""], "constraints")
    assert [(e.row, e.code) for e in report.errors] == [(3, "constraint-error")]


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ({"type": "number", "decimalChar": ",,"}, "decimalChar must be one character"),
        ({"type": "number", "decimalChar": "1"}, "decimalChar must be one character"),
        ({"type": "number", "groupChar": ",", "decimalChar": ","}, "must differ"),
        ({"type": "number", "groupChar": "0"}, "groupChar must be a string without digits"),
        ({"type": "number", "bareNumber": "no"}, "bareNumber must be true or false"),
        ({"type": "string", "groupChar": " "}, "groupChar applies to type number and integer"),
        ({"type": "integer", "decimalChar": ","}, "decimalChar applies to type number, not"),
        ({"type": "number", "trueValues": ["y"]}, "trueValues applies to type boolean"),
        ({"type": "boolean", "trueValues": ["y"], "falseValues": ["y"]}, "in both trueValues"),
        ({"type": "date", "format": "%d/%q/%Y"}, "unknown directive %q"),
        ({"type": "date", "format": "%"}, "unknown directive %"),
        ({"type": "integer", "missingValues": "-"}, "missingValues must be a list"),
        ({"type": "integer", "missingValues": [1]}, "missingValues must hold strings"),
    ],
)
def test_options_that_cannot_be_honoured_are_refused(field: dict[str, Any], message: str) -> None:
    for form in FORMS:
        with pytest.raises(ValueError, match=message):
            run(field, ["1"], form)
