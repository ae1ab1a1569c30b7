"""Real processes: SIGKILL at random points of create/restore/import, and concurrent writers."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _helpers import build_tree, tree_state
from wsnapshot import SnapshotStore

CHILD = r"""
import sys
from wsnapshot import SnapshotStore
ws, store_dir, mode, a, b = sys.argv[1:6]
s = SnapshotStore(ws, store_dir)
print("ready", flush=True)
n = 0
while True:
    n += 1
    if mode == "create":
        s.create(f"loop {n}")
    elif mode == "import":  # a: an export record's file
        with open(a, "rb") as fh:
            s.delete(s.import_from(fh).id)
    else:
        s.restore(a if n % 2 else b)
"""


def _tree(n: int, tag: bytes) -> dict[str, object]:
    spec: dict[str, object] = {}
    for i in range(n):
        spec[f"d{i % 7}/f{i}.bin"] = tag * (500 + 37 * i)
    spec["empty/"] = None
    spec["link"] = ("link", "d0/f0.bin")
    return spec


def _check_store(ws: Path, store_dir: Path) -> SnapshotStore:
    store = SnapshotStore(ws, store_dir)  # opening completes or cleans up
    for info in store.list():
        store.export(info.id)  # every listed snapshot is complete and verified
    refs = {e.sha256 for i in store.list() for e in store.get(i.id).entries if e.sha256}
    disk = {p.parent.name + p.name for p in (store_dir / "blobs").glob("*/*")}
    assert disk == refs
    assert not (store_dir / "restore.journal").exists()
    assert list((store_dir / "tmp").iterdir()) == []
    return store


def _kill_at_random(rng: random.Random, *args: str) -> None:
    """Start :data:`CHILD` with ``args``, wait for its ``ready``, SIGKILL it 0-250 ms later."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, *args], stdout=subprocess.PIPE)
    assert child.stdout is not None
    assert child.stdout.readline() == b"ready\n"
    time.sleep(rng.uniform(0.0, 0.25))
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()


@pytest.mark.parametrize("mode", ["create", "restore"])
@pytest.mark.slow
def test_sigkill_at_random_points(tmp_path: Path, mode: str) -> None:
    rng = random.Random(1234 + len(mode))
    ws, store_dir = tmp_path / "ws", tmp_path / "store"
    ws.mkdir()
    build_tree(ws, _tree(120, b"A"))
    store = SnapshotStore(ws, store_dir)
    a = store.create("A")
    state_a = tree_state(ws)
    for p in sorted(ws.glob("d*/f*.bin"))[::2]:
        p.write_bytes(b"B" * 999)
    (ws / "empty").rmdir()
    (ws / "extra").mkdir()
    (ws / "extra/new").write_bytes(b"new")
    b = store.create("B")
    state_b = tree_state(ws)
    for _round in range(8):
        _kill_at_random(rng, str(ws), str(store_dir), mode, a.id, b.id)
        store = _check_store(ws, store_dir)
        state = tree_state(ws)
        if mode == "restore":
            assert state in (state_a, state_b)
        else:
            assert state == state_b
            for info in store.list()[2:]:
                store.delete(info.id)


def test_sigkill_at_random_points_of_an_import(tmp_path: Path) -> None:
    """A killed streamed import leaves no half-written snapshot, blob or staging file."""
    rng = random.Random(4321)
    src_ws, src_store = tmp_path / "src", tmp_path / "src-store"
    src_ws.mkdir()
    build_tree(src_ws, _tree(150, b"I"))
    source = SnapshotStore(src_ws, src_store)
    record = tmp_path / "record.json"
    with record.open("wb") as out:
        imported = source.create("to import").id
        source.export_to(imported, out)
    ws, store_dir = tmp_path / "ws", tmp_path / "store"
    ws.mkdir()
    build_tree(ws, _tree(20, b"K"))
    kept = SnapshotStore(ws, store_dir).create("kept").id
    for _round in range(8):
        _kill_at_random(rng, str(ws), str(store_dir), "import", str(record), "-")
        store = _check_store(ws, store_dir)  # also: tmp/ is empty once reopened
        ids = {i.id for i in store.list()}
        assert ids in ({kept}, {kept, imported})  # the import is complete (checked) or absent
        if imported in ids:
            store.delete(imported)


WRITER = r"""
import sys
from wsnapshot import SnapshotStore
s = SnapshotStore(sys.argv[1], sys.argv[2])
for i in range(3):
    s.create(sys.argv[3] + str(i))
print("ok", flush=True)
"""


def test_two_processes_create_at_once(tmp_path: Path) -> None:
    ws, store_dir = tmp_path / "ws", tmp_path / "store"
    ws.mkdir()
    build_tree(ws, _tree(60, b"C"))
    SnapshotStore(ws, store_dir)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(ws), str(store_dir), tag], stdout=subprocess.PIPE
        )
        for tag in ("p", "q")
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outs == [b"ok\n", b"ok\n"]
    store = _check_store(ws, store_dir)
    assert sorted(i.description for i in store.list()) == ["p0", "p1", "p2", "q0", "q1", "q2"]
