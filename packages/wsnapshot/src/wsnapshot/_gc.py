"""Garbage collection of an ``s3://`` store: mark and sweep under a lease.

Layout: ``gc/lease-<20 digits>.json``, numbered from 1, each created create-only. The newest
one says who holds the store: ``{"holder", "started_at", "expires_at"}`` (epoch seconds) is a
lease, live until ``expires_at``; ``{"released": true}`` ends it. Taking the lease is creating
the next number, so of two collectors (or one taking an expired lease over) exactly one
succeeds; the other gets :class:`~wsnapshot.exceptions.StoreBusy`.

A collection, in order:

1. takes the lease (number *n*);
2. creates the next entry of the commit log as its *barrier* (``op`` ``"gc"``): a writer whose
   commit entry comes after it meets the lease and refuses (``StoreBusy``, nothing committed);
   the one entry just before it may be a commit whose manifest is still being written, so the
   collector waits for that manifest (at most :data:`~wsnapshot._s3.GC_WAIT_S`); every commit
   entered since the previous barrier whose manifest is then still missing is abandoned: the
   collector creates its manifest key first (:data:`~wsnapshot._s3.ABANDONED_MANIFEST`), so the
   writer's manifest, however late, is refused (``StoreBusy``) and never names a swept blob;
3. marks: reads every manifest (none unreadable, or nothing is deleted);
4. sweeps: deletes the blobs no manifest names *and* older than the lease's start (a writer's
   upload in flight survives), in batches, checking before each that its lease is still the
   newest and not expired (else :class:`~wsnapshot.exceptions.GcLeaseLost`);
5. releases the lease (creates *n + 1* as a release) and prunes older lease objects.

The writers' side (in :mod:`wsnapshot._s3`): no commit while a lease is live; every blob of a
commit stays staged until its manifest is committed, is checked again (``HEAD``) before the
commit entry when a collection ran since the blobs were checked, and again after the
manifest, and uploaded again if collected: no manifest names a missing blob.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable
from datetime import datetime, timezone

import obstore
from obstore.exceptions import AlreadyExistsError

from wsnapshot import _s3
from wsnapshot._manifest import check_id
from wsnapshot.exceptions import GcLeaseLost, SnapshotError, StoreBusy
from wsnapshot.snapshot import GcReport

__all__ = ["collect"]

log = logging.getLogger("wsnapshot")

#: Blob keys deleted per request (S3's ``DeleteObjects`` takes at most 1,000).
_BATCH = 1000
#: Seconds between two looks for an in-flight commit's manifest.
_POLL_S = 0.2
#: A collector stops deleting this long before its lease expires (clocks of writers differ).
_MARGIN_S = 10.0


def collect(
    files: _s3.S3StoreDir,
    blobs: _s3.S3BlobStore,
    *,
    lease_seconds: float = _s3.GC_LEASE_S,
    wait_seconds: float = _s3.GC_WAIT_S,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> GcReport:
    """Collect the blobs of ``files``'s prefix that no manifest names (see the module).

    Args:
        files: The store (a writer's or a read-only one: collecting takes no fence).
        blobs: Its blobs.
        lease_seconds: How long the lease lasts (seconds; longer than the collection takes).
        wait_seconds: How long to wait for an in-flight commit's manifest (seconds).
        clock: Epoch seconds (the lease's start and expiry).
        sleep: Waits that many seconds (between two looks for an in-flight manifest).

    Returns:
        What was kept and deleted.

    Raises:
        StoreBusy: Another collection holds a live lease (or took it at the same moment).
        GcLeaseLost: The lease expired or was taken over during the sweep.
        StoreUnavailable: The bucket cannot be reached (the lease is released if it can be).
    """
    number, body = files.lease_state()
    started = clock()
    if body is not None and _s3.lease_live(body, started):
        raise StoreBusy(files.url, _s3.iso_epoch(body.get("expires_at")))
    mine = number + 1
    expires = started + lease_seconds
    holder = f"{files.writer}:gc"
    lease = {"holder": holder, "started_at": started, "expires_at": expires, "released": False}
    key = files.lease_key(mine)
    try:
        with files.call(f"put {key}"):
            obstore.put(files.client, key, json.dumps(lease).encode(), mode="create")
    except AlreadyExistsError:
        raise StoreBusy(files.url, _s3.iso_epoch(expires)) from None
    try:
        barrier = files.append_barrier(holder)
        _wait_for_in_flight(files, barrier, started + wait_seconds, clock, sleep)
        return _mark_and_sweep(
            files, blobs, mine=mine, started=started, stop_at=expires - _MARGIN_S, clock=clock
        )
    finally:
        _release(files, mine, holder)


def _wait_for_in_flight(
    files: _s3.S3StoreDir,
    barrier: int,
    deadline: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> None:
    """Settle every commit entered since the previous collection whose manifest is missing.

    The one just before the barrier may be in flight: it gets until ``deadline``. Each of them
    whose manifest is still missing then is abandoned (:meth:`~wsnapshot._s3.S3StoreDir.
    abandon_commit`, a create-only claim of its manifest key), so a writer paused past the wait,
    or one a take-over left behind, can never create a manifest naming a blob this collection
    removes. Entries before the previous barrier were settled by that collection.
    """
    number = barrier - 1
    while number >= 1:
        entry = files.log_entry(number)
        if entry is not None and entry.get("op") == "gc":
            return
        sid = _created_id(entry)
        if sid is not None:
            while number == barrier - 1 and not files.exists(files.manifest_key(sid)):
                if clock() >= deadline:
                    break
                sleep(_POLL_S)
            files.abandon_commit(sid)  # a no-op (one refused put) when the manifest is there
        number -= 1


def _created_id(entry: dict[str, object] | None) -> str | None:
    """The snapshot id a ``create`` log entry names (``None``: another entry, or hostile)."""
    if entry is None or entry.get("op") != "create" or not isinstance(entry.get("id"), str):
        return None
    try:
        return check_id(str(entry["id"]))
    except SnapshotError:
        return None


def _mark_and_sweep(
    files: _s3.S3StoreDir,
    blobs: _s3.S3BlobStore,
    *,
    mine: int,
    started: float,
    stop_at: float,
    clock: Callable[[], float],
) -> GcReport:
    bad: list[str] = []
    used: set[str | None] = set()
    manifests = 0
    for m in files.iter_manifests(bad):
        manifests += 1
        used.update(e.sha256 for e in m.entries.values() if e.kind == "file")
        del m  # not held while the next one loads
    start = datetime.fromtimestamp(started, timezone.utc)
    kept = kept_bytes = young = 0
    victims: list[tuple[str, int]] = []
    for sha, size, modified in blobs.sizes_and_times():
        if sha in used or bad:
            kept, kept_bytes = kept + 1, kept_bytes + size
        elif modified >= start:
            kept, kept_bytes, young = kept + 1, kept_bytes + size, young + 1
        else:
            victims.append((sha, size))
    if bad:
        note = f"unreadable manifests {sorted(bad)[:3]}: no blob deleted"
        return GcReport(manifests, kept, kept_bytes, 0, 0, young, note)
    deleted = deleted_bytes = 0
    for lo in range(0, len(victims), _BATCH):
        batch = victims[lo : lo + _BATCH]
        if clock() >= stop_at or files.exists(files.lease_key(mine + 1)):
            raise GcLeaseLost(files.url, deleted)
        with files.call("delete blobs"):
            obstore.delete(files.client, [blobs.key(sha) for sha, _size in batch])
        deleted += len(batch)
        deleted_bytes += sum(size for _sha, size in batch)
    blobs.forget_usage()
    return GcReport(manifests, kept, kept_bytes, deleted, deleted_bytes, young)


def _release(files: _s3.S3StoreDir, mine: int, holder: str) -> None:
    """Create the release after lease ``mine`` (unless taken over), then prune older ones."""
    key = files.lease_key(mine + 1)
    body = json.dumps({"holder": holder, "released": True}).encode()
    try:
        with contextlib.suppress(AlreadyExistsError), files.call(f"put {key}"):
            obstore.put(files.client, key, body, mode="create")
        old = [files.lease_key(n) for n in range(max(1, mine - 64), mine)]
        with files.call("delete gc/"):
            obstore.delete(files.client, old)
    except SnapshotError as exc:  # the lease then ends when it expires
        log.warning("%s: lease %d not released: %s", files.url, mine, exc)
