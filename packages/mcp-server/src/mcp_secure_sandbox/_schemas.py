"""The server's own shapes of structured output; the SDK derives each tool's output schema.

A tool that returns a library's result as it is (wsnapshot's ``SnapshotInfo`` and ``Diff``,
datavalidate's ``CsvReport``) is annotated with that frozen dataclass, and the SDK derives the
schema from its fields. Where the server publishes a library result with fields of its own
added (the run result: pysandbox's ``RunResult`` and the rich part; a restore's report with its
counts; datavalidate's ``JsonReport`` with ``truncated``, a property a schema of its fields
would lose), the shape is *derived* from the library's dataclass (:func:`library_fields`): the
field names and types have one home, the library. The other shapes here are the server's
own: envelopes (a list and its count, an inline export or a link) and figures. Library items
inside them keep the library's type (``astguard.Violation``, ``JsonError``, ``SnapshotInfo``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, cast, get_args, get_origin, get_type_hints

from pydantic import Field
from typing_extensions import TypedDict

from datavalidate import JsonReport
from pysandbox import RunResult
from wsnapshot import RestoreReport, SnapshotInfo

__all__ = [
    "RUN_FIELDS",
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
    "library_fields",
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


def library_fields(
    source: type,
    names: Sequence[str] | None = None,
    *,
    types: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON shape of a library dataclass's fields: ``{name: type}``, in the order asked.

    A ``tuple[X, ...]`` field is published as ``list[X]`` (a JSON array either way).

    Args:
        source: A dataclass (``RunResult``, ``RestoreReport``, ``JsonReport``).
        names: The fields published, in order; a name may be a property's (its return type).
            Every field, in declaration order, when ``None``.
        types: Types that replace those of the named fields (an enum published as its
            value: ``{"status": str}``).

    Returns:
        The names and types, for a ``TypedDict``.

    Raises:
        KeyError: A name is neither a field nor a property of ``source``.
    """
    hints = get_type_hints(source)
    chosen = [f.name for f in dataclasses.fields(source)] if names is None else list(names)
    out: dict[str, Any] = {}
    for name in chosen:
        if types and name in types:
            out[name] = types[name]
            continue
        if name in hints:
            kind = hints[name]
        else:
            prop = getattr(source, name, None)
            if not isinstance(prop, property) or prop.fget is None:
                raise KeyError(f"{source.__name__} has no field or property {name!r}")
            kind = get_type_hints(prop.fget)["return"]
        args = get_args(kind)
        if get_origin(kind) is tuple and len(args) == 2 and args[1] is Ellipsis:
            kind = list.__class_getitem__(args[0])  # list[X], X known at run time
        out[name] = kind
    return out


def _typed_dict(name: str, fields: Mapping[str, Any], doc: str) -> Any:
    """A ``TypedDict`` class named ``name`` with ``fields`` (every key required)."""
    made = cast("Any", TypedDict)(name, dict(fields))
    made.__doc__ = doc
    made.__module__ = __name__
    return made


RUN_FIELDS = (
    "status",
    "exit_code",
    "signal",
    "stdout",
    "stderr",
    "stdout_truncated",
    "stderr_truncated",
    "duration_ms",
    "cpu_time_ms",
    "peak_memory_bytes",
    "violations",
    "detail",
)
"""The fields of pysandbox's ``RunResult`` a run result publishes (the isolation layers are in
``sandbox://status``; changed files and figures become the rich part)."""

RunOutput: Any = _typed_dict(
    "RunOutput",
    {
        **library_fields(RunResult, RUN_FIELDS, types={"status": str}),
        "images": list[ImageInfo],
        "images_omitted": list[OmittedImage],
        "files": list[ChangedFile],
        "files_omitted": int,
        **library_fields(RunResult, ("result",), types={"result": dict[str, Any] | None}),
        "session_id": str | None,
        **library_fields(RunResult, ("session_ended", "session_end_reason")),
    },
    """The outcome of one sandbox run (pysandbox ``RunResult``).

    ``images``, ``images_omitted``, ``files`` and ``files_omitted`` are the rich part: images
    returned as image content, images left out (over the count or the response budget, or
    not an image at all), the files created or changed (resource links), and how many more
    changed files were not listed. ``result`` is the final expression's value (``{type, text}``,
    or ``None``); ``session_id`` the session the code ran in (``None``: a one-shot run),
    ``session_ended`` and ``session_end_reason`` whether and why that call ended it (``None`` for
    a one-shot).
    """,
)
"""The structured result of ``run_sandbox_code``: :data:`RUN_FIELDS` and the rich part."""

JsonReportOutput: Any = _typed_dict(
    "JsonReportOutput",
    library_fields(JsonReport, ("valid", "draft", "error_count", "truncated", "errors")),
    "The outcome of a JSON Schema validation (datavalidate ``JsonReport``).",
)
"""The structured result of ``validate_json_data``: ``JsonReport``'s fields and ``truncated``."""


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


RestoreOutput: Any = _typed_dict(
    "RestoreOutput",
    {
        **library_fields(RestoreReport),
        "counts": dict[str, int],
        "paths_truncated": bool,
    },
    "A restore's report; the path lists cut to fit one answer (``counts`` has every length).",
)
"""The structured result of ``restore_state_snapshot``: ``RestoreReport``'s fields and more."""


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
