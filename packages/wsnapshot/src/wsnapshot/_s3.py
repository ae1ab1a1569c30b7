"""The S3 backend (extra ``wsnapshot[s3]``): manifests and blobs in an S3-compatible bucket.

Layout under ``s3://BUCKET/PREFIX/`` (the prefix names one workspace)::

    wsnapshot-store.json     {"format": 1}, created once (create-only)
    log/<20 digits>.json     the commit log: {"op", "id", "at", "writer"}, numbered from 1
    snapshots/<uuid>.json    manifests (the local format), created create-only
    blobs/ab/cdef...         contents by SHA-256, created create-only, verified on every read

**The single-writer fence.** A writer knows the newest number of ``log/`` (its *head*). Every
commit (``open`` when it opens the store, ``create`` before a manifest is stored, ``delete``
before one is removed) creates ``log/<head + 1>.json`` with ``If-None-Match: *``
(``put(mode="create")``). S3 lets only one such create succeed: a writer whose create fails
lost the fence to another writer (which opened the store on the same prefix), stops at once,
and every later call of its store raises
:class:`~wsnapshot.exceptions.WorkspaceServedElsewhere`. Every writers' call also checks,
with one ``HEAD`` of ``log/<head + 1>.json``, that nobody took over before it acknowledges
anything (``restore`` changes only the local workspace, so this is its check).

**Completeness.** A blob is stored before any manifest names it and a manifest object is
written whole or not at all, so a reader listing ``snapshots/`` sees only complete snapshots,
whenever a writer is killed. Blobs left by a writer killed before its manifest are collected
by :meth:`~wsnapshot.SnapshotStore.collect_garbage`, under a lease (:mod:`wsnapshot._gc`):
no commit while it is live (:class:`~wsnapshot.exceptions.StoreBusy`), and every blob of a
commit stays staged and is checked again around it; a failed or fenced writer never deletes
blobs (another writer may have found them present and skipped them).

**Bounded memory.** Blobs are uploaded from their local staging file in multipart parts of
:data:`PART_BYTES` (:data:`PART_CONCURRENCY` at a time) and downloaded as a stream of chunks;
a manifest is read up to ``MAX_MANIFEST_BYTES``.

Endpoint, region and credentials come only from the standard environment (``AWS_ENDPOINT_URL``,
``AWS_REGION``/``AWS_DEFAULT_REGION``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``; ``AWS_ALLOW_HTTP=true`` for a plain-HTTP endpoint), read by obstore;
nothing here names or logs a credential.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, NoReturn

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError, NotFoundError
from obstore.store import S3Store

from wsnapshot import _storedir
from wsnapshot._blobs import BlobStore
from wsnapshot._fsio import Ops
from wsnapshot._manifest import Manifest, check_id, now_iso
from wsnapshot._storedir import (
    MAX_MANIFEST_BYTES,
    S3_SCHEME,
    Limits,
    StoreDir,
    manifest_bytes,
    parse_s3_url,
)
from wsnapshot.exceptions import (
    CorruptSnapshot,
    QuotaExceeded,
    SnapshotError,
    SnapshotExists,
    SnapshotNotFound,
    StoreBusy,
    StoreConfigError,
    StoreUnavailable,
    WorkspaceServedElsewhere,
)

if TYPE_CHECKING:
    from wsnapshot._backend import BlobBackend, ManifestBackend

__all__ = [
    "GC_LEASE_S",
    "GC_WAIT_S",
    "PART_BYTES",
    "PART_CONCURRENCY",
    "S3BlobStore",
    "S3StoreDir",
]

log = logging.getLogger("wsnapshot")

#: Bytes of one multipart upload part (S3's minimum part size is 5 MiB).
PART_BYTES = 8 << 20
#: Parts uploaded at once: an upload holds at most PART_BYTES * PART_CONCURRENCY in memory.
PART_CONCURRENCY = 2
#: Retries of a failed request (with backoff) and the time they may take in all.
_RETRIES = 3
_RETRY_TIMEOUT = timedelta(seconds=20)
#: Opening tries this many times to create the next log entry (others opening at once).
_OPEN_TRIES = 8
_MARK = "wsnapshot-store.json"
_LOG = "log/"
_LOG_NAME = re.compile(r"[0-9]{20}\.json")
_HEX = re.compile(r"[0-9a-f]+")
_REASON_CHARS = 300
#: Seconds a garbage collection's lease lasts: writers commit nothing while it is live, and a
#: collector killed meanwhile keeps them waiting at most this long.
GC_LEASE_S = 120
#: Seconds a collector waits, after its barrier in the log, for the manifest of a commit the
#: log names just before it (a writer between its log entry and its manifest).
GC_WAIT_S = 30
_GC = "gc/"
#: What a collector creates, create-only, at the manifest key of a commit it stopped waiting for
#: (a writer paused between its log entry and its manifest): that writer's manifest can then never
#: be created, so no manifest names a blob the collection removed. Loading it is "no such
#: snapshot"; the writer's create fails with :class:`~wsnapshot.exceptions.StoreBusy`.
ABANDONED_MANIFEST = b'{"wsnapshot":"commit abandoned by a garbage collection"}'
_LEASE_NAME = re.compile(r"lease-([0-9]{20})\.json")
#: The clock judging whether a lease is live (epoch seconds); the tests inject theirs.
_clock: Callable[[], float] = time.time
#: Called with the operation's name after each request to the bucket, answered or failed
#: (``None``: nothing). The fault-injection tests kill the writer there, request by request.
_after_request: Callable[[str], None] | None = None


def _reason(exc: BaseException) -> str:
    """The first line of a backend error, shortened (it names URLs, never credentials)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:_REASON_CHARS]


class S3StoreDir(StoreDir):
    """Manifests, the commit log and the fence in ``s3://BUCKET/PREFIX``; local state locally.

    The local state (the writers' ``flock``, staging files, the restore journal, the
    inconsistent marker) is a :class:`~wsnapshot._storedir.StoreDir` on ``state_dir``.

    Args:
        workspace_root: The workspace's absolute real path.
        url: ``s3://BUCKET/PREFIX``.
        state_dir: The local state directory (created 0o700; must not overlap the workspace).
        ops: The local system calls.
        limits: The store's limits.
        read_only: Open for reading only: no commit, no fence (a reader never takes over).
        client: An obstore store to use instead of one built from the environment (tests).

    Raises:
        StoreConfigError: A bad URL, a prefix holding other objects than a store's, or (read
            only) no store at the prefix.
        StoreUnavailable: The bucket cannot be reached.
        WorkspaceServedElsewhere: Other writers kept taking the fence while this one opened.
    """

    backend_name = "s3"

    def __init__(
        self,
        workspace_root: str,
        url: str,
        state_dir: str,
        ops: Ops,
        limits: Limits,
        *,
        read_only: bool = False,
        client: S3Store | None = None,
    ) -> None:
        self.bucket, self.prefix = parse_s3_url(url)
        self.url = f"{S3_SCHEME}{self.bucket}/{self.prefix}"
        super().__init__(workspace_root, state_dir, ops, limits)
        self.read_only = read_only
        self.client = client or S3Store(
            self.bucket,
            prefix=self.prefix,
            retry_config={
                "max_retries": _RETRIES,
                "retry_timeout": _RETRY_TIMEOUT,
                "backoff": {
                    "init_backoff": timedelta(milliseconds=100),
                    "max_backoff": timedelta(seconds=2),
                    "base": 2.0,
                },
            },
        )
        self.writer = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.head = 0
        self.saved_at = now_iso()
        self.lost = False
        #: The blobs of this store (set by :class:`S3BlobStore`): re-checked around a commit.
        self.blobs: S3BlobStore | None = None
        #: (newest lease number, whether it was released or absent) when this commit's blobs
        #: were checked; ``None`` outside a commit of blobs.
        self.lease_seen: tuple[int, bool] | None = None
        self._check_marker()
        if not read_only:
            self._take_fence()

    # -- requests -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def call(self, operation: str) -> Iterator[None]:
        """Turn a backend failure of ``operation`` into :class:`StoreUnavailable`.

        ``FileNotFoundError`` (a missing object) and obstore's ``AlreadyExistsError`` (a
        create-only put that found an object) pass through for the caller to handle.
        """
        try:
            yield
        except (FileNotFoundError, NotFoundError, AlreadyExistsError):
            raise
        except (BaseError, OSError) as exc:
            raise StoreUnavailable(self.url, operation, _reason(exc)) from None
        finally:
            if _after_request is not None:
                _after_request(operation)

    def keys(self, under: str) -> Iterator[tuple[str, int]]:
        """``(key, size)`` of every object under ``under`` (relative to the prefix)."""
        for key, size, _modified in self.objects(under):
            yield key, size

    def objects(self, under: str) -> Iterator[tuple[str, int, datetime]]:
        """``(key, size, last modified)`` of every object under ``under``."""
        with self.call(f"list {under}"):
            for batch in obstore.list(self.client, under, chunk_size=1000):
                for meta in batch:
                    yield meta["path"], meta["size"], meta["last_modified"]

    def exists(self, key: str) -> bool:
        """Whether object ``key`` exists (one ``HEAD``)."""
        try:
            with self.call(f"head {key}"):
                obstore.head(self.client, key)
        except (FileNotFoundError, NotFoundError):
            return False
        return True

    def _check_marker(self) -> None:
        if self.exists(_MARK):
            return
        if self.read_only:
            raise StoreConfigError(self.url, "not a wsnapshot store (opened read-only)")
        foreign = [key for key, _size in self.keys("")][:3]
        if foreign:
            raise StoreConfigError(
                self.url, f"not a wsnapshot store and not empty (holds {foreign}); use a new prefix"
            )
        with contextlib.suppress(AlreadyExistsError), self.call(f"put {_MARK}"):
            obstore.put(self.client, _MARK, json.dumps({"format": 1}).encode(), mode="create")

    # -- the fence ----------------------------------------------------------------------------

    def _newest_log_number(self) -> int:
        newest = 0
        for key, _size in self.keys(_LOG):
            name = key[len(_LOG) :]
            if _LOG_NAME.fullmatch(name):
                newest = max(newest, int(name[:20]))
        return newest

    def _log_key(self, number: int) -> str:
        return f"{_LOG}{number:020d}.json"

    def _take_fence(self) -> None:
        for _ in range(_OPEN_TRIES):
            self.head = self._newest_log_number()
            try:
                self._append("open", None)
                return
            except AlreadyExistsError:
                continue  # another writer opened at the same moment: read the log again
        self._lose()

    def _append(self, op: str, sid: str | None) -> None:
        body = {"op": op, "id": sid, "at": now_iso(), "writer": self.writer}
        key = self._log_key(self.head + 1)
        with self.call(f"put {key}"):
            obstore.put(self.client, key, json.dumps(body).encode(), mode="create")
        self.head += 1
        self.saved_at = body["at"]  # type: ignore[assignment]

    def _lose(self) -> NoReturn:
        self.lost = True
        log.error("%s: another writer took over; this one stops saving", self.url)
        raise WorkspaceServedElsewhere(self.url, self.saved_at)

    def commit_entry(self, op: str, sid: str) -> None:
        """Create the next log entry (the fence) before a commit; lose the store if taken.

        Raises:
            WorkspaceServedElsewhere: Another writer created it first.
            StoreUnavailable: The bucket cannot be reached.
        """
        self.check_serving()
        while True:
            self.check_no_lease()
            try:
                self._append(op, sid)
                return
            except AlreadyExistsError:
                self._skip_own_or_lose()

    # -- the collection lease -----------------------------------------------------------------

    def lease_key(self, number: int) -> str:
        """The key of lease object ``number`` (relative to the prefix)."""
        return f"{_GC}lease-{number:020d}.json"

    def lease_number(self) -> int:
        """The newest lease object's number (0: none; one ``LIST`` of ``gc/``)."""
        newest = 0
        for key, _size in self.keys(_GC):
            got = _LEASE_NAME.fullmatch(key[len(_GC) :])
            if got:
                newest = max(newest, int(got.group(1)))
        return newest

    def lease_state(self) -> tuple[int, dict[str, object] | None]:
        """The newest lease object's number and body (``None``: none, or unreadable)."""
        newest = self.lease_number()
        if not newest:
            return 0, None
        key = self.lease_key(newest)
        try:
            with self.call(f"get {key}"):
                body = json.loads(bytes(obstore.get(self.client, key).bytes()))
        except (FileNotFoundError, NotFoundError, ValueError):
            return newest, None
        return newest, body if isinstance(body, dict) else None

    def check_no_lease(self) -> None:
        """Refuse to commit while a collection's lease is live; re-check the blobs if one ran.

        A lease is live when its object is the newest, is not a release, and its
        ``expires_at`` is ahead of :data:`_clock`. When a collection started (or had not been
        released) since this commit's blobs were checked, every blob of the commit is checked
        again (and uploaded again if collected) before its manifest may name it.

        Raises:
            StoreBusy: A live lease (nothing of this call was committed).
            StoreUnavailable: The bucket cannot be reached.
        """
        number, body = self.lease_state()
        if body is not None and lease_live(body, _clock()):
            raise StoreBusy(self.url, iso_epoch(body.get("expires_at")))
        seen = self.lease_seen
        if seen is None:
            self.lease_seen = (number, True)
            return
        clean = number == seen[0] and seen[1]
        if not clean and self.blobs is not None:
            self.blobs.verify_pending()
        self.lease_seen = (number, clean)

    def append_barrier(self, holder: str) -> int:
        """Create the next log entry as a collector's barrier (``op`` ``"gc"``); its number.

        Every writer's commit after it meets the lease; one before it is the entry just below.

        Raises:
            StoreUnavailable: The bucket cannot be reached, or the log kept moving.
        """
        for _ in range(_OPEN_TRIES):
            number = self._newest_log_number() + 1
            body = {"op": "gc", "id": None, "at": now_iso(), "writer": holder}
            key = self._log_key(number)
            try:
                with self.call(f"put {key}"):
                    obstore.put(self.client, key, json.dumps(body).encode(), mode="create")
            except AlreadyExistsError:
                continue
            return number
        raise StoreUnavailable(self.url, "put log/", "the log kept moving; retry")

    def log_entry(self, number: int) -> dict[str, object] | None:
        """Log entry ``number``'s body (``None``: missing or unreadable)."""
        key = self._log_key(number)
        try:
            with self.call(f"get {key}"):
                body = json.loads(bytes(obstore.get(self.client, key).bytes()))
        except (FileNotFoundError, NotFoundError, ValueError):
            return None
        return body if isinstance(body, dict) else None

    def check_serving(self) -> None:
        """Raise :class:`WorkspaceServedElsewhere` if this writer lost the fence."""
        if self.lost:
            raise WorkspaceServedElsewhere(self.url, self.saved_at)

    def check_head(self) -> None:
        """One ``HEAD`` of the next log entry: if it exists, another writer took over.

        Raises:
            WorkspaceServedElsewhere: It exists (this writer is lost from now on).
        """
        self.check_serving()
        while self.exists(self._log_key(self.head + 1)):
            self._skip_own_or_lose()

    def _skip_own_or_lose(self) -> None:
        """The next log entry exists: skip this writer's own, lose to another writer's.

        This writer's own is a create whose answer an outage lost (its commit went no further).
        """
        key = self._log_key(self.head + 1)
        try:
            with self.call(f"get {key}"):
                body = json.loads(bytes(obstore.get(self.client, key).bytes()))
        except (FileNotFoundError, NotFoundError, ValueError):
            body = None
        if isinstance(body, dict) and (body.get("writer") == self.writer or body.get("op") == "gc"):
            self.head += 1  # this writer's own, or a collector's barrier (not a take-over)
            return
        self._lose()

    def lost_reason(self) -> str | None:
        """The :class:`WorkspaceServedElsewhere` sentence once the fence is lost, else ``None``."""
        return str(WorkspaceServedElsewhere(self.url, self.saved_at)) if self.lost else None

    def check_fence(self) -> None:
        """:meth:`check_head` (one ``HEAD``)."""
        self.check_head()

    @contextlib.contextmanager
    def locked(self, *, blocking: bool = True) -> Iterator[bool]:
        """The local writers' lock, then the fence check (:meth:`check_head`).

        Raises:
            StoreConfigError: Opened read-only.
            WorkspaceServedElsewhere: Another writer took over.
        """
        with super().locked(blocking=blocking) as got:
            if got:
                self.check_head()
            yield got

    # -- manifests ----------------------------------------------------------------------------

    @property
    def location(self) -> str:
        """``s3://BUCKET/PREFIX``."""
        return self.url

    def manifest_key(self, sid: str) -> str:
        """The key of snapshot ``sid``'s manifest (relative to the prefix)."""
        return f"snapshots/{sid}.json"

    def has_manifest(self, sid: str) -> bool:
        """Whether snapshot ``sid``'s manifest is stored (one ``HEAD``)."""
        self.check_serving()
        return self.exists(self.manifest_key(sid))

    def load(self, sid: str) -> Manifest:
        """Read and validate snapshot ``sid``'s manifest (streamed, bounded).

        Raises:
            SnapshotNotFound: No such manifest.
            CorruptSnapshot: Too large or fails validation.
            StoreUnavailable: The bucket cannot be reached.
            WorkspaceServedElsewhere: This writer lost the fence.
        """
        self.check_serving()
        key = self.manifest_key(sid)
        buf = bytearray()
        try:
            with self.call(f"get {key}"):
                got = obstore.get(self.client, key)
                if got.meta["size"] > MAX_MANIFEST_BYTES:
                    raise CorruptSnapshot(sid, key, f"larger than {MAX_MANIFEST_BYTES} bytes")
                for piece in got.stream(min_chunk_size=_storedir.CHUNK):
                    buf += piece
                    if len(buf) > MAX_MANIFEST_BYTES:
                        raise CorruptSnapshot(sid, key, f"larger than {MAX_MANIFEST_BYTES} bytes")
        except (FileNotFoundError, NotFoundError):
            raise SnapshotNotFound(sid) from None
        if buf == ABANDONED_MANIFEST:
            raise SnapshotNotFound(sid)  # a commit a collection stopped waiting for: never saved
        return self.parse_manifest_bytes(sid, bytes(buf))

    def _abandoned(self, key: str) -> bool:
        """Whether the object at ``key`` is a collection's claim (:data:`ABANDONED_MANIFEST`)."""
        try:
            with self.call(f"get {key}"):
                got = obstore.get(self.client, key)
                if got.meta["size"] != len(ABANDONED_MANIFEST):
                    return False
                return bytes(got.bytes()) == ABANDONED_MANIFEST
        except (FileNotFoundError, NotFoundError):
            return False

    def abandon_commit(self, sid: str) -> bool:
        """Claim snapshot ``sid``'s manifest key for a collection (:data:`ABANDONED_MANIFEST`).

        Returns:
            Whether the claim was created (the commit can no longer land); ``False`` when the
            manifest (or an earlier claim) is already there.

        Raises:
            StoreUnavailable: The bucket cannot be reached.
        """
        key = self.manifest_key(sid)
        try:
            with self.call(f"put {key}"):
                obstore.put(self.client, key, ABANDONED_MANIFEST, mode="create")
        except AlreadyExistsError:
            return False
        log.warning("%s: commit of %s abandoned: its writer did not finish it", self.url, sid)
        return True

    def snapshot_ids(self) -> list[str]:
        """The ids of the manifests under ``snapshots/`` (other names are ignored)."""
        self.check_serving()
        out = []
        for key, _size in self.keys("snapshots/"):
            name = key[len("snapshots/") :]
            if name.endswith(".json"):
                try:
                    out.append(check_id(name[:-5]))
                except SnapshotError:
                    continue
        return out

    def save_manifest(self, m: Manifest) -> None:
        """Take the fence (the next log entry), then create the manifest object.

        Raises:
            WorkspaceServedElsewhere: Another writer took over (nothing was stored).
            SnapshotExists: A manifest with this id exists.
            StoreBusy: A live lease, or a collection stopped waiting for this commit (paused
                longer than :data:`GC_WAIT_S` between its log entry and its manifest) and
                claimed its key: nothing was saved.
            StoreUnavailable: The bucket cannot be reached.
        """
        self.commit_entry("create", m.id)
        key = self.manifest_key(m.id)
        try:
            with self.call(f"put {key}"):
                obstore.put(self.client, key, manifest_bytes(m), mode="create")
        except AlreadyExistsError:
            if self._abandoned(key):  # a collection claimed the key: this commit took too long
                _number, lease = self.lease_state()
                until = iso_epoch(lease.get("expires_at") if lease else None)
                raise StoreBusy(self.url, until) from None
            raise SnapshotExists(m.id) from None
        if self.blobs is not None:
            self.blobs.settle()

    def remove_manifest(self, sid: str) -> None:
        """Take the fence, then delete snapshot ``sid``'s manifest.

        Raises:
            FileNotFoundError: It is not stored.
            WorkspaceServedElsewhere: Another writer took over (nothing was removed).
        """
        if not self.has_manifest(sid):
            raise FileNotFoundError(self.manifest_key(sid))
        self.commit_entry("delete", sid)
        key = self.manifest_key(sid)
        with self.call(f"delete {key}"):
            obstore.delete(self.client, key)

    @contextlib.contextmanager
    def mirrored(self, sids: list[str]) -> Iterator[str]:
        """Copy the manifests ``sids`` into the local state directory while the block runs.

        A confined process without network (the MCP server's diff worker) then opens the state
        directory as a local store, read-only: manifests only, no blob (a diff needs none).
        One mirror at a time per store.

        Yields:
            The local state directory.

        Raises:
            SnapshotNotFound, CorruptSnapshot, StoreUnavailable: As :meth:`load`.
        """
        written: list[str] = []
        try:
            for sid in sids:
                StoreDir.save_manifest(self, self.load(sid))
                written.append(sid)
            yield self.path
        finally:
            for sid in written:
                with contextlib.suppress(FileNotFoundError):
                    StoreDir.remove_manifest(self, sid)

    def catalogue_key(self) -> tuple[str, ...]:
        """The sorted manifest ids (one ``LIST``)."""
        return tuple(sorted(self.snapshot_ids()))


class S3BlobStore(BlobStore):
    """Blobs under ``blobs/`` of an :class:`S3StoreDir`; staging files stay local.

    Args:
        files: The S3 store (its local state directory holds the staging files).
    """

    def __init__(self, files: S3StoreDir) -> None:
        super().__init__(files)
        self._s3 = files
        files.blobs = self
        #: sha256 -> (staging path, size) of every blob of the commit in progress (uploaded
        #: or found present): checked again after its manifest, re-uploaded if collected.
        self.pending: dict[str, tuple[str, int]] = {}

    def known(self, sha: str) -> bool:
        """Never: every blob of a commit is staged, so it can be uploaded again if collected."""
        return False

    def key(self, sha: str) -> str:
        """The key of blob ``sha`` (relative to the prefix)."""
        return f"blobs/{sha[:2]}/{sha[2:]}"

    def path(self, sha: str) -> str:
        """Blob ``sha`` as named in errors: its ``s3://`` URL."""
        return f"{self._s3.url}/{self.key(sha)}"

    def exists(self, sha: str) -> bool:
        """Whether blob ``sha`` is stored (one ``HEAD``)."""
        return self._s3.exists(self.key(sha))

    def all(self) -> Iterator[str]:
        """The SHA-256 of every stored blob."""
        for sha, _size in self._sizes():
            yield sha

    def _sizes(self) -> Iterator[tuple[str, int]]:
        for sha, size, _modified in self.sizes_and_times():
            yield sha, size

    def sizes_and_times(self) -> Iterator[tuple[str, int, datetime]]:
        """``(sha256, size, last modified)`` of every stored blob (other keys are ignored)."""
        for key, size, modified in self._s3.objects("blobs/"):
            parts = key.split("/")
            if len(parts) == 3 and len(parts[1]) == 2 and len(parts[2]) == 62:
                sha = parts[1] + parts[2]
                if _HEX.fullmatch(sha):
                    yield sha, size, modified

    # -- reading --------------------------------------------------------------------------------

    def chunks(self, sha: str, size: int, sid: str | None) -> Iterator[bytes]:
        """Yield blob ``sha`` as streamed by the backend, checking size and SHA-256 at the end.

        Raises:
            CorruptSnapshot: Missing or not matching (after the chunks read so far).
            StoreUnavailable: The bucket cannot be reached.
        """
        key = self.key(sha)
        h = hashlib.sha256()
        total = 0
        try:
            with self._s3.call(f"get {key}"):
                got = obstore.get(self._s3.client, key)
                for piece in got.stream(min_chunk_size=_storedir.CHUNK):
                    data = bytes(piece)
                    total += len(data)
                    if total > size:
                        break
                    h.update(data)
                    yield data
        except (FileNotFoundError, NotFoundError):
            raise CorruptSnapshot(sid, self.path(sha), "blob is missing") from None
        if total != size or h.hexdigest() != sha:
            raise CorruptSnapshot(sid, self.path(sha), "blob content does not match its SHA-256")

    def stream(
        self,
        sha: str,
        size: int,
        sid: str | None,
        write: Callable[[bytes], object] | None = None,
    ) -> None:
        """Stream blob ``sha`` to ``write`` (when given) and check it (as :meth:`chunks`)."""
        for data in self.chunks(sha, size, sid):
            if write is not None:
                write(data)

    def read(self, sha: str, size: int, sid: str | None) -> bytes:
        """Blob ``sha`` whole, verified (as :meth:`chunks`)."""
        return b"".join(self.chunks(sha, size, sid))

    def read_part(self, sha: str, size: int, sid: str | None, lo: int, hi: int) -> bytes:
        """Bytes ``[lo, hi)`` of blob ``sha`` (one ranged ``GET``); checked as locally.

        Raises:
            CorruptSnapshot: Missing, of another size, or (read whole) not matching.
        """
        if hi <= lo:
            return b""
        key = self.key(sha)
        try:
            with self._s3.call(f"get {key}"):
                got = obstore.get(self._s3.client, key, options={"range": (lo, hi)})
                if got.meta["size"] != size:
                    raise CorruptSnapshot(sid, key, "blob size does not match the manifest")
                data = bytes(got.bytes())
        except (FileNotFoundError, NotFoundError):
            raise CorruptSnapshot(sid, self.path(sha), "blob is missing") from None
        if len(data) != hi - lo or (
            lo == 0 and hi == size and hashlib.sha256(data).hexdigest() != sha
        ):
            raise CorruptSnapshot(sid, self.path(sha), "blob content does not match its SHA-256")
        return data

    # -- writing --------------------------------------------------------------------------------

    def commit(self, staged: dict[str, tuple[str, int]], out: dict[str, int]) -> None:
        """Upload the staged blobs not yet stored, create-only, from their staging files.

        Args:
            staged: sha256 -> (staging path, size); every staging file is removed.
            out: Filled with sha256 -> size of every blob this call created.

        Raises:
            QuotaExceeded: The new blobs would pass ``store_max_bytes`` (nothing is uploaded).
            StoreUnavailable: The bucket cannot be reached.
        """
        files = self._files
        number, body = self._s3.lease_state()
        self._s3.lease_seen = (number, body is None or body.get("released") is True)
        self.pending = dict(staged)  # staging files stay until the manifest is committed
        new = {}
        for sha, (tmp, size) in staged.items():
            if not self.exists(sha):
                new[sha] = (tmp, size)
        if not new:
            return
        needed = sum(size for _tmp, size in new.values())
        quota = files.limits.store_max_bytes
        used = self.usage()
        if used + needed > quota:
            used = self.usage(exact=True)
            if used + needed > quota:
                raise QuotaExceeded(quota, used, needed)
        for sha, (tmp, size) in sorted(new.items()):
            if self._upload(sha, tmp):
                out[sha] = size

    def _upload(self, sha: str, tmp: str) -> bool:
        """Upload blob ``sha`` from staging file ``tmp``, create-only; whether this call did."""
        key = self.key(sha)
        try:
            with open(tmp, "rb") as fh, self._s3.call(f"put {key}"):  # noqa: PTH123
                obstore.put(
                    self._s3.client,
                    key,
                    fh,
                    mode="create",
                    chunk_size=PART_BYTES,
                    max_concurrency=PART_CONCURRENCY,
                )
        except AlreadyExistsError:
            return False  # the same content, stored meanwhile by another writer
        return True

    def verify_pending(self) -> None:
        """``HEAD`` every blob of the commit in progress; upload again those collected.

        Raises:
            StoreUnavailable: The bucket cannot be reached.
        """
        for sha, (tmp, _size) in sorted(self.pending.items()):
            if not self.exists(sha):
                log.warning(
                    "%s: blob %s was collected during a commit; uploading it again",
                    self._s3.url,
                    sha,
                )
                self._upload(sha, tmp)

    def settle(self) -> None:
        """After a manifest is committed: check its blobs again, then drop the staging files.

        So no manifest names a blob a collection removed while the commit was in progress.

        The blobs are checked (``HEAD`` each) unless no collection can have run since they
        were: no lease object was created since, and the newest was a release (one ``LIST``).

        Raises:
            StoreUnavailable: The bucket cannot be reached (the staging files stay until the
                store's next writer's call clears them).
        """
        seen = self._s3.lease_seen
        if seen is None or not seen[1] or self._s3.lease_number() != seen[0]:
            self.verify_pending()
        for tmp, _size in self.pending.values():
            self._files.unlink(tmp)
        self.pending = {}
        self._s3.lease_seen = None

    def rollback(self, sid: str, new_blobs: Iterable[str]) -> None:
        """Undo nothing: a failed create or import leaves its blobs (and a created manifest).

        Another writer may have found those blobs present and skipped uploading them, and a
        manifest, once created, names only stored blobs: a complete snapshot.
        """
        self.pending = {}
        self._s3.lease_seen = None
        log.info("%s: snapshot %s not saved; its new blobs stay until collected", self._s3.url, sid)

    # -- quota and collection -------------------------------------------------------------------

    def _blob_usage(self) -> int:
        return sum(size for _sha, size in self._sizes())

    def mark_gc(self) -> None:
        """No marker: a blob stored before its manifest is complete content, never harmful."""

    def clear_gc_mark(self) -> None:
        """No marker to clear (:meth:`mark_gc`)."""

    def gc_pending(self) -> bool:
        """Whether staging files of a crashed writer are left in the local state directory."""
        return bool(self._files.ops.listdir(self._files.tmpdir))

    def gc(self, drop: set[str] | None = None) -> None:
        """Remove local staging files, then the blobs of ``drop`` no manifest names.

        A sweep of every blob (``drop=None``) is not done on a shared bucket without a
        collection lease: only the local staging files are removed then.
        """
        files = self._files
        for name in files.ops.listdir(files.tmpdir):
            files.unlink(os.path.join(files.tmpdir, name))  # noqa: PTH118
        if not drop:
            return
        bad: list[str] = []
        used: set[str | None] = set()
        for m in files.iter_manifests(bad):
            used.update(e.sha256 for e in m.entries.values() if e.kind == "file")
            del m  # not held while the next one loads
        if bad:
            log.warning("unreadable manifests %s: no blob removed", bad)
            return
        victims = [self.key(sha) for sha in sorted(drop) if sha not in used]
        if victims:
            with self._s3.call("delete blobs"):
                obstore.delete(self._s3.client, victims)


def lease_live(body: dict[str, object] | None, now: float) -> bool:
    """Whether a lease object's body is a live lease at ``now`` (epoch seconds)."""
    if body is None or body.get("released") is True:
        return False
    expires = body.get("expires_at")
    return isinstance(expires, (int, float)) and now < expires


def iso_epoch(epoch: object) -> str:
    """Epoch seconds as ISO 8601 UTC (``"?"`` when not a number)."""
    if not isinstance(epoch, (int, float)):
        return "?"
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def open_s3(
    workspace_root: str,
    url: str,
    state_dir: str,
    ops: Ops,
    limits: Limits,
    *,
    read_only: bool = False,
) -> tuple[S3StoreDir, S3BlobStore]:
    """Open the S3 backend: its store (manifests, fence, local state) and its blobs."""
    files = S3StoreDir(workspace_root, url, state_dir, ops, limits, read_only=read_only)
    return files, S3BlobStore(files)


if TYPE_CHECKING:

    def _s3_check(files: S3StoreDir, blobs: S3BlobStore) -> tuple[ManifestBackend, BlobBackend]:
        return files, blobs  # mypy: the S3 backend satisfies the interface
