"""CSV reading hardened: a BOM before a quoted header, blank lines above the header, NUL bytes.

The verdicts are the same on Python 3.10-3.13 (3.10's csv module raises on NUL, 3.11+ accepts
it): ``nox -s "tests-3.10(datavalidate)" "tests-3.13(datavalidate)"`` runs these too.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest

from datavalidate import ERROR_CODES, CsvReport, validate_csv

SOURCES: dict[str, Callable[[str], Any]] = {
    "str": lambda text: text,
    "bytes": lambda text: text.encode("utf-8"),
    "binary-stream": lambda text: io.BytesIO(text.encode("utf-8")),
    "text-stream": lambda text: io.StringIO(text, newline=""),
}


def found(report: CsvReport) -> list[tuple[str, int | None, str | None, str | None]]:
    return [(e.code, e.row, e.column, e.value) for e in report.errors]


@pytest.mark.parametrize("kind", SOURCES)
@pytest.mark.parametrize(
    ("text", "names"),
    [
        ('\ufeff"id","name"\r\n1,a\r\n', ["id", "name"]),
        ('\ufeff"id, with comma",name\n1,a\n', ["id, with comma", "name"]),
        ('\ufeff"say ""id""";name\n1;a\n', ['say "id"', "name"]),
        ("\ufeffid,name\n1,a\n", ["id", "name"]),
    ],
)
def test_bom_before_a_quoted_first_header(kind: str, text: str, names: list[str]) -> None:
    dialect = "sniff" if ";" in text else None
    first = names[0]
    report = validate_csv(SOURCES[kind](text), constraints={first: "integer"}, dialect=dialect)
    assert [c.name for c in report.columns] == names
    assert report.valid, found(report)


def test_a_bom_inside_the_data_is_data() -> None:
    report = validate_csv('id,name\n1,"\ufeffa"\n', constraints={"name": {"pattern": "a"}})
    assert found(report) == [
        ("constraint-error", 2, "name", "\ufeffa"),
    ]


@pytest.mark.parametrize("kind", SOURCES)
@pytest.mark.parametrize(
    ("text", "blank_rows", "header_row"),
    [
        ("\nid,name\n1,a\n", [1], 2),
        ("\n\n\nid,name\n1,a\n", [1, 2, 3], 4),
        ("\r\n\r\nid,name\r\n1,a\r\n", [1, 2], 3),
        (",,\nid,name\n1,a\n", [1], 2),
        ('\ufeff\n"id",name\n1,a\n', [1], 2),
    ],
)
def test_blank_lines_above_the_header_are_reported(
    kind: str, text: str, blank_rows: list[int], header_row: int
) -> None:
    report = validate_csv(SOURCES[kind](text + "x,b\n"), constraints={"id": "integer"})
    assert [c.name for c in report.columns] == ["id", "name"]  # not shifted, not hidden
    assert found(report) == [
        *[("blank-row", row, None, None) for row in blank_rows],
        ("type-error", header_row + 2, "id", "x"),
    ]
    assert "before the header" in report.errors[0].message
    assert report.row_count == 2


def test_only_blank_lines_is_an_empty_input() -> None:
    report = validate_csv("\n\n", required_headers=["id"])
    assert [(e.code, e.row) for e in report.errors] == [
        ("blank-row", 1),
        ("blank-row", 2),
        ("source-error", None),
        ("missing-header", None),
    ]


@pytest.mark.parametrize("kind", SOURCES)
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id,name\n1,a\x00b\n2,c\n", [("nul-byte", 2, "name", "a\\x00b")]),
        ("id,name\n\x00,a\n", [("nul-byte", 2, "id", "\\x00")]),
        ('id,name\n1,"x\x00\ny"\n2,c\n', [("nul-byte", 2, "name", "x\\x00\ny")]),
        (
            "id,name\n1,a\n2\x00,b\x00\x00\n",
            [("nul-byte", 3, "id", "2\\x00"), ("nul-byte", 3, "name", "b\\x00\\x00")],
        ),
        ("id,na\x00me\n1,a\n", [("nul-byte", 1, "na\\x00me", "na\\x00me")]),
        ("\x00id,name\n1,a\n", [("nul-byte", 1, "\\x00id", "\\x00id")]),
    ],
)
def test_a_nul_byte_is_an_error_on_every_python(
    kind: str, text: str, expected: list[tuple[str, int, str, str]]
) -> None:
    report = validate_csv(SOURCES[kind](text), constraints={"name": {"type": "string"}})
    nul = [e for e in found(report) if e[0] == "nul-byte"]
    assert nul == expected
    assert not report.valid
    assert "NUL character" in report.errors[0].message
    assert "nul-byte" in ERROR_CODES


def test_rows_after_a_nul_are_still_checked() -> None:
    report = validate_csv("id\n1\x00\nx\n3\n", constraints={"id": "integer"})
    assert found(report) == [("nul-byte", 2, "id", "1\\x00"), ("type-error", 3, "id", "x")]
    assert report.row_count == 3
