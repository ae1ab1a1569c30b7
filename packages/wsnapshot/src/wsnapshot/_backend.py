"""The one interface of a store backend: where manifests and blobs are kept durably.

A store has two halves. The *local state* (the writers' lock, the staging files of new blobs,
the restore journal, the inconsistent marker) always lives in a local directory: it concerns
this machine's workspace. The *catalogue* (manifests) and the *blobs* live in the backend:

* the local backend, :class:`~wsnapshot._storedir.StoreDir` and
  :class:`~wsnapshot._blobs.BlobStore`: the store directory itself;
* the S3 backend, :class:`~wsnapshot._s3.S3StoreDir` and :class:`~wsnapshot._s3.S3BlobStore`
  (extra ``wsnapshot[s3]``): an S3-compatible bucket under a prefix.

Every part of the store (capture, restore, record, the façade) reaches manifests and blobs
only through the methods named here; the Protocols below are that contract, checked by mypy
against both backends (``_local_check`` here and the S3 module's own check).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from wsnapshot._blobs import BlobStore
    from wsnapshot._manifest import Manifest
    from wsnapshot._storedir import StoreDir

__all__ = ["BlobBackend", "ManifestBackend"]


class ManifestBackend(Protocol):
    """Where a store's manifests are kept (and its writers serialised)."""

    @property
    def location(self) -> str:
        """Where the snapshots live, as shown to users (never a credential)."""

    def locked(self, *, blocking: bool = True) -> contextlib.AbstractContextManager[bool]:
        """Hold the writers' lock (and, on a shared backend, check this writer still serves)."""

    def lost_reason(self) -> str | None:
        """Why this writer stopped saving (another writer took the store over), or ``None``."""

    def check_fence(self) -> None:
        """Check, with a request, that no other writer took over (``WorkspaceServedElsewhere``)."""

    def has_manifest(self, sid: str) -> bool:
        """Whether snapshot ``sid`` is stored."""

    def load(self, sid: str) -> Manifest:
        """Snapshot ``sid``'s manifest, validated (SnapshotNotFound, CorruptSnapshot)."""

    def snapshot_ids(self) -> list[str]:
        """The ids of the stored manifests."""

    def iter_manifests(self, bad: list[str]) -> Iterator[Manifest]:
        """Every readable manifest, one at a time (ids of bad ones appended to ``bad``)."""

    def newest_manifest(self) -> Manifest | None:
        """The newest readable manifest, or ``None``."""

    def save_manifest(self, m: Manifest) -> None:
        """Store manifest ``m`` atomically: from then on its snapshot is listed."""

    def remove_manifest(self, sid: str) -> None:
        """Remove snapshot ``sid``'s manifest (``FileNotFoundError`` when not stored)."""

    def mirrored(self, sids: list[str]) -> contextlib.AbstractContextManager[str]:
        """A local directory holding manifests ``sids`` that a local read-only store opens."""

    def catalogue_key(self) -> tuple[str, ...]:
        """A value that changes whenever the set of manifests does."""


class BlobBackend(Protocol):
    """Where a store's content-addressed blobs are kept (staging is always local)."""

    def exists(self, sha: str) -> bool:
        """Whether blob ``sha`` is stored."""

    def known(self, sha: str) -> bool:
        """Whether a commit may skip staging blob ``sha`` (stored, and never re-checked)."""

    def all(self) -> Iterator[str]:
        """The SHA-256 of every stored blob."""

    def read(self, sha: str, size: int, sid: str | None) -> bytes:
        """Blob ``sha`` whole, verified (``CorruptSnapshot``)."""

    def stream(
        self,
        sha: str,
        size: int,
        sid: str | None,
        write: Callable[[bytes], object] | None = None,
    ) -> None:
        """Blob ``sha`` in bounded chunks handed to ``write``, verified at the end."""

    def chunks(self, sha: str, size: int, sid: str | None) -> Iterator[bytes]:
        """Blob ``sha`` in bounded chunks, verified at the end."""

    def read_part(self, sha: str, size: int, sid: str | None, lo: int, hi: int) -> bytes:
        """Bytes ``[lo, hi)`` of blob ``sha``."""

    def copier(self, sha: str, size: int, sid: str) -> Callable[[Callable[[Any], None]], None]:
        """A producer streaming blob ``sha`` into the ``write`` it is given."""

    def new_tmp(self) -> tuple[str, int]:
        """A new local staging file: its path and a descriptor to write."""

    def write_all(self, fd: int, data: bytes) -> None:
        """Write all of ``data`` to a staging descriptor."""

    def close_fd(self, fd: int) -> None:
        """Close a staging descriptor."""

    def stage_bytes(self, data: bytes) -> str:
        """Stage ``data`` in a new local file; returns its path."""

    def commit(self, staged: dict[str, tuple[str, int]], out: dict[str, int]) -> None:
        """Store the staged blobs (quota checked first); ``out`` gets the ones added."""

    def rollback(self, sid: str, new_blobs: Iterable[str]) -> None:
        """Undo what a failed create or import stored."""

    def usage(self, *, exact: bool = False) -> int:
        """Bytes of stored blobs."""

    def usage_grew(self, new_bytes: int) -> None:
        """Account for a snapshot just saved."""

    def forget_usage(self) -> None:
        """Drop the cached usage."""

    def mark_gc(self) -> None:
        """Note durably that unreferenced blobs may exist."""

    def clear_gc_mark(self) -> None:
        """Forget that note (a manifest names every new blob)."""

    def gc_pending(self) -> bool:
        """Whether a crashed writer may have left unreferenced blobs."""

    def gc(self, drop: set[str] | None = None) -> None:
        """Remove blobs no manifest names (only those of ``drop`` when given)."""


if TYPE_CHECKING:

    def _local_check(files: StoreDir, blobs: BlobStore) -> tuple[ManifestBackend, BlobBackend]:
        return files, blobs  # mypy: the local backend satisfies the interface
