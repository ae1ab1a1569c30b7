"""An ``s3://`` snapshot store the server serves without: opened when its bucket answers.

A server whose bucket is unreachable at start still starts and serves runs and file tools;
the workspace is not being saved meanwhile, and says so (``sandbox://status``
``snapshot_store.error``, ``get_sandbox_metrics``' ``snapshot_store``, every snapshot tool's
answer). :class:`StoreHandle` stands where the :class:`~wsnapshot.SnapshotStore` stands: every
snapshot operation first opens the store (at most every :data:`REOPEN_S` seconds; in between
it is refused at once with the last error), and the server's fence check (every
``FENCE_CHECK_S``) is such an operation, so the store is back within seconds of its bucket.

Nothing that would lose data goes on without it: a create, delete or import is refused
(nothing saved), a restore is refused before the workspace is touched, and while the local
state directory holds an interrupted restore the workspace counts as inconsistent (runs and
snapshots refused) until the store is reachable to complete it.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from wsnapshot import SnapshotStore, StoreUnavailable

__all__ = ["NOT_SAVED", "REOPEN_S", "StoreHandle"]

log = logging.getLogger("mcp_secure_sandbox")

#: Seconds between two attempts to open an unreachable ``s3://`` store.
REOPEN_S = 5.0
#: What the server's answers say while the store cannot be reached.
NOT_SAVED = "the workspace is not being saved"
#: Files of the local state directory that mean an interrupted restore (wsnapshot's names).
_RESTORE_LEFT = ("restore.journal", "inconsistent.json")


class StoreHandle:
    """A :class:`~wsnapshot.SnapshotStore` on ``s3://`` that may not be open yet.

    Attributes the server reads on its event loop (``backend``, ``bucket``, ``store_dir``,
    ``served_elsewhere``, ``inconsistent``) never make a request; every other attribute is
    the open store's, which it opens first (raising :class:`~wsnapshot.StoreUnavailable`
    when it cannot).

    Args:
        opener: Opens the store (``SnapshotStore(workspace, url, state_dir=...)``).
        url: ``s3://BUCKET/PREFIX`` (checked already).
        bucket: Its bucket.
        state_dir: The local state directory.
        clock: Monotonic seconds (tests inject theirs).

    Raises:
        StoreConfigError, WorkspaceServedElsewhere: From the first opening (not retried).
    """

    backend = "s3"

    def __init__(
        self,
        opener: Callable[[], SnapshotStore],
        url: str,
        bucket: str,
        state_dir: str,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._opener = opener
        self._url = url
        self.bucket = bucket
        self._state_dir = state_dir
        self._clock = clock
        self._lock = threading.Lock()
        self._store: SnapshotStore | None = None
        self._failure: StoreUnavailable | None = None
        self._tried = -math.inf
        try:
            self.open()
        except StoreUnavailable as exc:
            log.warning("%s; the server starts anyway and %s until it is back", exc, NOT_SAVED)

    # -- what is read without a request -------------------------------------------------------

    @property
    def error(self) -> str | None:
        """Why the workspace is not being saved now (the last failure), or ``None``."""
        failure = self._failure
        return None if failure is None else f"{NOT_SAVED}: {failure}"

    @property
    def store_dir(self) -> str:
        """``s3://BUCKET/PREFIX``."""
        return self._url

    @property
    def served_elsewhere(self) -> str | None:
        """The open store's ``served_elsewhere`` (``None`` while it is not open)."""
        return None if self._store is None else self._store.served_elsewhere

    @property
    def inconsistent(self) -> str | None:
        """The open store's ``inconsistent``; unopened, whether a restore was interrupted."""
        if self._store is not None:
            return self._store.inconsistent
        for name in _RESTORE_LEFT:
            if os.path.lexists(os.path.join(self._state_dir, name)):  # noqa: PTH118
                return (
                    f"a restore was interrupted ({name} in {self._state_dir}); it is completed "
                    f"when the snapshot store {self._url} is reachable again ({self.error})"
                )
        return None

    # -- opening ------------------------------------------------------------------------------

    def open(self) -> SnapshotStore:
        """The open store: opened now if it is not and the last attempt is old enough.

        Returns:
            The store.

        Raises:
            StoreUnavailable: The bucket cannot be reached (now, or at the last attempt less
                than :data:`REOPEN_S` seconds ago).
        """
        with self._lock:
            if self._store is not None:
                return self._store
            now = self._clock()
            if self._failure is not None and now - self._tried < REOPEN_S:
                raise self._failure
            self._tried = now
            try:
                self._store = self._opener()
            except StoreUnavailable as exc:
                self._failure = exc
                raise
            if self._failure is not None:
                log.warning("%s is reachable again: the workspace is being saved", self._url)
            self._failure = None
            return self._store

    def __getattr__(self, name: str) -> Any:
        """The open store's ``name``; a method opens the store when called, not when named.

        So ``handle.list`` may be named on the event loop and called in a thread; a
        method's :class:`StoreUnavailable` is remembered (:attr:`error`) until one succeeds.
        """
        if not callable(getattr(SnapshotStore, name, None)):
            return getattr(self.open(), name)

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                result = getattr(self.open(), name)(*args, **kwargs)
            except StoreUnavailable as exc:
                self._failure = exc
                raise
            self._failure = None
            return result

        return call
