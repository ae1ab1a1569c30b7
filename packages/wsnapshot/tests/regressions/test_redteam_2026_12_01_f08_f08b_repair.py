"""What a run can leave (F08, F08b): unreadable directories and files, trees of any depth.

The server runs unprivileged (the Docker image); root's permission bypass would hide every one
of these, so each test body runs in a forked child that drops to ``nobody`` when the suite runs
as root (:func:`_helpers.as_unprivileged`).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest

from _helpers import FaultyOps, as_unprivileged, build_tree, make_deep, tree_state, use_ops
from wsnapshot import SnapshotStore, WorkspaceInconsistent, _repair

BASE = {"keep.txt": b"keep", "sub/inner.txt": b"inner", "sub/deeper/x.bin": b"\x00\xff"}


def _mk(ws: Path, spec: str) -> None:
    """Leave what a run can leave, spelled ``spec``."""
    if spec == "dir-0o300-with-file":  # F08
        (ws / "d").mkdir(mode=0o700)
        (ws / "d" / "f").write_bytes(b"x")
        (ws / "d").chmod(0o300)
    elif spec == "dir-0o000-empty":
        (ws / "d").mkdir(mode=0o000)
    elif spec == "dir-0o000-with-tree":
        build_tree(ws, {"d/a/b.txt": b"b", "d/c.txt": b"c"})
        (ws / "d" / "a").chmod(0o000)
        (ws / "d").chmod(0o000)
    elif spec == "dir-0o600-not-searchable":
        build_tree(ws, {"d/f.txt": b"f"})
        (ws / "d").chmod(0o600)
    elif spec == "dir-0o100-search-only":
        build_tree(ws, {"d/f.txt": b"f"})
        (ws / "d").chmod(0o100)
    elif spec == "nested-unreadable":
        build_tree(ws, {"n/a/b/c/f.txt": b"f", "n/a/g.txt": b"g"})
        for p, mode in (("n/a/b/c", 0o300), ("n/a/b", 0o000), ("n/a", 0o500), ("n", 0o100)):
            (ws / p).chmod(mode)
    elif spec == "snapshot-dir-made-0o000":  # a directory the snapshot has, locked with new files
        (ws / "sub" / "new.txt").write_bytes(b"new")
        (ws / "sub" / "deeper").chmod(0o000)
        (ws / "sub").chmod(0o300)
    elif spec == "file-0o000":
        fd = os.open(ws / "secret.txt", os.O_WRONLY | os.O_CREAT, 0o000)
        os.write(fd, b"secret")
        os.close(fd)
    elif spec == "deep-1000":  # F08b
        make_deep(ws, "a", 1000)
    elif spec == "deep-5000":
        make_deep(ws, "a", 5000)
    elif spec == "deep-with-locked-dir":
        make_deep(ws, "a", 300)
        fd = os.open(ws / "a", os.O_RDONLY | os.O_DIRECTORY)
        for _ in range(298):
            nfd = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        os.chmod("a", 0o000, dir_fd=fd)  # the 300th, holding the leaf file
        os.close(fd)
    else:  # pragma: no cover
        raise AssertionError(spec)


SPECS = [
    "dir-0o300-with-file",
    "dir-0o000-empty",
    "dir-0o000-with-tree",
    "dir-0o600-not-searchable",
    "dir-0o100-search-only",
    "nested-unreadable",
    "snapshot-dir-made-0o000",
    "file-0o000",
    "deep-1000",
    "deep-5000",
    "deep-with-locked-dir",
]


def _fresh(base: Path) -> tuple[Path, Path]:
    ws = base / "ws"
    ws.mkdir()
    build_tree(ws, BASE)
    return ws, base / "store"


@pytest.mark.parametrize("spec", SPECS)
def test_restore_repairs_what_a_run_leaves(spec: str) -> None:
    def body(base: Path) -> None:
        ws, store_dir = _fresh(base)
        store = SnapshotStore(ws, store_dir, workers=1)
        clean = store.create("clean")
        want = tree_state(ws)
        _mk(ws, spec)
        report = store.restore(clean.id)
        assert tree_state(ws) == want
        assert store.inconsistent is None
        assert not (store_dir / "restore.journal").exists()
        assert report.snapshot_id == clean.id
        # and the restored workspace snapshots and restores as before
        assert store.diff(clean.id).is_empty

    as_unprivileged(body)


@pytest.mark.parametrize("spec", ["dir-0o300-with-file", "nested-unreadable", "deep-1000"])
def test_interrupted_restore_of_such_a_tree_completes_at_the_next_open(spec: str) -> None:
    """F08's second half: the journal of a failed restore used to crash every later open."""

    def body(base: Path) -> None:
        ws, store_dir = _fresh(base)
        store = SnapshotStore(ws, store_dir, workers=1)
        clean = store.create("clean")
        want = tree_state(ws)
        _mk(ws, spec)
        journal = {"format": 1, "kind": "wsnapshot-journal", "snapshot_id": clean.id}
        (store_dir / "restore.journal").write_text(json.dumps(journal))
        again = SnapshotStore(ws, store_dir, workers=1)  # rolls forward
        assert tree_state(ws) == want
        assert again.inconsistent is None
        assert not (store_dir / "restore.journal").exists()

    as_unprivileged(body)


def _meta(root: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """path -> (mode, mtime_ns, content) of everything below ``root``, as its owner sees it.

    Unreadable entries are opened up to be read, and their modes put back (a chmod changes
    neither a mode it restores nor any mtime).
    """
    out: dict[str, tuple[int, int, bytes | None]] = {}
    changed: list[tuple[Path, int]] = []

    def visit(d: Path, rel: str) -> None:
        for p in sorted(d.iterdir()):
            name = p.name
            st = p.lstat()
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISDIR(st.st_mode):
                out[rel + name] = (mode, st.st_mtime_ns, None)
                if mode & 0o700 != 0o700:
                    p.chmod(mode | 0o700)
                    changed.append((p, mode))
                visit(p, rel + name + "/")
            else:
                if not mode & 0o400:
                    p.chmod(mode | 0o400)
                    changed.append((p, mode))
                out[rel + name] = (mode, st.st_mtime_ns, p.read_bytes())

    visit(root, "")
    for p, mode in reversed(changed):
        p.chmod(mode)
    return out


@pytest.mark.parametrize(
    "spec", ["dir-0o300-with-file", "dir-0o000-with-tree", "nested-unreadable", "file-0o000"]
)
def test_create_reads_unreadable_entries_and_keeps_their_modes(spec: str) -> None:
    def body(base: Path) -> None:
        ws, store_dir = _fresh(base)
        _mk(ws, spec)
        before = _meta(ws)
        assert any(m & 0o400 == 0 for m, _t, _c in before.values())
        store = SnapshotStore(ws, store_dir, workers=2)
        info = store.create("locked")
        assert info.skipped == ()
        assert _meta(ws) == before  # every mode put back, no mtime changed
        recorded = {e.path: (e.mode, e.mtime_ns) for e in store.get(info.id).entries}
        assert recorded == {p: (m, t) for p, (m, t, _c) in before.items()}
        # restoring elsewhere gives the same content and modes back
        ws2 = base / "ws2"
        ws2.mkdir()
        other = SnapshotStore(ws2, base / "store2", workers=1)
        other.import_(store.export(info.id))
        other.restore(info.id)
        assert _meta(ws2) == before
        # and the workspace restores to itself (an unreadable file is rewritten, not read)
        store.restore(info.id)
        assert _meta(ws) == before

    as_unprivileged(body)


def test_tree_walk_keeps_few_descriptors_open(monkeypatch: pytest.MonkeyPatch) -> None:
    """5000 directories deep are removed with at most MAX_OPEN_DIRS (+ the caller's) open.

    (The plan's walk holds one descriptor per level down to ``MAX_DEPTH``, 128, as before.)
    """

    def body(base: Path) -> None:
        ws, store_dir = _fresh(base)
        store = SnapshotStore(ws, store_dir, workers=1)
        clean = store.create("clean")
        make_deep(ws, "a", 5000)
        peak = [0]
        fds = Path("/proc/self/fd")

        class Counting(FaultyOps):
            def rmdir(self, path: str, *, dir_fd: int | None = None) -> None:
                peak[0] = max(peak[0], len(list(fds.iterdir())))
                super().rmdir(path, dir_fd=dir_fd)

        base_fds = len(list(fds.iterdir()))
        use_ops(store, Counting(10**9))
        store.restore(clean.id)
        assert not (ws / "a").exists()
        assert 0 < peak[0] - base_fds <= _repair.MAX_OPEN_DIRS + 8

    as_unprivileged(body)


class _Failing(FaultyOps):
    """Ops whose every ``name`` call fails with ``err`` once ``armed``."""

    def __init__(self, name: str, err: int, *, armed: bool = False) -> None:
        super().__init__(10**9)
        self.name, self.err, self.armed = name, err, armed
        self.hook = self._fail

    def _fail(self, _count: int, called: str) -> None:
        if called == self.name and self.armed:
            raise OSError(self.err, os.strerror(self.err))


@pytest.mark.parametrize(
    ("call", "err", "recorded"),
    [
        ("unlink", errno.EIO, True),
        ("futimens", errno.ENOSPC, True),
        ("mkdir", errno.EROFS, True),
        ("write", errno.ENOSPC, False),  # not even the marker can be written
        ("rename", errno.EIO, False),
    ],
)
def test_unrepairable_error_marks_inconsistent_and_the_store_still_opens(
    tmp_path: Path, call: str, err: int, recorded: bool
) -> None:
    ws, store_dir = tmp_path / "ws", tmp_path / "store"
    ws.mkdir()
    build_tree(ws, BASE)
    store = SnapshotStore(ws, store_dir, workers=1)
    clean = store.create("clean")
    want = tree_state(ws)
    build_tree(ws, {"junk/x.txt": b"x", "junk2/y.txt": b"y"})
    (ws / "keep.txt").write_bytes(b"changed")
    (ws / "sub" / "deeper").rename(ws / "moved")
    ops = _Failing(call, err)
    use_ops(store, ops)

    def arm(count: int, called: str) -> None:  # armed once the journal is written
        ops.armed = ops.armed or (store_dir / "restore.journal").exists()
        ops._fail(count, called)

    ops.hook = arm
    with pytest.raises(OSError) as got:
        store.restore(clean.id)
    assert got.value.errno == err
    reason = store.inconsistent
    assert reason is not None
    assert clean.id in reason and errno.errorcode[err] in reason
    with pytest.raises(WorkspaceInconsistent) as refused:
        store.create("refused")
    assert "restore a snapshot" in str(refused.value) and clean.id in str(refused.value)
    # the next open, still on a failing disk, sets the journal aside and opens
    import wsnapshot._fsio as fsio

    again_ops = _Failing(call, err, armed=True)
    real = fsio._OPS
    fsio._OPS = again_ops
    try:
        reopened = SnapshotStore(ws, store_dir, workers=1)
    finally:
        fsio._OPS = real
    assert reopened.inconsistent is not None
    assert [i.id for i in reopened.list()] == [clean.id]  # reads keep working
    aside = sorted(p.name for p in store_dir.iterdir() if p.name.endswith(".failed"))
    if not recorded:
        # no marker could be written: the journal stays, the next healthy open completes it
        assert aside == [] and (store_dir / "restore.journal").exists()
        healthy = SnapshotStore(ws, store_dir, workers=1)
        assert healthy.inconsistent is None and tree_state(ws) == want
        return
    assert not (store_dir / "restore.journal").exists()
    assert len(aside) == 1 and aside[0].startswith("restore.journal.")
    marker = json.loads((store_dir / "inconsistent.json").read_text())
    assert marker["snapshot_id"] == clean.id and marker["journal"] == aside[0]
    # a successful restore is the remedy
    healthy = SnapshotStore(ws, store_dir, workers=1)
    assert healthy.inconsistent is not None
    healthy.restore(clean.id)
    assert tree_state(ws) == want
    assert SnapshotStore(ws, store_dir, workers=1).inconsistent is None
    assert healthy.create("after").file_count == 3


def test_clear_inconsistent(tmp_path: Path) -> None:
    ws, store_dir = tmp_path / "ws", tmp_path / "store"
    ws.mkdir()
    store = SnapshotStore(ws, store_dir, workers=1)
    assert store.clear_inconsistent() is False
    sid = store.create().id
    marker = {
        "format": 1,
        "kind": "wsnapshot-inconsistent",
        "snapshot_id": sid,
        "error": "EIO: Input/output error",
        "at": "2026-12-01T00:00:00.000000Z",
        "journal": "restore.journal.x.failed",
    }
    (store_dir / "inconsistent.json").write_text(json.dumps(marker))
    assert "EIO" in (store.inconsistent or "")
    with pytest.raises(WorkspaceInconsistent):
        store.create()
    assert store.clear_inconsistent() is True
    assert store.inconsistent is None
    store.create()
