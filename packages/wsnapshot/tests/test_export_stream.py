"""F07: an export's size is known from the manifest, and the export streams in bounded memory."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from _helpers import build_tree, tree_state
from wsnapshot import CorruptSnapshot, ExportTooLarge, SnapshotStore, _storedir

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
