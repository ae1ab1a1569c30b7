"""The vendored CSV corpora: csv-spectrum (parsing) and the W3C CSVW validation tests.

csv-spectrum: every file must parse into exactly the expected records. ``validate_csv`` does
not return records, so each column gets an ``enum`` of its expected values, the row count and
header are compared, and a constraint that must fail on the last record checks that the row
number is the line where that record starts.

W3C CSVW: each test's table description is mapped to our vocabulary by ``csvw_to_ours``. Tests
using a feature we cannot express are listed with the reason (``UNEXPRESSIBLE`` reasons, counted
and printed); the others must give the manifest's verdict (Positive/Warning -> valid,
Negative -> invalid) unless listed in ``KNOWN_DIFFERENCES`` with the reason.
"""

from __future__ import annotations

import collections
import json
import pathlib
import re
from typing import Any

import pytest

from _support import data_dir
from datavalidate import DataValidateError, validate_csv

CSV_DIR = data_dir("csv")
SPECTRUM = CSV_DIR / "csv-spectrum"
W3C = CSV_DIR / "w3c-csvw-validation"


def _spectrum_cases() -> list[str]:
    return sorted(p.stem for p in (SPECTRUM / "csvs").glob("*.csv"))


@pytest.mark.parametrize("stem", _spectrum_cases())
def test_csv_spectrum(stem: str) -> None:
    path = SPECTRUM / "csvs" / f"{stem}.csv"
    expected: list[dict[str, str]] = json.loads(
        (SPECTRUM / "json" / f"{stem}.json").read_text(encoding="utf-8")
    )
    header = list(expected[0])
    enums = {name: {"enum": sorted({r[name] for r in expected} | {"\x00"})} for name in header}
    report = validate_csv(path, required_headers=header, constraints=enums)
    assert report.valid, report.errors
    assert report.row_count == len(expected)
    assert [c.name for c in report.columns] == header
    # The same content as str and as bytes parses the same way.
    raw = path.read_bytes()
    assert validate_csv(raw, constraints=enums).valid
    assert validate_csv(raw.decode("utf-8"), constraints=enums).valid
    # Row numbers: forbid the last record's first value; the error must name its first line.
    last = expected[-1][header[0]]
    others = sorted({r[header[0]] for r in expected[:-1]} - {last} | {"\x00"})
    failing = validate_csv(path, constraints={header[0]: {"enum": others}})
    text = raw.decode("utf-8")
    lines = text.splitlines()
    last_line = max(i for i, line in enumerate(lines, 1) if line.startswith(last.split("\n")[0]))
    if "\n" not in last:
        assert failing.errors[-1].row == last_line
    assert (
        failing.errors[-1].value == last.replace("\r", "")[:80]
        or failing.errors[-1].value == last[:80]
    )


def test_csv_spectrum_row_numbers_after_multiline_record() -> None:
    report = validate_csv(
        SPECTRUM / "csvs" / "newlines.csv", constraints={"c": {"enum": ["3", "6"]}}
    )
    assert [(e.row, e.column, e.value) for e in report.errors] == [(5, "c", "9")]
    crlf = validate_csv(
        SPECTRUM / "csvs" / "newlines_crlf.csv", constraints={"c": {"enum": ["3", "6"]}}
    )
    assert [(e.row, e.value) for e in crlf.errors] == [(5, "9")]
    quoted = validate_csv(
        SPECTRUM / "csvs" / "quotes_and_newlines.csv", constraints={"a": {"enum": ["1"]}}
    )
    assert [(e.row, e.value) for e in quoted.errors] == [(5, "3")]


# --- W3C CSVW -------------------------------------------------------------------------------

_INTEGER_BASES: dict[str, tuple[int | None, int | None]] = {
    "integer": (None, None),
    "int": (-(2**31), 2**31 - 1),
    "long": (-(2**63), 2**63 - 1),
    "short": (-(2**15), 2**15 - 1),
    "byte": (-128, 127),
    "nonNegativeInteger": (0, None),
    "positiveInteger": (1, None),
    "nonPositiveInteger": (None, 0),
    "negativeInteger": (None, -1),
    "unsignedLong": (0, 2**64 - 1),
    "unsignedInt": (0, 2**32 - 1),
    "unsignedShort": (0, 65535),
    "unsignedByte": (0, 255),
}
_NUMBER_BASES = {"decimal", "double", "float", "number"}
_STRING_BASES = {"string", "normalizedString", "token", "NMTOKEN", "anyURI", "language", "Name"}
_DATE_PARTS = [
    ("yyyy", "%Y"),
    ("MM", "%m"),
    ("M", "%m"),
    ("dd", "%d"),
    ("d", "%d"),
    ("HH", "%H"),
    ("mm", "%M"),
    ("ss", "%S"),
]
_IGNORED_COLUMN_KEYS = {
    "titles",
    "name",
    "datatype",
    "required",
    "aboutUrl",
    "propertyUrl",
    "valueUrl",
    "@id",
    "@type",
    "suppressOutput",
    "lang",
    "ordered",
    "virtual",
    "null",
    "default",
    "textDirection",
}


class Unexpressible(Exception):
    pass


def _date_format(fmt: str) -> str:
    out, i = [], 0
    while i < len(fmt):
        for token, code in _DATE_PARTS:
            if fmt.startswith(token, i):
                out.append(code)
                i += len(token)
                break
        else:
            if fmt[i].isalpha():
                raise Unexpressible(f"date/time format letter {fmt[i]!r} (UTS #35 {fmt!r})")
            out.append(fmt[i])
            i += 1
    return "".join(out)


def _column(column: dict[str, Any]) -> tuple[str, dict[str, Any], list[str] | None]:
    if "@id" in column or "@type" in column:
        raise Unexpressible("JSON-LD @id/@type on a column (metadata validity)")
    unknown = set(column) - _IGNORED_COLUMN_KEYS
    if unknown:
        raise Unexpressible(f"column property {sorted(unknown)[0]}")
    if "separator" in column:
        raise Unexpressible("separator (list-valued cells)")
    titles = column.get("titles", column.get("name"))
    name = titles[0] if isinstance(titles, list) else titles
    if not isinstance(name, str):
        raise Unexpressible("column without a usable title")
    datatype = column.get("datatype", "string")
    if isinstance(datatype, str):
        datatype = {"base": datatype}
    base = datatype.get("base", "string")
    field: dict[str, Any] = {}
    constraints: dict[str, Any] = {}
    fmt = datatype.get("format")
    for key in datatype:
        if key not in {
            "base",
            "format",
            "minimum",
            "maximum",
            "minInclusive",
            "maxInclusive",
            "minExclusive",
            "maxExclusive",
            "length",
            "minLength",
            "maxLength",
        }:
            raise Unexpressible(f"datatype property {key}")
    if base in _INTEGER_BASES:
        field["type"] = "integer"
        low, high = _INTEGER_BASES[base]
        if low is not None:
            constraints["minimum"] = low
        if high is not None:
            constraints["maximum"] = high
        if fmt is not None:
            raise Unexpressible("numeric format pattern")
    elif base in _NUMBER_BASES:
        field["type"] = "number"
        if isinstance(fmt, dict):
            if "pattern" in fmt:
                raise Unexpressible("numeric format pattern")
            if "decimalChar" in fmt:
                field["decimalChar"] = fmt["decimalChar"]
            if "groupChar" in fmt:
                field["groupChar"] = fmt["groupChar"]
        elif fmt is not None:
            raise Unexpressible("numeric format pattern")
    elif base in _STRING_BASES:
        field["type"] = "string"
        if fmt is not None:
            constraints["pattern"] = fmt
    elif base == "boolean":
        field["type"] = "boolean"
        if fmt is not None:
            true, _, false = fmt.partition("|")
            field["trueValues"], field["falseValues"] = [true], [false]
    elif base in {"date", "dateTime", "datetime", "time", "dateTimeStamp"}:
        field["type"] = {"date": "date", "time": "time"}.get(base, "datetime")
        if fmt is not None:
            field["format"] = _date_format(fmt)
        if base == "dateTimeStamp":
            raise Unexpressible("dateTimeStamp (a required time zone)")
    elif base == "gYear" and fmt is None:
        field["type"] = "year"
    else:
        raise Unexpressible(f"datatype {base}")
    for ours, theirs in (
        ("minimum", "minimum"),
        ("minimum", "minInclusive"),
        ("maximum", "maximum"),
        ("maximum", "maxInclusive"),
    ):
        if theirs in datatype:
            constraints[ours] = datatype[theirs]
    for key in ("minExclusive", "maxExclusive"):
        if key in datatype:
            if field["type"] != "integer":
                raise Unexpressible(f"{key} on a non-integer type")
            step = 1 if key == "minExclusive" else -1
            constraints["minimum" if step == 1 else "maximum"] = int(datatype[key]) + step
    if "length" in datatype:
        constraints["minLength"] = constraints["maxLength"] = datatype["length"]
    for key in ("minLength", "maxLength"):
        if key in datatype:
            constraints[key] = datatype[key]
    if column.get("required") is True:
        constraints["required"] = True
    if constraints:
        field["constraints"] = constraints
    null = column.get("null")
    nulls = [null] if isinstance(null, str) else null
    return name, field, nulls


def csvw_to_ours(entry: dict[str, Any]) -> dict[str, Any]:
    """Map one manifest entry to ``validate_csv`` arguments, or raise ``Unexpressible``."""
    action = entry["action"].split("?")[0]
    if "httpLink" in entry:
        raise Unexpressible("metadata found through an HTTP Link header")
    if action.endswith(".csv"):
        if any(str(i).endswith(".json") for i in entry.get("implicit", [])):
            raise Unexpressible("metadata discovered next to the CSV (site-wide or -metadata.json)")
        if entry.get("option", {}).get("metadata"):
            raise Unexpressible("user-supplied metadata")
        return {"source": W3C / action}
    try:
        metadata = json.loads((W3C / action).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise Unexpressible("metadata that is not JSON") from exc
    if "tables" in metadata or "url" not in metadata:
        raise Unexpressible("table group (several tables or foreign keys)")
    allowed = {
        "@context",
        "url",
        "tableSchema",
        "rdfs:comment",
        "rdfs:label",
        "dialect",
        "rdf:value",
        "rdfs:value",
        "dc:title",
        "null",
    }
    for key, value in metadata.items():
        if ":" in key and not isinstance(value, str):
            raise Unexpressible("JSON-LD annotation values (metadata validity)")
    extra = set(metadata) - allowed
    if extra:
        raise Unexpressible(f"table property {sorted(extra)[0]}")
    if not isinstance(metadata.get("@context"), str) or "csvw" not in metadata["@context"]:
        raise Unexpressible("non-standard @context (metadata validity)")
    schema = metadata.get("tableSchema")
    if not isinstance(schema, dict) or not isinstance(schema.get("columns"), list):
        raise Unexpressible("table schema by reference or without columns")
    if "@type" in schema or "@id" in schema:
        raise Unexpressible("JSON-LD @id/@type on a schema (metadata validity)")
    extra_schema = set(schema) - {"columns", "primaryKey", "rowTitles", "aboutUrl"}
    if extra_schema:
        raise Unexpressible(f"schema property {sorted(extra_schema)[0]}")
    fields, nulls_seen = [], set()
    names_by_csvw = {}
    for column in schema["columns"]:
        if not isinstance(column, dict):
            raise Unexpressible("column description that is not an object")
        if column.get("virtual"):
            continue
        name, field, nulls = _column(column)
        names_by_csvw[column.get("name", name)] = name
        nulls_seen.add(tuple(nulls) if nulls else ("",))
        fields.append({"name": name, **field})
    if len(nulls_seen) > 1:
        raise Unexpressible("different null values per column")
    table: dict[str, Any] = {"fields": fields}
    if nulls_seen:
        table["missingValues"] = list(next(iter(nulls_seen)))
    if "primaryKey" in schema:
        key = schema["primaryKey"]
        keys = [key] if isinstance(key, str) else key
        if not all(k in names_by_csvw for k in keys):
            raise Unexpressible("primaryKey naming an unknown column")
        table["primaryKey"] = [names_by_csvw[k] for k in keys]
    kwargs: dict[str, Any] = {"source": W3C / metadata["url"], "table_schema": table}
    dialect = metadata.get("dialect")
    if dialect is not None:
        ours = {}
        for key, value in dialect.items():
            if key == "delimiter":
                ours["delimiter"] = value
            elif key == "quoteChar":
                ours["quoteChar"] = value
            elif key == "doubleQuote":
                ours["doubleQuote"] = value
            elif key == "header" and value is True:
                continue
            else:
                raise Unexpressible(f"dialect {key}")
        kwargs["dialect"] = ours
    if not kwargs["source"].is_file():
        raise Unexpressible("CSV named by the metadata is not in the corpus")
    return kwargs


# Tests we map but whose verdict differs, with the reason. An entry that starts agreeing
# fails the test (remove it then).
_STRICT_DIALECT = "an invalid dialect value is a ValueError for us; CSVW ignores it with a warning"
_METADATA_CONFLICT = (
    "contradictory metadata (CSVW: error); we check data, not the consistency of bounds"
)
_XSD_DECIMAL = "Table Schema 'number' allows exponents, NaN and INF; XSD decimal does not"
KNOWN_DIFFERENCES: dict[str, str] = {
    "test060": _STRICT_DIALECT,
    "test061": _STRICT_DIALECT,
    "test067": _STRICT_DIALECT,
    "test128": "two columns share a CSVW `name` (an identifier apart from the header title); "
    "we have no such identifier",
    "test133": "CSVW orders virtual columns after real ones; we have no virtual columns",
    "test153": "an invalid regex is refused (UnsupportedPatternError); CSVW ignores it with a "
    "warning",
    "test164": _XSD_DECIMAL,
    "test165": _XSD_DECIMAL,
    "test166": _XSD_DECIMAL,
    "test167": _XSD_DECIMAL,
    "test170": "percent suffixes (value / 100) are not a Table Schema number",
    "test171": "per-mille suffixes (value / 1000) are not a Table Schema number",
    "test199": _METADATA_CONFLICT,
    "test200": _METADATA_CONFLICT,
    "test218": _METADATA_CONFLICT,
    "test261": _METADATA_CONFLICT,
}


def _entries() -> list[dict[str, Any]]:
    manifest = json.loads((W3C / "manifest-validation.jsonld").read_text(encoding="utf-8"))
    return list(manifest["entries"])


def _run(entry: dict[str, Any]) -> tuple[str, str]:
    """Return ``(outcome, detail)``: outcome is agree, differ or a reason it was not run."""
    try:
        kwargs = csvw_to_ours(entry)
    except Unexpressible as exc:
        return "unexpressible", str(exc)
    except (TypeError, AttributeError, KeyError, ValueError):
        return "unexpressible", "malformed metadata (a metadata validity test)"
    source = kwargs.pop("source")
    expected_valid = not entry["type"].endswith("NegativeValidationTest")
    try:
        report = validate_csv(source, **kwargs)
    except (ValueError, DataValidateError) as exc:
        # The schema itself is refused (e.g. an invalid regex): that is an error verdict.
        if not expected_valid:
            return "agree", ""
        return "differ", f"raised {type(exc).__name__}: {exc}"
    if report.valid == expected_valid:
        return "agree", ""
    first = report.errors[0].to_dict() if report.errors else None
    return "differ", f"valid={report.valid} expected {expected_valid}; first error {first}"


def test_w3c_csvw_validation(capsys: pytest.CaptureFixture[str]) -> None:
    outcomes: collections.Counter[str] = collections.Counter()
    reasons: collections.Counter[str] = collections.Counter()
    unexpected = []
    stale = []
    for entry in _entries():
        test_id = entry["id"].split("#")[-1]
        outcome, detail = _run(entry)
        outcomes[outcome] += 1
        if outcome == "unexpressible":
            reasons[re.sub(r"'[^']*'", "'…'", detail)[:70]] += 1
        elif outcome == "differ" and test_id not in KNOWN_DIFFERENCES:
            unexpected.append(f"{test_id} ({entry['name']}): {detail}")
        elif outcome == "agree" and test_id in KNOWN_DIFFERENCES:
            stale.append(test_id)
    with capsys.disabled():
        print(
            f"\nW3C CSVW validation: {len(_entries())} tests; mapped and agreeing "
            f"{outcomes['agree']}, known differences {outcomes['differ']}, "
            f"not expressible {outcomes['unexpressible']}"
        )
        for reason, count in reasons.most_common():
            print(f"  not expressible x{count}: {reason}")
    assert not unexpected, "\n".join(unexpected)
    assert not stale, f"known differences that now agree, remove them: {stale}"
    assert (outcomes["agree"], outcomes["differ"]) == (57, len(KNOWN_DIFFERENCES))


def test_w3c_unexpressible_rules_are_listed() -> None:
    kinds = {csvw_reason for csvw_reason in (_run(e)[1] for e in _entries()) if csvw_reason}
    assert any("foreign keys" in k for k in kinds)


def test_corpus_paths_exist() -> None:
    assert (W3C / "manifest-validation.jsonld").is_file()
    assert len(_spectrum_cases()) == 11
    assert isinstance(SPECTRUM, pathlib.Path)
