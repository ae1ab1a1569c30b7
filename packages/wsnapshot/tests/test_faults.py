"""Deterministic fault injection at every system call of create, restore and delete.

For each k, the k-th system call fails, either as a crash (that call and every later one never
happen) or as a one-off ``EIO``. The store is then reopened with working system calls and must be
clean: no half snapshot listed, every listed snapshot complete and verified, no stray blob,
staging file, journal or marker; the workspace is exactly the old or the new state.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from _helpers import Crash, FaultyOps, State, as_unprivileged, build_tree, tree_state, use_ops
from wsnapshot import SnapshotError, SnapshotStore, _blobs, _fsio, _storedir


@pytest.fixture(autouse=True)
def _no_disk_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process crashes keep the page cache, so real flushes only cost time here; every
    ``fsync`` still counts as a step (and can fail) in :class:`FaultyOps`."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    monkeypatch.setattr(os, "sync", lambda: None)
    monkeypatch.setitem(_fsio._libc_state, "syncfs", None)  # syncfs -> the patched os.sync
    monkeypatch.setattr(_storedir, "CHUNK", 4096)  # small files take the streaming path too


BASE = {
    "keep.txt": b"unchanged",
    "mod.txt": b"version A",
    "gone.txt": b"deleted later",
    "big.bin": bytes(range(256)) * 40,  # several chunks: the streaming path
    "dir/inner.txt": b"inner",
    "dir/link": ("link", "inner.txt"),
    "empty/": None,
}


def mutate(ws: Path) -> None:
    (ws / "mod.txt").write_bytes(b"version B!")
    (ws / "gone.txt").unlink()
    (ws / "new.txt").write_bytes(b"brand new")
    (ws / "empty").rmdir()
    (ws / "newdir/sub").mkdir(parents=True)
    (ws / "newdir/sub/f").write_bytes(b"f")
    (ws / "dir/link").unlink()
    (ws / "dir/link").symlink_to("../keep.txt")
    (ws / "keep.txt").chmod(0o600)
    os.utime(ws / "dir/inner.txt", ns=(10**9, 10**9))


def referenced(store: SnapshotStore) -> set[str]:
    out: set[str] = set()
    for info in store.list():
        out |= {e.sha256 for e in store.get(info.id).entries if e.sha256}
    return out


def on_disk_blobs(store_dir: Path) -> set[str]:
    return {p.parent.name + p.name for p in (store_dir / "blobs").glob("*/*")}


def assert_store_clean(store_dir: Path, ws: Path, expect_ids: list[set[str]]) -> SnapshotStore:
    store = SnapshotStore(ws, store_dir, workers=1)  # opening recovers
    ids = {i.id for i in store.list()}
    assert ids in expect_ids
    for sid in ids:
        store.export(sid)  # reads and verifies every blob
    assert on_disk_blobs(store_dir) == referenced(store)
    assert list((store_dir / "tmp").iterdir()) == []
    leftovers = [p.name for p in store_dir.iterdir() if p.name.endswith(".tmp")]
    leftovers += [p.name for p in (store_dir / "snapshots").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
    assert not (store_dir / "restore.journal").exists()
    assert not (store_dir / "gc.pending").exists()
    return store


def sweep(
    tmp_path: Path,
    setup: Callable[[Path, Path], tuple[SnapshotStore, dict[str, object]]],
    op: Callable[[SnapshotStore, dict[str, object]], object],
    check: Callable[[Path, Path, dict[str, object]], None],
    *,
    crash: bool,
    openat2: bool = True,
) -> int:
    k = 0
    while True:
        k += 1
        base = tmp_path / f"k{k}"
        ws, store_dir = base / "ws", base / "store"
        ws.mkdir(parents=True)
        store, ctx = setup(ws, store_dir)
        if not openat2:
            store.workspace._openat2 = False
        ops = FaultyOps(k, crash=crash)
        use_ops(store, ops)
        with contextlib.suppress(Crash, SnapshotError, OSError):
            op(store, ctx)
        check(ws, store_dir, ctx)
        if ops.count < k:  # the operation finished before step k: every step was covered
            return k
        assert k < 2000, "runaway"


def setup_plain(ws: Path, store_dir: Path) -> tuple[SnapshotStore, dict[str, object]]:
    build_tree(ws, BASE)
    store = SnapshotStore(ws, store_dir, workers=1)
    first = store.create("A")
    mutate(ws)
    return store, {"before": {first.id}, "state": tree_state(ws), "a": first.id}


@pytest.mark.parametrize("flush", ["fsync-each", "syncfs"])
@pytest.mark.parametrize("crash", [True, False], ids=["crash", "eio"])
def test_create_faults(
    tmp_path: Path, crash: bool, flush: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if flush == "syncfs":
        monkeypatch.setattr(_blobs, "_FSYNC_EACH_MAX", 0)

    def check(ws: Path, store_dir: Path, ctx: dict[str, object]) -> None:
        before = ctx["before"]
        assert isinstance(before, set)
        store = SnapshotStore(ws, store_dir, workers=1)
        grown = {i.id for i in store.list()} - before
        assert len(grown) <= 1
        assert_store_clean(store_dir, ws, [before, before | grown])
        assert tree_state(ws) == ctx["state"]  # create never changes the workspace
        if grown:
            # the new snapshot is complete: restoring it gives the mutated state
            store.restore(grown.pop())
            assert tree_state(ws) == ctx["state"]

    steps = sweep(tmp_path, setup_plain, lambda s, _c: s.create("B"), check, crash=crash)
    assert steps > 40


@pytest.mark.parametrize("openat2", [True, False], ids=["openat2", "component-walk"])
@pytest.mark.parametrize("crash", [True, False], ids=["crash", "eio"])
def test_restore_faults(tmp_path: Path, crash: bool, openat2: bool) -> None:
    def setup(ws: Path, store_dir: Path) -> tuple[SnapshotStore, dict[str, object]]:
        build_tree(ws, BASE)
        store = SnapshotStore(ws, store_dir, workers=1)
        a = store.create("A")
        state_a = tree_state(ws)
        mutate(ws)
        return store, {"a": a.id, "state_a": state_a, "state_b": tree_state(ws), "ids": {a.id}}

    def check(ws: Path, store_dir: Path, ctx: dict[str, object]) -> None:
        ids = ctx["ids"]
        assert isinstance(ids, set)
        assert_store_clean(store_dir, ws, [ids])
        assert tree_state(ws) in (ctx["state_a"], ctx["state_b"])

    steps = sweep(
        tmp_path,
        setup,
        lambda s, c: s.restore(str(c["a"])),
        check,
        crash=crash,
        openat2=openat2,
    )
    assert steps > 40


@pytest.mark.parametrize("crash", [True, False], ids=["crash", "eio"])
def test_delete_faults(tmp_path: Path, crash: bool) -> None:
    def setup(ws: Path, store_dir: Path) -> tuple[SnapshotStore, dict[str, object]]:
        build_tree(ws, BASE)
        store = SnapshotStore(ws, store_dir, workers=1)
        a = store.create("A")
        mutate(ws)
        b = store.create("B")
        return store, {"a": a.id, "b": b.id, "state": tree_state(ws)}

    def check(ws: Path, store_dir: Path, ctx: dict[str, object]) -> None:
        a, b = str(ctx["a"]), str(ctx["b"])
        store = assert_store_clean(store_dir, ws, [{a, b}, {b}])
        assert tree_state(ws) == ctx["state"]
        store.restore(b)
        assert tree_state(ws) == ctx["state"]

    steps = sweep(tmp_path, setup, lambda s, c: s.delete(str(c["a"])), check, crash=crash)
    assert steps > 10


def test_crash_during_recovery_is_recovered_again(tmp_path: Path) -> None:
    """A crash while completing a journalled restore is completed by the next open."""
    ws, store_dir = tmp_path / "ws", tmp_path / "store"
    ws.mkdir()
    build_tree(ws, BASE)
    store = SnapshotStore(ws, store_dir, workers=1)
    a = store.create("A")
    state_a = tree_state(ws)
    mutate(ws)
    # crash right after the journal is in place
    ops = FaultyOps(10**9)

    def hook(_count: int, name: str) -> None:
        if name == "unlink" and (store_dir / "restore.journal").exists():
            ops.dead = True
            raise Crash(name)

    ops.hook = hook
    use_ops(store, ops)
    with pytest.raises(Crash):
        store.restore(a.id)
    assert (store_dir / "restore.journal").exists()
    state_mid: State = tree_state(ws)
    assert state_mid != state_a
    # second crash, during recovery itself, after a few steps
    import wsnapshot._fsio as fsio

    crashing = FaultyOps(25)
    real = fsio._OPS
    fsio._OPS = crashing
    try:
        with pytest.raises(Crash):
            SnapshotStore(ws, store_dir, workers=1)
    finally:
        fsio._OPS = real
    assert_store_clean(store_dir, ws, [{a.id}])
    assert tree_state(ws) == state_a


@pytest.mark.parametrize("crash", [True, False], ids=["crash", "eio"])
def test_import_faults(tmp_path: Path, crash: bool) -> None:
    src_ws = tmp_path / "src"
    src_ws.mkdir()
    build_tree(src_ws, BASE)
    source = SnapshotStore(src_ws, tmp_path / "src-store", workers=1)
    record = source.export(source.create().id)
    sid = str(record["id"])

    def setup(ws: Path, store_dir: Path) -> tuple[SnapshotStore, dict[str, object]]:
        (ws / "own.txt").write_bytes(b"own")
        store = SnapshotStore(ws, store_dir, workers=1)
        own = store.create("own")
        return store, {"own": own.id}

    def check(ws: Path, store_dir: Path, ctx: dict[str, object]) -> None:
        own = str(ctx["own"])
        store = assert_store_clean(store_dir, ws, [{own}, {own, sid}])
        if sid in {i.id for i in store.list()}:
            store.restore(sid)
            assert (ws / "big.bin").read_bytes() == BASE["big.bin"]

    steps = sweep(tmp_path, setup, lambda s, _c: s.import_(record), check, crash=crash)
    assert steps > 10


class FailingFrom(FaultyOps):
    """Every call from number ``fail_at`` on fails with ``EIO`` (a disk gone bad; no crash)."""

    def step(self, name: str) -> None:
        self.count += 1
        if self.count >= self.fail_at:
            raise OSError(errno.EIO, f"injected failure at step {self.count} ({name})")


def _open_with(ops: _fsio.Ops, ws: Path, store_dir: Path) -> SnapshotStore | None:
    real = _fsio._OPS
    _fsio._OPS = ops
    try:
        return SnapshotStore(ws, store_dir, workers=1)
    except Crash:
        return None  # the process died while opening
    finally:
        _fsio._OPS = real


def _restore_next_open_sweep(
    base: Path, mutate_more: Callable[[Path], None], stride: int, shard: int = 0, shards: int = 1
) -> int:
    """Crash a restore at step k, then fail the next open at every step j; a third open serves.

    ``k`` runs over the multiples of ``stride`` and ``j`` over every step of the next open; shard
    ``shard`` of ``shards`` takes every ``shards``-th ``j`` (the shards together cover every
    pair; pytest-xdist runs them side by side). Returns how many (k, j) pairs were checked.
    """
    covered = 0

    def setup(where: Path) -> tuple[Path, Path, str, State]:
        ws, store_dir = where / "ws", where / "store"
        ws.mkdir(parents=True)
        build_tree(ws, BASE)
        store = SnapshotStore(ws, store_dir, workers=1)
        a = store.create("A").id
        state_a = tree_state(ws)
        mutate(ws)
        mutate_more(ws)
        return ws, store_dir, a, state_a

    def crashed(where: Path, k: int) -> tuple[Path, Path, str, State, FaultyOps]:
        ws, store_dir, a, state_a = setup(where)
        store = SnapshotStore(ws, store_dir, workers=1)
        ops = FaultyOps(k)
        use_ops(store, ops)
        with contextlib.suppress(Crash):
            store.restore(a)
        return ws, store_dir, a, state_a, ops

    k = 0
    while True:
        k += stride
        _ws, store_dir, _a, _s, ops = crashed(base / f"k{k}", k)
        if ops.count < k:
            return covered  # the restore finished before step k
        if not (store_dir / "restore.journal").exists():
            continue
        for fail_from in (True, False):
            j = shard
            while True:
                j += shards
                ws2, store2, a, state_a, _ops = crashed(base / f"k{k}-j{j}-{fail_from}", k)
                bad: FaultyOps = FailingFrom(j) if fail_from else FaultyOps(j)
                opened = _open_with(bad, ws2, store2)  # never raises OSError nor SnapshotError
                if opened is not None and fail_from:
                    journal_gone = not (store2 / "restore.journal").exists()
                    assert opened.inconsistent is not None or journal_gone
                healthy = SnapshotStore(ws2, store2, workers=1)
                if healthy.inconsistent is not None:
                    healthy.restore(a)  # the remedy
                assert healthy.inconsistent is None
                assert tree_state(ws2) == state_a
                assert not (store2 / "restore.journal").exists()
                covered += 1
                if bad.count < j:
                    break
                assert j < 2000, "runaway"


def _locked(ws: Path) -> None:
    """What a run can leave that only a non-root server cannot read (F08)."""
    (ws / "d").mkdir()
    (ws / "d" / "f").write_bytes(b"x")
    (ws / "d" / "z").mkdir(mode=0o000)
    (ws / "d").chmod(0o300)
    (ws / "dir" / "inner.txt").chmod(0o000)


#: The locked sweep runs as three shards, side by side under pytest-xdist (one test took 90 s,
#: the longest of the suite).
_LOCKED_SHARDS = 3


@pytest.mark.parametrize(
    ("locked", "shard"),
    [(False, 0), *((True, s) for s in range(_LOCKED_SHARDS))],
    ids=["plain", *(f"unreadable-dirs-unprivileged-{s}" for s in range(_LOCKED_SHARDS))],
)
@pytest.mark.slow
def test_restore_and_next_open_faults(tmp_path: Path, locked: bool, shard: int) -> None:
    """A crash at every 30th step of a restore, then a failure at every step of the next open
    (a crash, or ``EIO`` from that step on): the store opens (or the process died), and a
    healthy open then serves and completes (or is marked inconsistent and a restore repairs)."""
    if not locked:
        assert _restore_next_open_sweep(tmp_path, lambda _ws: None, stride=30) > 100
        return

    def body(base: Path) -> None:
        covered = _restore_next_open_sweep(base, _locked, 30, shard, _LOCKED_SHARDS)
        assert covered > 300  # about 465 (k, j) pairs per shard, 1398 in all (2026-12-01)

    as_unprivileged(body)
