from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

import wsnapshot
from _helpers import build_tree, tree_state
from conftest import open_like
from wsnapshot import (
    CorruptSnapshot,
    InvalidRecord,
    InvalidSnapshotId,
    QuotaExceeded,
    SnapshotExists,
    SnapshotNotFound,
    SnapshotStore,
    SnapshotTooLarge,
    StoreConfigError,
    _capture,
)

TREE = {
    "a.txt": b"hello\n",
    "sub/b.bin": bytes(range(256)) * 10,
    "sub/deeper/c.txt": b"c",
    "empty/": None,
    "sub/link": ("link", "../a.txt"),
    "dup1": b"same",
    "dup2": b"same",
}


pytestmark = pytest.mark.both_backends


def blobs(store: SnapshotStore) -> set[str]:
    return set(store._blobs.all())


def test_version_and_exports() -> None:
    assert wsnapshot.__version__ == "0.1.0"
    for name in wsnapshot.__all__:
        assert hasattr(wsnapshot, name), name


def test_create_list_get(store: SnapshotStore, ws: Path) -> None:
    build_tree(ws, TREE)
    info = store.create("first")
    assert info.description == "first"
    assert info.file_count == 5
    assert info.dir_count == 3
    assert info.symlink_count == 1
    assert info.total_bytes == 6 + 2560 + 1 + 4 + 4
    assert info.new_bytes == 6 + 2560 + 1 + 4  # "same" stored once
    assert info.skipped == ()
    assert len(blobs(store)) == 4
    assert [i.id for i in store.list()] == [info.id]
    snap = store.get(info.id)
    assert snap.info == info
    by_path = {e.path: e for e in snap.entries}
    assert by_path["sub/link"].kind == "symlink"
    assert by_path["sub/link"].target == "../a.txt"
    assert by_path["empty"].kind == "dir"
    assert by_path["a.txt"].size == 6
    assert by_path["a.txt"].mtime_ns == (ws / "a.txt").stat().st_mtime_ns
    assert by_path["a.txt"].mode == stat.S_IMODE((ws / "a.txt").stat().st_mode)
    d = snap.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["entries"][0]["path"] == "a.txt"


def test_manifest_on_disk_format(store: SnapshotStore, ws: Path, store_dir: Path) -> None:
    build_tree(ws, {"x.txt": b"x"})
    info = store.create()
    doc = json.loads((store_dir / "snapshots" / f"{info.id}.json").read_text())
    assert doc["format"] == 1
    assert doc["id"] == info.id
    assert doc["created_at"].endswith("Z")
    entry = doc["files"]["x.txt"]
    assert entry["type"] == "file"
    assert entry["size"] == 1
    assert entry["sha256"] == "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
    sha = entry["sha256"]
    assert (store_dir / "blobs" / sha[:2] / sha[2:]).read_bytes() == b"x"


def test_list_oldest_first(store: SnapshotStore, ws: Path) -> None:
    ids = []
    for i in range(3):
        (ws / "f").write_text(str(i))
        ids.append(store.create(str(i)).id)
    assert [i.id for i in store.list()] == ids


def test_restore_exact(store: SnapshotStore, ws: Path) -> None:
    build_tree(ws, TREE)
    (ws / "a.txt").chmod(0o600)
    (ws / "sub").chmod(0o750)
    os.utime(ws / "sub/deeper/c.txt", ns=(1, 123456789))
    before = tree_state(ws)
    info = store.create()
    # mutate everything
    (ws / "a.txt").write_bytes(b"changed")
    (ws / "sub/b.bin").unlink()
    (ws / "new.txt").write_bytes(b"new")
    (ws / "empty").rmdir()
    (ws / "newdir/x").mkdir(parents=True)
    (ws / "sub/link").unlink()
    (ws / "sub/link").symlink_to("deeper/c.txt")
    (ws / "dup1").chmod(0o700)
    os.utime(ws / "dup2", ns=(5, 5))
    report = store.restore(info.id)
    assert tree_state(ws) == before
    assert report.deleted == ("new.txt",)
    assert report.rewritten == ("a.txt", "sub/link")
    assert report.recreated == ("sub/b.bin",)
    assert report.metadata_restored == ("dup1", "dup2")
    assert report.dirs_created == ("empty",)
    assert report.dirs_removed == ("newdir/x", "newdir")
    assert report.duration_ms >= 0
    # a second restore touches nothing
    again = store.restore(info.id)
    assert again.deleted == again.rewritten == again.recreated == again.metadata_restored == ()
    assert again.unchanged == len(before)
    assert store.diff(info.id).is_empty


def test_restore_leaves_matching_files_untouched(store: SnapshotStore, ws: Path) -> None:
    build_tree(ws, {"keep.txt": b"keep", "change.txt": b"one"})
    info = store.create()
    ino = (ws / "keep.txt").stat().st_ino
    (ws / "change.txt").write_bytes(b"two")
    report = store.restore(info.id)
    assert report.rewritten == ("change.txt",)
    assert (ws / "keep.txt").stat().st_ino == ino


def test_restore_mode_masked_never_setuid(store: SnapshotStore, ws: Path) -> None:
    (ws / "f").write_bytes(b"x")
    info = store.create()
    snap_mode = store.get(info.id).entries[0].mode
    assert snap_mode <= 0o777
    (ws / "f").chmod(0o4755)
    store.restore(info.id)
    assert stat.S_IMODE((ws / "f").stat().st_mode) == snap_mode


def test_restore_replaces_type_conflicts(store: SnapshotStore, ws: Path) -> None:
    build_tree(ws, {"a/b": b"file in dir", "c": b"plain"})
    before = tree_state(ws)
    info = store.create()
    (ws / "a/b").unlink()
    (ws / "a").rmdir()
    (ws / "a").write_bytes(b"now a file")
    (ws / "c").unlink()
    (ws / "c/d").mkdir(parents=True)
    (ws / "c/d/e").write_bytes(b"deep")
    store.restore(info.id)
    assert tree_state(ws) == before


def test_hardlinked_file_is_replaced_not_modified(
    store: SnapshotStore, ws: Path, tmp_path: Path
) -> None:
    (ws / "f").write_bytes(b"data")
    info = store.create()
    outside = tmp_path / "outside"
    outside.write_bytes(b"data")
    os.utime(outside, ns=(7, 7))
    outside.chmod(0o600)
    (ws / "f").unlink()
    os.link(outside, ws / "f")  # same content, other mtime/mode: metadata would need fixing
    report = store.restore(info.id)
    assert report.rewritten == ("f",)
    assert outside.stat().st_mtime_ns == 7
    assert stat.S_IMODE(outside.stat().st_mode) == 0o600
    assert (ws / "f").stat().st_ino != outside.stat().st_ino


def test_skipped_entries_are_reported(store: SnapshotStore, ws: Path, tmp_path: Path) -> None:
    (ws / "ok.txt").write_bytes(b"ok")
    (ws / "abs").symlink_to(tmp_path)
    (ws / "up").symlink_to("../outside")
    (ws / "sneaky").symlink_to("sub/../../x")
    os.mkfifo(ws / "fifo")
    bad = os.fsencode(ws) + b"/bad\xff"
    with open(bad, "wb") as fh:  # noqa: PTH123 - a bytes path
        fh.write(b"x")
    info = store.create()
    reasons = {s.path: s.reason for s in info.skipped}
    assert set(reasons) == {"abs", "up", "sneaky", "fifo", "bad\\xff"}
    assert "outside" in reasons["abs"]
    assert "outside" in reasons["up"]
    assert "'..'" in reasons["sneaky"]
    assert "special" in reasons["fifo"]
    assert "UTF-8" in reasons["bad\\xff"]
    assert [e.path for e in store.get(info.id).entries] == ["ok.txt"]
    assert store.list()[0].skipped == info.skipped


def test_symlink_inside_is_recorded_but_never_followed(store: SnapshotStore, ws: Path) -> None:
    build_tree(ws, {"d/f": b"x", "l": ("link", "d"), "d/up": ("link", "../d/f")})
    info = store.create()
    kinds = {e.path: e.kind for e in store.get(info.id).entries}
    assert kinds == {"d": "dir", "d/f": "file", "d/up": "symlink", "l": "symlink"}


def test_invalid_ids(store: SnapshotStore) -> None:
    for bad in ["../x", "/etc/passwd", "", "not-a-uuid", "x" * 36, None, 5]:
        with pytest.raises(InvalidSnapshotId) as exc:
            store.get(bad)  # type: ignore[arg-type]
        assert "invalid snapshot id" in str(exc.value)
        with pytest.raises(InvalidSnapshotId):
            store.restore(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidSnapshotId):
            store.delete(bad)  # type: ignore[arg-type]
    missing = "123e4567-e89b-12d3-a456-426614174000"
    for call in (store.get, store.restore, store.delete, store.export, store.diff):
        with pytest.raises(SnapshotNotFound) as nf:
            call(missing)
        assert missing in str(nf.value)


def test_uppercase_id_is_canonicalised(store: SnapshotStore, ws: Path) -> None:
    (ws / "f").write_bytes(b"1")
    info = store.create()
    assert store.get(info.id.upper()).info.id == info.id


def test_limits(ws: Path, store_dir: Path) -> None:
    build_tree(ws, {"a": b"12345", "b": b"67890"})
    s = SnapshotStore(ws, store_dir, max_bytes=9)
    with pytest.raises(SnapshotTooLarge) as exc:
        s.create()
    assert exc.value.limit_name == "max_bytes"
    assert exc.value.limit == 9
    assert "nothing was stored" in str(exc.value)
    s2 = SnapshotStore(ws, store_dir, max_files=1)
    with pytest.raises(SnapshotTooLarge) as exc2:
        s2.create()
    assert exc2.value.limit_name == "max_files"
    assert s2.list() == []
    assert not list((store_dir / "blobs").glob("*/*"))
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_bytes"):
            SnapshotStore(ws, store_dir, max_bytes=bad)  # type: ignore[arg-type]


def test_defaults_are_documented_and_finite(store: SnapshotStore) -> None:
    assert store.max_bytes == wsnapshot.DEFAULT_MAX_BYTES == 1 << 30
    assert store.max_files == wsnapshot.DEFAULT_MAX_FILES == 100_000
    assert store.store_max_bytes == wsnapshot.DEFAULT_STORE_MAX_BYTES == 10 << 30


def test_store_quota(ws: Path, store_dir: Path) -> None:
    (ws / "a").write_bytes(b"x" * 60)
    s = SnapshotStore(ws, store_dir, store_max_bytes=100)
    s.create()
    (ws / "b").write_bytes(b"y" * 60)
    with pytest.raises(QuotaExceeded) as exc:
        s.create()
    assert exc.value.used == 60
    assert exc.value.needed == 60
    assert len(s.list()) == 1
    assert len(blobs(s)) == 1
    (ws / "b").write_bytes(b"y" * 30)
    assert s.create().new_bytes == 30


def test_incremental_rehashes_only_changed(
    store: SnapshotStore, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_capture, "_RACY_NS", -(10**18))
    monkeypatch.setattr(_capture, "_RACY_COARSE_NS", -(10**18))
    for i in range(50):
        (ws / f"f{i}").write_bytes(b"content %d" % i)
    first = store.create()
    assert first.new_bytes > 0
    (ws / "f7").write_bytes(b"changed!")
    opened: list[str] = []
    real = store.workspace.open_regular

    def spy(root_fd: int, parts: tuple[str, ...]) -> tuple[int, os.stat_result]:
        opened.append("/".join(parts))
        return real(root_fd, parts)

    monkeypatch.setattr(store.workspace, "open_regular", spy)
    second = store.create()
    assert opened == ["f7"]
    assert second.new_bytes == len(b"changed!")
    # a fresh store object (another process) uses the newest manifest's stat keys too
    fresh = open_like(store, ws, workers=1)
    monkeypatch.setattr(fresh.workspace, "open_regular", spy)
    opened.clear()
    assert fresh.create().new_bytes == 0
    assert opened == []


@pytest.mark.local_only  # two writers at once: on S3 the second takes over (test_s3.py)
def test_incremental_cache_not_trusted_after_delete(
    store: SnapshotStore, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_capture, "_RACY_NS", -(10**18))
    monkeypatch.setattr(_capture, "_RACY_COARSE_NS", -(10**18))
    (ws / "f").write_bytes(b"data")
    first = store.create()
    other = SnapshotStore(ws, store.store_dir)
    other.delete(first.id)  # blobs gone; `store` still remembers the hash in memory
    second = store.create()
    assert second.new_bytes == 4
    store.restore(second.id)
    assert store.export(second.id)["files"]["f"]["content"] == "data"


def test_delete_collects_unshared_blobs(store: SnapshotStore, ws: Path) -> None:
    (ws / "shared").write_bytes(b"shared")
    (ws / "only1").write_bytes(b"only in one")
    one = store.create()
    (ws / "only1").unlink()
    (ws / "only2").write_bytes(b"only in two")
    two = store.create()
    assert len(blobs(store)) == 3
    store.delete(one.id)
    assert [i.id for i in store.list()] == [two.id]
    assert len(blobs(store)) == 2
    store.delete(two.id)
    assert blobs(store) == set()
    with pytest.raises(SnapshotNotFound):
        store.delete(two.id)


def test_corrupt_blob_detected_before_workspace_changes(
    store: SnapshotStore, ws: Path, store_dir: Path
) -> None:
    (ws / "f").write_bytes(b"original")
    info = store.create()
    (ws / "f").write_bytes(b"modified")
    (ws / "g").write_bytes(b"extra")
    blob = next((store_dir / "blobs").glob("*/*"))
    blob.write_bytes(b"tampered")
    before = tree_state(ws)
    with pytest.raises(CorruptSnapshot) as exc:
        store.restore(info.id)
    assert "SHA-256" in str(exc.value)
    assert tree_state(ws) == before
    with pytest.raises(CorruptSnapshot):
        store.export(info.id)
    blob.unlink()
    with pytest.raises(CorruptSnapshot, match="missing"):
        store.restore(info.id)


def test_diff(store: SnapshotStore, ws: Path) -> None:
    build_tree(ws, {"a": b"1", "b": b"2", "c": b"3"})
    one = store.create()
    (ws / "a").write_bytes(b"changed")
    (ws / "b").unlink()
    (ws / "d").write_bytes(b"4")
    os.utime(ws / "c", ns=(1, 1))
    d = store.diff(one.id)
    assert d.b is None
    assert d.added == ("d",)
    assert d.removed == ("b",)
    assert d.modified == ("a",)
    assert d.metadata_changed == ("c",)
    two = store.create()
    d2 = store.diff(one.id, two.id)
    assert (d2.added, d2.removed, d2.modified, d2.metadata_changed) == (
        ("d",),
        ("b",),
        ("a",),
        ("c",),
    )
    assert d2.to_dict()["b"] == two.id
    assert store.diff(two.id, two.id).is_empty


def test_export_import_roundtrip(ws: Path, tmp_path: Path) -> None:
    build_tree(ws, {**TREE, "bin": b"\xff\x00\xfe"})
    before = tree_state(ws)
    s = SnapshotStore(ws, tmp_path / "s1")
    info = s.create("exported")
    record = s.export(info.id)
    assert record["files"]["a.txt"] | {} == {
        "type": "file",
        "size": 6,
        "mtime_ns": before["a.txt"][3],
        "mode": before["a.txt"][2],
        "sha256": "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03",
        "encoding": "utf-8",
        "content": "hello\n",
    }
    assert record["files"]["bin"]["encoding"] == "base64"
    assert record["files"]["bin"]["content"] == "/wD+"
    text = json.dumps(record)
    other_ws = tmp_path / "ws2"
    other_ws.mkdir()
    s2 = SnapshotStore(other_ws, tmp_path / "s2")
    imported = s2.import_(json.loads(text))
    assert imported.id == info.id
    assert imported.description == "exported"
    s2.restore(info.id)
    assert tree_state(other_ws) == before
    with pytest.raises(SnapshotExists):
        s2.import_(json.loads(text))


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (lambda r: r.update(format=2), "/format"),
        (lambda r: r.update(kind="other"), "/kind"),
        (lambda r: r.update(id="../../etc"), "/id"),
        (lambda r: r.update(created_at="yesterday"), "/created_at"),
        (lambda r: r.update(extra=1), ""),
        (lambda r: r["files"].update({"../evil": r["files"]["f"]}), "/files/../evil"),
        (lambda r: r["files"].update({"/abs": r["files"]["f"]}), "/files//abs"),
        (lambda r: r["files"].update({"a/./b": r["files"]["f"]}), "/files/a/./b"),
        (lambda r: r["files"]["f"].update(content="other"), "/files/f/size"),
        (lambda r: r["files"]["f"].update(content="abd"), "/files/f/sha256"),
        (lambda r: r["files"]["f"].update(encoding="rot13"), "/files/f/encoding"),
        (lambda r: r["files"]["f"].update(encoding="base64", content="!!"), "/files/f/content"),
        (lambda r: r["files"]["f"].update(mode=0o4755), "/files/f/mode"),
        (lambda r: r["files"]["f"].update(mode=True), "/files/f/mode"),
        (lambda r: r["files"]["f"].update(size=-1), "/files/f/size"),
        (lambda r: r["files"]["f"].update(mtime_ns="1"), "/files/f/mtime_ns"),
        (lambda r: r["files"]["f"].update(type="fifo"), "/files/f/type"),
        (
            lambda r: r["files"].update(l={"type": "symlink", "mtime_ns": 1, "target": "/etc"}),
            "/files/l/target",
        ),
        (
            lambda r: r["files"].update(l={"type": "symlink", "mtime_ns": 1, "target": "../x"}),
            "/files/l/target",
        ),
        (lambda r: r["files"].update({"f/x": r["files"]["f"]}), "/files/f/x"),
        (lambda r: r.update(files=[]), "/files"),
    ],
)
def test_import_rejects_bad_records(ws: Path, tmp_path: Path, mutate: object, where: str) -> None:
    (ws / "f").write_bytes(b"abc")
    s = SnapshotStore(ws, tmp_path / "s1")
    record = s.export(s.create().id)
    target = SnapshotStore(ws, tmp_path / "s2")
    mutate(record)  # type: ignore[operator]
    with pytest.raises(InvalidRecord) as exc:
        target.import_(record)
    assert exc.value.where == where
    assert target.list() == []
    assert not list((tmp_path / "s2" / "blobs").glob("*/*"))


def test_import_fills_missing_parents(ws: Path, store_dir: Path) -> None:
    s = SnapshotStore(ws, store_dir)
    record = {
        "format": 1,
        "kind": "wsnapshot-export",
        "id": "123e4567-e89b-12d3-a456-426614174000",
        "created_at": "2026-01-01T00:00:00.000000Z",
        "description": "hand made",
        "files": {
            "a/b/c.txt": {
                "type": "file",
                "size": 2,
                "mtime_ns": 10**18,
                "mode": 0o644,
                "sha256": "8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4",
                "encoding": "utf-8",
                "content": "hi",
            }
        },
    }
    info = s.import_(record)
    assert info.dir_count == 2
    s.restore(info.id)
    assert (ws / "a/b/c.txt").read_text() == "hi"
    assert (ws / "a/b/c.txt").stat().st_mtime_ns == 10**18


def test_import_limits(ws: Path, store_dir: Path) -> None:
    (ws / "f").write_bytes(b"0123456789")
    record = SnapshotStore(ws, store_dir).export(SnapshotStore(ws, store_dir).create().id)
    small = SnapshotStore(ws, store_dir.parent / "small", max_bytes=5)
    with pytest.raises(SnapshotTooLarge):
        small.import_(record)


def test_store_must_not_overlap_workspace(ws: Path, tmp_path: Path) -> None:
    with pytest.raises(StoreConfigError, match="overlap"):
        SnapshotStore(ws, ws / "store")
    with pytest.raises(StoreConfigError, match="overlap"):
        SnapshotStore(ws, ws)
    with pytest.raises(StoreConfigError, match="overlap"):
        SnapshotStore(ws, tmp_path)
    (tmp_path / "link").symlink_to(ws)
    with pytest.raises(StoreConfigError, match="overlap"):
        SnapshotStore(ws, tmp_path / "link" / "s")
    with pytest.raises(StoreConfigError, match="workspace"):
        SnapshotStore(tmp_path / "missing", tmp_path / "s")


def test_refuses_foreign_directory_as_store(ws: Path, tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep me")
    with pytest.raises(StoreConfigError, match="not a wsnapshot store"):
        SnapshotStore(ws, foreign)


def test_description_checked(store: SnapshotStore) -> None:
    with pytest.raises(ValueError, match="description"):
        store.create("x" * 5000)
    with pytest.raises(ValueError, match="description"):
        store.create(3)  # type: ignore[arg-type]


def test_result_types_are_frozen_and_jsonable(store: SnapshotStore, ws: Path) -> None:
    (ws / "f").write_bytes(b"x")
    info = store.create()
    with pytest.raises(AttributeError):
        info.id = "x"  # type: ignore[misc]
    report = store.restore(info.id)
    for obj in (info, report, store.diff(info.id), store.get(info.id)):
        d = obj.to_dict()
        assert json.loads(json.dumps(d)) == d


def test_restore_removes_non_utf8_names(store: SnapshotStore, ws: Path) -> None:
    (ws / "ok").write_bytes(b"ok")
    info = store.create()
    raw = os.fsencode(ws)
    os.mkdir(raw + b"/dir\xfe")  # noqa: PTH102 - a bytes path
    with open(raw + b"/dir\xfe/f\xff", "wb") as fh:  # noqa: PTH123 - a bytes path
        fh.write(b"x")
    with open(raw + b"/top\xff", "wb") as fh:  # noqa: PTH123 - a bytes path
        fh.write(b"x")
    report = store.restore(info.id)
    assert sorted(report.deleted) == ["dir\\xfe/f\\xff", "top\\xff"]
    assert report.dirs_removed == ("dir\\xfe",)
    assert os.listdir(raw) == [b"ok"]  # noqa: PTH208 - bytes names
    assert json.loads(json.dumps(report.to_dict())) == report.to_dict()


def test_store_properties(store: SnapshotStore, ws: Path, store_dir: Path) -> None:
    assert store.store_dir == str(store_dir.resolve())
    assert store.workspace.root == str(ws.resolve())


def test_deep_trees_are_reported_and_removed(store: SnapshotStore, ws: Path) -> None:
    (ws / "keep").write_bytes(b"k")
    info = store.create()
    deep = ws / "deep"
    p = deep
    for i in range(135):
        p = p / f"d{i}"
    p.mkdir(parents=True)
    (p / "bottom.txt").write_bytes(b"bottom")
    (deep / "d0").chmod(0o500)
    skipped = store.create().skipped
    assert [s.reason for s in skipped] == ["nested deeper than 128 directories"]
    assert skipped[0].path.count("/") == 128
    report = store.restore(info.id)
    assert not deep.exists()
    assert "deep" in report.dirs_removed
    assert any(path.endswith("bottom.txt") for path in report.deleted)
    assert sorted(p.name for p in ws.iterdir()) == ["keep"]


def test_symlink_mtime_only_is_metadata(store: SnapshotStore, ws: Path) -> None:
    (ws / "t").write_bytes(b"t")
    (ws / "l").symlink_to("t")
    os.utime(ws / "l", ns=(5, 5), follow_symlinks=False)
    info = store.create()
    os.utime(ws / "l", ns=(9, 9), follow_symlinks=False)
    report = store.restore(info.id)
    assert report.metadata_restored == ("l",)
    assert (ws / "l").lstat().st_mtime_ns == 5
    assert (ws / "t").stat().st_mtime_ns != 5


def test_store_survives_crash_while_being_initialised(ws: Path, tmp_path: Path) -> None:
    store_dir = tmp_path / "fresh"
    store_dir.mkdir()
    (store_dir / ".0123abcd.tmp").write_bytes(b"half a marker")
    s = SnapshotStore(ws, store_dir)
    assert s.list() == []
    assert not (store_dir / ".0123abcd.tmp").exists()
