"""wsnapshot: crash-safe, content-addressed workspace snapshots with exact restore.

Public API: :class:`SnapshotStore` (create/list/get/restore/delete/diff/export/import_), the result
types in :mod:`wsnapshot.snapshot`, the errors in :mod:`wsnapshot.exceptions`, and the safe
workspace accessor :class:`SafeWorkspace` in :mod:`wsnapshot.workspace`, and :func:`hold_workspace`
(the ``flock`` a process that changes a whole workspace holds against a server serving it).
"""

from __future__ import annotations

from wsnapshot.__about__ import __version__
from wsnapshot._hold import hold_workspace
from wsnapshot._store import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_FILES,
    DEFAULT_STORE_MAX_BYTES,
    SnapshotStore,
)
from wsnapshot._storedir import S3_SCHEME, parse_s3_url
from wsnapshot.exceptions import (
    CorruptSnapshot,
    ExportTooLarge,
    GcLeaseLost,
    InvalidRecord,
    InvalidSnapshotId,
    NotARegularFile,
    QuotaExceeded,
    SnapshotError,
    SnapshotExists,
    SnapshotNotFound,
    SnapshotTooLarge,
    StoreBusy,
    StoreConfigError,
    StoreUnavailable,
    UnsafePathError,
    WorkspaceError,
    WorkspaceInconsistent,
    WorkspaceInUse,
    WorkspaceLimitError,
    WorkspaceServedElsewhere,
)
from wsnapshot.snapshot import (
    Diff,
    FileRecord,
    GcReport,
    RestoreReport,
    SkippedEntry,
    Snapshot,
    SnapshotInfo,
)
from wsnapshot.workspace import FileEntry, SafeWorkspace, split_relpath

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_FILES",
    "DEFAULT_STORE_MAX_BYTES",
    "S3_SCHEME",
    "CorruptSnapshot",
    "Diff",
    "ExportTooLarge",
    "FileEntry",
    "FileRecord",
    "GcLeaseLost",
    "GcReport",
    "InvalidRecord",
    "InvalidSnapshotId",
    "NotARegularFile",
    "QuotaExceeded",
    "RestoreReport",
    "SafeWorkspace",
    "SkippedEntry",
    "Snapshot",
    "SnapshotError",
    "SnapshotExists",
    "SnapshotInfo",
    "SnapshotNotFound",
    "SnapshotStore",
    "SnapshotTooLarge",
    "StoreBusy",
    "StoreConfigError",
    "StoreUnavailable",
    "UnsafePathError",
    "WorkspaceError",
    "WorkspaceInUse",
    "WorkspaceInconsistent",
    "WorkspaceLimitError",
    "WorkspaceServedElsewhere",
    "__version__",
    "hold_workspace",
    "parse_s3_url",
    "split_relpath",
]
