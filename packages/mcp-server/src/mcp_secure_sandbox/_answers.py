"""The shapes of the results confined workers send back, checked before the server uses them.

A worker runs caller-supplied input; if that input ever compromised it, its answer is hostile
too. Each result is validated strictly (pydantic: exact types, no missing or extra keys, no
coercion) and turned into datavalidate's report types here; a result that does not fit raises
``ValueError`` (pydantic's ``ValidationError``), which the pool treats as a malformed answer
(:meth:`mcp_secure_sandbox.workers.WorkerPool.call`: the worker is killed and replaced).
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, TypeAdapter, with_config
from typing_extensions import TypedDict

from datavalidate import CsvColumn, CsvError, CsvReport, JsonError
from wsnapshot import Diff

__all__ = ["csv_report", "diff", "json_report"]

_STRICT = ConfigDict(strict=True, extra="forbid")


@with_config(_STRICT)
class _JsonErrorShape(TypedDict):
    instance_location: str
    schema_location: str
    keyword: str
    message: str
    value: str


@with_config(_STRICT)
class _JsonReportShape(TypedDict):
    valid: bool
    draft: str
    error_count: int
    truncated: bool
    errors: list[_JsonErrorShape]


@with_config(_STRICT)
class _CsvColumnShape(TypedDict):
    name: str
    number: int
    type: str
    declared: bool


@with_config(_STRICT)
class _CsvErrorShape(TypedDict):
    code: str
    message: str
    row: int | None
    column: str | None
    column_number: int | None
    value: str | None


@with_config(_STRICT)
class _CsvReportShape(TypedDict):
    valid: bool
    row_count: int
    columns: list[_CsvColumnShape]
    error_count: int
    truncated: bool
    delimiter: str
    errors: list[_CsvErrorShape]
    warnings: list[str]
    error_summary: dict[str, dict[str, int]]


@with_config(_STRICT)
class _DiffShape(TypedDict):
    a: str
    b: str | None
    added: list[str]
    removed: list[str]
    modified: list[str]
    metadata_changed: list[str]


_JSON_REPORT = TypeAdapter(_JsonReportShape)
_DIFF = TypeAdapter(_DiffShape)
_CSV_REPORT = TypeAdapter(_CsvReportShape)


def json_report(result: Any) -> dict[str, Any]:
    """A worker's JSON Schema report, checked, its errors as :class:`datavalidate.JsonError`.

    Returns ``valid``, ``draft``, ``error_count``, ``truncated`` and ``errors``.

    Raises:
        ValueError: Not exactly that shape (a pydantic ``ValidationError``).
    """
    report = _JSON_REPORT.validate_python(result)
    return {**report, "errors": [JsonError(**e) for e in report["errors"]]}


def csv_report(result: Any) -> CsvReport:
    """A worker's CSV report, checked, as a :class:`datavalidate.CsvReport`.

    Raises:
        ValueError: Not exactly the shape of ``CsvReport.to_dict()`` (pydantic's
            ``ValidationError``).
    """
    found = _CSV_REPORT.validate_python(result)
    return CsvReport(
        valid=found["valid"],
        row_count=found["row_count"],
        columns=tuple(CsvColumn(**c) for c in found["columns"]),
        errors=tuple(CsvError(**e) for e in found["errors"]),
        error_count=found["error_count"],
        truncated=found["truncated"],
        delimiter=found["delimiter"],
        warnings=tuple(found["warnings"]),
        error_summary=found["error_summary"],
    )


def diff(result: Any) -> Diff:
    """A worker's snapshot diff, checked, as a :class:`wsnapshot.Diff`.

    Raises:
        ValueError: Not exactly the shape of ``Diff.to_dict()`` (pydantic's
            ``ValidationError``).
    """
    found = _DIFF.validate_python(result)
    return Diff(
        found["a"],
        found["b"],
        tuple(found["added"]),
        tuple(found["removed"]),
        tuple(found["modified"]),
        tuple(found["metadata_changed"]),
    )
