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


#: The requests the child makes (counted by a run without a kill: a change of the backend's
#: requests fails the count test, which names the new number).
REQUESTS = 27
#: The sweep is split into this many parts (pytest-xdist runs them side by side).
PARTS = 2


def test_the_child_makes_the_requests_counted(s3_endpoint: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    url = f"s3://wsnapshot-tests/faults/{os.getpid()}-count"
    baseline = _baseline(ws, url, tmp_path / "s0")
    proc = _child(ws, url, tmp_path / "s1", 0, baseline)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert int(out) == REQUESTS, f"the writer now makes {out.strip()} requests: set REQUESTS"
    reader = SnapshotStore.open_read_only(ws, url, state_dir=tmp_path / "r")
    assert [i.description for i in reader.list()] == ["by the child"]


@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11),
    reason="the sweep runs on 3.11: the requests of a writer do not depend on the Python",
)
@pytest.mark.parametrize("part", range(PARTS))
def test_sigkill_after_each_request_leaves_only_complete_snapshots(
    s3_endpoint: str, tmp_path: Path, part: int
) -> None:
    states = set()
    for k in range(1 + part, REQUESTS + 1, PARTS):
        base = tmp_path / f"k{k}"
        ws = base / "ws"
        ws.mkdir(parents=True)
        url = f"s3://wsnapshot-tests/faults/{os.getpid()}-{k}"
        baseline = _baseline(ws, url, base / "s0")
        wanted = tree_state(ws)
        proc = _child(ws, url, base / "s1", k, baseline)
        proc.communicate(timeout=120)
        assert proc.returncode == -signal.SIGKILL, f"request {k} of {REQUESTS}: not killed"
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
