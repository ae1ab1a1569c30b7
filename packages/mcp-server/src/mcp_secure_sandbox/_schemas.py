"""The server's own shapes of structured output; the SDK derives each tool's output schema.

A tool that returns a library's result as it is (wsnapshot's ``SnapshotInfo``, ``RestoreReport``
and ``Diff``, datavalidate's ``CsvReport``) is annotated with that frozen dataclass, and the SDK
derives the schema from its fields. The shapes here are what the server adds: envelopes (a list
and its count, an inline export or a link), the run result (the server's view of pysandbox's
``RunResult``), the JSON report (datavalidate's ``JsonReport`` computes ``truncated`` as a
property, which a schema derived from its fields would lose), and the server's own figures.
Library items inside them keep the library's type (``astguard.Violation``, ``JsonError``,
``SnapshotInfo``, ``FileEntry``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from typing_extensions import TypedDict

from astguard import Violation
from datavalidate import JsonError
from wsnapshot import SnapshotInfo

__all__ = [
    "ChangedFile",
    "DeleteOutput",
    "ExportOutput",
    "ImageInfo",
    "JsonReportOutput",
    "MetricsOutput",
    "OmittedImage",
    "RunOutput",
    "SnapshotId",
    "SnapshotListOutput",
    "WorkspaceEntryOutput",
    "WorkspaceListOutput",
    "WorkspacePath",
    "WorkspaceReadOutput",
    "WorkspaceWriteOutput",
]

SnapshotId = Annotated[
    str, Field(description="A snapshot's id (a UUID), as list_state_snapshots gives it.")
]
"""A ``snapshot_id`` argument, described in the input schema."""
WorkspacePath = Annotated[
    str,
    Field(description='A path relative to the workspace, e.g. "results/summary.txt".'),
]
"""A workspace ``path`` argument, described in the input schema."""


class ImageInfo(TypedDict):
    """An image a run result carries as image content (in the same order)."""

    source: str
    """``file``: a workspace file the run wrote; ``figure``: a figure it showed."""
    path: str | None
    """The workspace path of a file; ``None`` for a figure."""
    mime_type: str
    """``image/png``, ``image/jpeg`` or ``image/gif``, from the file's magic bytes."""
    bytes: int
    """The image's size, in bytes."""


class OmittedImage(TypedDict):
    """An image of the run that the result does not carry, and why."""

    source: str
    path: str | None
    bytes: int
    reason: str
    """Why it was left out and how to get it (ranged reads of the workspace file)."""


class ChangedFile(TypedDict):
    """A workspace file the run created or changed (also a resource link in the content)."""

    path: str
    bytes: int
    uri: str
    """The file's ``sandbox://workspace/{+path}`` resource (read it in ranges)."""


class RunOutput(TypedDict):
    """The outcome of one sandbox run (pysandbox ``RunResult``).

    ``images``, ``images_omitted``, ``files`` and ``files_omitted`` are the rich part: images
    returned as image content, images left out (over the count or the response budget, or
    not an image at all), the files created or changed (resource links), and how many more
    changed files were not listed. ``result`` is the final expression's value
    (``{type, text}``, or ``None``);
    ``session_id`` the session the code ran in (``None``: a one-shot run), ``session_ended``
    and ``session_end_reason`` whether and why that call ended it (``None`` for a one-shot).
    """

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
    violations: list[Violation]
    detail: str
    images: list[ImageInfo]
    images_omitted: list[OmittedImage]
    files: list[ChangedFile]
    files_omitted: int
    result: dict[str, Any] | None
    session_id: str | None
    session_ended: bool | None
    session_end_reason: str | None


class JsonReportOutput(TypedDict):
    """The outcome of a JSON Schema validation (datavalidate ``JsonReport``)."""

    valid: bool
    draft: str
    error_count: int
    truncated: bool
    errors: list[JsonError]


class SnapshotListOutput(TypedDict):
    """Every snapshot of the store, oldest first."""

    snapshots: list[SnapshotInfo]
    count: int


class DeleteOutput(TypedDict):
    """What a delete removed."""

    deleted: str
    description: str
    created_at: str
    remaining: int


class ExportOutput(TypedDict):
    """A snapshot export: the record inline, or how to read it in chunks when it is large."""

    snapshot_id: str
    size_bytes: int
    record: dict[str, Any] | None
    resource_uri: str | None
    chunk_count: int
    chunk_bytes: int
    chunk_uri_template: str | None


class RestoreOutput(TypedDict):
    """A restore's report; the path lists cut to fit one answer (``counts`` has every length)."""

    snapshot_id: str
    deleted: list[str]
    rewritten: list[str]
    recreated: list[str]
    metadata_restored: list[str]
    unchanged: int
    dirs_created: list[str]
    dirs_removed: list[str]
    duration_ms: float
    counts: dict[str, int]
    paths_truncated: bool


class MetricsOutput(TypedDict):
    """Server process, host, per-tool and sandbox-run figures."""

    process: dict[str, Any]
    host: dict[str, Any]
    uptime_s: float
    tools: dict[str, Any]
    runs_by_status: dict[str, int]
    peak_child_memory_bytes: int
    sessions: list[Any]
    active_runs: int
    max_concurrent_runs: int
    snapshot_store: dict[str, Any]
    caller: dict[str, Any]


class WorkspaceEntryOutput(TypedDict):
    """One entry of a workspace listing (wsnapshot ``FileEntry``, mode and time made readable)."""

    path: str
    kind: str
    size: int
    mode: str
    mtime: str


class WorkspaceListOutput(TypedDict):
    """A bounded listing of the workspace, one page of it when it does not fit one answer."""

    files: list[WorkspaceEntryOutput]
    file_count: int
    total_bytes: int
    entry_count: int
    offset: int
    next_offset: int | None


class WorkspaceReadOutput(TypedDict):
    """A byte range of one workspace file, as UTF-8 text or Base64."""

    path: str
    size: int
    offset: int
    length: int
    next_offset: int | None
    encoding: str
    content: str


class WorkspaceWriteOutput(TypedDict):
    """What a write did."""

    path: str
    bytes_written: int
