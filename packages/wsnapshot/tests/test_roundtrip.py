"""Property tests: random trees, random mutations, restore gives back exactly the snapshot."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _helpers import tree_state
from wsnapshot import SnapshotStore

NAMES = st.sampled_from(["a", "b", "c", "dé", "e f", "x.txt", "ü"])
PATHS = st.lists(NAMES, min_size=1, max_size=3).map("/".join)
FILE_MODES = st.sampled_from([0o400, 0o600, 0o640, 0o644, 0o755, 0o700, 0o604])
DIR_MODES = st.sampled_from([0o700, 0o750, 0o755, 0o777])
MTIMES = st.integers(min_value=0, max_value=4 * 10**18)

ENTRY = st.one_of(
    st.tuples(st.just("file"), st.binary(max_size=80), FILE_MODES, MTIMES),
    st.tuples(st.just("dir"), DIR_MODES, MTIMES),
    st.tuples(st.just("link"), PATHS),
)
TREES = st.dictionaries(PATHS, ENTRY, max_size=12)
MUTATION = st.one_of(
    st.tuples(st.just("write"), PATHS, st.binary(max_size=40)),
    st.tuples(st.just("delete"), PATHS),
    st.tuples(st.just("chmod"), PATHS, FILE_MODES),
    st.tuples(st.just("touch"), PATHS, MTIMES),
    st.tuples(st.just("mkdir"), PATHS),
    st.tuples(st.just("link"), PATHS, PATHS),
)
MUTATIONS = st.lists(MUTATION, min_size=1, max_size=8)


def _ensure_parents(root: Path, rel: str) -> bool:
    parent = root
    for part in rel.split("/")[:-1]:
        parent = parent / part
        if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
            return False
        parent.mkdir(exist_ok=True)
    return True


def _link_target(rel: str, to: str) -> str:
    return os.path.relpath(to, str(Path(rel).parent))


def materialise(root: Path, tree: dict[str, tuple[Any, ...]]) -> None:
    dirs: list[tuple[Path, int, int]] = []
    for rel in sorted(tree):
        entry = tree[rel]
        p = root / rel
        if not _ensure_parents(root, rel) or p.exists() or p.is_symlink():
            continue
        if entry[0] == "file":
            p.write_bytes(entry[1])
            p.chmod(entry[2])
            os.utime(p, ns=(entry[3], entry[3]))
        elif entry[0] == "dir":
            p.mkdir()
            dirs.append((p, entry[1], entry[2]))
        else:
            p.symlink_to(_link_target(rel, entry[1]))
    for p, mode, mtime in sorted(dirs, key=lambda d: -len(d[0].parts)):
        p.chmod(mode)
        os.utime(p, ns=(mtime, mtime))


def mutate(root: Path, ops: list[tuple[Any, ...]]) -> None:
    for op in ops:
        p = root / op[1]
        try:
            if op[0] == "write":
                if (_ensure_parents(root, op[1]) and not p.is_dir()) or p.is_symlink():
                    if p.is_symlink():
                        p.unlink()
                    p.write_bytes(op[2])
            elif op[0] == "delete":
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                elif p.exists() or p.is_symlink():
                    p.unlink()
            elif op[0] == "chmod":
                if p.exists() and not p.is_symlink():
                    p.chmod(op[2] | (0o700 if p.is_dir() else 0))
            elif op[0] == "touch":
                if p.exists() or p.is_symlink():
                    os.utime(p, ns=(op[2], op[2]), follow_symlinks=False)
            elif op[0] == "mkdir":
                if _ensure_parents(root, op[1]) and not p.exists() and not p.is_symlink():
                    p.mkdir()
            elif _ensure_parents(root, op[1]) and not p.exists() and not p.is_symlink():
                p.symlink_to(_link_target(op[1], op[2]))
        except OSError:
            continue


@pytest.mark.slow
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(tree=TREES, changes=MUTATIONS)
def test_restore_gives_back_the_snapshot_exactly(
    tree: dict[str, tuple[Any, ...]], changes: list[tuple[Any, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        materialise(ws, tree)
        store = SnapshotStore(ws, Path(tmp) / "store", workers=2)
        state_a = tree_state(ws)
        a = store.create("a")
        assert a.skipped == ()
        mutate(ws, changes)
        state_b = tree_state(ws)
        b = store.create("b")
        assert a.id != b.id
        store.restore(a.id)
        assert tree_state(ws) == state_a
        assert store.diff(a.id).is_empty
        store.restore(b.id)
        assert tree_state(ws) == state_b
        # the snapshot of a restored tree has the same registry as the original
        c = store.create("c")
        assert store.get(c.id).entries == store.get(b.id).entries
        # export/import into another store reproduces it too
        other_ws = Path(tmp) / "ws2"
        other_ws.mkdir()
        other = SnapshotStore(other_ws, Path(tmp) / "store2")
        other.import_(store.export(a.id))
        other.restore(a.id)
        assert tree_state(other_ws) == state_a


def test_modes_and_mtimes_of_dirs_roundtrip() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        materialise(
            ws,
            {
                "d": ("dir", 0o750, 123),
                "d/e": ("dir", 0o700, 456),
                "d/e/f": ("file", b"x", 0o640, 789),
            },
        )
        store = SnapshotStore(ws, Path(tmp) / "store")
        info = store.create()
        shutil.rmtree(ws / "d")
        store.restore(info.id)
        assert stat.S_IMODE((ws / "d").stat().st_mode) == 0o750
        assert (ws / "d").stat().st_mtime_ns == 123
        assert (ws / "d/e").stat().st_mtime_ns == 456
        assert (ws / "d/e/f").stat().st_mtime_ns == 789
