"""F07: an export's size is known from the manifest, and the export streams in bounded memory."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from _helpers import build_tree, tree_state
from wsnapshot import (
    CorruptSnapshot,
    ExportTooLarge,
    InvalidRecord,
    SnapshotExists,
    SnapshotStore,
    SnapshotTooLarge,
    _storedir,
)

# This regression starts real processes, so it is e2e too (tests/README.md).
pytestmark = pytest.mark.e2e

TREES: dict[str, dict[str, Any]] = {
    "text": {"a.txt": b"hello", "d/b.txt": "caf\u00e9 \u2603\n".encode()},
    "binary": {"x.bin": bytes(range(256)) * 7 + b"\x00", "e.bin": b"", "one": b"\xff"},
    "names": {"\u00e9t\u00e9/\u65e5\u672c.txt": b'"quoted"\\', "sp ace/l": ("link", "../x")},
    "multi-chunk": {f"f{n}": os.urandom(n) for n in (4095, 4096, 4097, 12289, 3 * 4096 + 1)},
    "empty": {"nothing/": None},
}


@pytest.mark.parametrize("name", sorted(TREES))
def test_stream_size_and_round_trip(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_storedir, "CHUNK", 4096)  # blobs cross chunk and Base64 boundaries
    ws = tmp_path / "ws"
    ws.mkdir()
    tree = dict(TREES[name])
    if name == "names":
        tree["x"] = b"target"
    build_tree(ws, tree)
    store = SnapshotStore(ws, tmp_path / "store", workers=1)
    sid = store.create('desc "\u2603"\n').id
    pieces = list(store.export_chunks(sid))
    data = b"".join(pieces)
    assert len(data) == store.export_size(sid)
    out = io.BytesIO()
    assert store.export_to(sid, out) == len(data)
    assert out.getvalue() == data
    record = json.loads(data)
    assert record["files"].keys() == store.export(sid)["files"].keys()
    assert {e["encoding"] for e in record["files"].values() if e["type"] == "file"} <= {"base64"}
    # the streamed record imports into another store and restores the same tree
    ws2 = tmp_path / "ws2"
    ws2.mkdir()
    other = SnapshotStore(ws2, tmp_path / "store2", workers=1)
    other.import_(record)
    other.restore(sid)
    assert tree_state(ws2) == tree_state(ws)


def test_size_and_limit_read_no_blob(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    build_tree(ws, {"a.bin": b"a" * 3000, "b.txt": b"b"})
    store = SnapshotStore(ws, tmp_path / "store", workers=1)
    sid = store.create().id
    size = store.export_size(sid)
    assert size > 4000
    for blob in (tmp_path / "store" / "blobs").glob("*/*"):
        blob.unlink()  # any blob read would now fail with CorruptSnapshot
    assert store.export_size(sid) == size
    with pytest.raises(ExportTooLarge) as got:
        store.export(sid, max_size=size - 1)
    assert (got.value.size, got.value.limit) == (size, size - 1)
    assert f"wsnapshot export {sid} -o FILE" in str(got.value)
    with pytest.raises(CorruptSnapshot):
        store.export(sid, max_size=size)
    with pytest.raises(CorruptSnapshot):
        b"".join(store.export_chunks(sid))


def test_a_blob_corrupted_midway_fails_the_stream(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    build_tree(ws, {"a.bin": b"a" * 3000})
    store = SnapshotStore(ws, tmp_path / "store", workers=1)
    sid = store.create().id
    (blob,) = (tmp_path / "store" / "blobs").glob("*/*")
    blob.chmod(0o600)
    blob.write_bytes(b"b" * 3000)
    with pytest.raises(CorruptSnapshot):
        b"".join(store.export_chunks(sid))


_RSS_SCRIPT = textwrap.dedent(
    """
    import json, os, resource, sys
    from wsnapshot import SnapshotStore
    ws, store_dir = sys.argv[1], sys.argv[2]
    with open(os.path.join(ws, "big.bin"), "wb") as fh:
        fh.truncate(200 << 20)  # 200 MB of zeros, sparse in the workspace
    with open(os.path.join(ws, "noise.bin"), "wb") as fh:
        fh.write(os.urandom(4 << 20))
    store = SnapshotStore(ws, store_dir, workers=1)
    sid = store.create().id
    size = store.export_size(sid)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(os.devnull, "wb") as out:
        written = store.export_to(sid, out)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"size": size, "written": written, "grew_kib": after - before}))
    """
)


def test_export_of_a_large_snapshot_keeps_memory_flat(tmp_path: Path) -> None:
    """A memory bound, not a timing test: peak RSS grows by far less than the record."""
    ws = tmp_path / "ws"
    ws.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, str(ws), str(tmp_path / "store")],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    shutil.rmtree(tmp_path)  # 200 MB of blobs: not kept for pytest's last three runs
    got = json.loads(done.stdout)
    assert got["written"] == got["size"] > 4 * (204 << 20) // 3
    assert got["grew_kib"] * 1024 < 64 << 20, got


# -- streaming import ---------------------------------------------------------------------------


def _source(tmp_path: Path, tree: dict[str, Any]) -> tuple[SnapshotStore, str, Path]:
    ws = tmp_path / "src"
    ws.mkdir()
    build_tree(ws, tree)
    store = SnapshotStore(ws, tmp_path / "src-store", workers=1)
    return store, store.create("d\u00e9sc \U0001f600").id, ws


def _target(tmp_path: Path, **limits: Any) -> tuple[SnapshotStore, Path, Path]:
    ws = tmp_path / "dst"
    ws.mkdir(exist_ok=True)
    store_dir = tmp_path / "dst-store"
    return SnapshotStore(ws, store_dir, workers=1, **limits), ws, store_dir


@pytest.mark.parametrize("name", sorted(TREES))
@pytest.mark.parametrize("form", ["streamed", "dict-ascii", "dict-indented"])
def test_import_from_round_trip(
    tmp_path: Path, name: str, form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_storedir, "CHUNK", 4096)  # Base64 decoded across several reads
    tree = dict(TREES[name])
    if name == "names":
        tree["x"] = b"target"
    tree["emoji.txt"] = "\U0001f600 \u2028 \x01".encode()
    source, sid, src_ws = _source(tmp_path, tree)
    if form == "streamed":
        data = b"".join(source.export_chunks(sid))
    else:
        record = source.export(sid)
        # content before encoding in every entry: the order of keys is free in JSON
        for entry in record["files"].values():
            if "content" in entry:
                entry["encoding"] = entry.pop("encoding")
        if form == "dict-ascii":
            data = json.dumps(record).encode()  # \uXXXX escapes, surrogate pairs
        else:
            data = json.dumps(record, ensure_ascii=False, indent=2).encode()
    store, ws, store_dir = _target(tmp_path)
    info = store.import_from(io.BytesIO(data))
    assert info.id == sid
    store.restore(sid)
    assert tree_state(ws) == tree_state(src_ws)
    assert list((store_dir / "tmp").iterdir()) == []


def _good_record(tmp_path: Path) -> tuple[bytes, SnapshotStore]:
    source, sid, _ws = _source(tmp_path, {"a.bin": b"a" * 3000, "t.txt": b"text"})
    return b"".join(source.export_chunks(sid)), source


BAD: dict[str, Callable[[bytes], bytes]] = {
    "truncated": lambda d: d[: len(d) // 2],
    "trailing-data": lambda d: d + b" {}",
    "not-json": lambda _d: b"{nope",
    "bad-escape": lambda d: d.replace(b'"t.txt"', b'"t\\q.txt"', 1),
    "control-char": lambda d: d.replace(b'"t.txt"', b'"t\x01.txt"', 1),
    "duplicate-key": lambda d: d.replace(b'{"format":1,', b'{"format":1,"format":1,', 1),
    "padding-midway": lambda d: d.replace(b'"content":"YWFh', b'"content":"YQ==YWFh', 1),
    "not-base64": lambda d: d.replace(b'"content":"YWFh', b'"content":"Y!Fh', 1),
    "wrong-size": lambda d: d.replace(b'"size":3000', b'"size":3001', 1),
    "invalid-utf8": lambda d: d.replace(b'"t.txt"', b'"t\xff.txt"', 1),
    "deep-value": lambda d: d.replace(
        b'"description":"', b'"x":' + b"[" * 40 + b"]" * 40 + b',"description":"', 1
    ),
}


@pytest.mark.parametrize("how", sorted(BAD))
def test_import_from_refuses_malformed_records_and_leaves_nothing(tmp_path: Path, how: str) -> None:
    data, _source_store = _good_record(tmp_path)
    bad = BAD[how](data)
    assert bad != data
    store, _ws, store_dir = _target(tmp_path)
    with pytest.raises(InvalidRecord):
        store.import_from(io.BytesIO(bad))
    assert store.list() == []
    assert list((store_dir / "tmp").iterdir()) == []
    assert list((store_dir / "blobs").iterdir()) == []


def test_import_from_stops_at_max_bytes_while_reading(tmp_path: Path) -> None:
    data, _source_store = _good_record(tmp_path)
    store, _ws, store_dir = _target(tmp_path, max_bytes=1000)
    with pytest.raises(SnapshotTooLarge):
        store.import_from(io.BytesIO(data))
    assert list((store_dir / "tmp").iterdir()) == []
    assert store.list() == []


def test_import_from_an_existing_id_leaves_nothing(tmp_path: Path) -> None:
    data, _source_store = _good_record(tmp_path)
    store, _ws, store_dir = _target(tmp_path)
    store.import_from(io.BytesIO(data))
    with pytest.raises(SnapshotExists):
        store.import_from(io.BytesIO(data))
    assert list((store_dir / "tmp").iterdir()) == []


_IMPORT_RSS_SCRIPT = textwrap.dedent(
    """
    import json, os, resource, sys
    from wsnapshot import SnapshotStore
    src, dst, record = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(os.path.join(src, "ws", "big.bin"), "wb") as fh:
        for _ in range(48):  # a MiB at a time: the peak before the import stays low
            fh.write(os.urandom(1 << 20))
    source = SnapshotStore(os.path.join(src, "ws"), os.path.join(src, "store"), workers=1)
    sid = source.create().id
    with open(record, "wb") as out:
        source.export_to(sid, out)
    target = SnapshotStore(os.path.join(dst, "ws"), os.path.join(dst, "store"), workers=1)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(record, "rb") as fh:
        info = target.import_from(fh)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"bytes": info.total_bytes, "grew_kib": after - before}))
    """
)


def test_import_of_a_large_record_keeps_memory_flat(tmp_path: Path) -> None:
    """A memory bound, not a timing test: a 64 MB record imports with far less memory."""
    for side in ("src", "dst"):
        (tmp_path / side / "ws").mkdir(parents=True)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _IMPORT_RSS_SCRIPT,
            str(tmp_path / "src"),
            str(tmp_path / "dst"),
            str(tmp_path / "record.json"),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    shutil.rmtree(tmp_path)
    got = json.loads(done.stdout)
    assert got["bytes"] == 48 << 20
    assert got["grew_kib"] * 1024 < 32 << 20, got


@pytest.mark.parametrize("name", sorted(TREES))
@pytest.mark.parametrize("step", [1, 2, 3, 5, 7, 4096, 10_000])
def test_export_range_is_a_slice_of_the_stream(tmp_path: Path, name: str, step: int) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    tree = dict(TREES[name])
    if name == "names":
        tree["x"] = b"target"
    build_tree(ws, tree)
    store = SnapshotStore(ws, tmp_path / "store", workers=1)
    sid = store.create("ranges").id
    whole = b"".join(store.export_chunks(sid))
    size = store.export_size(sid)
    pieces = [store.export_range(sid, at, step) for at in range(0, size, step)]
    assert b"".join(pieces) == whole
    assert all(len(p) == step for p in pieces[:-1])
    assert store.export_range(sid, size, 10) == b""
    assert store.export_range(sid, 3, 0) == b""


def test_export_range_refuses_bad_bounds_and_checks_blobs(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "f").write_bytes(b"x" * 10_000)
    store = SnapshotStore(ws, tmp_path / "store", workers=1)
    sid = store.create().id
    for offset, length in ((-1, 1), (0, -1), (0, (16 << 20) + 1)):
        with pytest.raises(ValueError, match="offset and length"):
            store.export_range(sid, offset, length)
    (blob,) = [p for p in (tmp_path / "store" / "blobs").rglob("*") if p.is_file()]
    blob.chmod(0o600)
    blob.write_bytes(b"y" * 10_000)  # same size, other content: a whole read notices
    with pytest.raises(CorruptSnapshot, match="SHA-256"):
        store.export_range(sid, 0, store.export_size(sid))
    blob.write_bytes(b"y" * 10)  # another size: even a partial read notices
    with pytest.raises(CorruptSnapshot, match="size"):
        store.export_range(sid, 400, 10)  # inside the content (the head is ~330 bytes)
