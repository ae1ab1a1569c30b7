"""Typed shapes of the tools' structured output; the SDK derives each tool's output schema.

These mirror the ``to_dict()`` of the libraries' result types; a test calls every tool through a
real client, so a field added on one side and not the other fails there.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

__all__ = [
    "CsvColumnOutput",
    "CsvErrorOutput",
    "CsvReportOutput",
    "DeleteOutput",
    "DiffOutput",
    "ExportOutput",
    "JsonErrorOutput",
    "JsonReportOutput",
    "MetricsOutput",
    "RestoreOutput",
    "RunOutput",
    "SkippedOutput",
    "SnapshotInfoOutput",
    "SnapshotListOutput",
    "ViolationOutput",
    "WorkspaceFileOutput",
    "WorkspaceListOutput",
    "WorkspaceReadOutput",
    "WorkspaceWriteOutput",
]


class ViolationOutput(TypedDict):
    """One finding of the static checker (astguard), 1-based lines, 0-based columns."""

    rule_id: str
    message: str
    line: int
    col: int
    end_line: int | None
    end_col: int | None


class RunOutput(TypedDict):
    """The outcome of one sandbox run (pysandbox ``RunResult``)."""

    status: str
    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    duration_ms: float
    cpu_time_ms: float
    peak_memory_bytes: int
    violations: list[ViolationOutput]
    layers: list[str]
    detail: str


class JsonErrorOutput(TypedDict):
    """One JSON Schema error; locations are RFC 6901 JSON Pointers."""

    instance_location: str
    schema_location: str
    keyword: str
    message: str
    value: str


class JsonReportOutput(TypedDict):
    """The outcome of a JSON Schema validation (datavalidate ``JsonReport``)."""

    valid: bool
    draft: str
    error_count: int
    truncated: bool
    errors: list[JsonErrorOutput]


class CsvColumnOutput(TypedDict):
    """One column of a validated CSV table."""

    name: str
    number: int
    type: str
    declared: bool


class CsvErrorOutput(TypedDict):
    """One CSV error: row as a person counts lines (header = 1), column, value, stable code."""

    code: str
    message: str
    row: int | None
    column: str | None
    column_number: int | None
    value: str | None


class CsvReportOutput(TypedDict):
    """The outcome of a CSV validation (datavalidate ``CsvReport``)."""

    valid: bool
    row_count: int
    columns: list[CsvColumnOutput]
    error_count: int
    truncated: bool
    delimiter: str
    errors: list[CsvErrorOutput]


class SkippedOutput(TypedDict):
    """A workspace entry a snapshot left out, and why."""

    path: str
    reason: str


class SnapshotInfoOutput(TypedDict):
    """Summary of one snapshot (wsnapshot ``SnapshotInfo``); sizes in bytes."""

    id: str
    created_at: str
    description: str
    file_count: int
    dir_count: int
    symlink_count: int
    total_bytes: int
    new_bytes: int
    skipped: list[SkippedOutput]


class SnapshotListOutput(TypedDict):
    """Every snapshot of the store, oldest first."""

    snapshots: list[SnapshotInfoOutput]
    count: int


class RestoreOutput(TypedDict):
    """What a restore changed (wsnapshot ``RestoreReport``)."""

    snapshot_id: str
    deleted: list[str]
    rewritten: list[str]
    recreated: list[str]
    metadata_restored: list[str]
    unchanged: int
    dirs_created: list[str]
    dirs_removed: list[str]
    duration_ms: float


class DeleteOutput(TypedDict):
    """What a delete removed."""

    deleted: str
    description: str
    created_at: str
    remaining: int


class DiffOutput(TypedDict):
    """Paths that differ between two snapshots, or a snapshot and the workspace (``b`` null)."""

    a: str
    b: str | None
    added: list[str]
    removed: list[str]
    modified: list[str]
    metadata_changed: list[str]


class ExportOutput(TypedDict):
    """A snapshot export: the record inline, or a resource link when it is large."""

    snapshot_id: str
    size_bytes: int
    record: dict[str, Any] | None
    resource_uri: str | None


class MetricsOutput(TypedDict):
    """Server process, host, per-tool and sandbox-run figures."""

    process: dict[str, Any]
    host: dict[str, Any]
    uptime_s: float
    tools: dict[str, Any]
    runs_by_status: dict[str, int]
    peak_child_memory_bytes: int
    active_runs: int
    max_concurrent_runs: int


class WorkspaceFileOutput(TypedDict):
    """One entry of the workspace (sizes in bytes, mtime in ns since the epoch)."""

    path: str
    kind: str
    size: int
    mtime_ns: int
    mode: int


class WorkspaceListOutput(TypedDict):
    """A bounded listing of the workspace."""

    files: list[WorkspaceFileOutput]
    file_count: int
    total_bytes: int


class WorkspaceReadOutput(TypedDict):
    """The content of one workspace file, as UTF-8 text or Base64."""

    path: str
    size: int
    encoding: str
    content: str


class WorkspaceWriteOutput(TypedDict):
    """What a write did."""

    path: str
    bytes_written: int
