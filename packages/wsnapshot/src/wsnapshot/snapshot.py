"""Result types of :mod:`wsnapshot`: frozen dataclasses, each with a JSON-ready ``to_dict()``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "Diff",
    "FileRecord",
    "GcReport",
    "RestoreReport",
    "SkippedEntry",
    "Snapshot",
    "SnapshotInfo",
]


@dataclass(frozen=True)
class FileRecord:
    """One entry of a snapshot's registry.

    Attributes:
        path: Relative POSIX path from the workspace root.
        kind: ``"file"``, ``"symlink"`` or ``"dir"``.
        mtime_ns: Modification time in nanoseconds since the Unix epoch.
        mode: Permission bits (``0o000``-``0o777``); 0 for symlinks.
        size: Content size in bytes (files; 0 otherwise).
        sha256: Lowercase hex SHA-256 of the content (files; ``None`` otherwise).
        target: Link target, relative (symlinks; ``None`` otherwise).
    """

    path: str
    kind: str
    mtime_ns: int
    mode: int = 0
    size: int = 0
    sha256: str | None = None
    target: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible form (fields that do not apply to the kind are left out)."""
        out: dict[str, Any] = {"path": self.path, "type": self.kind, "mtime_ns": self.mtime_ns}
        if self.kind == "file":
            out.update(size=self.size, sha256=self.sha256, mode=self.mode)
        elif self.kind == "dir":
            out["mode"] = self.mode
        else:
            out["target"] = self.target
        return out


@dataclass(frozen=True)
class SkippedEntry:
    """A workspace entry left out of a snapshot, and why.

    Attributes:
        path: Relative path (bytes of names that are not UTF-8 are shown as backslash escapes).
        reason: Why it was skipped (symlink pointing outside, special file, bad name...).
    """

    path: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible form."""
        return {"path": self.path, "reason": self.reason}


@dataclass(frozen=True)
class SnapshotInfo:
    """Summary of one stored snapshot (read from its manifest only).

    Attributes:
        id: Canonical lowercase UUID.
        created_at: ISO 8601 UTC time, microseconds, ``Z`` suffix.
        description: Free text given at creation.
        file_count: Regular files in the snapshot.
        dir_count: Directories in the snapshot.
        symlink_count: Symlinks in the snapshot.
        total_bytes: Sum of file sizes, in bytes.
        new_bytes: Bytes of blobs this snapshot added to the store when it was made.
        skipped: Entries left out at creation.
    """

    id: str
    created_at: str
    description: str
    file_count: int
    dir_count: int
    symlink_count: int
    total_bytes: int
    new_bytes: int
    skipped: tuple[SkippedEntry, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible form."""
        return {
            "id": self.id,
            "created_at": self.created_at,
            "description": self.description,
            "file_count": self.file_count,
            "dir_count": self.dir_count,
            "symlink_count": self.symlink_count,
            "total_bytes": self.total_bytes,
            "new_bytes": self.new_bytes,
            "skipped": [s.to_dict() for s in self.skipped],
        }


@dataclass(frozen=True)
class Snapshot:
    """A snapshot's summary plus its full registry.

    Attributes:
        info: The summary.
        entries: Registry entries sorted by path.
    """

    info: SnapshotInfo
    entries: tuple[FileRecord, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible form: the info plus ``entries``."""
        out = self.info.to_dict()
        out["entries"] = [e.to_dict() for e in self.entries]
        return out


@dataclass(frozen=True)
class GcReport:
    """What a garbage collection (:meth:`wsnapshot.SnapshotStore.collect_garbage`) did.

    Attributes:
        manifests: Manifests read to mark the blobs in use.
        kept_blobs: Blobs kept (named by a manifest, or newer than the collection's start).
        kept_bytes: Their bytes.
        deleted_blobs: Blobs deleted (named by no manifest and older than the start).
        deleted_bytes: Their bytes.
        young_blobs: Of the kept blobs, those named by no manifest but newer than the start
            (a writer's upload in flight; a later collection takes them if still unnamed).
        note: Why nothing was deleted when a manifest could not be read (else ``""``).
    """

    manifests: int
    kept_blobs: int
    kept_bytes: int
    deleted_blobs: int
    deleted_bytes: int
    young_blobs: int = 0
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible form."""
        return {
            "manifests": self.manifests,
            "kept_blobs": self.kept_blobs,
            "kept_bytes": self.kept_bytes,
            "deleted_blobs": self.deleted_blobs,
            "deleted_bytes": self.deleted_bytes,
            "young_blobs": self.young_blobs,
            "note": self.note,
        }


@dataclass(frozen=True)
class RestoreReport:
    """What a restore did, path by path.

    Attributes:
        snapshot_id: The snapshot restored.
        deleted: Files, symlinks and special files removed (not in the snapshot).
        rewritten: Files and symlinks whose content differed and were replaced.
        recreated: Files and symlinks that were missing and were written.
        metadata_restored: Entries whose content matched but whose mtime or mode was reset.
        unchanged: Number of entries left completely untouched.
        dirs_created: Directories created.
        dirs_removed: Directories removed.
        duration_ms: Wall-clock time of the restore, in milliseconds.
    """

    snapshot_id: str
    deleted: tuple[str, ...]
    rewritten: tuple[str, ...]
    recreated: tuple[str, ...]
    metadata_restored: tuple[str, ...]
    unchanged: int
    dirs_created: tuple[str, ...]
    dirs_removed: tuple[str, ...]
    duration_ms: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible form."""
        return {
            "snapshot_id": self.snapshot_id,
            "deleted": list(self.deleted),
            "rewritten": list(self.rewritten),
            "recreated": list(self.recreated),
            "metadata_restored": list(self.metadata_restored),
            "unchanged": self.unchanged,
            "dirs_created": list(self.dirs_created),
            "dirs_removed": list(self.dirs_removed),
            "duration_ms": self.duration_ms,
        }


@dataclass(frozen=True)
class Diff:
    """Differences between two snapshots, or a snapshot and the current workspace.

    Attributes:
        a: The older side (a snapshot id).
        b: The newer side (a snapshot id, or ``None`` for the current workspace).
        added: Paths only in ``b``.
        removed: Paths only in ``a``.
        modified: Paths in both whose content, link target or kind differ.
        metadata_changed: Paths with equal content but a different mtime or mode.
    """

    a: str
    b: str | None
    added: tuple[str, ...]
    removed: tuple[str, ...]
    modified: tuple[str, ...]
    metadata_changed: tuple[str, ...]

    @property
    def is_empty(self) -> bool:
        """``True`` when both sides are identical."""
        return not (self.added or self.removed or self.modified or self.metadata_changed)

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible form."""
        return {
            "a": self.a,
            "b": self.b,
            "added": list(self.added),
            "removed": list(self.removed),
            "modified": list(self.modified),
            "metadata_changed": list(self.metadata_changed),
        }
