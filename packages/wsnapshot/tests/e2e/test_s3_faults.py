"""The S3 backend's writer SIGKILLed after each of its requests to the bucket, one run per
request (``_s3._after_request`` counts them in a child process and kills it at the k-th): after
every kill a reader sees only complete snapshots, and the next writer takes over and saves."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _helpers import build_tree, tree_state
from wsnapshot import SnapshotStore

#: The child: open the store (taking it over), create a snapshot of the changed workspace, then
#: delete the baseline snapshot (its unshared blobs are collected): every request of the three.
_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from wsnapshot import SnapshotStore, _s3
    ws, url, state, kill_at, baseline = sys.argv[1:6]
    count = 0
    def after(operation):
        global count
        count += 1
        if count == int(kill_at):
            os.kill(os.getpid(), signal.SIGKILL)
    _s3._after_request = after
    store = SnapshotStore(ws, url, state_dir=state, workers=1)
    store.create("by the child")
    store.delete(baseline)
    print(count)
    """
)


def _child(ws: Path, url: str, state: Path, kill_at: int, baseline: str) -> subprocess.Popen[str]:
    args = [sys.executable, "-c", _WRITER, str(ws), url, str(state), str(kill_at), baseline]
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True)


def _baseline(ws: Path, url: str, state: Path) -> str:
    build_tree(ws, {"keep": b"kept across", "old": b"only in the baseline", "dir/": None})
    sid = SnapshotStore(ws, url, state_dir=state, workers=1).create("baseline").id
    (ws / "old").unlink()
    build_tree(ws, {"new": os.urandom(3000), "dir/more": b"more"})
    return sid


#: The sweep is split into this many parts (pytest-xdist runs them side by side): part p kills
#: the child at requests p + 1, p + 1 + PARTS, ... until a child finishes before its k-th
#: request. (How many requests a writer makes varies: a file changed within the timestamp
#: granularity of a snapshot is hashed again by the next one, which then asks for its blob.)
PARTS = 2


@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11),
    reason="the sweep runs on 3.11: the requests of a writer do not depend on the Python",
)
@pytest.mark.parametrize("part", range(PARTS))
@pytest.mark.slow
def test_sigkill_after_each_request_leaves_only_complete_snapshots(
    s3_endpoint: str, tmp_path: Path, part: int
) -> None:
    states = set()
    finished = False
    k = 1 + part - PARTS
    while not finished:
        k += PARTS
        base = tmp_path / f"k{k}"
        ws = base / "ws"
        ws.mkdir(parents=True)
        url = f"s3://wsnapshot-tests/faults/{os.getpid()}-{k}"
        baseline = _baseline(ws, url, base / "s0")
        wanted = tree_state(ws)
        proc = _child(ws, url, base / "s1", k, baseline)
        out, _ = proc.communicate(timeout=120)
        if proc.returncode == 0:  # it made fewer than k requests: the sweep is complete
            assert int(out) < k
            assert k > 20  # open (3), create (blobs, log entry, manifest), delete (log, gc)
            finished = True
        else:
            assert proc.returncode == -signal.SIGKILL, f"request {k}: {proc.returncode}"
        # a reader on another machine: every listed snapshot is complete and restores exactly
        reader = SnapshotStore.open_read_only(ws, url, state_dir=base / "r")
        listed = {i.description: i.id for i in reader.list()}
        assert set(listed) <= {"baseline", "by the child"}, (k, listed)
        for description, sid in listed.items():
            sink = io.BytesIO()
            assert reader.export_to(sid, sink) == reader.export_size(sid), (k, description)
        if "by the child" in listed:
            other = base / "restored"
            other.mkdir()
            SnapshotStore(other, url, state_dir=base / "s2").restore(listed["by the child"])
            assert tree_state(other) == wanted, k
        states.add(tuple(sorted(listed)))
        # the next writer takes over and saves
        after = SnapshotStore(ws, url, state_dir=base / "s3", workers=1)
        assert after.create("after the kill").id in {i.id for i in after.list()}
    # each part goes through every state: before the child's manifest, after it, after delete
    assert states == {("baseline",), ("baseline", "by the child"), ("by the child",)}
