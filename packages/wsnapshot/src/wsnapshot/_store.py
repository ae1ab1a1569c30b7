"""The snapshot store's façade: :class:`SnapshotStore`, its public API, lock and recovery.

The work is done by one part per concern, each in its own private module:

* :mod:`wsnapshot._storedir`: the store directory (layout, lock, atomic files, manifests);
* :mod:`wsnapshot._blobs`: content-addressed blobs (stage, commit, verify, stream, collect);
* :mod:`wsnapshot._capture`: ``create`` (scan, incremental hashing) and the workspace for ``diff``;
* :mod:`wsnapshot._restore`: ``restore`` (plan, verify, journal, apply, roll-forward);
* :mod:`wsnapshot._record`: ``export`` and ``import_`` (the JSON record).

:class:`SnapshotStore` validates its arguments, takes the writers' lock, completes what a
crashed writer left (:meth:`SnapshotStore._recover`) and hands each call to its part.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO

from wsnapshot._blobs import BlobStore
from wsnapshot._capture import Capture
from wsnapshot._fsio import Ops, get_ops
from wsnapshot._manifest import MAX_DESCRIPTION, check_id
from wsnapshot._record import Records
from wsnapshot._restore import Restorer
from wsnapshot._storedir import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_FILES,
    DEFAULT_STORE_MAX_BYTES,
    S3_SCHEME,
    Limits,
    StoreDir,
    order,
)
from wsnapshot.exceptions import (
    CorruptSnapshot,
    SnapshotNotFound,
    StoreConfigError,
    WorkspaceInconsistent,
)
from wsnapshot.snapshot import (
    Diff,
    FileRecord,
    GcReport,
    RestoreReport,
    Snapshot,
    SnapshotInfo,
)
from wsnapshot.workspace import SafeWorkspace

log = logging.getLogger("wsnapshot")

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_FILES",
    "DEFAULT_STORE_MAX_BYTES",
    "SnapshotStore",
]


def _open_s3(
    workspace_root: str,
    url: str,
    state_dir: str | os.PathLike[str] | None,
    limits: Limits,
    *,
    read_only: bool,
) -> tuple[StoreDir, BlobStore]:
    """The S3 backend's two halves, imported only when an ``s3://`` store is opened."""
    try:
        from wsnapshot import _s3
    except ImportError:
        raise StoreConfigError(
            url, "the S3 backend is not installed: pip install 'wsnapshot[s3]'"
        ) from None
    local = os.fspath(state_dir) if state_dir is not None else tempfile.mkdtemp(prefix="wsnapshot-")
    return _s3.open_s3(workspace_root, url, local, get_ops(), limits, read_only=read_only)


def _check_description(description: object) -> None:
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        raise ValueError(f"description must be a string of at most {MAX_DESCRIPTION} characters")


class SnapshotStore:
    """Content-addressed, crash-safe snapshots of one workspace directory.

    Store layout (``store_dir``)::

        wsnapshot-store.json    format marker
        lock                    flock(2) serialising writers
        snapshots/<uuid>.json   one manifest per snapshot (written atomically)
        blobs/ab/cdef...        file contents by SHA-256 (written atomically, verified on read)
        tmp/                    staging area for blobs being written
        restore.journal         intent journal of a restore in progress
        restore.journal.*.failed  a journal set aside (its restore failed beyond repair)
        inconsistent.json       marker: a restore failed, the workspace may be half restored
        gc.pending              marker: unreferenced blobs may exist

    Every file of the store is written to a temporary file, fsynced, renamed, and its directory
    fsynced. Writers (``create``, ``restore``, ``delete``, ``import_``) hold an exclusive
    ``flock`` on ``lock``, so several processes may share a store. Pending work of a crashed
    writer (a restore journal, unreferenced blobs) is completed when the store is opened and
    before every write. Opening never fails on such pending work: a restore that cannot be
    completed marks the workspace inconsistent (see :attr:`inconsistent`) instead.

    Args:
        workspace: The workspace directory (must exist).
        store_dir: The store directory (created with mode 0o700 if missing). It must not be
            inside the workspace, nor contain it. Or ``s3://BUCKET/PREFIX``: the S3 backend
            (extra ``wsnapshot[s3]``; see :mod:`wsnapshot._s3`), endpoint and credentials from
            the standard ``AWS_*`` environment; opening it as a writer takes the workspace
            over from any other writer of that prefix.
        max_bytes: Largest snapshot content accepted, in bytes (default 1 GiB).
        max_files: Most entries (files, directories, symlinks) in one snapshot (default 100,000).
        store_max_bytes: Store-wide quota of blob bytes (default 10 GiB).
        workers: Threads hashing files during ``create`` (default ``min(4, cpu_count)``).
        state_dir: With an ``s3://`` store only: the local directory of the writers' lock,
            staging files and restore journal (default: a new private temporary directory,
            so an interrupted restore is completed only within the same process).

    Raises:
        StoreConfigError: A directory is missing, overlapping or not a wsnapshot store; a bad
            ``s3://`` URL; the S3 extra is not installed.
        StoreUnavailable: The ``s3://`` store cannot be reached.
        WorkspaceServedElsewhere: Other writers kept taking the ``s3://`` store over while it
            was being opened.
        ValueError: A limit is not a positive integer; ``state_dir`` with a local store.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        store_dir: str | os.PathLike[str],
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_files: int = DEFAULT_MAX_FILES,
        store_max_bytes: int = DEFAULT_STORE_MAX_BYTES,
        workers: int | None = None,
        state_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        for name, value in (
            ("max_bytes", max_bytes),
            ("max_files", max_files),
            ("store_max_bytes", store_max_bytes),
        ):
            if type(value) is not int or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if workers is None:
            workers = min(4, os.cpu_count() or 1)
        if type(workers) is not int or workers <= 0:
            raise ValueError(f"workers must be a positive integer, got {workers!r}")
        self._open(
            workspace,
            store_dir,
            Limits(max_bytes, max_files, store_max_bytes, workers),
            state_dir=state_dir,
        )

    @classmethod
    def open_read_only(
        cls,
        workspace: str | os.PathLike[str],
        store_dir: str | os.PathLike[str],
        *,
        state_dir: str | os.PathLike[str] | None = None,
    ) -> SnapshotStore:
        """Open an existing store for reading only (``list``, ``get``, ``diff``, ``export``).

        Nothing is created, locked or completed at open (a crashed writer's pending work is
        left to the next writer), and every writer (``create``, ``restore``, ``delete``,
        ``import_``) raises :class:`~wsnapshot.exceptions.StoreConfigError`. For a confined
        process whose filesystem access is read-only (the MCP server's diff worker). The
        limits are the defaults (a manifest is read up to ``max(max_files, 100,000)`` entries).

        Args:
            workspace: The workspace directory (must exist).
            store_dir: The store directory (must be a wsnapshot store already), or an
                ``s3://`` URL (a reader never takes the store over from its writer).
            state_dir: As for the constructor (``s3://`` only).

        Returns:
            The read-only store.

        Raises:
            StoreConfigError: A directory is missing, overlapping or not a wsnapshot store.
        """
        store = cls.__new__(cls)
        store._open(
            workspace,
            store_dir,
            Limits(DEFAULT_MAX_BYTES, DEFAULT_MAX_FILES, DEFAULT_STORE_MAX_BYTES, 1),
            read_only=True,
            state_dir=state_dir,
        )
        return store

    def _open(
        self,
        workspace: str | os.PathLike[str],
        store_dir: str | os.PathLike[str],
        limits: Limits,
        *,
        read_only: bool = False,
        state_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self._limits = limits
        self._ws = SafeWorkspace(workspace)
        location = os.fspath(store_dir)
        if location.startswith(S3_SCHEME):
            self._files, self._blobs = _open_s3(
                self._ws.root, location, state_dir, self._limits, read_only=read_only
            )
        else:
            if state_dir is not None:
                raise ValueError("state_dir is for s3:// stores (a local store keeps its own)")
            self._files = StoreDir(
                self._ws.root, location, get_ops(), self._limits, read_only=read_only
            )
            self._blobs = BlobStore(self._files)
        self._capture = Capture(self._files, self._blobs, self._ws)
        self._restorer = Restorer(self._files, self._blobs, self._capture, self._ws)
        self._records = Records(self._files, self._blobs)
        if read_only:
            return
        with self._files.locked(blocking=False) as got:
            if got:
                try:
                    self._recover()
                except OSError as exc:  # the store's disk fails: open anyway, retried later
                    log.error("cannot complete pending work in %s: %s", self.store_dir, exc)

    @property
    def max_bytes(self) -> int:
        """Largest snapshot content accepted, in bytes (may be changed)."""
        return self._limits.max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        self._limits.max_bytes = value

    @property
    def max_files(self) -> int:
        """Most entries (files, directories, symlinks) in one snapshot (may be changed)."""
        return self._limits.max_files

    @max_files.setter
    def max_files(self, value: int) -> None:
        self._limits.max_files = value

    @property
    def store_max_bytes(self) -> int:
        """Store-wide quota of blob bytes (may be changed)."""
        return self._limits.store_max_bytes

    @store_max_bytes.setter
    def store_max_bytes(self, value: int) -> None:
        self._limits.store_max_bytes = value

    @property
    def _ops(self) -> Ops:
        """The system calls the store makes (the workspace accessor has its own ``_ops``)."""
        return self._files.ops

    @_ops.setter
    def _ops(self, ops: Ops) -> None:
        self._files.ops = ops

    @property
    def workspace(self) -> SafeWorkspace:
        """The safe accessor of the workspace this store snapshots."""
        return self._ws

    @property
    def store_dir(self) -> str:
        """Absolute path of the store directory, or the ``s3://BUCKET/PREFIX`` URL."""
        return self._files.location

    @property
    def backend(self) -> str:
        """Where the snapshots are kept: ``"local"`` (a directory) or ``"s3"``."""
        return self._files.backend_name

    @property
    def bucket(self) -> str | None:
        """The bucket of an ``s3://`` store (``None`` for a local one)."""
        return self._files.bucket

    @property
    def served_elsewhere(self) -> str | None:
        """Why this store saves nothing more, or ``None`` while it is the writer.

        Set once another writer took the ``s3://`` store over (found by any call, or by
        :meth:`check_fence`): the sentence of
        :class:`~wsnapshot.exceptions.WorkspaceServedElsewhere`, which every later call
        raises. Always ``None`` for a local store and for a read-only one.
        """
        return self._files.lost_reason()

    def check_fence(self) -> None:
        """Check now, with one request, that no other writer took the ``s3://`` store over.

        Nothing to check on a local store (one machine's, serialised by ``flock``).

        Raises:
            WorkspaceServedElsewhere: Another writer took over (:attr:`served_elsewhere` is
                set from now on).
            StoreUnavailable: The bucket cannot be reached.
        """
        if not self._files.read_only:
            self._files.check_fence()

    def mirror_for_reader(
        self, snapshot_ids: Iterable[str]
    ) -> contextlib.AbstractContextManager[str]:
        """A local store directory holding the manifests ``snapshot_ids``, for a reader.

        A process without network opens it with :meth:`open_read_only`. A local store
        yields its own directory. An ``s3://`` store copies those manifests into its state
        directory for the duration of the block (``diff`` needs nothing else; reading a blob
        there fails with ``CorruptSnapshot``). One block at a time per store.

        Args:
            snapshot_ids: UUIDs.

        Returns:
            A context manager yielding the directory's path.

        Raises:
            InvalidSnapshotId: An id is not a UUID.
            SnapshotNotFound, CorruptSnapshot, StoreUnavailable: Reading a manifest failed.
        """
        return self._files.mirrored([check_id(sid) for sid in snapshot_ids])

    # -- the inconsistent state -------------------------------------------------------------------

    @property
    def inconsistent(self) -> str | None:
        """Why the workspace may be half restored, or ``None`` when it is sound.

        Set when a restore fails on an error that cannot be repaired (``EIO``, ``ENOSPC``,
        ``EROFS``...) after it started changing the workspace, or when completing an
        interrupted restore at open fails (its journal is then set aside as
        ``restore.journal.<time>.failed``). While set, :meth:`create` raises
        :class:`~wsnapshot.exceptions.WorkspaceInconsistent`; every read, ``delete``, ``export``
        and ``import_`` work. A successful :meth:`restore` clears it (that is the remedy), and so
        does :meth:`clear_inconsistent` after a repair by hand. A server should also refuse to
        run code in the workspace while it is set.

        Returns:
            A sentence naming the snapshot, the error and the time, or ``None``.
        """
        got = self._restorer.inconsistent()
        return None if got is None else got[1]

    def clear_inconsistent(self) -> bool:
        """Forget the inconsistent state (an operator repaired the workspace by hand).

        Journals set aside are kept. Takes the writers' lock.

        Returns:
            Whether the workspace was marked inconsistent.
        """
        with self._locked():
            return self._restorer.clear_inconsistent()

    # -- lock and recovery ------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, *, blocking: bool = True) -> Iterator[bool]:
        with self._files.locked(blocking=blocking) as got:
            yield got

    def _recover(self) -> None:
        """Finish what a crashed writer left: a restore journal, unreferenced blobs, temp files."""
        self._restorer.roll_forward()
        if self._blobs.gc_pending():
            self._blobs.gc()
        self._files.remove_stray_tmp()

    # -- public API: read side --------------------------------------------------------------------

    def list(self) -> builtins.list[SnapshotInfo]:
        """List stored snapshots, oldest first, reading manifests only (never blob content).

        Manifests that fail validation are left out and logged (logger ``wsnapshot``).

        Returns:
            One :class:`SnapshotInfo` per snapshot.
        """
        # One manifest in memory at a time: a store may hold many of 100,000 entries each.
        infos = []
        for m in self._files.iter_manifests([]):
            infos.append((order(m), m.info()))
            del m  # not held while the next one loads
        infos.sort(key=lambda pair: pair[0])
        return [info for _, info in infos]

    def get(self, snapshot_id: str) -> Snapshot:
        """Read one snapshot's manifest.

        Args:
            snapshot_id: A UUID.

        Returns:
            The info plus the registry, sorted by path.

        Raises:
            InvalidSnapshotId: Not a UUID.
            SnapshotNotFound: No such snapshot.
            CorruptSnapshot: The manifest fails validation.
        """
        m = self._files.load(check_id(snapshot_id))
        return Snapshot(m.info(), tuple(m.entries[p] for p in sorted(m.entries)))

    # -- create -----------------------------------------------------------------------------------

    def create(self, description: str = "") -> SnapshotInfo:
        """Snapshot the workspace.

        Symlinks are recorded as links when they provably resolve inside the workspace; links
        pointing outside, special files, names that are not valid UTF-8 and unreadable entries
        are skipped and listed in ``SnapshotInfo.skipped``. Only files whose stat key (size,
        mtime_ns, ctime_ns, inode, device) differs from the newest snapshot are read and hashed.

        Args:
            description: Free text (at most 4096 characters).

        Returns:
            The new snapshot's info (``new_bytes`` = blob bytes it added to the store).

        Raises:
            SnapshotTooLarge: More than ``max_files`` entries or ``max_bytes`` bytes.
            QuotaExceeded: The new blobs would pass ``store_max_bytes``.
            WorkspaceInconsistent: A restore failed (:attr:`inconsistent`); the error names it
                and the remedy.
            ValueError: ``description`` is not a string or is too long.
        """
        _check_description(description)
        with self._locked():
            self._recover()
            bad = self._restorer.inconsistent()
            if bad is not None:
                raise WorkspaceInconsistent(bad[0], bad[1])
            return self._capture.create_locked(description)

    # -- restore ----------------------------------------------------------------------------------

    def restore(self, snapshot_id: str) -> RestoreReport:
        """Return the workspace to a snapshot, exactly.

        In this order (the seed's): files not in the snapshot are deleted, files whose SHA-256
        differs are rewritten, missing ones recreated, then every mtime (ns) and mode (masked
        to 0o777) is set; directories are created and removed to match, and their modes and
        mtimes set last, deepest first. Entries that already match are not touched. Every blob
        needed is verified against its SHA-256 *before* the workspace is changed; then an intent
        journal is written, so a crash mid-way is completed when the store is next opened.
        Nothing is ever written through a symlink: files are replaced by renaming a new file
        over them.

        What a run can leave is repaired: directories the server owns but cannot list or search
        (``mkdir(mode=0o300)``, ``0o000``...) get the owner's ``rwx`` back, through an
        ``O_PATH`` descriptor checked for type and owner, before the plan is made (the journal
        is written first in that case); trees of any depth are removed iteratively with at most
        32 directory descriptors open. A successful restore clears :attr:`inconsistent`.

        Precondition: no process that can write the workspace (a run's) is running; the caller
        guarantees it, with pysandbox's ``Sandbox.exclusive()`` for instance (it waits for the
        runs, stops the parked long-lived processes; the README shows it). The descriptor
        checks keep a violation from reaching outside the workspace, but modes could be
        changed under a running process.

        Args:
            snapshot_id: A UUID.

        Returns:
            What was done, path by path.

        Raises:
            InvalidSnapshotId: Not a UUID.
            SnapshotNotFound: No such snapshot.
            CorruptSnapshot: Its manifest or a blob it needs fails validation (the workspace is
                left untouched).
            WorkspaceLimitError: The workspace holds more than a million entries.
            OSError: A failure that cannot be repaired (``EIO``, ``ENOSPC``, ``EROFS``...); if the
                workspace was already being changed it is marked :attr:`inconsistent` and the
                journal kept, so the next open completes the restore (or sets it aside).
        """
        sid = check_id(snapshot_id)
        with self._locked():
            self._recover()
            return self._restorer.restore_locked(sid, journal_written=False)

    # -- delete -----------------------------------------------------------------------------------

    def delete(self, snapshot_id: str) -> None:
        """Delete a snapshot and the blobs no other snapshot uses.

        The manifest is removed first (atomically); blobs are removed afterwards, and only when
        no remaining manifest names them, so a crash at any point leaves every listed snapshot
        complete (unreferenced blobs left by a crash are collected on the next open).

        Args:
            snapshot_id: A UUID.

        Raises:
            InvalidSnapshotId: Not a UUID.
            SnapshotNotFound: No such snapshot.
        """
        sid = check_id(snapshot_id)
        files = self._files
        with self._locked():
            self._recover()
            if not files.has_manifest(sid):
                raise SnapshotNotFound(sid)
            try:
                drop: set[str] | None = {
                    e.sha256 for e in files.load(sid).entries.values() if e.sha256 is not None
                }
            except CorruptSnapshot:
                drop = None  # unknown references: sweep every blob no manifest names
            self._blobs.mark_gc()
            files.remove_manifest(sid)
            self._capture.forget(sid)
            self._blobs.forget_usage()
            self._blobs.gc(drop)

    # -- garbage collection -----------------------------------------------------------------------

    def collect_garbage(
        self,
        *,
        lease_seconds: float | None = None,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> GcReport:
        """Delete the blobs no snapshot names (mark and sweep).

        A local store does it under the writers' lock. An ``s3://`` store does it under a
        lease (``gc/lease-<n>.json``, created create-only): writers of the prefix commit
        nothing while it is live (they raise :class:`~wsnapshot.exceptions.StoreBusy`), only
        blobs named by no manifest *and* older than the lease's start are deleted, and a
        writer checks its blobs again around its commit, so no manifest names a missing blob.
        Collecting takes no fence: a store opened with :meth:`open_read_only` may collect
        (another machine than the writer's), and so may the writer's own store.

        Args:
            lease_seconds: ``s3://`` only: how long the lease lasts, in seconds (default
                ``GC_LEASE_S``, 120); a collector killed meanwhile keeps writers waiting at most
                this long.
            clock: ``s3://`` only: epoch seconds (default ``time.time``; tests inject theirs).
            sleep: ``s3://`` only: waits that many seconds (default ``time.sleep``).

        Returns:
            Blobs and bytes kept and deleted.

        Raises:
            StoreBusy: Another collection holds the lease.
            GcLeaseLost: The lease expired or was taken over while deleting (run it again).
            StoreUnavailable: The bucket cannot be reached.
            WorkspaceServedElsewhere: This writer lost the fence.
        """
        if self._files.backend_name == "local":
            with self._locked():
                self._recover()
                return self._blobs.collect()
        from wsnapshot import _gc, _s3

        files, blobs = self._files, self._blobs
        if not isinstance(files, _s3.S3StoreDir) or not isinstance(blobs, _s3.S3BlobStore):
            raise TypeError("an s3:// store without its S3 backend")  # not reached
        files.check_serving()
        options: dict[str, Any] = {"lease_seconds": lease_seconds or _s3.GC_LEASE_S}
        if clock is not None:
            options["clock"] = clock
        if sleep is not None:
            options["sleep"] = sleep
        if files.read_only:
            return _gc.collect(files, blobs, **options)
        with self._locked():
            return _gc.collect(files, blobs, **options)

    # -- diff -------------------------------------------------------------------------------------

    def diff(self, a: str, b: str | None = None) -> Diff:
        """Compare two snapshots, or a snapshot and the current workspace.

        Args:
            a: The older snapshot's UUID.
            b: The newer snapshot's UUID, or ``None`` for the workspace as it is now (entries
                that would be skipped by ``create`` are left out).

        Returns:
            Added, removed, modified (content, link target or kind) and metadata-changed paths.

        Raises:
            InvalidSnapshotId: Not a UUID.
            SnapshotNotFound: No such snapshot.
            CorruptSnapshot: A manifest fails validation.
        """
        ma = self._files.load(check_id(a))
        eb: dict[str, FileRecord]
        if b is not None:
            other = check_id(b)
            eb = self._files.load(other).entries
            bid: str | None = other
        else:
            bid = None
            eb = self._capture.workspace_records(ma)
        ea = ma.entries
        added = sorted(set(eb) - set(ea))
        removed = sorted(set(ea) - set(eb))
        modified: builtins.list[str] = []
        meta: builtins.list[str] = []
        for path in sorted(set(ea) & set(eb)):
            x, y = ea[path], eb[path]
            if x.kind != y.kind or x.size != y.size or x.sha256 != y.sha256 or x.target != y.target:
                modified.append(path)
            elif x.mode != y.mode or x.mtime_ns != y.mtime_ns:
                meta.append(path)
        return Diff(ma.id, bid, tuple(added), tuple(removed), tuple(modified), tuple(meta))

    # -- export / import --------------------------------------------------------------------------

    def export_size(self, snapshot_id: str) -> int:
        """Exact size in bytes of the streamed record (:meth:`export_chunks`), from the manifest.

        No blob is read: callers decide from it whether to stream, chunk or refuse.

        Args:
            snapshot_id: A UUID.

        Returns:
            The byte length of the compact UTF-8 JSON record with every content in Base64.

        Raises:
            InvalidSnapshotId: Not a UUID.
            SnapshotNotFound: No such snapshot.
            CorruptSnapshot: The manifest fails validation.
        """
        return self._records.size(check_id(snapshot_id))

    def export_chunks(self, snapshot_id: str) -> Iterator[bytes]:
        """The export record as compact UTF-8 JSON bytes, a bounded piece at a time.

        The same record as :meth:`export` (importable by :meth:`import_` once parsed), except
        that every content is Base64 so that its size is known beforehand
        (:meth:`export_size`, exactly the sum of the pieces' lengths). Pieces are about 256 KiB;
        memory does not grow with the snapshot. Blobs are read (and verified) only as the
        iterator is consumed; the store's lock is not held (blobs a manifest names are never
        removed while it exists, but deleting the snapshot meanwhile makes a later blob read
        fail with ``CorruptSnapshot``).

        Args:
            snapshot_id: A UUID.

        Returns:
            An iterator of ``bytes``.

        Raises:
            InvalidSnapshotId: Not a UUID.
            SnapshotNotFound: No such snapshot (raised here, before iterating).
            CorruptSnapshot: The manifest fails (here) or a blob does (while iterating: the
                bytes already produced are then not a valid record and must be discarded).
        """
        return self._records.chunks(check_id(snapshot_id))

    def export_range(self, snapshot_id: str, offset: int, length: int) -> bytes:
        """Bytes ``[offset, offset + length)`` of :meth:`export_chunks`'s record.

        Random access for a reader that fetches the record in pieces (a server answering
        chunk ``k`` of an export): only the blobs overlapping the range are read, and of a
        large blob only the part needed. A blob read whole is verified against its SHA-256; a
        part of one is checked by the blob's size (every file entry of the record carries its
        SHA-256, for the reader to check the assembled file). Past the end the result is
        shorter (empty beyond :meth:`export_size`).

        Args:
            snapshot_id: A UUID.
            offset: First byte, from 0.
            length: Bytes wanted, at most 16 MiB.

        Returns:
            The bytes.

        Raises:
            InvalidSnapshotId: Not a UUID.
            SnapshotNotFound: No such snapshot.
            CorruptSnapshot: The manifest or an overlapping blob fails validation.
            ValueError: A negative offset or length, or a length over 16 MiB.
        """
        return self._records.range(check_id(snapshot_id), offset, length)

    def export_to(self, snapshot_id: str, out: BinaryIO) -> int:
        """Write :meth:`export_chunks`'s record to the binary file object ``out``.

        Args:
            snapshot_id: A UUID.
            out: Anything with ``write(bytes)``.

        Returns:
            Bytes written (equal to :meth:`export_size`).

        Raises:
            InvalidSnapshotId, SnapshotNotFound, CorruptSnapshot: As :meth:`export_chunks`.
            OSError: Writing to ``out`` failed.
        """
        return self._records.write_to(check_id(snapshot_id), out)

    def export(self, snapshot_id: str, *, max_size: int | None = None) -> dict[str, Any]:
        """A self-contained JSON record of a snapshot (the seed's format), content inline.

        Each file entry carries ``encoding`` (``"utf-8"`` when the content decodes as UTF-8,
        otherwise ``"base64"``, RFC 4648) and ``content``. Every blob is verified while read.
        The whole record is built in memory: meant for small snapshots; give ``max_size`` (or
        use :meth:`export_size`) and stream larger ones (:meth:`export_chunks`).

        Args:
            snapshot_id: A UUID.
            max_size: Refuse with :class:`~wsnapshot.exceptions.ExportTooLarge`, before any
                blob is read, when :meth:`export_size` passes this many bytes (``None``: no
                check).

        Returns:
            ``{"format": 1, "kind": "wsnapshot-export", "id", "created_at", "description",
            "files": {path: {...}}}``.

        Raises:
            InvalidSnapshotId: Not a UUID.
            SnapshotNotFound: No such snapshot.
            CorruptSnapshot: The manifest or a blob fails validation.
            ExportTooLarge: Past ``max_size``.
        """
        return self._records.export(check_id(snapshot_id), max_size)

    def import_from(self, fileobj: BinaryIO) -> SnapshotInfo:
        """Store a record read from a binary file (as written by :meth:`export_to`), streaming.

        Memory holds the record's entries, never a content: each content string is decoded to
        a staging file as it is read and checked against its size and SHA-256; the record is
        validated completely (as :meth:`import_` does) before a blob or manifest is stored.
        The writers' lock is held while the file is read.

        Args:
            fileobj: Anything with ``read(n) -> bytes``; UTF-8 JSON.

        Returns:
            The new snapshot's info.

        Raises:
            InvalidRecord: Malformed JSON (the byte offset is named) or record.
            SnapshotExists: Its id is already stored.
            SnapshotTooLarge: Past ``max_files`` or ``max_bytes`` (found while reading).
            QuotaExceeded: Its new blobs would pass ``store_max_bytes``.
        """
        with self._locked():
            self._recover()
            rec = self._records.parse_stream(fileobj)
            try:
                return self._records.store_locked(rec)
            finally:
                for tmp, _size in rec.staged.values():  # left only when not stored
                    self._files.unlink(tmp)

    def import_(self, record: object) -> SnapshotInfo:
        """Store a record made by :meth:`export` (possibly by another store) as a snapshot.

        The record is validated completely (paths, kinds, sizes, modes, link targets, that
        every content decodes and matches its size and SHA-256, the limits) before anything is
        written. Missing parent directories are added (mode 0o755). The record's id is kept.

        Args:
            record: The parsed JSON record.

        Returns:
            The imported snapshot's info.

        Raises:
            InvalidRecord: The record is malformed.
            SnapshotTooLarge: It passes ``max_files`` or ``max_bytes``.
            SnapshotExists: A snapshot with its id is already stored.
            QuotaExceeded: Its new blobs would pass ``store_max_bytes``.
        """
        parsed = self._records.parse(record)
        with self._locked():
            self._recover()
            return self._records.store_locked(parsed)
