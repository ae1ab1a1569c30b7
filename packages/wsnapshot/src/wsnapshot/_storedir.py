"""The store directory: its layout, its writer lock, its atomic-file primitives, its manifests.

Every other part of the store (:mod:`wsnapshot._blobs`, :mod:`wsnapshot._capture`,
:mod:`wsnapshot._restore`, :mod:`wsnapshot._record`) writes and reads through one
:class:`StoreDir`: it knows where each file of the store lives, writes a file atomically
(temporary file, fsync, rename, directory fsync), reads one with a size bound, and loads and
saves manifests. It also holds what those parts share: the :class:`~wsnapshot._fsio.Ops` every
system call goes through (``ops``, replaced by the fault-injection tests) and the store's
:class:`Limits`. Constants named here (the read chunk, the store's own file names, the reserved
name prefix) have no other home.
"""

# File-descriptor and dir_fd= system calls have no pathlib equivalent:
# ruff: noqa: PTH100,PTH102,PTH103,PTH110,PTH112,PTH118,PTH208

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import stat
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from wsnapshot._fsio import O_DIRFLAGS, Ops
from wsnapshot._manifest import (
    FORMAT,
    Manifest,
    check_id,
    parse_manifest,
    parse_time,
)
from wsnapshot.exceptions import (
    CorruptSnapshot,
    SnapshotError,
    SnapshotNotFound,
    StoreConfigError,
)

__all__ = [
    "CHUNK",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_FILES",
    "DEFAULT_STORE_MAX_BYTES",
    "GC_MARK",
    "INCONSISTENT",
    "JOURNAL",
    "MAX_MANIFEST_BYTES",
    "O_NOFOLLOW",
    "RESERVED_PREFIX",
    "S3_SCHEME",
    "Key",
    "Limits",
    "StoreDir",
    "manifest_bytes",
    "order",
    "parse_s3_url",
    "parts",
    "shown",
    "stat_key",
]

log = logging.getLogger("wsnapshot")


def order(m: Manifest) -> tuple[datetime, str]:
    """A manifest's place in the store's history: its creation time, then its id (a tie)."""
    return (parse_time(m.created_at), m.id)


#: Default cap of one snapshot's content (1 GiB).
DEFAULT_MAX_BYTES = 1 << 30
#: Default cap of one snapshot's entries (files, directories and symlinks).
DEFAULT_MAX_FILES = 100_000
#: Default store-wide quota of blob bytes (10 GiB).
DEFAULT_STORE_MAX_BYTES = 10 << 30

#: Bytes read (and written) per system call when streaming a file. Read through the module
#: (``_storedir.CHUNK``) by every part of the store, so a test can shrink it in one place.
CHUNK = 1024 * 1024
#: Largest manifest read, in bytes.
MAX_MANIFEST_BYTES = 256 * 1024 * 1024
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: The intent journal of a restore in progress.
JOURNAL = "restore.journal"
#: The marker saying unreferenced blobs may exist.
GC_MARK = "gc.pending"
#: The marker saying a restore failed and the workspace may be half restored (JSON: what, when).
INCONSISTENT = "inconsistent.json"
_STORE_MARK = "wsnapshot-store.json"
_OWN_NAMES = frozenset(
    {"snapshots", "blobs", "tmp", "lock", JOURNAL, GC_MARK, INCONSISTENT, _STORE_MARK}
)
#: The scheme of a store location naming the S3 backend (``s3://BUCKET/PREFIX``).
S3_SCHEME = "s3://"
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_SEGMENT = re.compile(r"[A-Za-z0-9._=+@-]{1,255}")
#: Workspace names starting with this are the store's own temporary entries: never snapshotted.
RESERVED_PREFIX = ".wsnapshot-"

#: A file's stat key: (size, mtime_ns, ctime_ns, inode, device).
Key = tuple[int, int, int, int, int]


def stat_key(st: os.stat_result) -> Key:
    """The stat key of ``st``: while it is unchanged, a file's content and mode are taken as is."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def parse_s3_url(url: str) -> tuple[str, str]:
    """Split ``s3://BUCKET/PREFIX`` into the bucket and the prefix (no slash at either end).

    Args:
        url: The store's URL, as given on a command line.

    Returns:
        ``(bucket, prefix)``.

    Raises:
        StoreConfigError: Credentials, a query string or a fragment in the URL (the URL is
            then not echoed, only what precedes a query or fragment), or not of that
            form: the scheme, an invalid bucket name, a missing prefix, or a prefix segment
            that is empty, ``.``, ``..`` or holds other characters than letters, digits and
            ``._=+@-``.
    """
    form = "give s3://BUCKET/PREFIX, the prefix naming the workspace (s3://snapshots/team/ws1)"
    if not url.startswith(S3_SCHEME):
        raise StoreConfigError(str(url), f"not an s3:// URL; {form}")
    if any(c in url for c in "?#"):
        # a query (a presigned URL's X-Amz-Signature...) or a fragment may hold a credential:
        # only what comes before it is echoed
        shown = url.split("?", 1)[0].split("#", 1)[0]
        raise StoreConfigError(
            shown + "?...",
            "an s3:// store URL takes no query string or fragment (credentials never go in "
            f"the URL: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment); {form}",
        )
    host = url[len(S3_SCHEME) :].partition("/")[0]
    if "@" in host or ":" in host:
        # user:secret@bucket: the URL is not echoed, it may hold a credential
        raise StoreConfigError(
            "s3://...",
            "credentials never go in the URL: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
            f"in the environment; {form}",
        )
    bucket, _, prefix = url[len(S3_SCHEME) :].partition("/")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise StoreConfigError(url, f"{bucket!r} is not a valid bucket name; {form}")
    prefix = prefix.rstrip("/")
    if not prefix:
        raise StoreConfigError(url, f"the prefix is missing; {form}")
    for segment in prefix.split("/"):
        if segment in (".", "..") or not _SEGMENT.fullmatch(segment):
            raise StoreConfigError(url, f"prefix segment {segment!r} is not allowed; {form}")
    return bucket, prefix


def shown(path: str) -> str:
    """``path`` as text safe to report (bytes that are not UTF-8 shown as backslash escapes)."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def parts(path: str) -> tuple[str, ...]:
    """The components of a workspace-relative ``/``-separated path (``()`` for the root)."""
    return tuple(path.split("/")) if path else ()


@dataclass
class Limits:
    """The store's limits, shared by every part of it (the façade's attributes read through).

    Attributes:
        max_bytes: Largest snapshot content, in bytes.
        max_files: Most entries in one snapshot.
        store_max_bytes: Store-wide quota of blob bytes.
        workers: Threads hashing files during ``create``.
    """

    max_bytes: int
    max_files: int
    store_max_bytes: int
    workers: int


class StoreDir:
    """One store directory: its layout, lock, atomic-file primitives and manifest catalogue.

    Creating it creates the directory (mode 0o700) and its format marker and sub-directories
    when missing; it does not take the lock nor recover anything.

    Args:
        workspace_root: The workspace's absolute real path (the store must not overlap it).
        store_dir: The store directory as given by the caller.
        ops: The system calls to use (``self.ops``, replaceable afterwards).
        limits: The store's limits (``max_files`` bounds a manifest's entries).

    Raises:
        StoreConfigError: The directory is not a directory, overlaps the workspace, or is
            neither empty nor a wsnapshot store.
    """

    #: The backend's name, as reported by a server's status (``"local"``, ``"s3"``).
    backend_name = "local"
    #: The bucket holding the store (``None``: not an object store).
    bucket: str | None = None

    def __init__(
        self,
        workspace_root: str,
        store_dir: str,
        ops: Ops,
        limits: Limits,
        *,
        read_only: bool = False,
    ) -> None:
        self.ops = ops
        self.limits = limits
        self.read_only = read_only
        self.path = self._prepare(workspace_root, store_dir)
        self.snapdir = os.path.join(self.path, "snapshots")
        self.blobdir = os.path.join(self.path, "blobs")
        self.tmpdir = os.path.join(self.path, "tmp")

    def _prepare(self, ws: str, store_dir: str) -> str:
        absolute = os.path.abspath(store_dir)
        if self.read_only:  # nothing is created: the store must exist already
            if not os.path.exists(os.path.join(absolute, _STORE_MARK)):
                raise StoreConfigError(store_dir, "not a wsnapshot store (opened read-only)")
        elif not os.path.lexists(absolute):
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
        if self.read_only:
            return real
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
            self.write_file(real, _STORE_MARK, json.dumps({"format": FORMAT}).encode())
        for sub in ("snapshots", "blobs", "tmp"):
            with contextlib.suppress(FileExistsError):
                os.mkdir(os.path.join(real, sub), 0o700)
        return real

    # -- the lock and file primitives -------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self, *, blocking: bool = True) -> Iterator[bool]:
        """Hold the exclusive ``flock(2)`` on ``lock`` that serialises writers.

        Yields:
            ``True`` when the lock is held; ``False`` when ``blocking`` is false and another
            writer holds it.

        Raises:
            StoreConfigError: The store was opened read-only (every writer takes this lock).
        """
        if self.read_only:
            raise StoreConfigError(self.path, "opened read-only: it cannot be changed")
        fd = os.open(os.path.join(self.path, "lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
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

    def fsync_dir(self, path: str) -> None:
        """Make the entries of directory ``path`` durable (open, ``fsync``, close)."""
        ops = self.ops
        fd = ops.open(path, O_DIRFLAGS)
        try:
            ops.fsync(fd)
        finally:
            ops.close(fd)

    def fsync_path(self, path: str) -> None:
        """Make the content of file ``path`` durable (open without following, ``fsync``)."""
        ops = self.ops
        fd = ops.open(path, os.O_RDONLY | O_NOFOLLOW)
        try:
            ops.fsync(fd)
        finally:
            ops.close(fd)

    def flush(self) -> None:
        """Make everything written to the store so far durable.

        ``syncfs(2)`` on the store's file system: one flush for a whole batch of blobs, which
        gives the guarantee of an ``fsync`` of each file and directory written (``sync(2)``
        where ``syncfs`` is missing). Small batches are fsynced file by file instead, so their
        cost does not depend on what else is being written to the file system.
        """
        ops = self.ops
        fd = ops.open(self.path, O_DIRFLAGS)
        try:
            ops.syncfs(fd)
        finally:
            ops.close(fd)

    def write_file(self, directory: str, name: str, data: bytes) -> None:
        """Atomically write ``directory/name``: temporary file, fsync, rename, directory fsync."""
        ops = self.ops
        dfd = ops.open(directory, O_DIRFLAGS)
        try:
            tmp = f".{uuid.uuid4().hex}.tmp"
            fd = ops.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW, 0o600, dir_fd=dfd)
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

    def read_file(self, path: str, limit: int) -> bytes:
        """Read the regular file ``path`` (never through a symlink), at most ``limit`` bytes.

        Raises:
            FileNotFoundError: It does not exist.
            OSError: It is not a regular file (``EINVAL``), is larger than ``limit``
                (``EFBIG``), or cannot be read.
        """
        ops = self.ops
        fd = ops.open(path, os.O_RDONLY | O_NOFOLLOW)
        try:
            st = ops.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise OSError(errno.EINVAL, "not a regular file", path)
            if st.st_size > limit:
                raise OSError(errno.EFBIG, f"larger than {limit} bytes", path)
            chunks = []
            total = 0
            while True:
                b = ops.read(fd, CHUNK)
                if not b:
                    break
                total += len(b)
                if total > limit:
                    raise OSError(errno.EFBIG, f"larger than {limit} bytes", path)
                chunks.append(b)
            return b"".join(chunks)
        finally:
            ops.close(fd)

    def unlink(self, path: str, *, missing_ok: bool = True) -> None:
        """Remove the file ``path`` (a missing one is fine unless ``missing_ok`` is false)."""
        try:
            self.ops.unlink(path)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def remove_stray_tmp(self) -> None:
        """Remove temporary files a crashed atomic write left in ``snapshots/`` and the store."""
        for name in self.ops.listdir(self.snapdir):
            if name.endswith(".tmp"):
                self.unlink(os.path.join(self.snapdir, name))
        for name in self.ops.listdir(self.path):
            if name.endswith(".tmp"):
                self.unlink(os.path.join(self.path, name))

    # -- manifests --------------------------------------------------------------------------------

    def manifest_path(self, sid: str) -> str:
        """Path of snapshot ``sid``'s manifest."""
        return os.path.join(self.snapdir, f"{sid}.json")

    @property
    def location(self) -> str:
        """Where the snapshots live, as shown to users (this store: its directory's path)."""
        return self.path

    def has_manifest(self, sid: str) -> bool:
        """Whether snapshot ``sid``'s manifest is stored (one ``lstat``)."""
        return os.path.lexists(self.manifest_path(sid))

    def remove_manifest(self, sid: str) -> None:
        """Remove snapshot ``sid``'s manifest durably (the snapshot is no longer listed).

        Raises:
            FileNotFoundError: It is not stored.
        """
        self.unlink(self.manifest_path(sid), missing_ok=False)
        self.fsync_dir(self.snapdir)

    def lost_reason(self) -> str | None:
        """Why this writer stopped saving (another writer took over), or ``None``."""
        return None

    def check_fence(self) -> None:
        """Check that no other writer took over (a local store is one machine's: nothing)."""

    @contextlib.contextmanager
    def mirrored(self, sids: list[str]) -> Iterator[str]:
        """A local store directory holding the manifests ``sids``, for a reader without network.

        Yields:
            This store's directory (it holds every manifest already).
        """
        yield self.path

    def catalogue_key(self) -> tuple[str, ...]:
        """A value that changes whenever the set of stored manifests does (cache keys)."""
        return tuple(sorted(self.ops.listdir(self.snapdir)))

    def load(self, sid: str) -> Manifest:
        """Read and validate snapshot ``sid``'s manifest.

        Raises:
            SnapshotNotFound: No such manifest.
            CorruptSnapshot: It cannot be read or fails validation.
        """
        path = self.manifest_path(sid)
        try:
            raw = self.read_file(path, MAX_MANIFEST_BYTES)
        except FileNotFoundError:
            raise SnapshotNotFound(sid) from None
        except OSError as exc:
            raise CorruptSnapshot(sid, path, f"cannot read manifest: {exc.strerror}") from None
        return self.parse_manifest_bytes(sid, raw)

    def parse_manifest_bytes(self, sid: str, raw: bytes) -> Manifest:
        """Validate the stored manifest ``raw`` of snapshot ``sid`` (every backend's format).

        Raises:
            CorruptSnapshot: It is not JSON, fails validation or names another snapshot.
        """

        def fail(where: str, reason: str) -> SnapshotError:
            return CorruptSnapshot(sid, f"manifest{where}", reason)

        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise CorruptSnapshot(sid, "manifest", f"not valid JSON: {exc}") from None
        m = parse_manifest(doc, fail, max_entries=max(self.limits.max_files, DEFAULT_MAX_FILES))
        if m.id != sid:
            raise CorruptSnapshot(sid, "manifest/id", f"names snapshot {m.id}, not its file name")
        return m

    def snapshot_ids(self) -> list[str]:
        """The ids of the manifests in ``snapshots/`` (other names are ignored)."""
        out = []
        for name in self.ops.listdir(self.snapdir):
            if name.endswith(".json"):
                try:
                    out.append(check_id(name[:-5]))
                except SnapshotError:
                    continue
        return out

    def iter_manifests(self, bad: list[str]) -> Iterator[Manifest]:
        """Every readable manifest, one at a time, in no particular order.

        A store may hold any number of snapshots of up to 100,000 entries each: a caller that
        needs something of every manifest (a listing, the blobs in use, the newest) keeps that
        and drops the manifest, so at most one is in memory at a time.

        Args:
            bad: The ids of manifests that fail validation are appended to it (each logged).

        Yields:
            Each manifest that loads and validates.
        """
        for sid in self.snapshot_ids():
            try:
                m = self.load(sid)
            except SnapshotNotFound:
                continue  # deleted while we listed
            except CorruptSnapshot as exc:
                log.warning("skipping %s", exc)
                bad.append(sid)
                continue
            yield m
            del m  # not held while the next one loads

    def manifests(self) -> tuple[list[Manifest], list[str]]:
        """Every readable manifest, oldest first, and the ids of those that fail validation.

        All of them in memory at once: for tests and small stores; the library's own callers
        use :meth:`iter_manifests`.
        """
        bad: list[str] = []
        good = list(self.iter_manifests(bad))
        good.sort(key=order)
        return good, bad

    def newest_manifest(self) -> Manifest | None:
        """The newest readable manifest (:func:`order`), or ``None``; at most two in memory."""
        newest: Manifest | None = None
        for m in self.iter_manifests([]):
            if newest is None or order(m) > order(newest):
                newest = m
            del m  # the newest and the one loading, never a third
        return newest

    def save_manifest(self, m: Manifest) -> None:
        """Write manifest ``m`` atomically (this makes its snapshot listed)."""
        self.write_file(self.snapdir, f"{m.id}.json", manifest_bytes(m))


def manifest_bytes(m: Manifest) -> bytes:
    """Manifest ``m`` as stored by every backend: compact UTF-8 JSON."""
    return json.dumps(m.to_json(), ensure_ascii=False, separators=(",", ":")).encode()
