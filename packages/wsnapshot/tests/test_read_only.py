"""A store opened read-only (the server's confined diff worker): reads work, nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from wsnapshot import SnapshotStore, StoreConfigError
from wsnapshot._storedir import StoreDir


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its mode and mtime (what a write would change)."""
    return {
        str(p.relative_to(root)): (p.lstat().st_mode, p.lstat().st_mtime_ns)
        for p in root.rglob("*")
    }


def test_a_read_only_store_diffs_and_writes_nothing(ws: Path, store: SnapshotStore) -> None:
    (ws / "a.txt").write_text("one")
    first = store.create("first").id
    (ws / "a.txt").write_text("two!")
    (ws / "b.txt").write_text("new")
    second = store.create("second").id
    (ws / "c.txt").write_text("later")
    before = _tree(Path(store.store_dir))

    reader = SnapshotStore.open_read_only(ws, store.store_dir)
    between = reader.diff(first, second)
    assert (between.added, between.modified, between.removed) == (("b.txt",), ("a.txt",), ())
    now = reader.diff(second)
    assert (now.added, now.modified, now.removed) == (("c.txt",), (), ())
    assert [i.id for i in reader.list()] == [first, second]
    for write in (
        lambda: reader.create("x"),
        lambda: reader.restore(first),
        lambda: reader.delete(first),
    ):
        with pytest.raises(StoreConfigError, match="opened read-only: it cannot be changed"):
            write()
    assert _tree(Path(store.store_dir)) == before  # not even the lock file's times


def test_a_read_only_open_creates_no_store(ws: Path, tmp_path: Path) -> None:
    for target in (tmp_path / "missing", tmp_path):
        with pytest.raises(StoreConfigError, match=r"not a wsnapshot store \(opened read-only\)"):
            SnapshotStore.open_read_only(ws, target)
    assert not (tmp_path / "missing").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


def test_a_diff_with_the_workspace_reads_no_other_manifest(
    ws: Path, store: SnapshotStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "same.txt").write_text("same")
    (ws / "changed.txt").write_text("one")
    first = store.create("first").id
    store.create("newest")
    (ws / "changed.txt").write_text("two")  # same size, other content: hashed

    def every_manifest(self: object) -> None:
        raise AssertionError("diff read every manifest of the store")

    monkeypatch.setattr(StoreDir, "manifests", every_manifest)
    for reader in (store, SnapshotStore.open_read_only(ws, store.store_dir)):
        found = reader.diff(first)
        assert (found.added, found.removed, found.modified) == ((), (), ("changed.txt",))
