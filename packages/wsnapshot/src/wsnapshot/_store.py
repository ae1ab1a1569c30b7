"""The snapshot store: manifests, content-addressed blobs, journalled restore."""

# File-descriptor and dir_fd= system calls have no pathlib equivalent:
# ruff: noqa: PTH100,PTH102,PTH103,PTH110,PTH112,PTH118,PTH208

from __future__ import annotations

import base64
import binascii
import builtins
import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from wsnapshot._fsio import O_DIRFLAGS, Ops, get_ops
from wsnapshot._manifest import (
    EXPORT_KIND,
    FORMAT,
    MAX_DESCRIPTION,
    Manifest,
    check_id,
    now_iso,
    parse_entries,
    parse_header,
    parse_manifest,
    parse_time,
    symlink_problem,
)
from wsnapshot.exceptions import (
    CorruptSnapshot,
    InvalidRecord,
    QuotaExceeded,
    SnapshotError,
    SnapshotExists,
    SnapshotNotFound,
    SnapshotTooLarge,
    StoreConfigError,
    UnsafePathError,
    WorkspaceLimitError,
)
from wsnapshot.snapshot import (
    Diff,
    FileRecord,
    RestoreReport,
    SkippedEntry,
    Snapshot,
    SnapshotInfo,
)
from wsnapshot.workspace import (
    KIND_DIR,
    KIND_FILE,
    KIND_SYMLINK,
    SafeWorkspace,
    WalkEntry,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_FILES",
    "DEFAULT_STORE_MAX_BYTES",
    "SnapshotStore",
]

log = logging.getLogger("wsnapshot")

#: Default cap of one snapshot's content (1 GiB).
DEFAULT_MAX_BYTES = 1 << 30
#: Default cap of one snapshot's entries (files, directories and symlinks).
DEFAULT_MAX_FILES = 100_000
#: Default store-wide quota of blob bytes (10 GiB).
DEFAULT_STORE_MAX_BYTES = 10 << 30

_CHUNK = 1024 * 1024
#: Up to this many new blobs are fsynced one by one; larger batches are flushed with syncfs(2).
_FSYNC_EACH_MAX = 32
_MAX_MANIFEST_BYTES = 256 * 1024 * 1024
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_JOURNAL = "restore.journal"
_GC_MARK = "gc.pending"
_STORE_MARK = "wsnapshot-store.json"
_OWN_NAMES = frozenset({"snapshots", "blobs", "tmp", "lock", _JOURNAL, _GC_MARK, _STORE_MARK})
_RESERVED_PREFIX = ".wsnapshot-"
#: A file whose ctime is this close to "now" may still change without its stat key changing
#: (timestamps have a granularity); its hash is not remembered for incremental snapshots.
_RACY_NS = 100_000_000
_RACY_COARSE_NS = 2_000_000_000

Key = tuple[int, int, int, int, int]


def _key(st: os.stat_result) -> Key:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def _racy(st: os.stat_result, now_ns: int) -> bool:
    window = _RACY_COARSE_NS if st.st_ctime_ns % 1_000_000_000 == 0 else _RACY_NS
    return now_ns - st.st_ctime_ns < window


def _utf8(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(path: str) -> str:
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _parts(path: str) -> tuple[str, ...]:
    return tuple(path.split("/")) if path else ()


def _check_description(description: object) -> None:
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        raise ValueError(f"description must be a string of at most {MAX_DESCRIPTION} characters")


@dataclass
class _Plan:
    delete_files: list[str] = field(default_factory=list)
    delete_dirs: list[str] = field(default_factory=list)
    create_dirs: list[str] = field(default_factory=list)
    rewrite: list[str] = field(default_factory=list)
    recreate: list[str] = field(default_factory=list)
    metadata: list[str] = field(default_factory=list)
    loosen_dirs: list[tuple[str, int]] = field(default_factory=list)
    unchanged: int = 0


@dataclass
class _Ingested:
    sha: str
    size: int
    st: os.stat_result
    stable: bool


class SnapshotStore:
    """Content-addressed, crash-safe snapshots of one workspace directory.

    Store layout (``store_dir``)::

        wsnapshot-store.json    format marker
        lock                    flock(2) serialising writers
        snapshots/<uuid>.json   one manifest per snapshot (written atomically)
        blobs/ab/cdef...        file contents by SHA-256 (written atomically, verified on read)
        tmp/                    staging area for blobs being written
        restore.journal         intent journal of a restore in progress
        gc.pending              marker: unreferenced blobs may exist

    Every file of the store is written to a temporary file, fsynced, renamed, and its directory
    fsynced. Writers (``create``, ``restore``, ``delete``, ``import_``) hold an exclusive
    ``flock`` on ``lock``, so several processes may share a store. Pending work of a crashed
    writer (a restore journal, unreferenced blobs) is completed when the store is opened and
    before every write.

    Args:
        workspace: The workspace directory (must exist).
        store_dir: The store directory (created with mode 0o700 if missing). It must not be
            inside the workspace, nor contain it.
        max_bytes: Largest snapshot content accepted, in bytes (default 1 GiB).
        max_files: Most entries (files, directories, symlinks) in one snapshot (default 100,000).
        store_max_bytes: Store-wide quota of blob bytes (default 10 GiB).
        workers: Threads hashing files during ``create`` (default ``min(4, cpu_count)``).

    Raises:
        StoreConfigError: A directory is missing, overlapping or not a wsnapshot store.
        ValueError: A limit is not a positive integer.
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
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.store_max_bytes = store_max_bytes
        self._workers = workers
        self._ws = SafeWorkspace(workspace)
        self._ops: Ops = get_ops()
        self._cache: tuple[str, dict[str, tuple[Key, FileRecord]]] | None = None
        self._usage_cache: tuple[tuple[str, ...], int] | None = None
        self._subdirs: set[str] | None = None
        self._dir = self._prepare_store(os.fspath(store_dir))
        self._snapdir = os.path.join(self._dir, "snapshots")
        self._blobdir = os.path.join(self._dir, "blobs")
        self._tmpdir = os.path.join(self._dir, "tmp")
        with self._locked(blocking=False) as got:
            if got:
                self._recover()

    # -- set-up -----------------------------------------------------------------------------------

    def _prepare_store(self, store_dir: str) -> str:
        ws = self._ws.root
        absolute = os.path.abspath(store_dir)
        if not os.path.lexists(absolute):
            os.makedirs(absolute, mode=0o700, exist_ok=True)
        real = os.path.realpath(absolute)
        if not os.path.isdir(real):
            raise StoreConfigError(store_dir, "store is not a directory")
        if real == ws or real.startswith(ws + os.sep) or ws.startswith(real + os.sep):
            raise StoreConfigError(
                store_dir,
                f"store and workspace {ws!r} overlap (code in the workspace could edit it)",
            )
        mark = os.path.join(real, _STORE_MARK)
        if not os.path.exists(mark):
            foreign = sorted(
                name
                for name in set(os.listdir(real)) - _OWN_NAMES
                if not (name.startswith(".") and name.endswith(".tmp"))  # a crash of this step
            )
            if foreign:
                raise StoreConfigError(
                    store_dir, f"not a wsnapshot store and not empty (contains {foreign[:3]})"
                )
            self._write_file(real, _STORE_MARK, json.dumps({"format": FORMAT}).encode())
        for sub in ("snapshots", "blobs", "tmp"):
            with contextlib.suppress(FileExistsError):
                os.mkdir(os.path.join(real, sub), 0o700)
        return real

    @property
    def workspace(self) -> SafeWorkspace:
        """The safe accessor of the workspace this store snapshots."""
        return self._ws

    @property
    def store_dir(self) -> str:
        """Absolute path of the store directory."""
        return self._dir

    # -- store-file primitives --------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, *, blocking: bool = True) -> Iterator[bool]:
        fd = os.open(os.path.join(self._dir, "lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _fsync_dir(self, path: str) -> None:
        ops = self._ops
        fd = ops.open(path, O_DIRFLAGS)
        try:
            ops.fsync(fd)
        finally:
            ops.close(fd)

    def _write_file(self, directory: str, name: str, data: bytes) -> None:
        """Atomically write ``directory/name``: temporary file, fsync, rename, directory fsync."""
        ops = self._ops
        dfd = ops.open(directory, O_DIRFLAGS)
        try:
            tmp = f".{uuid.uuid4().hex}.tmp"
            fd = ops.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW, 0o600, dir_fd=dfd
            )
            try:
                try:
                    view = memoryview(data)
                    while view:
                        view = view[ops.write(fd, view) :]
                    ops.fsync(fd)
                finally:
                    ops.close(fd)
                ops.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                with contextlib.suppress(OSError):
                    ops.unlink(tmp, dir_fd=dfd)
                raise
            ops.fsync(dfd)
        finally:
            ops.close(dfd)

    def _read_file(self, path: str, limit: int) -> bytes:
        ops = self._ops
        fd = ops.open(path, os.O_RDONLY | _O_NOFOLLOW)
        try:
            st = ops.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise OSError(errno.EINVAL, "not a regular file", path)
            if st.st_size > limit:
                raise OSError(errno.EFBIG, f"larger than {limit} bytes", path)
            chunks = []
            total = 0
            while True:
                b = ops.read(fd, _CHUNK)
                if not b:
                    break
                total += len(b)
                if total > limit:
                    raise OSError(errno.EFBIG, f"larger than {limit} bytes", path)
                chunks.append(b)
            return b"".join(chunks)
        finally:
            ops.close(fd)

    def _unlink(self, path: str, *, missing_ok: bool = True) -> None:
        try:
            self._ops.unlink(path)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def _blob_path(self, sha: str) -> str:
        return os.path.join(self._blobdir, sha[:2], sha[2:])

    def _blob_exists(self, sha: str) -> bool:
        try:
            self._ops.lstat(self._blob_path(sha))
        except FileNotFoundError:
            return False
        return True

    def _manifest_path(self, sid: str) -> str:
        return os.path.join(self._snapdir, f"{sid}.json")

    # -- manifests --------------------------------------------------------------------------------

    def _load(self, sid: str) -> Manifest:
        path = self._manifest_path(sid)
        try:
            raw = self._read_file(path, _MAX_MANIFEST_BYTES)
        except FileNotFoundError:
            raise SnapshotNotFound(sid) from None
        except OSError as exc:
            raise CorruptSnapshot(sid, path, f"cannot read manifest: {exc.strerror}") from None

        def fail(where: str, reason: str) -> SnapshotError:
            return CorruptSnapshot(sid, f"manifest{where}", reason)

        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise CorruptSnapshot(sid, "manifest", f"not valid JSON: {exc}") from None
        m = parse_manifest(doc, fail, max_entries=max(self.max_files, DEFAULT_MAX_FILES))
        if m.id != sid:
            raise CorruptSnapshot(sid, "manifest/id", f"names snapshot {m.id}, not its file name")
        return m

    def _snapshot_ids(self) -> builtins.list[str]:
        out = []
        for name in self._ops.listdir(self._snapdir):
            if name.endswith(".json"):
                try:
                    out.append(check_id(name[:-5]))
                except SnapshotError:
                    continue
        return out

    def _manifests(self) -> tuple[builtins.list[Manifest], builtins.list[str]]:
        good: builtins.list[Manifest] = []
        bad: builtins.list[str] = []
        for sid in self._snapshot_ids():
            try:
                good.append(self._load(sid))
            except SnapshotNotFound:
                continue  # deleted while we listed
            except CorruptSnapshot as exc:
                log.warning("skipping %s", exc)
                bad.append(sid)
        good.sort(key=lambda m: (parse_time(m.created_at), m.id))
        return good, bad

    def _save_manifest(self, m: Manifest) -> None:
        data = json.dumps(m.to_json(), ensure_ascii=False, separators=(",", ":")).encode()
        self._write_file(self._snapdir, f"{m.id}.json", data)

    # -- recovery and garbage collection ----------------------------------------------------------

    def _recover(self) -> None:
        """Finish what a crashed writer left: a restore journal, unreferenced blobs, temp files."""
        jpath = os.path.join(self._dir, _JOURNAL)
        sid: str | None = None
        try:
            raw = self._read_file(jpath, 4096)
        except FileNotFoundError:
            raw = None
        if raw is not None:
            try:
                doc = json.loads(raw)
                sid = check_id(doc["snapshot_id"])
            except (ValueError, KeyError, TypeError, SnapshotError):
                log.error("discarding unreadable restore journal %s", jpath)
                self._unlink(jpath)
                self._fsync_dir(self._dir)
        if sid is not None:
            try:
                self._restore_locked(sid, journal_written=True)
            except (SnapshotNotFound, CorruptSnapshot) as exc:
                log.error("cannot complete the interrupted restore of %s: %s", sid, exc)
                self._unlink(jpath)
                self._fsync_dir(self._dir)
        if os.path.lexists(os.path.join(self._dir, _GC_MARK)) or self._ops.listdir(self._tmpdir):
            self._gc()
        for name in self._ops.listdir(self._snapdir):
            if name.endswith(".tmp"):
                self._unlink(os.path.join(self._snapdir, name))
        for name in self._ops.listdir(self._dir):
            if name.endswith(".tmp"):
                self._unlink(os.path.join(self._dir, name))

    def _mark_gc(self) -> None:
        """Durably create the (empty) marker saying unreferenced blobs may exist."""
        path = os.path.join(self._dir, _GC_MARK)
        if os.path.lexists(path):
            return
        self._ops.close(self._ops.open(path, os.O_WRONLY | os.O_CREAT | _O_NOFOLLOW, 0o600))
        self._fsync_dir(self._dir)

    def _gc(self, drop: set[str] | None = None) -> None:
        """Remove blobs no manifest names (and staging files), then the gc marker.

        A blob is removed only after every manifest on disk was read: if one cannot be read, no
        blob is removed at all.
        """
        for name in self._ops.listdir(self._tmpdir):
            self._unlink(os.path.join(self._tmpdir, name))
        manifests, bad = self._manifests()
        if not bad:
            used = {e.sha256 for m in manifests for e in m.entries.values() if e.kind == "file"}
            if drop is not None:
                victims = [s for s in drop if s not in used]
            else:
                victims = [s for s in self._all_blobs() if s not in used]
            touched = set()
            for sha in victims:
                self._unlink(self._blob_path(sha))
                touched.add(sha[:2])
            for sub in sorted(touched):
                self._fsync_dir(os.path.join(self._blobdir, sub))
            self._unlink(os.path.join(self._dir, _GC_MARK))
        else:
            # Keep the marker: collection is retried on the next open.
            log.warning("unreadable manifests %s: no blob removed", bad)

    def _all_blobs(self) -> Iterator[str]:
        for sub in self._ops.listdir(self._blobdir):
            if len(sub) != 2:
                continue
            for rest in self._ops.listdir(os.path.join(self._blobdir, sub)):
                if len(rest) == 62:
                    yield sub + rest

    def _rollback(self, sid: str, new_blobs: Iterable[str]) -> None:
        """Undo a failed create/import: its manifest (if it got renamed in), then its new blobs.

        If undoing fails too, the gc marker stays and the next open collects what is left.
        """
        path = self._manifest_path(sid)
        try:
            if os.path.lexists(path):
                self._unlink(path)
                self._fsync_dir(self._snapdir)
            for sha in new_blobs:
                self._unlink(self._blob_path(sha))
        except OSError:
            log.warning("could not undo the failed snapshot %s; collected on next open", sid)

    def _blob_usage(self) -> int:
        total = 0
        for sha in self._all_blobs():
            with contextlib.suppress(FileNotFoundError):
                total += self._ops.lstat(self._blob_path(sha)).st_size
        return total

    # -- blobs ------------------------------------------------------------------------------------

    def _read_blob(self, sha: str, size: int, sid: str | None) -> bytes:
        path = self._blob_path(sha)
        try:
            data = self._read_file(path, size)
        except FileNotFoundError:
            raise CorruptSnapshot(sid, path, "blob is missing") from None
        except OSError as exc:
            raise CorruptSnapshot(sid, path, f"cannot read blob: {exc.strerror}") from None
        if len(data) != size or hashlib.sha256(data).hexdigest() != sha:
            raise CorruptSnapshot(sid, path, "blob content does not match its SHA-256")
        return data

    def _stream_blob(
        self,
        sha: str,
        size: int,
        sid: str | None,
        write: Callable[[bytes], object] | None = None,
    ) -> None:
        """Read blob ``sha`` in chunks, handing each to ``write`` (when given), and check it.

        Raises:
            CorruptSnapshot: The blob is missing, or is not ``size`` bytes whose SHA-256 is
                ``sha``. Chunks already handed to ``write`` are then not to be trusted.
        """
        ops = self._ops
        path = self._blob_path(sha)
        try:
            fd = ops.open(path, os.O_RDONLY | _O_NOFOLLOW)
        except FileNotFoundError:
            raise CorruptSnapshot(sid, path, "blob is missing") from None
        try:
            h = hashlib.sha256()
            total = 0
            while b := ops.read(fd, _CHUNK):
                total += len(b)
                if total > size:
                    break
                h.update(b)
                if write is not None:
                    write(b)
        finally:
            ops.close(fd)
        if total != size or h.hexdigest() != sha:
            raise CorruptSnapshot(sid, path, "blob content does not match its SHA-256")

    def _copy_blob(self, sha: str, size: int, sid: str) -> Callable[[Callable[[Any], None]], None]:
        """Return a producer that streams blob ``sha`` into the ``write`` it is given."""
        return lambda write: self._stream_blob(sha, size, sid, write)

    def _flush(self) -> None:
        """Make everything written to the store so far durable.

        ``syncfs(2)`` on the store's file system: one flush for a whole batch of blobs, which
        gives the guarantee of an ``fsync`` of each file and directory written (``sync(2)``
        where ``syncfs`` is missing). Small batches are fsynced file by file instead, so their
        cost does not depend on what else is being written to the file system.
        """
        ops = self._ops
        fd = ops.open(self._dir, O_DIRFLAGS)
        try:
            ops.syncfs(fd)
        finally:
            ops.close(fd)

    def _new_tmp(self) -> tuple[str, int]:
        tmp = os.path.join(self._tmpdir, uuid.uuid4().hex)
        fd = self._ops.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW, 0o600)
        return tmp, fd

    def _stage_bytes(self, data: bytes) -> str:
        """Write ``data`` to a new staging file (not yet durable); returns its path."""
        tmp, fd = self._new_tmp()
        try:
            try:
                self._write_all(fd, data)
            finally:
                self._ops.close(fd)
        except BaseException:
            self._unlink(tmp)
            raise
        return tmp

    def _usage(self, *, exact: bool = False) -> int:
        """Bytes of blobs in the store (cached while the set of manifests is unchanged)."""
        key = tuple(sorted(self._ops.listdir(self._snapdir)))
        if not exact and self._usage_cache is not None and self._usage_cache[0] == key:
            return self._usage_cache[1]
        used = self._blob_usage()
        self._usage_cache = (key, used)
        return used

    def _commit_blobs(self, staged: dict[str, tuple[str, int]], out: dict[str, int]) -> None:
        """Move staged files into the blob store: quota check, flush, rename each, flush.

        Args:
            staged: sha256 -> (staging path, size). Staging files of blobs already present are
                removed.
            out: Filled with sha256 -> size of every blob renamed into place (for rollback).

        Raises:
            QuotaExceeded: The new blobs would pass ``store_max_bytes`` (nothing is stored).
        """
        new = {}
        for sha, (tmp, size) in staged.items():
            if self._blob_exists(sha):
                self._unlink(tmp)
            else:
                new[sha] = (tmp, size)
        if not new:
            return
        needed = sum(size for _tmp, size in new.values())
        used = self._usage()
        if used + needed > self.store_max_bytes:
            used = self._usage(exact=True)
            if used + needed > self.store_max_bytes:
                raise QuotaExceeded(self.store_max_bytes, used, needed)
        few = len(new) <= _FSYNC_EACH_MAX
        if few:
            for tmp, _size in new.values():
                self._fsync_path(tmp)
        else:
            self._flush()  # the content of every staged blob is durable before any rename
        self._mark_gc()  # from here until the manifest is written, orphan blobs may exist
        new_sub = False
        for sha, (tmp, size) in sorted(new.items()):
            new_sub |= self._commit_blob(tmp, sha)
            out[sha] = size
        if few:
            for sub in sorted({sha[:2] for sha in new}):
                self._fsync_dir(os.path.join(self._blobdir, sub))
            if new_sub:
                self._fsync_dir(self._blobdir)
        else:
            self._flush()  # the renames (and new blobs/<2 hex> directories) are durable

    def _fsync_path(self, path: str) -> None:
        ops = self._ops
        fd = ops.open(path, os.O_RDONLY | _O_NOFOLLOW)
        try:
            ops.fsync(fd)
        finally:
            ops.close(fd)

    def _commit_blob(self, tmp: str, sha: str) -> bool:
        if self._subdirs is None:
            self._subdirs = set(self._ops.listdir(self._blobdir))
        made = False
        if sha[:2] not in self._subdirs:
            with contextlib.suppress(FileExistsError):
                self._ops.mkdir(os.path.join(self._blobdir, sha[:2]), 0o700)
                made = True
            self._subdirs.add(sha[:2])
        self._ops.rename(tmp, self._blob_path(sha))
        return made

    # -- public API: read side --------------------------------------------------------------------

    def list(self) -> builtins.list[SnapshotInfo]:
        """List stored snapshots, oldest first, reading manifests only (never blob content).

        Manifests that fail validation are left out and logged (logger ``wsnapshot``).

        Returns:
            One :class:`SnapshotInfo` per snapshot.
        """
        return [m.info() for m in self._manifests()[0]]

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
        m = self._load(check_id(snapshot_id))
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
            ValueError: ``description`` is not a string or is too long.
        """
        _check_description(description)
        with self._locked():
            self._recover()
            return self._create_locked(description)

    def _hash_cache(self) -> dict[str, tuple[Key, FileRecord]]:
        """Stat keys and records of the newest snapshot, for incremental hashing.

        Every blob a stored manifest names is present (blobs are only collected when no manifest
        names them), so a cache entry is only trusted while its manifest still exists.
        """
        if self._cache is not None and os.path.lexists(self._manifest_path(self._cache[0])):
            return self._cache[1]
        manifests, _ = self._manifests()
        if not manifests:
            return {}
        m = manifests[-1]
        cache = {p: (k, m.entries[p]) for p, k in m.keys.items()}
        self._cache = (m.id, cache)
        return cache

    def _scan_for_create(
        self, root_fd: int
    ) -> tuple[builtins.list[WalkEntry], builtins.list[SkippedEntry]]:
        skipped: builtins.list[SkippedEntry] = []

        def problem(path: str, reason: str) -> None:
            skipped.append(SkippedEntry(_shown(path), reason))

        try:
            walked = self._ws.walk(root_fd, max_entries=self.max_files + 10_000, on_problem=problem)
        except WorkspaceLimitError:
            raise SnapshotTooLarge("max_files", self.max_files, self.max_files + 10_000) from None
        keep: builtins.list[WalkEntry] = []
        bad_dirs: builtins.list[str] = []
        for e in walked:
            path = e.path
            if bad_dirs and any(path.startswith(d) for d in bad_dirs):
                continue
            reason = None
            if not path.isascii() and not _utf8(path):
                reason = "name is not valid UTF-8"
            elif _RESERVED_PREFIX in path and any(
                p.startswith(_RESERVED_PREFIX) for p in path.split("/")
            ):
                reason = f"names starting with {_RESERVED_PREFIX!r} are reserved"
            elif e.kind == KIND_SYMLINK:
                reason = symlink_problem(path, e.target or "")
            elif e.kind not in (KIND_FILE, KIND_DIR):
                reason = "special file (FIFO, socket or device) is not snapshotted"
            if reason is not None:
                skipped.append(SkippedEntry(_shown(path), reason))
                if e.kind == KIND_DIR:
                    bad_dirs.append(path + "/")
                continue
            keep.append(e)
        if len(keep) > self.max_files:
            raise SnapshotTooLarge("max_files", self.max_files, len(keep))
        total = sum(e.st.st_size for e in keep if e.kind == KIND_FILE)
        if total > self.max_bytes:
            raise SnapshotTooLarge("max_bytes", self.max_bytes, total)
        return keep, skipped

    def _create_locked(self, description: str) -> SnapshotInfo:
        root_fd = self._ws.open_root()
        try:
            entries, skipped = self._scan_for_create(root_fd)
            cache = self._hash_cache()
            records: dict[str, FileRecord] = {}
            keys: dict[str, Key] = {}
            todo: builtins.list[WalkEntry] = []
            for e in entries:
                st = e.st
                if e.kind == KIND_FILE:
                    hit = cache.get(e.path)
                    key = _key(st)
                    if hit is not None and hit[0] == key:
                        # same size, mtime, ctime, inode and device: content and mode unchanged
                        records[e.path] = hit[1]
                        keys[e.path] = key
                    else:
                        todo.append(e)
                elif e.kind == KIND_DIR:
                    mode = stat.S_IMODE(st.st_mode) & 0o777
                    records[e.path] = FileRecord(e.path, "dir", st.st_mtime_ns, mode=mode)
                else:
                    records[e.path] = FileRecord(e.path, "symlink", st.st_mtime_ns, target=e.target)
            staged: dict[str, tuple[str, int]] = {}
            new_shas: dict[str, int] = {}
            m_id = str(uuid.uuid4())
            try:
                budget = self.max_bytes - sum(r.size for r in records.values())
                results = self._ingest_all(root_fd, todo, budget, staged)
                now = time.time_ns()
                for e in todo:
                    got = results.get(e.path)
                    if isinstance(got, str):
                        skipped.append(SkippedEntry(_shown(e.path), got))
                        continue
                    if got is None:
                        continue
                    records[e.path] = FileRecord(
                        e.path,
                        "file",
                        got.st.st_mtime_ns,
                        mode=stat.S_IMODE(got.st.st_mode) & 0o777,
                        size=got.size,
                        sha256=got.sha,
                    )
                    if got.stable and not _racy(got.st, now):
                        keys[e.path] = _key(got.st)
                self._drop_orphan_records(records)
                self._commit_blobs(staged, new_shas)
                m = Manifest(
                    id=m_id,
                    created_at=now_iso(),
                    description=description,
                    entries=records,
                    new_bytes=sum(new_shas.values()),
                    skipped=sorted(skipped, key=lambda s: s.path),
                    keys=keys,
                )
                self._save_manifest(m)
            except BaseException:
                for tmp, _size in staged.values():
                    with contextlib.suppress(OSError):
                        self._unlink(tmp)
                self._rollback(m_id, new_shas)
                raise
            if new_shas:
                self._unlink(os.path.join(self._dir, _GC_MARK))
        finally:
            self._ops.close(root_fd)
        self._cache = (m.id, {p: (k, records[p]) for p, k in keys.items()})
        if self._usage_cache is not None and new_shas:
            used = self._usage_cache[1] + m.new_bytes
            self._usage_cache = (tuple(sorted(self._ops.listdir(self._snapdir))), used)
        return m.info()

    @staticmethod
    def _drop_orphan_records(records: dict[str, FileRecord]) -> None:
        # An entry whose parent directory was skipped or vanished cannot be restored faithfully.
        for path in sorted(records, key=lambda p: p.count("/")):
            parent = path.rpartition("/")[0]
            if parent and (parent not in records or records[parent].kind != "dir"):
                del records[path]

    def _ingest_all(
        self,
        root_fd: int,
        todo: builtins.list[WalkEntry],
        budget: int,
        staged: dict[str, tuple[str, int]],
    ) -> dict[str, _Ingested | str | None]:
        """Read and hash every file of ``todo`` once (in ``workers`` threads), staging new blobs.

        ``budget`` is how many bytes may still be read before ``max_bytes`` is passed (files may
        grow between the scan and the read). Returns, per path, the result, a skip reason, or
        ``None`` for a file that vanished.
        """
        lock = threading.Lock()
        left = [budget]
        results: dict[str, _Ingested | str | None] = {}

        def one(e: WalkEntry) -> None:
            got: _Ingested | str | None
            try:
                got = self._ingest(root_fd, e=e, lock=lock, left=left, staged=staged)
            except UnsafePathError as exc:
                got = f"changed while being read: {exc.reason}"
            except FileNotFoundError:
                got = None
            except PermissionError as exc:
                got = f"cannot read: {exc.strerror}"
            with lock:
                results[e.path] = got

        if self._workers <= 1 or len(todo) <= 1:
            for e in todo:
                one(e)
        else:
            with ThreadPoolExecutor(max_workers=self._workers) as pool:
                futures = [pool.submit(one, e) for e in todo]
                try:
                    for fut in futures:
                        fut.result()
                except BaseException:
                    for fut in futures:
                        fut.cancel()
                    raise
        return results

    def _take(self, lock: threading.Lock, left: builtins.list[int], n: int) -> None:
        with lock:
            left[0] -= n
            if left[0] < 0:
                raise SnapshotTooLarge("max_bytes", self.max_bytes, self.max_bytes - left[0])

    def _ingest(
        self,
        root_fd: int,
        *,
        e: WalkEntry,
        lock: threading.Lock,
        left: builtins.list[int],
        staged: dict[str, tuple[str, int]],
    ) -> _Ingested:
        """Read one workspace file once: hash it, and stage its content if the store lacks it."""
        ops = self._ops
        fd, st = self._ws.open_regular(root_fd, _parts(e.path))
        tmp_fd = -1
        tmp = ""
        try:
            h = hashlib.sha256()
            first = ops.read(fd, _CHUNK)
            self._take(lock, left, len(first))
            size = len(first)
            h.update(first)
            if len(first) == _CHUNK:
                tmp, tmp_fd = self._new_tmp()
                self._write_all(tmp_fd, first)
                while True:
                    b = ops.read(fd, _CHUNK)
                    if not b:
                        break
                    self._take(lock, left, len(b))
                    size += len(b)
                    h.update(b)
                    self._write_all(tmp_fd, b)
                ops.close(tmp_fd)
                tmp_fd = -1
            st2 = ops.fstat(fd)
            sha = h.hexdigest()
            with lock:
                wanted = sha not in staged
            if wanted and not self._blob_exists(sha):
                if not tmp:
                    tmp = self._stage_bytes(first)
                with lock:
                    if sha not in staged:
                        staged[sha] = (tmp, size)
                        tmp = ""  # owned by `staged` now
            stable = _key(st2) == _key(st) and size == st.st_size
            return _Ingested(sha, size, st, stable=stable)
        finally:
            if tmp_fd >= 0:
                with contextlib.suppress(OSError):
                    ops.close(tmp_fd)
            if tmp:
                with contextlib.suppress(OSError):
                    self._unlink(tmp)
            ops.close(fd)

    def _write_all(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[self._ops.write(fd, view) :]

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
        """
        sid = check_id(snapshot_id)
        with self._locked():
            self._recover()
            return self._restore_locked(sid, journal_written=False)

    def _restore_locked(self, sid: str, *, journal_written: bool) -> RestoreReport:
        t0 = time.perf_counter()
        m = self._load(sid)
        root_fd = self._ws.open_root()
        try:
            plan = self._plan(root_fd, m)
            needed = {
                m.entries[p].sha256: m.entries[p].size
                for p in plan.rewrite + plan.recreate
                if m.entries[p].kind == "file"
            }
            for sha, size in sorted(needed.items()):
                assert sha is not None  # noqa: S101 - files always have a hash
                self._stream_blob(sha, size, sid)
            if not journal_written:
                body = {"format": FORMAT, "kind": "wsnapshot-journal", "snapshot_id": sid}
                self._write_file(self._dir, _JOURNAL, json.dumps(body).encode())
            removed_files, removed_dirs = self._apply(root_fd, m, plan)
        finally:
            self._ops.close(root_fd)
        self._unlink(os.path.join(self._dir, _JOURNAL))
        self._fsync_dir(self._dir)
        return RestoreReport(
            snapshot_id=sid,
            deleted=tuple(removed_files),
            rewritten=tuple(plan.rewrite),
            recreated=tuple(plan.recreate),
            metadata_restored=tuple(plan.metadata),
            unchanged=plan.unchanged,
            dirs_created=tuple(plan.create_dirs),
            dirs_removed=tuple(removed_dirs),
            duration_ms=round((time.perf_counter() - t0) * 1000, 3),
        )

    def _scan_current(self, root_fd: int) -> tuple[dict[str, WalkEntry], builtins.list[str]]:
        problems: builtins.list[str] = []
        walked = self._ws.walk(
            root_fd,
            max_entries=max(1_000_000, 4 * self.max_files),
            on_problem=lambda path, _reason: problems.append(path),
        )
        return {e.path: e for e in walked}, problems

    def _current_sha(
        self, root_fd: int, e: WalkEntry, expect_size: int, cache: dict[str, tuple[Key, str]]
    ) -> str | None:
        hit = cache.get(e.path)
        if hit is not None and hit[0] == _key(e.st):
            return hit[1]
        try:
            fd, _st = self._ws.open_regular(root_fd, _parts(e.path))
        except (SnapshotError, OSError):
            return None
        try:
            h = hashlib.sha256()
            total = 0
            while True:
                b = self._ops.read(fd, _CHUNK)
                if not b:
                    break
                total += len(b)
                if total > expect_size:
                    return None
                h.update(b)
        finally:
            self._ops.close(fd)
        return h.hexdigest() if total == expect_size else None

    def _restore_cache(self, m: Manifest) -> dict[str, tuple[Key, str]]:
        cache = {p: (k, r.sha256 or "") for p, (k, r) in self._hash_cache().items()}
        for p, k in m.keys.items():
            cache[p] = (k, m.entries[p].sha256 or "")
        return cache

    def _plan(self, root_fd: int, m: Manifest) -> _Plan:
        target = m.entries
        cur, problems = self._scan_current(root_fd)
        cache = self._restore_cache(m)
        plan = _Plan()
        for path in sorted(cur):
            e = cur[path]
            t = target.get(path)
            mode = stat.S_IMODE(e.st.st_mode) & 0o777
            if e.kind == KIND_DIR:
                if mode & 0o700 != 0o700:
                    plan.loosen_dirs.append((path, mode))
                if t is None or t.kind != "dir":
                    plan.delete_dirs.append(path)
                continue
            if t is None or t.kind != e.kind:
                plan.delete_files.append(path)
                continue
            if t.kind == "file":
                same = e.st.st_size == t.size and (
                    self._current_sha(root_fd, e, t.size, cache) == t.sha256
                )
                if not same:
                    plan.rewrite.append(path)
                elif mode != t.mode or e.st.st_mtime_ns != t.mtime_ns:
                    # Never chmod/utime an inode that other names share (a hard link planted
                    # by the workspace's code could point at a file outside it): replace it.
                    (plan.rewrite if e.st.st_nlink > 1 else plan.metadata).append(path)
                else:
                    plan.unchanged += 1
            elif e.target != t.target:
                plan.rewrite.append(path)
            elif e.st.st_mtime_ns != t.mtime_ns:
                plan.metadata.append(path)
            else:
                plan.unchanged += 1
        plan.delete_dirs.extend(p for p in problems if p not in plan.delete_dirs)
        for path in sorted(target):
            t = target[path]
            have = cur.get(path)
            if t.kind == "dir":
                if have is None or have.kind != KIND_DIR or path in problems:
                    plan.create_dirs.append(path)
                else:
                    plan.unchanged += 1
            elif have is None or have.kind != t.kind:
                plan.recreate.append(path)
        return plan

    @contextlib.contextmanager
    def _dir_at(self, root_fd: int, path: str) -> Iterator[int]:
        fd = self._ws.open_dir(root_fd, _parts(path))
        try:
            yield fd
        finally:
            self._ops.close(fd)

    def _rmtree_at(
        self,
        dfd: int,
        name: str,
        path: str,
        out: tuple[builtins.list[str], builtins.list[str]],
        depth: int = 0,
    ) -> None:
        files, dirs = out
        ops = self._ops
        if depth > 4 * 128:
            raise WorkspaceLimitError(path, "directory tree too deep to remove")
        try:
            sub = ops.open(name, O_DIRFLAGS, dir_fd=dfd)
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            with contextlib.suppress(FileNotFoundError):
                ops.unlink(name, dir_fd=dfd)
                files.append(path)
            return
        try:
            st = ops.fstat(sub)
            if stat.S_IMODE(st.st_mode) & 0o700 != 0o700:
                ops.fchmod(sub, stat.S_IMODE(st.st_mode) | 0o700)
            for child in sorted(ops.listdir(sub)):
                try:
                    cst = ops.lstat(child, dir_fd=sub)
                except FileNotFoundError:
                    continue
                cpath = f"{path}/{child}"
                if stat.S_ISDIR(cst.st_mode):
                    self._rmtree_at(sub, child, cpath, out, depth + 1)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        ops.unlink(child, dir_fd=sub)
                        files.append(_shown(cpath))
        finally:
            ops.close(sub)
        with contextlib.suppress(FileNotFoundError):
            ops.rmdir(name, dir_fd=dfd)
            dirs.append(_shown(path))

    def _apply(
        self, root_fd: int, m: Manifest, plan: _Plan
    ) -> tuple[builtins.list[str], builtins.list[str]]:
        ops = self._ops
        target = m.entries
        touched: set[str] = set()
        removed_files: builtins.list[str] = []
        removed_dirs: builtins.list[str] = []
        for path, mode in plan.loosen_dirs:
            with contextlib.suppress(FileNotFoundError), self._dir_at(root_fd, path) as fd:
                ops.fchmod(fd, mode | 0o700)
        # 1. Remove what the snapshot does not have: files and links, then directories.
        for path in plan.delete_files:
            parent, _, name = path.rpartition("/")
            with self._dir_at(root_fd, parent) as dfd:
                try:
                    ops.unlink(name, dir_fd=dfd)
                    removed_files.append(_shown(path))
                except FileNotFoundError:
                    pass
                except IsADirectoryError:
                    self._rmtree_at(dfd, name, path, (removed_files, removed_dirs))
            touched.add(parent)
        for path in sorted(plan.delete_dirs, key=lambda p: (-p.count("/"), p)):
            parent, _, name = path.rpartition("/")
            try:
                dir_cm = self._dir_at(root_fd, parent)
                dfd = dir_cm.__enter__()
            except FileNotFoundError:
                continue  # its parent went first
            try:
                try:
                    ops.rmdir(name, dir_fd=dfd)
                    removed_dirs.append(_shown(path))
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                        raise
                    self._rmtree_at(dfd, name, path, (removed_files, removed_dirs))
            finally:
                dir_cm.__exit__(None, None, None)
            touched.add(parent)
        # 2. Directories the snapshot has (parents first).
        for path in plan.create_dirs:
            parent, _, name = path.rpartition("/")
            with self._dir_at(root_fd, parent) as dfd, contextlib.suppress(FileExistsError):
                ops.mkdir(name, 0o700, dir_fd=dfd)
            touched.add(parent)
        # 3. and 4. Rewrite differing files and links, then recreate missing ones.
        for path in plan.rewrite + plan.recreate:
            self._put_entry(root_fd, target[path], m.id)
            touched.add(path.rpartition("/")[0])
        # 5. Metadata of entries whose content already matched.
        for path in plan.metadata:
            t = target[path]
            parts = _parts(path)
            if t.kind == "symlink":
                with self._dir_at(root_fd, "/".join(parts[:-1])) as dfd:
                    ops.lutimens(parts[-1], t.mtime_ns, dir_fd=dfd)
                continue
            fd, st = self._ws.open_regular(root_fd, parts)
            try:
                if st.st_nlink == 1:
                    ops.fchmod(fd, t.mode)
                    ops.futimens(fd, t.mtime_ns)
            finally:
                ops.close(fd)
            if st.st_nlink != 1:
                self._put_entry(root_fd, t, m.id)
                touched.add(path.rpartition("/")[0])
        # 6. Directory modes and mtimes, deepest first, after every change inside them.
        dirs = sorted(
            (p for p, t in target.items() if t.kind == "dir"), key=lambda p: (-p.count("/"), p)
        )
        changed = bool(plan.rewrite or plan.recreate or plan.metadata or touched)
        for path in dirs:
            t = target[path]
            with self._dir_at(root_fd, path) as fd:
                st = ops.fstat(fd)
                if stat.S_IMODE(st.st_mode) != t.mode:
                    ops.fchmod(fd, t.mode)
                    changed = True
                if st.st_mtime_ns != t.mtime_ns:
                    ops.futimens(fd, t.mtime_ns)
                    changed = True
        # 7. One flush of the workspace's file system makes every change above durable before
        # the journal goes. Until then a crash is rolled forward; files written here have new
        # inodes (no stat key any snapshot recorded), so the roll-forward hashes them again and
        # rewrites any whose data had not reached the disk.
        if changed:
            ops.syncfs(root_fd)
        return removed_files, removed_dirs

    def _put_entry(self, root_fd: int, t: FileRecord, sid: str) -> None:
        ops = self._ops
        parts = _parts(t.path)
        with self._dir_at(root_fd, "/".join(parts[:-1])) as dfd:
            if t.kind == "file":
                assert t.sha256 is not None  # noqa: S101 - validated manifest
                self._ws.write_at(
                    dfd,
                    parts[-1],
                    self._copy_blob(t.sha256, t.size, sid),
                    mode=t.mode,
                    mtime_ns=t.mtime_ns,
                    sync=False,  # flushed in one batch before the journal is removed
                )
                return
            assert t.target is not None  # noqa: S101 - validated manifest
            tmp = f"{_RESERVED_PREFIX}{uuid.uuid4().hex}.tmp"
            ops.symlink(t.target, tmp, dir_fd=dfd)
            try:
                ops.lutimens(tmp, t.mtime_ns, dir_fd=dfd)
                ops.rename(tmp, parts[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                with contextlib.suppress(OSError):
                    ops.unlink(tmp, dir_fd=dfd)
                raise

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
        with self._locked():
            self._recover()
            path = self._manifest_path(sid)
            if not os.path.lexists(path):
                raise SnapshotNotFound(sid)
            try:
                drop: set[str] | None = {
                    e.sha256 for e in self._load(sid).entries.values() if e.sha256 is not None
                }
            except CorruptSnapshot:
                drop = None  # unknown references: sweep every blob no manifest names
            self._mark_gc()
            self._unlink(path, missing_ok=False)
            self._fsync_dir(self._snapdir)
            if self._cache is not None and self._cache[0] == sid:
                self._cache = None
            self._usage_cache = None
            self._gc(drop)

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
        ma = self._load(check_id(a))
        if b is not None:
            other = check_id(b)
            eb = self._load(other).entries
            bid: str | None = other
        else:
            bid = None
            eb = self._workspace_records(ma)
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

    def _workspace_records(self, ma: Manifest) -> dict[str, FileRecord]:
        root_fd = self._ws.open_root()
        try:
            entries, _skipped = self._scan_for_create(root_fd)
            cache = self._restore_cache(ma)
            out: dict[str, FileRecord] = {}
            for e in entries:
                st = e.st
                mode = stat.S_IMODE(st.st_mode) & 0o777
                if e.kind == KIND_DIR:
                    out[e.path] = FileRecord(e.path, "dir", st.st_mtime_ns, mode=mode)
                elif e.kind == KIND_SYMLINK:
                    out[e.path] = FileRecord(e.path, "symlink", st.st_mtime_ns, target=e.target)
                else:
                    old = ma.entries.get(e.path)
                    sha = None
                    if old is not None and old.kind == "file" and old.size == st.st_size:
                        sha = self._current_sha(root_fd, e, st.st_size, cache)
                    out[e.path] = FileRecord(
                        e.path,
                        "file",
                        st.st_mtime_ns,
                        mode=mode,
                        size=st.st_size,
                        sha256=sha or "?",
                    )
            return out
        finally:
            self._ops.close(root_fd)

    # -- export / import --------------------------------------------------------------------------

    def export(self, snapshot_id: str) -> dict[str, Any]:
        """A self-contained JSON record of a snapshot (the seed's format), content inline.

        Each file entry carries ``encoding`` (``"utf-8"`` when the content decodes as UTF-8,
        otherwise ``"base64"``, RFC 4648) and ``content``. Every blob is verified while read.

        Args:
            snapshot_id: A UUID.

        Returns:
            ``{"format": 1, "kind": "wsnapshot-export", "id", "created_at", "description",
            "files": {path: {...}}}``.

        Raises:
            InvalidSnapshotId: Not a UUID.
            SnapshotNotFound: No such snapshot.
            CorruptSnapshot: The manifest or a blob fails validation.
        """
        m = self._load(check_id(snapshot_id))
        files: dict[str, Any] = {}
        for path in sorted(m.entries):
            e = m.entries[path]
            d = e.to_dict()
            del d["path"]
            if e.kind == "file":
                assert e.sha256 is not None  # noqa: S101 - validated manifest
                data = self._read_blob(e.sha256, e.size, m.id)
                try:
                    d["content"] = data.decode("utf-8")
                    d["encoding"] = "utf-8"
                except UnicodeDecodeError:
                    d["content"] = base64.b64encode(data).decode("ascii")
                    d["encoding"] = "base64"
            files[path] = d
        return {
            "format": FORMAT,
            "kind": EXPORT_KIND,
            "id": m.id,
            "created_at": m.created_at,
            "description": m.description,
            "files": files,
        }

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

        def fail(where: str, reason: str) -> SnapshotError:
            return InvalidRecord(where, reason)

        sid, created, desc = parse_header(record, fail, EXPORT_KIND)
        assert isinstance(record, dict)  # noqa: S101 - checked by parse_header
        unknown = set(record) - {"format", "kind", "id", "created_at", "description", "files"}
        if unknown:
            raise InvalidRecord("", f"unknown keys {sorted(unknown)}")
        files = record.get("files")
        if isinstance(files, dict) and len(files) > self.max_files:
            raise SnapshotTooLarge("max_files", self.max_files, len(files))
        entries, extras = parse_entries(
            files,
            fail,
            max_entries=self.max_files,
            extra_keys=frozenset({"encoding", "content"}),
            fill_parents=True,
        )
        contents: dict[str, bytes] = {}
        total = 0
        for path in sorted(entries):
            e = entries[path]
            extra = extras.get(path, {})
            where = f"/files/{path}"
            if e.kind != "file":
                if extra:
                    raise InvalidRecord(where, f"a {e.kind} entry has no content")
                continue
            enc, content = extra.get("encoding"), extra.get("content")
            if not isinstance(content, str):
                raise InvalidRecord(where + "/content", "expected a string")
            if len(content) > 4 * (self.max_bytes - total) // 3 + 4:
                raise SnapshotTooLarge("max_bytes", self.max_bytes, total + len(content) * 3 // 4)
            if enc == "utf-8":
                try:
                    data = content.encode("utf-8")
                except UnicodeEncodeError:
                    raise InvalidRecord(where + "/content", "not valid Unicode text") from None
            elif enc == "base64":
                try:
                    data = base64.b64decode(content, validate=True)
                except (binascii.Error, ValueError):
                    raise InvalidRecord(where + "/content", "not valid Base64 (RFC 4648)") from None
            else:
                raise InvalidRecord(where + "/encoding", "expected 'utf-8' or 'base64'")
            total += len(data)
            if total > self.max_bytes:
                raise SnapshotTooLarge("max_bytes", self.max_bytes, total)
            if len(data) != e.size:
                raise InvalidRecord(
                    where + "/size", f"content is {len(data)} bytes, size says {e.size}"
                )
            if hashlib.sha256(data).hexdigest() != e.sha256:
                raise InvalidRecord(where + "/sha256", "content does not match its SHA-256")
            contents[e.sha256] = data
        with self._locked():
            self._recover()
            if os.path.lexists(self._manifest_path(sid)):
                raise SnapshotExists(sid)
            new = {sha: data for sha, data in contents.items() if not self._blob_exists(sha)}
            staged: dict[str, tuple[str, int]] = {}
            committed: dict[str, int] = {}
            try:
                for sha, data in sorted(new.items()):
                    staged[sha] = (self._stage_bytes(data), len(data))
                self._commit_blobs(staged, committed)
                m = Manifest(sid, created, desc, entries, new_bytes=sum(committed.values()))
                self._save_manifest(m)
            except BaseException:
                for tmp, _size in staged.values():
                    with contextlib.suppress(OSError):
                        self._unlink(tmp)
                self._rollback(sid, committed)
                raise
            if committed:
                self._unlink(os.path.join(self._dir, _GC_MARK))
            self._usage_cache = None
        return m.info()
