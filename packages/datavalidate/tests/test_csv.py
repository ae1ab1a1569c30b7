from __future__ import annotations

import gc
import io
import json
import pathlib
import re
import threading
import tracemalloc
from typing import Any

import pytest

from _support import BAD_ROWS_CONSTRAINTS, bad_rows_csv
from datavalidate import (
    CSV_CONSTRAINTS,
    CSV_TYPES,
    DEFAULT_MAX_ERRORS,
    ERROR_CODES,
    MAX_ERRORS_LIMIT,
    CsvColumn,
    CsvError,
    CsvReport,
    UnsupportedPatternError,
    text_encoding,
    validate_csv,
)


def codes(report: CsvReport) -> list[tuple[str, int | None, str | None]]:
    return [(e.code, e.row, e.column) for e in report.errors]


def test_valid_file_report() -> None:
    report = validate_csv("name,age\nann,31\nbob,42\n", constraints={"age": "integer"})
    assert report == CsvReport(
        valid=True,
        row_count=2,
        columns=(CsvColumn("name", 1, "string", False), CsvColumn("age", 2, "integer", True)),
        errors=(),
        error_count=0,
        truncated=False,
        delimiter=",",
    )
    data = report.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["columns"][1] == {"name": "age", "number": 2, "type": "integer", "declared": True}


def test_every_error_code_with_rows_and_columns() -> None:
    text = (
        "id,name,name,,score\n"  # 1: duplicate + blank header
        "1,a,b,c,5\n"  # 2
        "x,a,b,c,5\n"  # 3: type-error
        "\n"  # 4: blank-row
        "3,a,b,c,5,extra\n"  # 5: extra-cell
        "4,a\n"  # 6: missing-cell x3
        "1,a,b,c,500\n"  # 7: unique-error (id), constraint-error (score)
    )
    report = validate_csv(
        text,
        required_headers=["id", "email"],
        constraints={
            "id": {"type": "integer", "unique": True},
            "score": {"maximum": 100, "type": "number"},
        },
    )
    assert codes(report) == [
        ("duplicate-header", 1, "name"),
        ("blank-header", 1, ""),
        ("missing-header", 1, "email"),
        ("type-error", 3, "id"),
        ("blank-row", 4, None),
        ("extra-cell", 5, None),
        ("missing-cell", 6, "name"),
        ("missing-cell", 6, ""),
        ("missing-cell", 6, "score"),
        ("unique-error", 7, "id"),
        ("constraint-error", 7, "score"),
    ]
    assert report.error_count == 11 and not report.valid and report.row_count == 6
    by_code = {e.code: e for e in report.errors}
    assert by_code["extra-cell"].column_number == 6 and by_code["extra-cell"].value == "extra"
    assert by_code["type-error"].value == "x" and by_code["type-error"].column_number == 1
    assert "maximum 100" in by_code["constraint-error"].message
    assert {e.code for e in report.errors} <= set(ERROR_CODES)


def test_encoding_error_is_a_finding_with_row() -> None:
    data = b"a,b\n1,2\n3,\xff\xfe\n5,6\n"
    report = validate_csv(data, constraints={"a": "integer"})
    assert codes(report) == [("encoding-error", 3, "b")]
    assert report.errors[0].value == "\\xff\\xfe"
    assert report.row_count == 3
    latin = validate_csv(data, encoding="latin-1")
    assert latin.valid


def test_encoding_error_in_a_path_and_header(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(b"a,\xc3\n1,2\n")
    report = validate_csv(path)
    assert codes(report) == [("encoding-error", 1, "\\xc3")]


UTF8_HINT = (
    "the file was read as utf-8 and some bytes are not valid utf-8; if it is in another "
    'encoding, give the encoding (for example "latin-1" or "cp1252")'
)


def test_encoding_errors_name_the_encoding_and_the_hint_is_said_once() -> None:
    latin = "city,n\nZürich,1\nMálaga,2\nOslo,3\n".encode("latin-1")
    report = validate_csv(latin, constraints={"n": "integer"})
    assert codes(report) == [("encoding-error", 2, "city"), ("encoding-error", 3, "city")]
    assert [e.message for e in report.errors] == [
        "the bytes are not valid utf-8 (the value shows them as \\xNN)"
    ] * 2
    assert [e.value for e in report.errors] == ["Z\\xfcrich", "M\\xe1laga"]
    assert report.warnings == (UTF8_HINT,)
    # Another encoding goes by its canonical name; read with the right one, the file is valid.
    cp = validate_csv(b"a\n\x81\n", encoding="CP1252")
    assert cp.errors[0].message == "the bytes are not valid cp1252 (the value shows them as \\xNN)"
    assert cp.warnings[-1].startswith("the file was read as cp1252 and some bytes are not valid")
    fixed = validate_csv(latin, constraints={"n": "integer"}, encoding="latin-1")
    assert (fixed.valid, fixed.warnings) == (True, ())
    # Text given as str was not decoded here: no advice about encodings.
    lone = validate_csv("a\n\x00\ud800\n")
    assert "read as" not in " ".join(lone.warnings)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("nope", "encoding 'nope': unknown encoding; give one Python knows, such as"),
        ("zlib_codec", "encoding 'zlib_codec': zlib is not a text encoding"),
        ("rot13", "encoding 'rot13': rot-13 is not a text encoding"),
        ("base64", "encoding 'base64': base64 is not a text encoding"),
        ("hex", "encoding 'hex': hex is not a text encoding"),
        ("undefined", "encoding 'undefined': undefined is not a text encoding"),
        ("../os", "encoding '../os': unknown encoding (a name has ASCII letters"),
        ("utf\x008", "encoding 'utf\\x008': unknown encoding (a name has ASCII letters"),
        ("x" * 10_000, "encoding: a name of 10,000 characters is not an encoding (at most 64)"),
    ],
)
def test_text_encoding_refuses_hostile_names(name: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)) as info:
        text_encoding(name)
    assert str(info.value).endswith('such as "utf-8", "latin-1" or "cp1252"')
    with pytest.raises(ValueError, match=re.escape(message)):
        validate_csv(b"a\n", encoding=name)
    with pytest.raises(ValueError, match=r"^--encoding"):
        text_encoding(name, option="--encoding")


def test_text_encoding_gives_canonical_names() -> None:
    assert [text_encoding(n) for n in ("UTF8", "latin-1", "cp1252", "utf_16", "Shift JIS")] == [
        "utf-8",
        "iso8859-1",
        "cp1252",
        "utf-16",
        "shift_jis",
    ]
    with pytest.raises(TypeError, match="encoding must be a string, not int"):
        text_encoding(8)


def test_bom_crlf_and_quoted_fields() -> None:
    data = '\ufeffname,note\r\n"Doe, J","said ""hi""\r\nthen left"\r\nx,y\r\n'.encode()
    report = validate_csv(data, required_headers=["name"], constraints={"note": {"maxLength": 3}})
    assert [c.name for c in report.columns] == ["name", "note"]
    assert codes(report) == [("constraint-error", 2, "note")]
    assert report.row_count == 2
    text = validate_csv(data.decode("utf-8"), required_headers=["name"])
    assert text.valid


@pytest.mark.parametrize("delimiter", [";", "\t", "|", ","])
def test_sniffing(delimiter: str) -> None:
    rows = [["a", "b", "c"], ["1", "x,y", "3"], ["4", "5", "6"]]
    text = "\n".join(delimiter.join(r) for r in rows if delimiter != "," or "x,y" not in r) + "\n"
    report = validate_csv(text, dialect="sniff", constraints={"a": "integer"})
    assert report.delimiter == delimiter
    assert [c.name for c in report.columns] == ["a", "b", "c"]
    assert report.valid


def test_explicit_dialect() -> None:
    report = validate_csv("a;b\n'x;y';2\n", dialect={"delimiter": ";", "quoteChar": "'"})
    assert report.valid and report.row_count == 1
    with pytest.raises(ValueError, match="unknown dialect key 'comment'"):
        validate_csv("a\n", dialect={"comment": "#"})
    with pytest.raises(ValueError, match="sniff"):
        validate_csv("a\n", dialect="excel")


def test_empty_and_header_only() -> None:
    empty = validate_csv("", required_headers=["a"])
    assert codes(empty) == [("source-error", None, None), ("missing-header", None, "a")]
    assert empty.row_count == 0 and empty.columns == ()
    assert not validate_csv(b"").valid
    header_only = validate_csv("a,b\n", constraints={"a": {"type": "integer", "required": True}})
    assert header_only.valid and header_only.row_count == 0


def test_str_is_never_a_path(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("secret\n1\n")
    report = validate_csv(str(path))
    assert [c.name for c in report.columns] == [str(path)]
    assert report.row_count == 0
    assert validate_csv(path).columns[0].name == "secret"


def test_sources_text_and_binary_streams(tmp_path: pathlib.Path) -> None:
    binary = io.BytesIO(b"a,b\n1,2\n")
    report = validate_csv(binary, constraints={"a": "integer"})
    assert report.valid and report.row_count == 1
    assert not binary.closed  # the caller's stream stays open
    path = tmp_path / "f.csv"
    path.write_bytes(b"a\n1\nz\n")
    with path.open("rb") as handle:
        assert codes(validate_csv(handle, constraints={"a": "integer"})) == [("type-error", 3, "a")]
        assert not handle.closed
    with path.open(encoding="utf-8", newline="") as text:
        assert validate_csv(text, constraints={"a": "integer"}).error_count == 1
    assert validate_csv(io.StringIO("a\n1\n"), constraints={"a": "integer"}).valid

    class DuckText:
        def __init__(self, text: str) -> None:
            self.buffer = io.StringIO(text)

        def read(self, size: int = -1) -> str:
            return self.buffer.read(size)

    duck = validate_csv(DuckText('a\r\n1\r\n"x\ny"\r\nq\r'), constraints={"a": "integer"})  # type: ignore[arg-type]
    assert codes(duck) == [("type-error", 3, "a"), ("type-error", 5, "a")]


@pytest.mark.parametrize("source", [42, ["a,b"], None, 1.5])
def test_other_sources_are_type_errors(source: object) -> None:
    with pytest.raises(TypeError, match=r"os\.PathLike"):
        validate_csv(source)  # type: ignore[arg-type]


def test_unknown_type_and_constraint_name_allowed_ones() -> None:
    with pytest.raises(
        ValueError, match="unknown type 'int'; allowed types: string, integer"
    ) as info:
        validate_csv("a\n1\n", constraints={"a": "int"})
    for name in CSV_TYPES:
        assert name in str(info.value)
    with pytest.raises(ValueError, match="unknown constraint 'min'; allowed constraints") as info:
        validate_csv("a\n1\n", table_schema={"fields": [{"name": "a", "constraints": {"min": 1}}]})
    for name in CSV_CONSTRAINTS:
        assert name in str(info.value)
    with pytest.raises(ValueError, match="unknown key 'minimun'"):
        validate_csv("a\n1\n", constraints={"a": {"type": "integer", "minimun": 1}})


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ({"type": "string", "minimum": 1}, "minimum applies to"),
        ({"type": "integer", "minimum": "x"}, "minimum 'x' is not a valid integer"),
        ({"type": "integer", "required": "yes"}, "required must be true or false"),
        ({"type": "integer", "minLength": -1}, "minLength must be a non-negative integer"),
        ({"type": "date", "format": "dd/mm"}, "strptime pattern"),
        ({"type": "string", "format": "phone"}, "unknown string format"),
        ({"type": "integer", "enum": []}, "enum must be a non-empty list"),
        ({"type": "integer", "enum": ["a"]}, "enum value 'a' is not a valid integer"),
        ({"type": "boolean", "trueValues": "yes"}, "trueValues and falseValues"),
        ({"type": "string", "pattern": 5}, "pattern must be a string"),
        ([1], "type name or an object"),
    ],
)
def test_bad_declarations(declared: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_csv("a\n1\n", constraints={"a": declared})


def test_bad_table_schema_and_arguments() -> None:
    with pytest.raises(ValueError, match="unsupported key 'foreignKeys'"):
        validate_csv("a\n", table_schema={"fields": [], "foreignKeys": []})
    with pytest.raises(ValueError, match="primaryKey must name declared fields"):
        validate_csv("a\n", table_schema={"fields": [{"name": "a"}], "primaryKey": ["b"]})
    with pytest.raises(ValueError, match="declared twice"):
        validate_csv("a\n", table_schema={"fields": [{"name": "a"}, {"name": "a"}]})
    with pytest.raises(ValueError, match="unknown encoding"):
        validate_csv(b"a\n", encoding="nope")
    with pytest.raises(ValueError, match="max_errors"):
        validate_csv("a\n", max_errors=-1)
    with pytest.raises(TypeError, match="one string"):
        validate_csv("a\n", required_headers="a")
    with pytest.raises(TypeError):
        validate_csv("a\n", constraints=["a"])  # type: ignore[arg-type]


def test_table_schema_missing_values_and_primary_key() -> None:
    schema = {
        "fields": [
            {"name": "id", "type": "integer"},
            {"name": "part", "type": "string"},
            {"name": "qty", "type": "integer", "constraints": {"required": True}},
        ],
        "missingValues": ["", "NA"],
        "primaryKey": ["id", "part"],
    }
    text = "id,part,qty\n1,a,NA\n1,b,2\n1,a,3\nNA,c,4\n"
    report = validate_csv(text, table_schema=schema)
    assert codes(report) == [("constraint-error", 2, "qty"), ("unique-error", 4, "id, part")]
    assert report.errors[1].value == "1, a"


@pytest.mark.parametrize(
    ("declared", "good", "bad"),
    [
        ("integer", ["-3", "+4", "0012"], ["1.0", "1_000", " 1", "\u0663", "1e3", "9" * 5000]),
        (
            "number",
            ["1.5", "-.5", "1e3", "NaN", "-INF", "7"],
            ["1,5", "1.2.3", "nan", "inf", "0x1"],
        ),
        ({"type": "number", "decimalChar": ",", "groupChar": "."}, ["1.234,5"], ["1,2,3", "1.5e"]),
        ("boolean", ["true", "FALSE", "1", "0"], ["yes", "t"]),
        ({"type": "boolean", "trueValues": ["Y"], "falseValues": ["N"]}, ["Y", "N"], ["true"]),
        ("date", ["2024-02-29"], ["2023-02-29", "20240101", "2024-1-01", "2024-01-01T00:00"]),
        ({"type": "date", "format": "%d/%m/%Y"}, ["31/12/2024"], ["2024-12-31"]),
        ({"type": "date", "format": "any"}, ["2024-12-31", "31/12/2024"], ["someday"]),
        (
            "time",
            ["10:00:00", "23:59:59.123", "10:00:00Z", "10:00:00+02:00"],
            ["24:00:00", "10:00"],
        ),
        (
            "datetime",
            ["2024-01-01T10:00:00Z", "2024-01-01T10:00:00.5+01:00"],
            ["2024-01-01", "2024-13-01T00:00:00"],
        ),
        ("year", ["2024", "0999"], ["24", "20245", "-100"]),
        ({"type": "string", "format": "email"}, ["a@b.org"], ["a@", "nobody"]),
        ({"type": "string", "format": "uri"}, ["https://x.org/a"], ["not a uri"]),
        ({"type": "string", "format": "uuid"}, ["2eb8aa08-aa98-11ea-b4aa-73b441d16380"], ["2eb8"]),
        ({"type": "string", "format": "binary"}, ["aGk="], ["***"]),
    ],
)
def test_types(declared: Any, good: list[str], bad: list[str]) -> None:
    text = "v\n" + "\n".join(f'"{v}"' for v in good) + "\n"
    report = validate_csv(text, constraints={"v": declared})
    assert report.valid, report.errors
    for value in bad:
        report = validate_csv(f'v\n"{value}"\n', constraints={"v": declared})
        assert codes(report) == [("type-error", 2, "v")], value
    # Inside a large batch the fast path must agree with the per-value path.
    lots = (good * 900)[:900]
    many = "v\n" + "\n".join(f'"{v}"' for v in lots + bad) + "\n"
    report = validate_csv(many, constraints={"v": declared})
    assert [e.row for e in report.errors] == list(range(902, 902 + len(bad)))


@pytest.mark.parametrize(
    ("constraint", "good", "bad"),
    [
        ({"type": "integer", "minimum": 0, "maximum": 10}, ["0", "10"], ["-1", "11"]),
        ({"type": "date", "minimum": "2020-01-01"}, ["2020-01-01"], ["2019-12-31"]),
        (
            {"type": "datetime", "maximum": "2020-01-01T00:00:00Z"},
            ["2020-01-01T01:00:00+01:00"],
            ["2020-01-01T00:00:01Z"],
        ),
        ({"type": "time", "minimum": "08:00:00"}, ["08:00:00"], ["07:59:59"]),
        ({"type": "year", "minimum": 2000}, ["2000"], ["1999"]),
        ({"minLength": 2, "maxLength": 3}, ["ab", "abc"], ["a", "abcd"]),
        ({"pattern": "[A-Z]{2}-[0-9]+"}, ["AB-1"], ["ab-1", "AB-1x", "xAB-1"]),
        ({"enum": ["red", "green"]}, ["red"], ["blue", "Red"]),
        ({"type": "integer", "enum": [1, "2"]}, ["1", "02"], ["3"]),
        ({"type": "number", "minimum": 0}, ["0", "INF"], ["-0.5", "NaN", "-INF"]),
    ],
)
def test_constraints(constraint: dict[str, Any], good: list[str], bad: list[str]) -> None:
    for values, expected in ((good, True), (good * 400, True)):
        report = validate_csv("v\n" + "\n".join(values) + "\n", constraints={"v": constraint})
        assert report.valid is expected, report.errors[:3]
    for value in bad:
        report = validate_csv(f"v\n{value}\n", constraints={"v": constraint})
        assert codes(report) == [("constraint-error", 2, "v")], value
    batch = "v\n" + "\n".join(good * 300 + bad) + "\n"
    report = validate_csv(batch, constraints={"v": constraint})
    assert [e.row for e in report.errors] == [2 + 300 * len(good) + i for i in range(len(bad))]


def test_required_and_missing_values() -> None:
    report = validate_csv(
        "a,b\n,x\n1,\n", constraints={"a": {"type": "integer", "required": True}, "b": "integer"}
    )
    assert codes(report) == [("constraint-error", 2, "a"), ("type-error", 2, "b")]


def test_unique_across_batches_and_rows() -> None:
    values = [str(i) for i in range(3000)] + ["17"]
    report = validate_csv(
        "v\n" + "\n".join(values) + "\n", constraints={"v": {"type": "integer", "unique": True}}
    )
    assert codes(report) == [("unique-error", 3002, "v")]
    # Typed comparison: 017 is the integer 17.
    report = validate_csv("v\n17\n017\n", constraints={"v": {"type": "integer", "unique": True}})
    assert codes(report) == [("unique-error", 3, "v")]


def test_max_errors_and_truncation() -> None:
    report = validate_csv("v\n" + "x\n" * 250, constraints={"v": "integer"}, max_errors=10)
    assert report.error_count == 250 and len(report.errors) == 10 and report.truncated
    assert [e.row for e in report.errors] == list(range(2, 12))
    none = validate_csv("v\nx\n", constraints={"v": "integer"}, max_errors=0)
    assert none.error_count == 1 and none.errors == () and none.truncated and not none.valid


#: bad_rows_csv()'s 4,999 errors by column and code (see its docstring for the arithmetic).
BAD_ROWS_SUMMARY = {
    "id": {"type-error": 495},
    "age": {"constraint-error": 2999, "type-error": 1500},
    "": {"extra-cell": 5},
}


def test_error_summary_counts_every_error_not_only_those_listed() -> None:
    text = bad_rows_csv()
    report = validate_csv(text, constraints=BAD_ROWS_CONSTRAINTS)
    assert (report.error_count, len(report.errors), report.truncated) == (4999, 100, True)
    assert DEFAULT_MAX_ERRORS == 100
    assert report.error_summary == BAD_ROWS_SUMMARY
    assert list(report.error_summary) == ["id", "age", ""]  # the order first found
    assert report.to_dict()["error_summary"] == BAD_ROWS_SUMMARY
    # The bound: 1,000 listed, the first 1,000 rows' errors in file order; the counts unchanged.
    most = validate_csv(text, constraints=BAD_ROWS_CONSTRAINTS, max_errors=MAX_ERRORS_LIMIT)
    assert (most.error_count, len(most.errors)) == (4999, 1000)
    assert [e.row for e in most.errors] == list(range(2, 1002))
    assert most.error_summary == BAD_ROWS_SUMMARY
    none = validate_csv(text, constraints=BAD_ROWS_CONSTRAINTS, max_errors=0)
    assert none.errors == () and none.error_summary == BAD_ROWS_SUMMARY
    # Streamed from bytes (batches of 512 rows) the same.
    streamed = validate_csv(io.BytesIO(text.encode()), constraints=BAD_ROWS_CONSTRAINTS)
    assert streamed.error_summary == BAD_ROWS_SUMMARY


def test_error_summary_of_valid_and_whole_file_findings() -> None:
    assert validate_csv("a\n1\n", constraints={"a": "integer"}).error_summary == {}
    empty = validate_csv("", required_headers=["a"])
    assert empty.error_summary == {"": {"source-error": 1}, "a": {"missing-header": 1}}
    mixed = validate_csv("a,b\n\n1\n,\n", constraints={"b": {"type": "integer"}})
    assert mixed.error_summary == {"": {"blank-row": 2}, "b": {"missing-cell": 1}}


@pytest.mark.parametrize("bad", [MAX_ERRORS_LIMIT + 1, 5000, -1, True, 10.0, "100"])
def test_max_errors_outside_0_to_1000_is_refused(bad: object) -> None:
    message = (
        "max_errors must be an integer from 0 to 1,000 (how many errors are listed; "
        f"error_count counts them all), not {bad!r}"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        validate_csv("a\n", max_errors=bad)  # type: ignore[arg-type]


def test_errors_in_file_order_across_irregular_rows() -> None:
    rows = ["x,1"] * 3 + ["1"] + ["2,y"] * 2
    report = validate_csv(
        "a,b\n" + "\n".join(rows) + "\n", constraints={"a": "integer", "b": "integer"}
    )
    assert [e.row for e in report.errors] == sorted(e.row or 0 for e in report.errors)


def test_inferred_types() -> None:
    text = (
        "i,n,b,d,dt,t,s,e\n"
        "1,1.5,true,2024-01-01,2024-01-01T00:00:00Z,10:00:00,x,\n"
        "2,2,false,2024-01-02,2024-01-01T00:00:00Z,11:00:00,1,\n"
    )
    report = validate_csv(text)
    assert [c.type for c in report.columns] == [
        "integer",
        "number",
        "boolean",
        "date",
        "datetime",
        "time",
        "string",
        "string",
    ]
    assert not any(c.declared for c in report.columns)


def test_source_error_for_oversized_field() -> None:
    text = 'a,b\n1,2\n3,"' + "x" * 200_000 + '"\n'
    report = validate_csv(text)
    assert codes(report)[-1][0] == "source-error"
    assert report.errors[-1].row == 3
    assert "field larger than field limit" in report.errors[-1].message


@pytest.mark.parametrize(
    "pattern", [r"(a+)+$", r"(a|aa)+", r"(\w+\s?)*!", r"(x+x+)+y", r"\d*\d*\d*\d*\d*\d*a"]
)
def test_hostile_csv_pattern_is_linear(pattern: str) -> None:
    hostile = "a" * 20_000 + "!"
    results: list[CsvReport] = []
    worker = threading.Thread(
        target=lambda: results.append(
            validate_csv(f"v\n{hostile}\n" * 1, constraints={"v": {"pattern": pattern}})
        ),
        daemon=True,
    )
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "pattern evaluation hung"
    assert len(results) == 1


def test_unsupported_csv_pattern() -> None:
    with pytest.raises(UnsupportedPatternError) as info:
        validate_csv("v\nx\n", constraints={"v": {"pattern": r"(a)\1"}})
    assert info.value.location == "column 'v'"


def test_error_dataclass_to_dict() -> None:
    error = CsvError("type-error", "m", 2, "a", 1, "x")
    assert error.to_dict() == {
        "code": "type-error",
        "message": "m",
        "row": 2,
        "column": "a",
        "column_number": 1,
        "value": "x",
    }


def _generate(path: pathlib.Path, rows: int) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.write("id,name,score,day,flag\n")
        for i in range(rows):
            handle.write(f"{i},name {i % 977},{i % 100}.5,2024-01-{i % 28 + 1:02d},true\n")


def _peak_bytes(path: pathlib.Path, constraints: dict[str, Any]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        report = validate_csv(path, constraints=constraints)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert report.valid, report.errors[:3]
    return peak


def test_memory_does_not_grow_with_rows(tmp_path: pathlib.Path) -> None:
    constraints = {
        "id": {"type": "integer", "minimum": 0},
        "name": {"maxLength": 20},
        "score": {"type": "number", "maximum": 100},
        "day": "date",
        "flag": "boolean",
    }
    peaks = {}
    for rows in (10_000, 40_000, 160_000):
        path = tmp_path / f"{rows}.csv"
        _generate(path, rows)
        peaks[rows] = _peak_bytes(path, constraints)
    growth_per_row = (peaks[160_000] - peaks[10_000]) / 150_000
    # Streaming: a fixed batch buffer, no per-row state. Less than 1 byte per row of growth
    # (an accumulating design would need at least ~50 bytes per row).
    assert growth_per_row < 1.0, peaks
    assert peaks[160_000] < 4 * 2**20, peaks


def test_memory_of_unique_grows_with_rows(tmp_path: pathlib.Path) -> None:
    peaks = {}
    for rows in (10_000, 40_000):
        path = tmp_path / f"{rows}.csv"
        _generate(path, rows)
        peaks[rows] = _peak_bytes(path, {"id": {"type": "integer", "unique": True}})
    assert (peaks[40_000] - peaks[10_000]) / 30_000 > 20  # the set of seen ids


def test_reports_are_utf8_encodable() -> None:
    report = validate_csv(
        b"a\xff,b\n\xfe,2\n", required_headers=["\ud800x"], constraints={"b": "integer"}
    )
    text = json.dumps(report.to_dict(), ensure_ascii=False)
    text.encode("utf-8")
    assert [c.name for c in report.columns] == ["a\\xff", "b"]
    assert codes(report) == [
        ("encoding-error", 1, "a\\xff"),
        ("missing-header", 1, "\\ud800x"),
        ("encoding-error", 2, "a\\xff"),
    ]
    lone = validate_csv("v\n\ud800\n", constraints={"v": "integer"})
    assert lone.errors[0].value == "\\ud800"


def test_other_encodings() -> None:
    data = "name,n\nZoë,1\nÅsa,x\n"
    for encoding in ("utf-16", "utf-8-sig", "cp1252", "latin-1"):
        report = validate_csv(
            data.encode(encoding), encoding=encoding, constraints={"n": "integer"}
        )
        assert [c.name for c in report.columns] == ["name", "n"], encoding
        assert codes(report) == [("type-error", 3, "n")], encoding
    bad = validate_csv(b"a\n\x81\n", encoding="cp1252")
    assert codes(bad) == [("encoding-error", 2, "a")]


@pytest.mark.parametrize(
    ("text", "name", "spelled"),
    [
        ("a;b\n1;2\n", "semicolon", '";"'),
        ("a\tb\n1\t2\n", "tab", '"\\t"'),
        ("a|b\n1|2\n", "pipe", '"|"'),
    ],
)
def test_one_column_header_betrays_its_delimiter(text: str, name: str, spelled: str) -> None:
    hint = f"if the file is {name}-separated, give the delimiter {spelled} (or sniff it)"
    # With no rules: valid, but the report says nothing was checked and what the header looks like.
    report = validate_csv(text)
    assert report.valid is True
    assert report.warnings[0].startswith("no rules were given")
    assert report.warnings[1].endswith(hint)
    assert report.to_dict()["warnings"] == list(report.warnings)
    # Missing columns: each error names the header it saw; the hint is said once, as a warning.
    report = validate_csv(text, required_headers=["b", "c"], constraints={"d": "integer"})
    assert [e.code for e in report.errors] == ["missing-header"] * 3
    header = text.partition("\n")[0]
    assert [e.message for e in report.errors] == [
        f"required column 'b' is missing (the header has: {header})",
        f"required column 'c' is missing (the header has: {header})",
        f"column 'd' has constraints but is not in the header (the header has: {header})",
    ]
    assert len(report.warnings) == 1 and report.warnings[0].endswith(hint)
    assert str(report.to_dict()).count("-separated") == 1
    # Given or sniffed, the delimiter is the user's choice: no hint.
    assert validate_csv(text, required_headers=["b"], dialect="sniff").valid is True
    assert validate_csv(text, dialect={"delimiter": ","}).warnings == (
        validate_csv("a\n1\n").warnings
    )


def test_missing_header_messages_say_required_or_constrained() -> None:
    report = validate_csv(
        "a,b\n1,2\n", required_headers=["x"], constraints={"c": "integer", "x": "string"}
    )
    assert [e.message for e in report.errors] == [
        "required column 'x' is missing (the header has: a, b)",
        "column 'c' has constraints but is not in the header (the header has: a, b)",
    ]
    assert report.warnings == ()
    empty = validate_csv("", constraints={"c": "integer"})
    assert empty.errors[1].message == (
        "column 'c' has constraints but is not in the header (the header has: no columns)"
    )
    wide = ",".join(f"h{i}" for i in range(30))
    message = validate_csv(wide + "\n", required_headers=["z"]).errors[0].message
    assert message.endswith("h18, h19, ... (30 columns))")


@pytest.mark.parametrize("name", ["punycode", "idna", "PunyCode"])
def test_codecs_that_cannot_report_bad_bytes_are_refused(name: str) -> None:
    """Red team 2026-12-01: accepted, then every file failed with "Unsupported error handling
    datavalidate.csv-decode" (their decoders take no error handler)."""
    with pytest.raises(ValueError, match=r"cannot report undecodable bytes by position"):
        text_encoding(name)


def test_unknown_encoding_names_are_not_looked_up() -> None:
    """Red team 2026-12-01: the codec registry caches every name it fails to find, for good
    (500,000 distinct names grew the server by 85 MB); unknown names never reach it."""
    import encodings

    cache = getattr(encodings, "_cache", None)
    before = len(cache) if cache is not None else 0
    for i in range(2000):
        with pytest.raises(ValueError, match="unknown encoding"):
            text_encoding(f"no-such-codec-{i}")
    if cache is not None:
        assert len(cache) == before
    assert text_encoding("Latin1") == "iso8859-1"  # aliases still resolve
