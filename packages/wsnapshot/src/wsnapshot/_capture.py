"""Capture: reading the workspace into a snapshot, and hashing what it holds now.

:meth:`Capture.create_locked` is ``create``: one walk of the workspace (entries that cannot be
snapshotted are skipped with a reason), then every file whose stat key differs from the newest
snapshot is read once, in ``workers`` threads, hashed and staged as a blob when the store lacks
it (:mod:`wsnapshot._blobs`), and finally the manifest is saved. The stat keys of the newest
snapshot (the hash cache) also let restore's plan and ``diff`` know a file's SHA-256 without
reading it (:meth:`Capture.known_hashes`, :meth:`Capture.current_sha`).

Entries the server owns but cannot read (a directory made ``0o300`` or ``0o000``, a file created
``0o000``) are opened up for the snapshot (:mod:`wsnapshot._repair`): each original mode is
recorded, the snapshot keeps it exactly, and it is put back on the entry afterwards (deepest
first), whether the snapshot succeeded or not.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from wsnapshot import _storedir
from wsnapshot._blobs import BlobStore
from wsnapshot._fsio import Ops
from wsnapshot._manifest import Manifest, now_iso, symlink_problem
from wsnapshot._repair import loosen, set_mode, walk_tree
from wsnapshot._storedir import RESERVED_PREFIX, Key, StoreDir, parts, shown, stat_key
from wsnapshot.exceptions import (
    SnapshotError,
    SnapshotTooLarge,
    UnsafePathError,
    WorkspaceLimitError,
)
from wsnapshot.snapshot import FileRecord, SkippedEntry, SnapshotInfo
from wsnapshot.workspace import (
    KIND_DIR,
    KIND_FILE,
    KIND_SYMLINK,
    MAX_DEPTH,
    SafeWorkspace,
    WalkEntry,
)

__all__ = ["Capture", "ModeGuard"]

log = logging.getLogger("wsnapshot")

#: A file whose ctime is this close to "now" may still change without its stat key changing
#: (timestamps have a granularity); its hash is not remembered for incremental snapshots.
_RACY_NS = 100_000_000
_RACY_COARSE_NS = 2_000_000_000


def _racy(st: os.stat_result, now_ns: int) -> bool:
    window = _RACY_COARSE_NS if st.st_ctime_ns % 1_000_000_000 == 0 else _RACY_NS
    return now_ns - st.st_ctime_ns < window


def _utf8(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class ModeGuard:
    """The original modes of the entries opened up for a snapshot, to record and put back.

    Thread-safe (files are opened up from the hashing threads).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._modes: dict[str, tuple[int, tuple[int, int], bool]] = {}

    def add(self, path: str, mode: int, ident: tuple[int, int], *, directory: bool) -> None:
        """Remember ``path``'s original ``mode`` (the first one seen wins)."""
        with self._lock:
            self._modes.setdefault(path, (mode, ident, directory))

    def add_dir(self, path: str, mode: int, ident: tuple[int, int]) -> None:
        """:meth:`add` for a directory (a :data:`wsnapshot._repair.Repaired` callback)."""
        self.add(path, mode, ident, directory=True)

    def mode(self, path: str, current: int) -> int:
        """The mode to record for ``path``: its original one if it was changed, else ``current``."""
        with self._lock:
            got = self._modes.get(path)
        return current if got is None else got[0]

    def changed(self, path: str) -> bool:
        """Whether ``path``'s mode was changed (its stat key is then not cached)."""
        with self._lock:
            return path in self._modes

    def put_back(self, ws: SafeWorkspace, root_fd: int, ops: Ops) -> None:
        """Set every original mode back, deepest first (best effort: failures are logged)."""
        for path in sorted(self._modes, key=lambda p: (-p.count("/"), p)):
            mode, ident, directory = self._modes[path]
            names = parts(path)
            try:
                dfd = ws.open_dir(root_fd, names[:-1])
                try:
                    set_mode(ops, dfd, names[-1], mode, ident, directory=directory)
                finally:
                    ops.close(dfd)
            except (OSError, SnapshotError) as exc:
                log.warning("could not put back the mode %o of %s: %s", mode, shown(path), exc)
        self._modes.clear()


@dataclass
class _Ingested:
    sha: str
    size: int
    st: os.stat_result
    stable: bool


class Capture:
    """Snapshot creation and the hashes of the workspace's current files.

    Args:
        files: The store directory (limits, manifests, system calls).
        blobs: Where new content is staged and committed.
        ws: The workspace accessor.
    """

    def __init__(self, files: StoreDir, blobs: BlobStore, ws: SafeWorkspace) -> None:
        self._files = files
        self._blobs = blobs
        self._ws = ws
        self._cache: tuple[str, dict[str, tuple[Key, FileRecord]]] | None = None

    # -- the hash cache ---------------------------------------------------------------------------

    def hash_cache(self) -> dict[str, tuple[Key, FileRecord]]:
        """Stat keys and records of the newest snapshot, for incremental hashing.

        Every blob a stored manifest names is present (blobs are only collected when no manifest
        names them), so a cache entry is only trusted while its manifest still exists.
        """
        if self._cache is not None and self._files.has_manifest(self._cache[0]):
            return self._cache[1]
        m = self._files.newest_manifest()
        if m is None:
            return {}
        cache = {p: (k, m.entries[p]) for p, k in m.keys.items()}
        self._cache = (m.id, cache)
        return cache

    def forget(self, sid: str) -> None:
        """Stop trusting the hash cache if it came from snapshot ``sid`` (being deleted)."""
        if self._cache is not None and self._cache[0] == sid:
            self._cache = None

    def known_hashes(self, m: Manifest, *, load_newest: bool = True) -> dict[str, tuple[Key, str]]:
        """Path -> (stat key, SHA-256) from the newest snapshot, overlaid with ``m``'s keys.

        With ``load_newest`` false the newest snapshot's keys are used only when already in
        memory: finding the newest reads every manifest of the store (up to 100,000 entries
        each), which ``diff`` must not pay for; a file whose stat key ``m`` lacks is hashed.
        """
        if load_newest:
            newest = self.hash_cache()
        elif self._cache is not None and self._files.has_manifest(self._cache[0]):
            newest = self._cache[1]
        else:
            newest = {}
        cache = {p: (k, r.sha256 or "") for p, (k, r) in newest.items()}
        for p, k in m.keys.items():
            cache[p] = (k, m.entries[p].sha256 or "")
        return cache

    def current_sha(
        self, root_fd: int, e: WalkEntry, expect_size: int, cache: dict[str, tuple[Key, str]]
    ) -> str | None:
        """The SHA-256 of workspace file ``e`` if it is ``expect_size`` bytes, else ``None``.

        Taken from ``cache`` when ``e``'s stat key is there, otherwise read and hashed (``None``
        too when the file cannot be opened safely).
        """
        hit = cache.get(e.path)
        if hit is not None and hit[0] == stat_key(e.st):
            return hit[1]
        ops = self._files.ops
        try:
            fd, _st = self._ws.open_regular(root_fd, parts(e.path))
        except (SnapshotError, OSError):
            return None
        try:
            h = hashlib.sha256()
            total = 0
            while True:
                b = ops.read(fd, _storedir.CHUNK)
                if not b:
                    break
                total += len(b)
                if total > expect_size:
                    return None
                h.update(b)
        finally:
            ops.close(fd)
        return h.hexdigest() if total == expect_size else None

    # -- the scan ---------------------------------------------------------------------------------

    def scan(
        self, root_fd: int, denied: list[str] | None = None
    ) -> tuple[list[WalkEntry], list[SkippedEntry]]:
        """Walk the workspace for ``create``: the entries to keep and those skipped, with why.

        Args:
            root_fd: The workspace's descriptor.
            denied: If given, filled with the directories that could not be walked for lack of
                permission.

        Raises:
            SnapshotTooLarge: More than ``max_files`` entries or ``max_bytes`` bytes.
        """
        limits = self._files.limits
        skipped: list[SkippedEntry] = []

        def problem(path: str, reason: str) -> None:
            skipped.append(SkippedEntry(shown(path), reason))

        try:
            walked = self._ws.walk(
                root_fd,
                max_entries=limits.max_files + 10_000,
                on_problem=problem,
                on_denied=None if denied is None else denied.append,
            )
        except WorkspaceLimitError:
            raise SnapshotTooLarge(
                "max_files", limits.max_files, limits.max_files + 10_000
            ) from None
        keep: list[WalkEntry] = []
        bad_dirs: list[str] = []
        for e in walked:
            path = e.path
            if bad_dirs and any(path.startswith(d) for d in bad_dirs):
                continue
            reason = None
            if not path.isascii() and not _utf8(path):
                reason = "name is not valid UTF-8"
            elif RESERVED_PREFIX in path and any(
                p.startswith(RESERVED_PREFIX) for p in path.split("/")
            ):
                reason = f"names starting with {RESERVED_PREFIX!r} are reserved"
            elif e.kind == KIND_SYMLINK:
                reason = symlink_problem(path, e.target or "")
            elif e.kind not in (KIND_FILE, KIND_DIR):
                reason = "special file (FIFO, socket or device) is not snapshotted"
            if reason is not None:
                skipped.append(SkippedEntry(shown(path), reason))
                if e.kind == KIND_DIR:
                    bad_dirs.append(path + "/")
                continue
            keep.append(e)
        if len(keep) > limits.max_files:
            raise SnapshotTooLarge("max_files", limits.max_files, len(keep))
        total = sum(e.st.st_size for e in keep if e.kind == KIND_FILE)
        if total > limits.max_bytes:
            raise SnapshotTooLarge("max_bytes", limits.max_bytes, total)
        return keep, skipped

    # -- create -----------------------------------------------------------------------------------

    def create_locked(self, description: str) -> SnapshotInfo:
        """Snapshot the workspace (the caller holds the store's lock and has recovered it).

        Returns:
            The new snapshot's info.

        Raises:
            SnapshotTooLarge: More than ``max_files`` entries or ``max_bytes`` bytes.
            QuotaExceeded: The new blobs would pass ``store_max_bytes``.
        """
        files, blobs, ops = self._files, self._blobs, self._files.ops
        root_fd = self._ws.open_root()
        guard = ModeGuard()
        try:
            denied: list[str] = []
            entries, skipped = self.scan(root_fd, denied)
            if denied:
                self._open_up(root_fd, denied, guard)
                entries, skipped = self.scan(root_fd)
            cache = self.hash_cache()
            records: dict[str, FileRecord] = {}
            keys: dict[str, Key] = {}
            todo: list[WalkEntry] = []
            for e in entries:
                st = e.st
                if e.kind == KIND_FILE:
                    hit = cache.get(e.path)
                    key = stat_key(st)
                    if hit is not None and hit[0] == key:
                        # same size, mtime, ctime, inode and device: content and mode unchanged
                        records[e.path] = hit[1]
                        keys[e.path] = key
                    else:
                        todo.append(e)
                elif e.kind == KIND_DIR:
                    mode = guard.mode(e.path, stat.S_IMODE(st.st_mode) & 0o777)
                    records[e.path] = FileRecord(e.path, "dir", st.st_mtime_ns, mode=mode)
                else:
                    records[e.path] = FileRecord(e.path, "symlink", st.st_mtime_ns, target=e.target)
            staged: dict[str, tuple[str, int]] = {}
            new_shas: dict[str, int] = {}
            m_id = str(uuid.uuid4())
            try:
                budget = files.limits.max_bytes - sum(r.size for r in records.values())
                results = self._ingest_all(root_fd, todo, budget, staged, guard)
                now = time.time_ns()
                for e in todo:
                    got = results.get(e.path)
                    if isinstance(got, str):
                        skipped.append(SkippedEntry(shown(e.path), got))
                        continue
                    if got is None:
                        continue
                    records[e.path] = FileRecord(
                        e.path,
                        "file",
                        got.st.st_mtime_ns,
                        mode=guard.mode(e.path, stat.S_IMODE(got.st.st_mode) & 0o777),
                        size=got.size,
                        sha256=got.sha,
                    )
                    if got.stable and not _racy(got.st, now) and not guard.changed(e.path):
                        keys[e.path] = stat_key(got.st)
                self._drop_orphan_records(records)
                blobs.commit(staged, new_shas)
                m = Manifest(
                    id=m_id,
                    created_at=now_iso(),
                    description=description,
                    entries=records,
                    new_bytes=sum(new_shas.values()),
                    skipped=sorted(skipped, key=lambda s: s.path),
                    keys=keys,
                )
                files.save_manifest(m)
            except BaseException:
                for tmp, _size in staged.values():
                    with contextlib.suppress(OSError):
                        files.unlink(tmp)
                blobs.rollback(m_id, new_shas)
                raise
            if new_shas:
                blobs.clear_gc_mark()
        finally:
            try:
                guard.put_back(self._ws, root_fd, ops)
            finally:
                ops.close(root_fd)
        self._cache = (m.id, {p: (k, records[p]) for p, k in keys.items()})
        if new_shas:
            blobs.usage_grew(m.new_bytes)
        return m.info()

    def _open_up(self, root_fd: int, denied: list[str], guard: ModeGuard) -> None:
        """Give the owner's ``rwx`` to each directory of ``denied`` and below, recording modes."""
        for path in sorted(denied, key=lambda p: (p.count("/"), p)):
            names = parts(path)
            try:
                dfd = self._ws.open_dir(root_fd, names[:-1])
                try:
                    walk_tree(
                        self._files.ops,
                        dfd,
                        names[-1],
                        path,
                        on_entry=None,
                        on_leave=None,
                        repaired=guard.add_dir,
                        max_depth=MAX_DEPTH - path.count("/"),
                    )
                finally:
                    self._files.ops.close(dfd)
            except (PermissionError, FileNotFoundError, SnapshotError) as exc:
                log.warning("cannot open up %s for the snapshot: %s", shown(path), exc)

    def _ingest_locked_file(
        self,
        root_fd: int,
        e: WalkEntry,
        guard: ModeGuard,
        exc: PermissionError,
        read: Callable[[], _Ingested],
    ) -> _Ingested | str:
        """Give the owner's ``r`` to unreadable file ``e`` (recording its mode), then read it."""
        names = parts(e.path)
        ops = self._files.ops
        try:
            dfd = self._ws.open_dir(root_fd, names[:-1])
            try:
                got = loosen(ops, dfd, names[-1], e.path, directory=False)
            finally:
                ops.close(dfd)
        except (PermissionError, UnsafePathError) as exc2:
            return f"cannot read: {exc2}"
        if got is None:
            return f"cannot read: {exc.strerror}"
        guard.add(e.path, got[0], got[1], directory=False)
        return read()

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
        todo: list[WalkEntry],
        budget: int,
        staged: dict[str, tuple[str, int]],
        guard: ModeGuard,
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

            def read() -> _Ingested:
                return self._ingest(root_fd, e=e, lock=lock, left=left, staged=staged)

            try:
                try:
                    got = read()
                except PermissionError as exc:
                    got = self._ingest_locked_file(root_fd, e, guard, exc, read)
            except UnsafePathError as exc:
                got = f"changed while being read: {exc.reason}"
            except FileNotFoundError:
                got = None
            except PermissionError as exc:
                got = f"cannot read: {exc.strerror}"
            with lock:
                results[e.path] = got

        workers = self._files.limits.workers
        if workers <= 1 or len(todo) <= 1:
            for e in todo:
                one(e)
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                futures = [pool.submit(one, e) for e in todo]
                try:
                    for fut in futures:
                        fut.result()
                except BaseException:
                    for fut in futures:
                        fut.cancel()
                    raise
        return results

    def _take(self, lock: threading.Lock, left: list[int], n: int) -> None:
        with lock:
            left[0] -= n
            if left[0] < 0:
                max_bytes = self._files.limits.max_bytes
                raise SnapshotTooLarge("max_bytes", max_bytes, max_bytes - left[0])

    def _ingest(
        self,
        root_fd: int,
        *,
        e: WalkEntry,
        lock: threading.Lock,
        left: list[int],
        staged: dict[str, tuple[str, int]],
    ) -> _Ingested:
        """Read one workspace file once: hash it, and stage its content if the store lacks it."""
        ops = self._files.ops
        blobs = self._blobs
        chunk = _storedir.CHUNK
        fd, st = self._ws.open_regular(root_fd, parts(e.path))
        tmp_fd = -1
        tmp = ""
        try:
            h = hashlib.sha256()
            first = ops.read(fd, chunk)
            self._take(lock, left, len(first))
            size = len(first)
            h.update(first)
            if len(first) == chunk:
                tmp, tmp_fd = blobs.new_tmp()
                blobs.write_all(tmp_fd, first)
                while True:
                    b = ops.read(fd, chunk)
                    if not b:
                        break
                    self._take(lock, left, len(b))
                    size += len(b)
                    h.update(b)
                    blobs.write_all(tmp_fd, b)
                ops.close(tmp_fd)
                tmp_fd = -1
            st2 = ops.fstat(fd)
            sha = h.hexdigest()
            with lock:
                wanted = sha not in staged
            if wanted and not blobs.known(sha):
                if not tmp:
                    tmp = blobs.stage_bytes(first)
                with lock:
                    if sha not in staged:
                        staged[sha] = (tmp, size)
                        tmp = ""  # owned by `staged` now
            stable = stat_key(st2) == stat_key(st) and size == st.st_size
            return _Ingested(sha, size, st, stable=stable)
        finally:
            if tmp_fd >= 0:
                with contextlib.suppress(OSError):
                    ops.close(tmp_fd)
            if tmp:
                with contextlib.suppress(OSError):
                    self._files.unlink(tmp)
            ops.close(fd)

    # -- the workspace as a snapshot, for diff ----------------------------------------------------

    def workspace_records(self, ma: Manifest) -> dict[str, FileRecord]:
        """The workspace as records, for ``diff`` against ``ma``.

        Entries ``create`` would skip are left out. A file's SHA-256 is only computed when
        ``ma`` has a file of the same size at that path; otherwise it is ``"?"``.
        """
        root_fd = self._ws.open_root()
        try:
            entries, _skipped = self.scan(root_fd)
            cache = self.known_hashes(ma, load_newest=False)
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
                        sha = self.current_sha(root_fd, e, st.st_size, cache)
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
            self._files.ops.close(root_fd)
