"""The blob store: file contents by SHA-256 under ``blobs/``, staged in ``tmp/``.

A blob is written in two steps: :meth:`BlobStore.new_tmp` / :meth:`BlobStore.stage_bytes` put
the content in a staging file (not yet durable), and :meth:`BlobStore.commit` checks the quota,
makes the staged content durable, renames each file into ``blobs/<2 hex>/<62 hex>`` and makes the
renames durable. Blobs are verified against their SHA-256 whenever they are read
(:meth:`BlobStore.read`, :meth:`BlobStore.stream`). Blobs no manifest names are removed by
:meth:`BlobStore.gc` (reachability from the manifests on disk), which the ``gc.pending`` marker
schedules: it is set before the first new blob is renamed in and cleared once the manifest that
names them is written, so a crash in between is collected when the store is next opened.
"""

# File-descriptor and dir_fd= system calls have no pathlib equivalent:
# ruff: noqa: PTH118

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from wsnapshot import _storedir
from wsnapshot._storedir import GC_MARK, O_NOFOLLOW, StoreDir
from wsnapshot.exceptions import CorruptSnapshot, QuotaExceeded
from wsnapshot.snapshot import GcReport

__all__ = ["BlobStore"]

log = logging.getLogger("wsnapshot")

#: Up to this many new blobs are fsynced one by one; larger batches are flushed with syncfs(2).
_FSYNC_EACH_MAX = 32


class BlobStore:
    """Content-addressed blobs of one store directory.

    Args:
        files: The store directory (its ``ops`` are used for every system call).
    """

    def __init__(self, files: StoreDir) -> None:
        self._files = files
        self._usage_cache: tuple[tuple[str, ...], int] | None = None
        self._subdirs: set[str] | None = None

    # -- names ------------------------------------------------------------------------------------

    def path(self, sha: str) -> str:
        """Path of blob ``sha`` (a SHA-256 in lowercase hex)."""
        return os.path.join(self._files.blobdir, sha[:2], sha[2:])

    def exists(self, sha: str) -> bool:
        """Whether blob ``sha`` is in the store (one ``lstat``)."""
        try:
            self._files.ops.lstat(self.path(sha))
        except FileNotFoundError:
            return False
        return True

    def known(self, sha: str) -> bool:
        """Whether a commit may skip staging blob ``sha``: it is stored (one ``lstat``)."""
        return self.exists(sha)

    def all(self) -> Iterator[str]:
        """The SHA-256 of every blob on disk (names of another length are ignored)."""
        ops = self._files.ops
        blobdir = self._files.blobdir
        for sub in ops.listdir(blobdir):
            if len(sub) != 2:
                continue
            for rest in ops.listdir(os.path.join(blobdir, sub)):
                if len(rest) == 62:
                    yield sub + rest

    # -- reading ----------------------------------------------------------------------------------

    def read(self, sha: str, size: int, sid: str | None) -> bytes:
        """The content of blob ``sha``, verified to be ``size`` bytes with that SHA-256.

        Args:
            sha: The blob's SHA-256.
            size: Its size in bytes (from the manifest).
            sid: The snapshot that needs it (named in the error).

        Raises:
            CorruptSnapshot: The blob is missing, unreadable or does not match.
        """
        path = self.path(sha)
        try:
            data = self._files.read_file(path, size)
        except FileNotFoundError:
            raise CorruptSnapshot(sid, path, "blob is missing") from None
        except OSError as exc:
            raise CorruptSnapshot(sid, path, f"cannot read blob: {exc.strerror}") from None
        if len(data) != size or hashlib.sha256(data).hexdigest() != sha:
            raise CorruptSnapshot(sid, path, "blob content does not match its SHA-256")
        return data

    def stream(
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
        ops = self._files.ops
        path = self.path(sha)
        try:
            fd = ops.open(path, os.O_RDONLY | O_NOFOLLOW)
        except FileNotFoundError:
            raise CorruptSnapshot(sid, path, "blob is missing") from None
        try:
            h = hashlib.sha256()
            total = 0
            while b := ops.read(fd, _storedir.CHUNK):
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

    def chunks(self, sha: str, size: int, sid: str | None) -> Iterator[bytes]:
        """Yield blob ``sha`` in chunks of at most ``CHUNK`` bytes, checking it at the end.

        Raises:
            CorruptSnapshot: The blob is missing or does not match (after the chunks read so
                far were yielded: they are then not to be trusted).
        """
        ops = self._files.ops
        path = self.path(sha)
        try:
            fd = ops.open(path, os.O_RDONLY | O_NOFOLLOW)
        except FileNotFoundError:
            raise CorruptSnapshot(sid, path, "blob is missing") from None
        h = hashlib.sha256()
        total = 0
        try:
            while b := ops.read(fd, _storedir.CHUNK):
                total += len(b)
                if total > size:
                    break
                h.update(b)
                yield b
        finally:
            ops.close(fd)
        if total != size or h.hexdigest() != sha:
            raise CorruptSnapshot(sid, path, "blob content does not match its SHA-256")

    def read_part(self, sha: str, size: int, sid: str | None, lo: int, hi: int) -> bytes:
        """Bytes ``[lo, hi)`` of blob ``sha`` (``size`` bytes by its manifest).

        A part is checked by the blob's size; the whole blob (``lo == 0``, ``hi == size``) is
        also checked against its SHA-256.

        Raises:
            CorruptSnapshot: The blob is missing, of another size or does not match.
        """
        ops = self._files.ops
        path = self.path(sha)
        try:
            fd = ops.open(path, os.O_RDONLY | O_NOFOLLOW)
        except FileNotFoundError:
            raise CorruptSnapshot(sid, path, "blob is missing") from None
        try:
            if ops.fstat(fd).st_size != size:
                raise CorruptSnapshot(sid, path, "blob size does not match the manifest")
            data = os.pread(fd, hi - lo, lo)
        finally:
            ops.close(fd)
        if len(data) != hi - lo or (
            lo == 0 and hi == size and hashlib.sha256(data).hexdigest() != sha
        ):
            raise CorruptSnapshot(sid, path, "blob content does not match its SHA-256")
        return data

    def copier(self, sha: str, size: int, sid: str) -> Callable[[Callable[[Any], None]], None]:
        """Return a producer that streams blob ``sha`` into the ``write`` it is given."""
        return lambda write: self.stream(sha, size, sid, write)

    # -- writing ----------------------------------------------------------------------------------

    def new_tmp(self) -> tuple[str, int]:
        """Create a new staging file in ``tmp/``; returns its path and a descriptor to write."""
        tmp = os.path.join(self._files.tmpdir, uuid.uuid4().hex)
        fd = self._files.ops.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW, 0o600)
        return tmp, fd

    def write_all(self, fd: int, data: bytes) -> None:
        """Write all of ``data`` to ``fd`` (``write(2)`` until nothing is left)."""
        view = memoryview(data)
        while view:
            view = view[self._files.ops.write(fd, view) :]

    def close_fd(self, fd: int) -> None:
        """Close a staging file's descriptor."""
        self._files.ops.close(fd)

    def stage_bytes(self, data: bytes) -> str:
        """Write ``data`` to a new staging file (not yet durable); returns its path."""
        tmp, fd = self.new_tmp()
        try:
            try:
                self.write_all(fd, data)
            finally:
                self._files.ops.close(fd)
        except BaseException:
            self._files.unlink(tmp)
            raise
        return tmp

    def commit(self, staged: dict[str, tuple[str, int]], out: dict[str, int]) -> None:
        """Move staged files into the blob store: quota check, flush, rename each, flush.

        Sets the ``gc.pending`` marker before the first rename; the caller clears it
        (:meth:`clear_gc_mark`) once a manifest names the new blobs.

        Args:
            staged: sha256 -> (staging path, size). Staging files of blobs already present are
                removed.
            out: Filled with sha256 -> size of every blob renamed into place (for rollback).

        Raises:
            QuotaExceeded: The new blobs would pass ``store_max_bytes`` (nothing is stored).
        """
        files = self._files
        new = {}
        for sha, (tmp, size) in staged.items():
            if self.exists(sha):
                files.unlink(tmp)
            else:
                new[sha] = (tmp, size)
        if not new:
            return
        needed = sum(size for _tmp, size in new.values())
        quota = files.limits.store_max_bytes
        used = self.usage()
        if used + needed > quota:
            used = self.usage(exact=True)
            if used + needed > quota:
                raise QuotaExceeded(quota, used, needed)
        few = len(new) <= _FSYNC_EACH_MAX
        if few:
            for tmp, _size in new.values():
                files.fsync_path(tmp)
        else:
            files.flush()  # the content of every staged blob is durable before any rename
        self.mark_gc()  # from here until the manifest is written, orphan blobs may exist
        new_sub = False
        for sha, (tmp, size) in sorted(new.items()):
            new_sub |= self._commit_one(tmp, sha)
            out[sha] = size
        if few:
            for sub in sorted({sha[:2] for sha in new}):
                files.fsync_dir(os.path.join(files.blobdir, sub))
            if new_sub:
                files.fsync_dir(files.blobdir)
        else:
            files.flush()  # the renames (and new blobs/<2 hex> directories) are durable

    def _commit_one(self, tmp: str, sha: str) -> bool:
        ops = self._files.ops
        if self._subdirs is None:
            self._subdirs = set(ops.listdir(self._files.blobdir))
        made = False
        if sha[:2] not in self._subdirs:
            with contextlib.suppress(FileExistsError):
                ops.mkdir(os.path.join(self._files.blobdir, sha[:2]), 0o700)
                made = True
            self._subdirs.add(sha[:2])
        ops.rename(tmp, self.path(sha))
        return made

    def rollback(self, sid: str, new_blobs: Iterable[str]) -> None:
        """Undo a failed create/import: its manifest (if it got renamed in), then its new blobs.

        If undoing fails too, the gc marker stays and the next open collects what is left.
        """
        files = self._files
        try:
            if files.has_manifest(sid):
                files.remove_manifest(sid)
            for sha in new_blobs:
                files.unlink(self.path(sha))
        except OSError:
            log.warning("could not undo the failed snapshot %s; collected on next open", sid)

    # -- quota ------------------------------------------------------------------------------------

    def _blob_usage(self) -> int:
        total = 0
        for sha in self.all():
            with contextlib.suppress(FileNotFoundError):
                total += self._files.ops.lstat(self.path(sha)).st_size
        return total

    def usage(self, *, exact: bool = False) -> int:
        """Bytes of blobs in the store (cached while the set of manifests is unchanged)."""
        key = self._files.catalogue_key()
        if not exact and self._usage_cache is not None and self._usage_cache[0] == key:
            return self._usage_cache[1]
        used = self._blob_usage()
        self._usage_cache = (key, used)
        return used

    def usage_grew(self, new_bytes: int) -> None:
        """Account for a snapshot just saved that added ``new_bytes`` (when usage is cached)."""
        if self._usage_cache is not None:
            used = self._usage_cache[1] + new_bytes
            self._usage_cache = (self._files.catalogue_key(), used)

    def forget_usage(self) -> None:
        """Drop the cached usage (the next quota check measures again)."""
        self._usage_cache = None

    # -- garbage collection -----------------------------------------------------------------------

    def mark_gc(self) -> None:
        """Durably create the (empty) marker saying unreferenced blobs may exist."""
        files = self._files
        path = os.path.join(files.path, GC_MARK)
        if os.path.lexists(path):
            return
        files.ops.close(files.ops.open(path, os.O_WRONLY | os.O_CREAT | O_NOFOLLOW, 0o600))
        files.fsync_dir(files.path)

    def clear_gc_mark(self) -> None:
        """Remove the marker once a manifest names every new blob (not made durable here)."""
        self._files.unlink(os.path.join(self._files.path, GC_MARK))

    def gc_pending(self) -> bool:
        """Whether a crashed writer may have left unreferenced blobs or staging files."""
        files = self._files
        return os.path.lexists(os.path.join(files.path, GC_MARK)) or bool(
            files.ops.listdir(files.tmpdir)
        )

    def collect(self) -> GcReport:
        """Mark and sweep every blob of the local store (the caller holds the writers' lock).

        Returns:
            What was kept and deleted; nothing is deleted when a manifest cannot be read.
        """
        files = self._files
        bad: list[str] = []
        used: set[str | None] = set()
        manifests = 0
        for m in files.iter_manifests(bad):
            manifests += 1
            used.update(e.sha256 for e in m.entries.values() if e.kind == "file")
            del m  # not held while the next one loads
        sizes: dict[str, int] = {}
        for sha in self.all():
            with contextlib.suppress(FileNotFoundError):
                sizes[sha] = files.ops.lstat(self.path(sha)).st_size
        if bad:
            return GcReport(
                manifests,
                len(sizes),
                sum(sizes.values()),
                0,
                0,
                note=f"unreadable manifests {sorted(bad)[:3]}: no blob deleted",
            )
        victims = {sha for sha in sizes if sha not in used}
        self.gc(victims)
        self.forget_usage()
        gone = sum(sizes[sha] for sha in victims)
        return GcReport(
            manifests,
            len(sizes) - len(victims),
            sum(sizes.values()) - gone,
            len(victims),
            gone,
        )

    def gc(self, drop: set[str] | None = None) -> None:
        """Remove blobs no manifest names (and staging files), then the gc marker.

        A blob is removed only after every manifest on disk was read: if one cannot be read, no
        blob is removed at all.

        Args:
            drop: The only blobs that may have lost their last reference, or ``None`` to sweep
                every blob on disk.
        """
        files = self._files
        for name in files.ops.listdir(files.tmpdir):
            files.unlink(os.path.join(files.tmpdir, name))
        bad: list[str] = []
        used: set[str | None] = set()
        for m in files.iter_manifests(bad):  # one manifest in memory at a time
            used.update(e.sha256 for e in m.entries.values() if e.kind == "file")
            del m  # not held while the next one loads
        if not bad:
            if drop is not None:
                victims = [s for s in drop if s not in used]
            else:
                victims = [s for s in self.all() if s not in used]
            touched = set()
            for sha in victims:
                files.unlink(self.path(sha))
                touched.add(sha[:2])
            for sub in sorted(touched):
                files.fsync_dir(os.path.join(files.blobdir, sub))
            self.clear_gc_mark()
        else:
            # Keep the marker: collection is retried on the next open.
            log.warning("unreadable manifests %s: no blob removed", bad)
