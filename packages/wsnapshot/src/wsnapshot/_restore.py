"""Restore: plan, apply, and the journal that lets a crashed restore roll forward.

A restore (:meth:`Restorer.restore_locked`) has three steps:

1. **Plan** (:meth:`Restorer.plan`): one walk of the workspace compared with the manifest gives
   what to delete, create, rewrite, recreate, and what needs only its metadata set; files whose
   stat key the hash cache knows are not read (:mod:`wsnapshot._capture`).
2. **Verify and journal**: every blob the plan needs is verified against its SHA-256 before the
   workspace is touched; then the intent journal ``restore.journal`` (naming the snapshot) is
   written atomically.
3. **Apply** (:meth:`Restorer.apply`): the changes, in the documented order, through
   descriptors only (never through a symlink), then one flush of the workspace's file system;
   the journal is removed last.

A crash after step 2 leaves the journal: the next open (:meth:`Restorer.roll_forward`) plans and
applies the same snapshot again, which completes it whatever was already done.

What a run can leave is repaired, never fatal (:mod:`wsnapshot._repair`): directories the server
owns but cannot list or search are given the owner's ``rwx`` back (the journal is written
first, then the plan is made again), and trees of any depth are removed iteratively with a
bounded number of descriptors. An error that cannot be repaired (``EIO``, ``ENOSPC``,
``EROFS``...) after the journal was written marks the workspace inconsistent (the
``inconsistent.json`` marker: which snapshot, what failed, when); if the roll-forward at the next
open fails too, the journal is set aside (renamed ``restore.journal.<time>.failed``, never
deleted) so that the store still opens. A successful restore clears the marker.
"""

# dir_fd= system calls have no pathlib equivalent:
# ruff: noqa: PTH118

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import stat
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from wsnapshot._blobs import BlobStore
from wsnapshot._capture import Capture
from wsnapshot._manifest import FORMAT, Manifest, check_id, now_iso
from wsnapshot._repair import walk_tree
from wsnapshot._storedir import INCONSISTENT, JOURNAL, RESERVED_PREFIX, StoreDir, parts, shown
from wsnapshot.exceptions import (
    CorruptSnapshot,
    SnapshotError,
    SnapshotNotFound,
)
from wsnapshot.snapshot import FileRecord, RestoreReport
from wsnapshot.workspace import KIND_DIR, MAX_DEPTH, SafeWorkspace, WalkEntry

__all__ = ["Plan", "Restorer"]

log = logging.getLogger("wsnapshot")


@dataclass
class Plan:
    """What a restore changes, path by path (workspace-relative, ``/``-separated).

    Attributes:
        delete_files: Files and links the snapshot does not have (or has as another kind).
        delete_dirs: Directories it does not have, and those the walk could not read.
        create_dirs: Its directories missing from the workspace (parents first).
        rewrite: Files and links present with other content, link target or shared inode.
        recreate: Its files and links missing from the workspace.
        metadata: Entries whose content matches but whose mode or mtime differs.
        loosen_dirs: Directories (path, mode) to make searchable and writable first.
        denied: Directories the walk could not open or list for lack of permission (to repair
            before the plan is made again).
        unchanged: How many entries already match.
    """

    delete_files: list[str] = field(default_factory=list)
    delete_dirs: list[str] = field(default_factory=list)
    create_dirs: list[str] = field(default_factory=list)
    rewrite: list[str] = field(default_factory=list)
    recreate: list[str] = field(default_factory=list)
    metadata: list[str] = field(default_factory=list)
    loosen_dirs: list[tuple[str, int]] = field(default_factory=list)
    denied: list[str] = field(default_factory=list)
    unchanged: int = 0


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        name = errno.errorcode.get(exc.errno, str(exc.errno))
        where = f" ({shown(str(exc.filename))})" if exc.filename is not None else ""
        return f"{name}: {exc.strerror}{where}"
    return f"{type(exc).__name__}: {exc}"


class Restorer:
    """Journalled restore of the workspace to a snapshot.

    Args:
        files: The store directory (manifests, journal, limits, system calls).
        blobs: Where the snapshot's content is read and verified.
        capture: The hash cache and current-file hashing shared with ``create``.
        ws: The workspace accessor.
    """

    def __init__(
        self, files: StoreDir, blobs: BlobStore, capture: Capture, ws: SafeWorkspace
    ) -> None:
        self._files = files
        self._blobs = blobs
        self._capture = capture
        self._ws = ws
        self._unrecorded: str | None = None  # the reason, when the marker could not be written

    # -- the inconsistent state -------------------------------------------------------------------

    def inconsistent(self) -> tuple[str | None, str] | None:
        """``(snapshot id, reason)`` of a failed restore, or ``None`` when the workspace is sound.

        Read from the store's ``inconsistent.json`` marker (an unreadable marker still counts);
        a restore journal still present (a roll-forward that could not even start, or a restore
        running in another process) counts too.
        """
        path = os.path.join(self._files.path, INCONSISTENT)
        try:
            if not os.path.lexists(path):  # (no system call of the store's on the sound path)
                raise FileNotFoundError(path)
            raw = self._files.read_file(path, 64 * 1024)
        except FileNotFoundError:
            if self._unrecorded is not None:
                return None, self._unrecorded
            if os.path.lexists(os.path.join(self._files.path, JOURNAL)):
                return None, f"a restore was interrupted and is not completed ({JOURNAL} pending)"
            return None
        except OSError as exc:
            return None, f"the marker {path} cannot be read ({exc.strerror})"
        try:
            doc = json.loads(raw)
            sid = check_id(doc["snapshot_id"])
            reason = (
                f"the restore of snapshot {sid} failed at {doc['at']} with "
                f"{doc['error']} (journal: {doc['journal']})"
            )
        except (ValueError, KeyError, TypeError, SnapshotError):
            return None, f"a restore failed (the marker {path} is unreadable)"
        return sid, reason

    def mark_inconsistent(self, sid: str, exc: BaseException, journal: str) -> bool:
        """Durably record that the restore of ``sid`` failed with ``exc`` (best effort).

        If the marker cannot be written (the store's disk fails too) the reason is kept in
        memory, so this store object still refuses ``create``.

        Returns:
            Whether the marker was written.
        """
        body = {
            "format": FORMAT,
            "kind": "wsnapshot-inconsistent",
            "snapshot_id": sid,
            "error": _describe(exc),
            "at": now_iso(),
            "journal": journal,
        }
        log.error("restore of %s failed: %s; the workspace is marked inconsistent", sid, exc)
        try:
            self._files.write_file(self._files.path, INCONSISTENT, json.dumps(body).encode())
        except OSError as exc2:
            log.error("cannot write the inconsistent marker: %s", exc2)
            self._unrecorded = f"the restore of snapshot {sid} failed with {_describe(exc)}"
            return False
        return True

    def clear_inconsistent(self) -> bool:
        """Remove the marker (after a successful restore, or an operator's repair).

        Returns:
            Whether there was one.
        """
        had = self._unrecorded is not None
        self._unrecorded = None
        path = os.path.join(self._files.path, INCONSISTENT)
        if not os.path.lexists(path):
            return had
        self._files.unlink(path)
        self._files.fsync_dir(self._files.path)
        return True

    def _set_aside(self, sid: str, exc: BaseException) -> None:
        """Mark the workspace inconsistent, then rename the journal aside (never deleted).

        Without a marker on disk the journal stays where it is (the next open tries again):
        a journal set aside unmarked would let a half-restored workspace pass for sound.
        """
        files = self._files
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        aside = f"{JOURNAL}.{stamp}-{uuid.uuid4().hex[:8]}.failed"
        if not self.mark_inconsistent(sid, exc, aside):
            return
        try:
            files.ops.rename(os.path.join(files.path, JOURNAL), os.path.join(files.path, aside))
            files.fsync_dir(files.path)
        except OSError as exc2:
            log.error("cannot set the restore journal aside: %s", exc2)

    # -- journal ----------------------------------------------------------------------------------

    def roll_forward(self) -> None:
        """Complete the restore a crashed writer's journal names (the caller holds the lock).

        An unreadable journal, or one naming a snapshot that is gone or corrupt, is logged and
        discarded. If completing it fails on any other error (one that cannot be repaired), the
        workspace is marked inconsistent and the journal set aside: this never raises
        ``OSError`` or :class:`SnapshotError`, so the store always opens.
        """
        files = self._files
        jpath = os.path.join(files.path, JOURNAL)
        sid: str | None = None
        try:
            raw = files.read_file(jpath, 4096)
        except FileNotFoundError:
            raw = None
        if raw is not None:
            try:
                doc = json.loads(raw)
                sid = check_id(doc["snapshot_id"])
            except (ValueError, KeyError, TypeError, SnapshotError):
                log.error("discarding unreadable restore journal %s", jpath)
                files.unlink(jpath)
                files.fsync_dir(files.path)
        if sid is not None:
            try:
                self.restore_locked(sid, journal_written=True)
            except (SnapshotNotFound, CorruptSnapshot) as exc:
                log.error("cannot complete the interrupted restore of %s: %s", sid, exc)
                files.unlink(jpath)
                files.fsync_dir(files.path)
            except (OSError, SnapshotError) as exc:
                self._set_aside(sid, exc)

    def restore_locked(self, sid: str, *, journal_written: bool) -> RestoreReport:
        """Restore snapshot ``sid`` (the caller holds the lock and has recovered the store).

        Args:
            sid: A validated snapshot id.
            journal_written: The journal is already in place (a roll-forward).

        Returns:
            What was done, path by path.

        Raises:
            SnapshotNotFound: No such snapshot.
            CorruptSnapshot: Its manifest or a needed blob fails validation (before any
                change to the workspace, unless directories had to be repaired first).
            WorkspaceLimitError: The workspace is too large to walk.
            OSError: A failure that cannot be repaired; once the journal is written the
                workspace is marked inconsistent and the journal kept for a roll-forward.
        """
        files = self._files
        m = files.load(sid)
        try:
            return self._restore(m, journal_written=journal_written)
        except (OSError, SnapshotError) as exc:
            if not journal_written and os.path.lexists(os.path.join(files.path, JOURNAL)):
                self.mark_inconsistent(sid, exc, JOURNAL)
            raise

    def _restore(self, m: Manifest, *, journal_written: bool) -> RestoreReport:
        files, ops = self._files, self._files.ops
        sid = m.id
        t0 = time.perf_counter()
        root_fd = self._ws.open_root()
        try:
            plan = self.plan(root_fd, m)
            if plan.denied:
                # Repairing changes modes: the journal goes first, so a crash is completed.
                if not journal_written:
                    self._write_journal(sid)
                    journal_written = True
                self._repair(root_fd, plan.denied)
                plan = self.plan(root_fd, m)
            needed = {
                m.entries[p].sha256: m.entries[p].size
                for p in plan.rewrite + plan.recreate
                if m.entries[p].kind == "file"
            }
            for sha, size in sorted(needed.items()):
                assert sha is not None  # noqa: S101 - files always have a hash
                self._blobs.stream(sha, size, sid)
            if not journal_written:
                self._write_journal(sid)
            removed_files, removed_dirs = self.apply(root_fd, m, plan)
        finally:
            ops.close(root_fd)
        self.clear_inconsistent()  # before the journal goes: a crash between is rolled forward
        files.unlink(os.path.join(files.path, JOURNAL))
        files.fsync_dir(files.path)
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

    def _write_journal(self, sid: str) -> None:
        body = {"format": FORMAT, "kind": "wsnapshot-journal", "snapshot_id": sid}
        self._files.write_file(self._files.path, JOURNAL, json.dumps(body).encode())

    def _repair(self, root_fd: int, denied: list[str]) -> None:
        """Give the owner's ``rwx`` back to each directory of ``denied`` and to those below it."""
        for path in sorted(denied, key=lambda p: (p.count("/"), p)):
            parent, _, name = path.rpartition("/")
            with contextlib.suppress(FileNotFoundError), self._dir_at(root_fd, parent) as dfd:
                walk_tree(
                    self._files.ops,
                    dfd,
                    name,
                    path,
                    on_entry=None,
                    on_leave=None,
                    max_depth=MAX_DEPTH - path.count("/"),
                )

    # -- plan -------------------------------------------------------------------------------------

    def _scan_current(self, root_fd: int) -> tuple[dict[str, WalkEntry], list[str], list[str]]:
        problems: list[str] = []
        denied: list[str] = []
        walked = self._ws.walk(
            root_fd,
            max_entries=max(1_000_000, 4 * self._files.limits.max_files),
            on_problem=lambda path, _reason: problems.append(path),
            on_denied=denied.append,
        )
        return {e.path: e for e in walked}, problems, denied

    def plan(self, root_fd: int, m: Manifest) -> Plan:
        """Compare the workspace under ``root_fd`` with manifest ``m`` (reads, never writes)."""
        target = m.entries
        cur, problems, denied = self._scan_current(root_fd)
        cache = self._capture.known_hashes(m)
        plan = Plan(denied=denied)
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
                    self._capture.current_sha(root_fd, e, t.size, cache) == t.sha256
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

    # -- apply ------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _dir_at(self, root_fd: int, path: str) -> Iterator[int]:
        fd = self._ws.open_dir(root_fd, parts(path))
        try:
            yield fd
        finally:
            self._files.ops.close(fd)

    def _rmtree_at(
        self,
        dfd: int,
        name: str,
        path: str,
        out: tuple[list[str], list[str]],
    ) -> None:
        """Remove the tree ``name`` of ``dfd`` (any depth; unreadable directories repaired)."""
        files, dirs = out
        ops = self._files.ops

        def entry(d: int, n: str, p: str, _st: os.stat_result) -> None:
            with contextlib.suppress(FileNotFoundError):
                ops.unlink(n, dir_fd=d)
                files.append(shown(p))

        def leave(d: int, n: str, p: str) -> None:
            with contextlib.suppress(FileNotFoundError):
                ops.rmdir(n, dir_fd=d)
                dirs.append(shown(p))

        try:
            walk_tree(ops, dfd, name, path, on_entry=entry, on_leave=leave)
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            with contextlib.suppress(FileNotFoundError):
                ops.unlink(name, dir_fd=dfd)
                files.append(path)

    def apply(self, root_fd: int, m: Manifest, plan: Plan) -> tuple[list[str], list[str]]:
        """Carry out ``plan`` (restoring ``m``) in the workspace under ``root_fd``.

        The caller has verified every blob the plan needs and written the journal.

        Returns:
            The files and the directories removed (paths as shown to users).
        """
        ops = self._files.ops
        target = m.entries
        touched: set[str] = set()
        removed_files: list[str] = []
        removed_dirs: list[str] = []
        for path, mode in plan.loosen_dirs:
            with contextlib.suppress(FileNotFoundError), self._dir_at(root_fd, path) as fd:
                ops.fchmod(fd, mode | 0o700)
        # 1. Remove what the snapshot does not have: files and links, then directories.
        for path in plan.delete_files:
            parent, _, name = path.rpartition("/")
            with self._dir_at(root_fd, parent) as dfd:
                try:
                    ops.unlink(name, dir_fd=dfd)
                    removed_files.append(shown(path))
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
                    removed_dirs.append(shown(path))
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
            names = parts(path)
            if t.kind == "symlink":
                with self._dir_at(root_fd, "/".join(names[:-1])) as dfd:
                    ops.lutimens(names[-1], t.mtime_ns, dir_fd=dfd)
                continue
            fd, st = self._ws.open_regular(root_fd, names)
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
        ops = self._files.ops
        names = parts(t.path)
        with self._dir_at(root_fd, "/".join(names[:-1])) as dfd:
            if t.kind == "file":
                assert t.sha256 is not None  # noqa: S101 - validated manifest
                self._ws.write_at(
                    dfd,
                    names[-1],
                    self._blobs.copier(t.sha256, t.size, sid),
                    mode=t.mode,
                    mtime_ns=t.mtime_ns,
                    sync=False,  # flushed in one batch before the journal is removed
                )
                return
            assert t.target is not None  # noqa: S101 - validated manifest
            tmp = f"{RESERVED_PREFIX}{uuid.uuid4().hex}.tmp"
            ops.symlink(t.target, tmp, dir_fd=dfd)
            try:
                ops.lutimens(tmp, t.mtime_ns, dir_fd=dfd)
                ops.rename(tmp, names[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                with contextlib.suppress(OSError):
                    ops.unlink(tmp, dir_fd=dfd)
                raise
