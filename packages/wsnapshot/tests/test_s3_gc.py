"""Garbage collection of an ``s3://`` store under its lease, against the moto server.

The collector's clock is injected (``clock=``; the writers' through ``_s3._clock``): a clock an
hour ahead makes every unnamed blob older than the lease's start, so a writer's blobs in flight
are collected and the writer's re-checks are what keeps its manifest complete. No test depends
on how long anything takes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import obstore
import pytest
from obstore.store import S3Store

import wsnapshot
from _helpers import build_tree, tree_state
from conftest import BUCKET
from wsnapshot import GcLeaseLost, SnapshotStore, StoreBusy, _s3

HOUR = 3600.0


def _raw(url: str) -> S3Store:
    bucket, prefix = wsnapshot.parse_s3_url(url)
    return S3Store(bucket, prefix=prefix)


def _blob_shas(url: str) -> set[str]:
    out = set()
    for batch in obstore.list(_raw(url), "blobs/"):
        for meta in batch:
            parts = meta["path"].split("/")
            out.add(parts[1] + parts[2])
    return out


def _orphan(url: str, data: bytes) -> str:
    """A blob no manifest names (a crashed writer's), put straight into the bucket."""
    sha = hashlib.sha256(data).hexdigest()
    obstore.put(_raw(url), f"blobs/{sha[:2]}/{sha[2:]}", data)
    return sha


def _reader(ws: Path, url: str) -> SnapshotStore:
    return SnapshotStore.open_read_only(ws, url, state_dir=ws.parent / f"r-{uuid.uuid4().hex[:6]}")


def _assert_complete(ws: Path, url: str) -> dict[str, str]:
    """Every listed snapshot's blobs exist and verify (each exported whole); description -> id."""
    reader = _reader(ws, url)
    listed = {}
    stored = _blob_shas(url)
    for info in reader.list():
        snap = reader.get(info.id)
        for entry in snap.entries:
            if entry.kind == "file":
                assert entry.sha256 in stored, (info.description, entry.path)
        sink = io.BytesIO()
        assert reader.export_to(info.id, sink) == reader.export_size(info.id)
        listed[info.description] = info.id
    return listed


@pytest.fixture
def ahead() -> Callable[[], float]:
    """A collector's clock an hour ahead: every blob no manifest names counts as old."""
    return lambda: time.time() + HOUR


@pytest.fixture
def hook() -> Iterator[list[Callable[[str], None]]]:
    """Functions called after each request to the bucket (``_s3._after_request``)."""
    calls: list[Callable[[str], None]] = []

    def after(operation: str) -> None:
        for call in list(calls):
            call(operation)

    _s3._after_request = after
    try:
        yield calls
    finally:
        _s3._after_request = None


def _store(tmp_path: Path, url: str, name: str = "ws") -> tuple[Path, SnapshotStore]:
    ws = tmp_path / name
    ws.mkdir()
    return ws, SnapshotStore(ws, url, workers=1, state_dir=tmp_path / f"state-{name}")


def test_collect_deletes_only_unnamed_blobs_older_than_its_start(
    s3_url: str, tmp_path: Path, ahead: Callable[[], float]
) -> None:
    ws, store = _store(tmp_path, s3_url)
    build_tree(ws, {"a": b"alpha", "b": b"beta" * 100})
    one = store.create("one")
    (ws / "a").write_bytes(b"alpha 2")
    store.create("two")
    orphans = {_orphan(s3_url, b"crashed writer %d" % i) for i in range(3)}
    named = _blob_shas(s3_url) - orphans
    assert len(named) == 3
    # a clock behind the blobs: every orphan is younger than the start and stays
    young = store.collect_garbage(clock=lambda: time.time() - HOUR)
    assert (young.deleted_blobs, young.young_blobs, young.kept_blobs) == (0, 3, 6)
    assert _blob_shas(s3_url) == named | orphans
    report = _reader(ws, s3_url).collect_garbage(clock=ahead)  # another machine, read-only
    assert report.manifests == 2
    assert (report.kept_blobs, report.deleted_blobs) == (3, 3)
    assert report.deleted_bytes == sum(len(b"crashed writer %d" % i) for i in range(3))
    assert report.kept_bytes == len(b"alpha") + len(b"beta" * 100) + len(b"alpha 2")
    assert _blob_shas(s3_url) == named
    assert set(_assert_complete(ws, s3_url)) == {"one", "two"}
    # the lease was released: the writer still commits, and the next collection finds nothing
    store.delete(one.id)
    assert store.create("three").id
    again = store.collect_garbage(clock=ahead)
    assert again.deleted_blobs == 0
    names = sorted(m["path"] for batch in obstore.list(_raw(s3_url), "gc/") for m in batch)
    # three leases, each released; the older objects pruned
    assert names == ["gc/lease-00000000000000000005.json", "gc/lease-00000000000000000006.json"]


def test_a_live_lease_refuses_commits_until_it_ends(
    s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, store = _store(tmp_path, s3_url)
    (ws / "f").write_bytes(b"first")
    first = store.create("first")
    now = time.time()
    lease = {"holder": "elsewhere:gc", "started_at": now, "expires_at": now + 100}
    obstore.put(_raw(s3_url), "gc/lease-00000000000000000001.json", json.dumps(lease).encode())
    (ws / "f").write_bytes(b"second")
    for attempt in (
        lambda: store.create("refused"),
        lambda: store.delete(first.id),
        lambda: store.import_(store.export(first.id) | {"id": str(uuid.uuid4())}),
    ):
        with pytest.raises(StoreBusy, match=r"garbage collection holds .* retry") as err:
            attempt()
        assert "nothing was saved" in str(err.value)
    assert [i.description for i in store.list()] == ["first"]
    with pytest.raises(StoreBusy):  # a second collector
        store.collect_garbage()
    # the lease expires (by the writers' clock): commits go on; a collector takes it over
    monkeypatch.setattr(_s3, "_clock", lambda: time.time() + 200)
    assert store.create("after").description == "after"
    report = store.collect_garbage(clock=lambda: time.time() + 200)
    assert report.manifests == 2
    assert set(_assert_complete(ws, s3_url)) == {"first", "after"}


def test_two_collectors_cannot_both_hold_the_lease(
    s3_url: str, tmp_path: Path, hook: list[Callable[[str], None]], ahead: Callable[[], float]
) -> None:
    ws, store = _store(tmp_path, s3_url)
    (ws / "f").write_bytes(b"x")
    store.create()
    _orphan(s3_url, b"orphan")
    other = _reader(ws, s3_url)
    outcomes: list[object] = []

    def race(operation: str) -> None:
        # A has read the lease state (none) and is about to create lease 1: B does first
        if operation == "list gc/" and not outcomes:
            outcomes.append("B started")
            outcomes.append(other.collect_garbage(clock=ahead))

    hook.append(race)
    with pytest.raises(StoreBusy):
        store.collect_garbage(clock=ahead)
    hook.clear()
    report = outcomes[1]
    assert isinstance(report, wsnapshot.GcReport)
    assert report.deleted_blobs == 1
    # B released; a collection now succeeds and deletes nothing more
    assert store.collect_garbage(clock=ahead).deleted_blobs == 0


def test_a_collector_whose_lease_was_taken_over_stops_before_deleting(
    s3_url: str, tmp_path: Path, hook: list[Callable[[str], None]], ahead: Callable[[], float]
) -> None:
    ws, store = _store(tmp_path, s3_url)
    (ws / "f").write_bytes(b"x")
    store.create()
    orphan = _orphan(s3_url, b"orphan")
    taken: list[str] = []

    def take_over(operation: str) -> None:
        if operation == "list blobs/" and not taken:  # A marked; B takes the expired lease
            taken.append(operation)
            late = {"holder": "b:gc", "started_at": 0, "expires_at": time.time() + 3 * HOUR}
            obstore.put(
                _raw(s3_url),
                "gc/lease-00000000000000000002.json",
                json.dumps(late).encode(),
                mode="create",
            )

    hook.append(take_over)
    with pytest.raises(GcLeaseLost, match=r"lost its lease .* after deleting 0"):
        store.collect_garbage(clock=ahead)
    assert orphan in _blob_shas(s3_url)
    hook.clear()
    # and one whose lease expired by its own clock stops the same way
    clock = [time.time() + 4 * HOUR]
    hook.append(lambda op: clock.__setitem__(0, clock[0] + HOUR) if op == "list blobs/" else None)
    with pytest.raises(GcLeaseLost):
        store.collect_garbage(clock=lambda: clock[0], lease_seconds=60)
    assert orphan in _blob_shas(s3_url)


def _interleaving(
    base: Path,
    k: int,
    hook: list[Callable[[str], None]],
    start: float,
) -> bool | None:
    """One writer with a whole collection after its k-th request (``None``: it made fewer).

    Returns whether the collection abandoned the writer's commit in flight (its create then
    raised ``StoreBusy`` and was made again).
    """
    url = f"s3://{BUCKET}/gc/{uuid.uuid4().hex}"
    base.mkdir()
    ws, store = _store(base, url)
    build_tree(ws, {"keep": b"kept", "old": b"old only", "dir/": None})
    baseline = store.create("baseline").id
    (ws / "old").unlink()
    build_tree(ws, {"new": os.urandom(3000), "dir/more": b"more", "dup": b"kept"})
    wanted = tree_state(ws)
    count = 0
    ran = False
    fake = start

    def advance(seconds: float) -> None:
        nonlocal fake
        fake += seconds

    def after(operation: str) -> None:
        nonlocal count, ran
        count += 1
        if count == k and not ran:
            ran = True
            _reader(ws, url).collect_garbage(clock=lambda: fake, sleep=advance)

    hook.append(after)
    abandoned = False
    try:
        try:
            store.create("by the writer")
        except StoreBusy:
            abandoned = True
            store.create("by the writer")
        store.delete(baseline)
    finally:
        hook.clear()
    listed = _assert_complete(ws, url)
    assert set(listed) == {"by the writer"}, k
    other = base / "restored"
    other.mkdir()
    SnapshotStore(other, url, state_dir=base / "s2").restore(listed["by the writer"])
    assert tree_state(other) == wanted, k
    return abandoned if ran else None


@pytest.mark.slow
@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11),
    reason="the sweep runs on 3.11: the requests of a writer do not depend on the Python",
)
def test_a_collection_interleaved_with_a_writer_at_every_request(
    s3_endpoint: str,
    tmp_path: Path,
    hook: list[Callable[[str], None]],
    ahead: Callable[[], float],
) -> None:
    """A whole collection (clock ahead: the writer's blobs in flight count as old) runs after
    the writer's k-th request of a create then a delete, for every k: the writer's snapshot is
    complete all the same."""
    k = 1
    abandoned = []
    while (step := _interleaving(tmp_path / f"k{k}", k, hook, ahead())) is not None:
        if step:
            abandoned.append(k)
        k += 1
    assert k > 10  # the writer made fewer than k requests: every step was covered
    # Between its log entry and its manifest the writer is "paused" past the collector's wait
    # (the collector's clock jumps): the collector claims the manifest key, the writer's create
    # fails with StoreBusy and the same create again succeeds.
    assert len(abandoned) == 1, abandoned


#: The collector, SIGKILLed after its k-th request (its clock an hour ahead).
_COLLECTOR = textwrap.dedent(
    """
    import os, signal, sys, time
    from wsnapshot import SnapshotStore, _s3
    ws, url, state, kill_at = sys.argv[1:5]
    count = 0
    def after(operation):
        global count
        count += 1
        if count == int(kill_at):
            os.kill(os.getpid(), signal.SIGKILL)
    _s3._after_request = after
    store = SnapshotStore.open_read_only(ws, url, state_dir=state)
    report = store.collect_garbage(clock=lambda: time.time() + 3600)
    print(count, report.deleted_blobs)
    """
)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11),
    reason="the sweep runs on 3.11: the requests of a collector do not depend on the Python",
)
def test_sigkill_of_the_collector_after_each_request(
    s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    k = 0
    while True:
        k += 1
        url = f"s3://{BUCKET}/gckill/{uuid.uuid4().hex}"
        base = tmp_path / f"k{k}"
        base.mkdir()
        ws, store = _store(base, url)
        build_tree(ws, {"a": b"alpha", "b": b"beta"})
        store.create("one")
        (ws / "a").write_bytes(b"alpha 2")
        store.create("two")
        orphans = {_orphan(url, b"orphan %d" % i) for i in range(3)}
        args = [sys.executable, "-c", _COLLECTOR, str(ws), url, str(base / "c"), str(k)]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
        finished = proc.returncode == 0
        if not finished:
            assert proc.returncode == -signal.SIGKILL, (k, proc.stderr[-2000:])
        assert set(_assert_complete(ws, url)) == {"one", "two"}, k
        left = _blob_shas(url) & orphans
        # the writer: refused while the dead collector's lease lives, saves once it expired
        (ws / "b").write_bytes(b"beta 2")
        _number, lease = store._files.lease_state()  # type: ignore[attr-defined]
        if lease is not None and _s3.lease_live(lease, time.time()):
            with pytest.raises(StoreBusy):
                store.create("refused")
        monkeypatch.setattr(_s3, "_clock", lambda: time.time() + 3 * HOUR)
        store.create("three")
        monkeypatch.undo()
        report = store.collect_garbage(clock=lambda: time.time() + 3 * HOUR)
        assert report.deleted_blobs == len(left), k
        assert not _blob_shas(url) & orphans
        assert set(_assert_complete(ws, url)) == {"one", "two", "three"}, k
        if finished:
            assert int(proc.stdout.split()[0]) < k
            assert int(proc.stdout.split()[1]) == 3
            assert k > 8
            break


def test_collect_on_a_local_store(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    store_dir = tmp_path / "store"
    store = SnapshotStore(ws, store_dir, workers=1)
    build_tree(ws, {"a": b"alpha", "b": b"beta"})
    store.create("one")
    orphans = []
    for data in (b"left by a crash", b"another"):
        sha = hashlib.sha256(data).hexdigest()
        (store_dir / "blobs" / sha[:2]).mkdir(exist_ok=True)
        (store_dir / "blobs" / sha[:2] / sha[2:]).write_bytes(data)
        orphans.append(store_dir / "blobs" / sha[:2] / sha[2:])
    report = store.collect_garbage()
    assert report.to_dict() == {
        "manifests": 1,
        "kept_blobs": 2,
        "kept_bytes": len(b"alpha") + len(b"beta"),
        "deleted_blobs": 2,
        "deleted_bytes": len(b"left by a crash") + len(b"another"),
        "young_blobs": 0,
        "note": "",
    }
    assert not any(p.exists() for p in orphans)
    assert store.collect_garbage().deleted_blobs == 0
    assert [i.description for i in store.list()] == ["one"]


def test_a_writer_paused_past_the_wait_then_killed_never_leaves_a_manifest_naming_a_swept_blob(
    s3_url: str,
    tmp_path: Path,
    hook: list[Callable[[str], None]],
    ahead: Callable[[], float],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A writer that found its blobs already stored (a deleted snapshot's, so unnamed and old)
    stops between its commit's log entry and its manifest for longer than the collector waits;
    the collection sweeps those blobs; the writer then goes on and dies before it could check
    its blobs again. Before the collector claimed the manifest key, that left a listed snapshot
    naming a missing blob."""
    ws, store = _store(tmp_path, s3_url)
    build_tree(ws, {"a": b"alpha, stored once", "b": b"beta, stored once"})
    first = store.create("first").id
    store.delete(first)  # its blobs stay until collected: unnamed, and old by the clock ahead
    ran: list[str] = []

    def collect_while_paused(operation: str) -> None:
        if operation.startswith("put log/") and not ran:
            ran.append(operation)
            fake = [ahead()]  # the collector's waits pass on its own clock, not the test's
            _reader(ws, s3_url).collect_garbage(
                clock=lambda: fake[0], sleep=lambda s: fake.__setitem__(0, fake[0] + s)
            )

    def killed(self: object) -> None:
        raise RuntimeError("the writer was killed before it checked its blobs again")

    monkeypatch.setattr(_s3.S3BlobStore, "settle", killed)
    hook.append(collect_while_paused)
    with pytest.raises(StoreBusy, match="nothing was saved"):
        store.create("second")
    hook.clear()
    assert ran
    assert _assert_complete(ws, s3_url) == {}  # no snapshot names a swept blob
    monkeypatch.undo()
    # the same create again saves a complete snapshot, its blobs uploaded again
    again = store.create("second").id
    assert set(_assert_complete(ws, s3_url)) == {"second"}
    other = tmp_path / "restored"
    other.mkdir()
    SnapshotStore(other, s3_url, state_dir=tmp_path / "s2").restore(again)
    assert tree_state(other) == tree_state(ws)
