"""The exception tree of :mod:`wsnapshot`, rooted in :class:`SnapshotError`.

Every error carries structured attributes (the snapshot id, the path, the limit that was hit) and a
human-readable ``str()`` that names what was wrong.
"""

from __future__ import annotations

__all__ = [
    "CorruptSnapshot",
    "ExportTooLarge",
    "GcLeaseLost",
    "InvalidRecord",
    "InvalidSnapshotId",
    "NotARegularFile",
    "QuotaExceeded",
    "SnapshotError",
    "SnapshotExists",
    "SnapshotNotFound",
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
]


class SnapshotError(Exception):
    """Base class of every error raised by :mod:`wsnapshot`."""


class StoreConfigError(SnapshotError, ValueError):
    """The workspace or store directory is unusable (missing, overlapping, not a directory).

    Attributes:
        path: The offending path.
        reason: Why it was refused.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"unusable path {self.path!r}: {self.reason}"


class InvalidSnapshotId(SnapshotError, ValueError):
    """A snapshot id is not a canonical UUID (``8-4-4-4-12`` hexadecimal digits).

    Attributes:
        snapshot_id: The value that was given (any type).
    """

    def __init__(self, snapshot_id: object) -> None:
        super().__init__(snapshot_id)
        self.snapshot_id = snapshot_id

    def __str__(self) -> str:
        shown = repr(self.snapshot_id)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        example = "123e4567-e89b-12d3-a456-426614174000"
        return f"invalid snapshot id {shown}: expected a UUID such as {example}"


class SnapshotNotFound(SnapshotError, LookupError):
    """No snapshot with this id exists in the store.

    Attributes:
        snapshot_id: The canonical id that was looked up.
    """

    def __init__(self, snapshot_id: str) -> None:
        super().__init__(snapshot_id)
        self.snapshot_id = snapshot_id

    def __str__(self) -> str:
        return f"snapshot {self.snapshot_id} not found"


class SnapshotExists(SnapshotError):
    """An imported record carries the id of a snapshot that is already stored.

    Attributes:
        snapshot_id: The id that is already taken.
    """

    def __init__(self, snapshot_id: str) -> None:
        super().__init__(snapshot_id)
        self.snapshot_id = snapshot_id

    def __str__(self) -> str:
        return f"snapshot {self.snapshot_id} already exists in the store"


class SnapshotTooLarge(SnapshotError):
    """The workspace passes ``max_bytes`` or ``max_files``; nothing was stored.

    Attributes:
        limit_name: ``"max_bytes"`` or ``"max_files"``.
        limit: The configured limit (bytes or entries).
        actual: The amount seen when the limit was passed (a lower bound).
    """

    def __init__(self, limit_name: str, limit: int, actual: int) -> None:
        super().__init__(limit_name, limit, actual)
        self.limit_name = limit_name
        self.limit = limit
        self.actual = actual

    def __str__(self) -> str:
        unit = "bytes" if self.limit_name == "max_bytes" else "entries"
        return (
            f"snapshot too large: at least {self.actual} {unit}, "
            f"{self.limit_name} is {self.limit} {unit}; nothing was stored"
        )


class QuotaExceeded(SnapshotError):
    """Storing the new snapshot would take the store past ``store_max_bytes``.

    Attributes:
        quota: The store-wide quota in bytes.
        used: Bytes of blobs stored before this snapshot.
        needed: New blob bytes the snapshot would add.
    """

    def __init__(self, quota: int, used: int, needed: int) -> None:
        super().__init__(quota, used, needed)
        self.quota = quota
        self.used = used
        self.needed = needed

    def __str__(self) -> str:
        return (
            f"store quota exceeded: {self.used} bytes used + {self.needed} new bytes "
            f"> store_max_bytes {self.quota}; nothing was stored"
        )


class CorruptSnapshot(SnapshotError):
    """A manifest or blob on disk fails validation (bad JSON, hostile path, hash mismatch).

    Attributes:
        snapshot_id: The snapshot concerned, when known.
        where: The file or the manifest path/field that failed.
        reason: What was wrong.
    """

    def __init__(self, snapshot_id: str | None, where: str, reason: str) -> None:
        super().__init__(snapshot_id, where, reason)
        self.snapshot_id = snapshot_id
        self.where = where
        self.reason = reason

    def __str__(self) -> str:
        who = f"snapshot {self.snapshot_id}" if self.snapshot_id else "store"
        return f"corrupt {who}: {self.where}: {self.reason}"


class InvalidRecord(SnapshotError, ValueError):
    """An export record given to ``import_`` is malformed; nothing was written.

    Attributes:
        where: The field of the record (a JSON-Pointer-like location such as ``/files/a.txt``).
        reason: What was wrong.
    """

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(where, reason)
        self.where = where
        self.reason = reason

    def __str__(self) -> str:
        return f"invalid snapshot record at {self.where or '/'}: {self.reason}"


class WorkspaceError(SnapshotError):
    """Base class of errors about accessing the workspace.

    Attributes:
        path: The workspace-relative path concerned (``""`` for the workspace itself).
        reason: What was wrong.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path!r}: {self.reason}"


class UnsafePathError(WorkspaceError):
    """A workspace path was refused.

    Reasons: absolute, ``..``, NUL byte, a symlink on the way, not a regular file, too large, or
    otherwise outside what may be touched.
    """

    def __str__(self) -> str:
        return f"unsafe workspace path {self.path!r}: {self.reason}"


class NotARegularFile(UnsafePathError):
    """A path to read names an existing entry that is not a regular file (a directory, a FIFO).

    Attributes:
        kind: The entry's kind, a :class:`wsnapshot.FileEntry` kind (``"dir"`` or ``"other"``).
    """

    def __init__(self, path: str, kind: str) -> None:
        what = {"dir": "a directory", "symlink": "a symbolic link"}.get(
            kind, "a special file (a FIFO, socket or device)"
        )
        super().__init__(path, f"is {what}, not a regular file")
        self.kind = kind


class WorkspaceLimitError(WorkspaceError):
    """A bounded walk of the workspace met more entries than allowed."""


class WorkspaceInconsistent(SnapshotError):
    """A restore failed on an error that cannot be repaired; the workspace may be half restored.

    Raised by ``SnapshotStore.create`` until a restore succeeds or the state is cleared.

    Attributes:
        snapshot_id: The snapshot whose restore failed (``None`` if unknown).
        reason: What failed, and when (from the store's ``inconsistent.json`` marker).
    """

    def __init__(self, snapshot_id: str | None, reason: str) -> None:
        super().__init__(snapshot_id, reason)
        self.snapshot_id = snapshot_id
        self.reason = reason

    def __str__(self) -> str:
        return (
            f"the workspace is inconsistent: {self.reason}; restore a snapshot to repair it "
            "(wsnapshot restore ID), or repair it by hand and clear the state "
            "(wsnapshot state --clear)"
        )


class ExportTooLarge(SnapshotError):
    """A snapshot's export record would pass the size asked for; nothing was read.

    The size comes from the manifest alone (``SnapshotStore.export_size``).

    Attributes:
        snapshot_id: The snapshot.
        size: Bytes of its streamed record.
        limit: The limit that was given.
    """

    def __init__(self, snapshot_id: str, size: int, limit: int) -> None:
        super().__init__(snapshot_id, size, limit)
        self.snapshot_id = snapshot_id
        self.size = size
        self.limit = limit

    def __str__(self) -> str:
        return (
            f"the export of snapshot {self.snapshot_id} is {self.size} bytes, more than the "
            f"{self.limit} allowed here; stream it instead (SnapshotStore.export_to, or "
            f"wsnapshot export {self.snapshot_id} -o FILE on the host)"
        )


class WorkspaceServedElsewhere(SnapshotError):
    """Another writer took over this store's prefix (the single-writer fence was lost).

    Raised by the call that found out and by every later call of the store: nothing more is
    saved from this writer.

    Attributes:
        location: The store (``s3://BUCKET/PREFIX``).
        since: When this writer last saved (ISO 8601 UTC): snapshots after it were not saved.
    """

    def __init__(self, location: str, since: str) -> None:
        super().__init__(location, since)
        self.location = location
        self.since = since

    def __str__(self) -> str:
        return (
            f"this workspace is now served elsewhere; snapshots since {self.since} were not "
            f"saved (another writer took over {self.location}; stop this one, or open the "
            f"store again to take it back)"
        )


class StoreBusy(SnapshotError):
    """A garbage collection holds the store's lease: nothing is committed until it ends.

    Raised to a writer whose commit (``create``, ``import_``, ``delete``) meets a live lease
    (nothing of the call was committed), and to a second collector.

    Attributes:
        location: The store (``s3://BUCKET/PREFIX``).
        until: When the lease expires at the latest (ISO 8601 UTC).
    """

    def __init__(self, location: str, until: str) -> None:
        super().__init__(location, until)
        self.location = location
        self.until = until

    def __str__(self) -> str:
        return (
            f"a garbage collection holds the snapshot store {self.location} (its lease runs "
            f"until {self.until} at the latest); nothing was saved by this call: retry in a "
            f"few seconds"
        )


class GcLeaseLost(SnapshotError):
    """A collector's lease expired or was taken over: it stopped before deleting more.

    Attributes:
        location: The store (``s3://BUCKET/PREFIX``).
        deleted: Blobs it had deleted (every one unreferenced and older than its start).
    """

    def __init__(self, location: str, deleted: int) -> None:
        super().__init__(location, deleted)
        self.location = location
        self.deleted = deleted

    def __str__(self) -> str:
        return (
            f"the garbage collection of {self.location} lost its lease (expired or taken over) "
            f"after deleting {self.deleted} unreferenced blobs; it stopped; run it again"
        )


class StoreUnavailable(SnapshotError):
    """The backend holding the snapshots cannot be reached or refused the request.

    Attributes:
        location: The store (``s3://BUCKET/PREFIX``; never a credential).
        operation: What was being done (``"put blobs/ab/..."``).
        reason: The backend's answer, shortened.
    """

    def __init__(self, location: str, operation: str, reason: str) -> None:
        super().__init__(location, operation, reason)
        self.location = location
        self.operation = operation
        self.reason = reason

    def __str__(self) -> str:
        return (
            f"the snapshot store {self.location} is unavailable ({self.operation}: "
            f"{self.reason}); nothing was changed by this call; retry when it is back "
            f"(check AWS_ENDPOINT_URL, the network and the credentials in the environment)"
        )


class WorkspaceInUse(SnapshotError):
    """Another process holds the workspace: an exclusive ``flock(2)`` on its directory.

    An mcp-secure-sandbox server holds one for as long as it serves the workspace; restoring
    under it would change files its runs and sessions are using.

    Attributes:
        workspace: The workspace directory, as given.
    """

    def __init__(self, workspace: str) -> None:
        super().__init__(workspace)
        self.workspace = workspace

    def __str__(self) -> str:
        return (
            f"the workspace {self.workspace!r} is in use: another process (a server serving it, "
            "or anything that locked the directory with flock) holds it; stop that process, or "
            "restore through it (a server's restore_state_snapshot tool), then try again"
        )
