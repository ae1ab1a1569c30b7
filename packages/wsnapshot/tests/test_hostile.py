"""Tampered manifests and a workspace whose code fights back."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from _helpers import Crash, FaultyOps, build_tree, tree_state, use_ops
from wsnapshot import CorruptSnapshot, SnapshotError, SnapshotStore, _fsio


@pytest.fixture(autouse=True)
def _no_disk_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process crashes keep the page cache, so real flushes only cost time here; every
    ``fsync`` still counts as a step (and can fail) in :class:`FaultyOps`."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    monkeypatch.setattr(os, "sync", lambda: None)
    monkeypatch.setitem(_fsio._libc_state, "syncfs", None)  # syncfs -> the patched os.sync


SHA_X = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"  # sha256(b"x")


def manifest(files: dict[str, Any], **over: Any) -> dict[str, Any]:
    doc = {
        "format": 1,
        "kind": "wsnapshot-manifest",
        "id": str(uuid.uuid4()),
        "created_at": "2026-01-01T00:00:00.000000Z",
        "description": "",
        "new_bytes": 0,
        "skipped": [],
        "files": files,
    }
    doc.update(over)
    return doc


def plant(store_dir: Path, doc: dict[str, Any] | str) -> str:
    sid = doc["id"] if isinstance(doc, dict) else str(uuid.uuid4())
    body = json.dumps(doc) if isinstance(doc, dict) else doc
    (store_dir / "snapshots" / f"{sid}.json").write_text(body)
    return str(sid)


def xfile(**over: Any) -> dict[str, Any]:
    return {"type": "file", "size": 1, "mtime_ns": 1, "mode": 0o644, "sha256": SHA_X, **over}


HOSTILE: list[tuple[str, Any]] = [
    ("dotdot", manifest({"../escape": xfile()})),
    (
        "dotdot-inner",
        manifest({"a": {"type": "dir", "mode": 0o755, "mtime_ns": 1}, "a/../../e": xfile()}),
    ),
    ("absolute", manifest({"/tmp/escape": xfile()})),
    ("nul", manifest({"a\x00b": xfile()})),
    ("empty-name", manifest({"": xfile()})),
    ("link-out", manifest({"l": {"type": "symlink", "mtime_ns": 1, "target": "/etc/passwd"}})),
    ("link-up", manifest({"l": {"type": "symlink", "mtime_ns": 1, "target": "../../x"}})),
    ("setuid", manifest({"f": xfile(mode=0o4755)})),
    ("bad-sha", manifest({"f": xfile(sha256="../../../etc/passwd")})),
    ("negative-size", manifest({"f": xfile(size=-5)})),
    ("huge-mtime", manifest({"f": xfile(mtime_ns=2**70)})),
    ("parent-missing", manifest({"d/f": xfile()})),
    ("parent-is-file", manifest({"d": xfile(), "d/f": xfile()})),
    ("reserved", manifest({".wsnapshot-x.tmp": xfile()})),
    ("unknown-key", manifest({"f": xfile(owner=0)})),
    ("id-mismatch", None),
    ("not-json", "{not json"),
    ("deep-json", "[" * 100000 + "]" * 100000),
    ("not-object", "[]"),
    ("format", manifest({}, format=99)),
]


@pytest.mark.parametrize(("name", "doc"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_manifest_rejected(
    ws: Path, store_dir: Path, tmp_path: Path, name: str, doc: Any
) -> None:
    store = SnapshotStore(ws, store_dir)
    (ws / "x").write_bytes(b"x")
    good = store.create("good")
    if doc is None:
        doc = manifest({"x": xfile()})
        sid = str(uuid.uuid4())
        (store_dir / "snapshots" / f"{sid}.json").write_text(json.dumps(doc))
    else:
        sid = plant(store_dir, doc)
    before_ws = tree_state(ws)
    before_parent = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(CorruptSnapshot) as exc:
        store.restore(sid)
    assert sid in str(exc.value)
    with pytest.raises(CorruptSnapshot):
        store.get(sid)
    assert [i.id for i in store.list()] == [good.id]  # listed snapshots stay usable
    assert tree_state(ws) == before_ws
    assert sorted(p.name for p in tmp_path.iterdir()) == before_parent
    store.delete(sid)  # a corrupt snapshot can still be deleted
    assert [i.id for i in store.list()] == [good.id]
    store.restore(good.id)


def test_workspace_dir_replaced_by_symlink_before_restore(
    ws: Path, store_dir: Path, tmp_path: Path
) -> None:
    build_tree(ws, {"sub/f": b"inside", "sub/g": b"g"})
    store = SnapshotStore(ws, store_dir)
    info = store.create()
    state = tree_state(ws)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_bytes(b"victim")
    before = tree_state(outside)
    (ws / "sub/f").unlink()
    (ws / "sub/g").unlink()
    (ws / "sub").rmdir()
    (ws / "sub").symlink_to(outside)
    report = store.restore(info.id)
    assert "sub" in report.deleted
    assert report.dirs_created == ("sub",)
    assert tree_state(outside) == before
    assert tree_state(ws) == state


def test_file_replaced_by_symlink_to_outside(ws: Path, store_dir: Path, tmp_path: Path) -> None:
    (ws / "f").write_bytes(b"mine")
    store = SnapshotStore(ws, store_dir)
    info = store.create()
    victim = tmp_path / "victim"
    victim.write_bytes(b"victim")
    os.utime(victim, ns=(3, 3))
    (ws / "f").unlink()
    (ws / "f").symlink_to(victim)
    store.restore(info.id)
    assert victim.read_bytes() == b"victim"
    assert victim.stat().st_mtime_ns == 3
    assert (ws / "f").read_bytes() == b"mine"
    assert not (ws / "f").is_symlink()


@pytest.mark.parametrize("openat2", [True, False], ids=["openat2", "component-walk"])
def test_directory_swapped_mid_restore_never_writes_outside(tmp_path: Path, openat2: bool) -> None:
    """At every system call of a restore, the workspace's code swaps a directory for a symlink
    to a victim directory outside. Nothing outside may ever change."""
    k = 0
    while True:
        k += 1
        base = tmp_path / f"k{k}"
        ws, store_dir, outside = base / "ws", base / "store", base / "outside"
        ws.mkdir(parents=True)
        outside.mkdir()
        build_tree(outside, {"f": b"victim f", "keep": b"victim keep", "sub/x": b"victim x"})
        os.utime(outside / "f", ns=(5, 5))
        victim = tree_state(outside)
        build_tree(ws, {"d/f": b"snap f", "d/new": b"snap new", "d/sub/x": b"snap x"})
        store = SnapshotStore(ws, store_dir, workers=1)
        info = store.create()
        (ws / "d/f").write_bytes(b"changed")
        (ws / "d/new").unlink()
        (ws / "d/extra").write_bytes(b"extra")
        if not openat2:
            store.workspace._openat2 = False
        ops = FaultyOps(10**9)
        swapped: list[bool] = []

        def hook(count: int, _name: str, ws: Path = ws, outside: Path = outside) -> None:
            if count == k and not swapped:  # noqa: B023 - read in this iteration only
                (ws / "d").rename(ws / "d_moved")
                (ws / "d").symlink_to(outside)
                swapped.append(True)  # noqa: B023

        ops.hook = hook
        use_ops(store, ops)
        with contextlib.suppress(SnapshotError, OSError):
            store.restore(info.id)
        assert tree_state(outside) == victim, f"wrote outside at step {k}"
        if not swapped:
            return  # the restore finished before step k: every step was covered
        assert k < 1000


def test_fifo_swapped_in_during_create_does_not_hang(ws: Path, store_dir: Path) -> None:
    (ws / "f").write_bytes(b"data")
    store = SnapshotStore(ws, store_dir, workers=1)
    ops = FaultyOps(10**9)
    done: list[bool] = []

    def hook(_count: int, name: str) -> None:
        if name == "openat2" and not done and (ws / "f").is_file():
            (ws / "f").unlink()
            os.mkfifo(ws / "f")
            done.append(True)

    ops.hook = hook
    use_ops(store, ops)
    info = store.create()
    assert [s.path for s in info.skipped] == ["f"]
    assert "regular file" in info.skipped[0].reason


def test_crash_exception_type_is_not_an_error() -> None:
    assert not issubclass(Crash, Exception)


def test_directory_swapped_mid_create_never_reads_outside(tmp_path: Path) -> None:
    """At every system call of a create, a directory is swapped for a symlink to a victim
    directory outside: no byte of the victim's files may end up in the store."""
    k = 0
    while True:
        k += 1
        base = tmp_path / f"k{k}"
        ws, store_dir, outside = base / "ws", base / "store", base / "outside"
        ws.mkdir(parents=True)
        outside.mkdir()
        build_tree(outside, {"f": b"VICTIM-F", "sub/x": b"VICTIM-X"})
        build_tree(ws, {"d/f": b"mine f", "d/sub/x": b"mine x", "top": b"top"})
        store = SnapshotStore(ws, store_dir, workers=1)
        ops = FaultyOps(10**9)
        swapped: list[bool] = []

        def hook(count: int, _name: str, ws: Path = ws, outside: Path = outside) -> None:
            if count == k and not swapped:  # noqa: B023 - read in this iteration only
                (ws / "d").rename(ws / "d_moved")
                (ws / "d").symlink_to(outside)
                swapped.append(True)  # noqa: B023

        ops.hook = hook
        use_ops(store, ops)
        with contextlib.suppress(SnapshotError, OSError):
            store.create()
        for blob in (store_dir / "blobs").glob("*/*"):
            assert b"VICTIM" not in blob.read_bytes(), f"read outside at step {k}"
        if not swapped:
            return
        assert k < 1000
