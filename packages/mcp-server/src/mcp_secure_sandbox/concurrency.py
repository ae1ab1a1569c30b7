"""Ordering of work on one workspace.

Runs may overlap each other, but a snapshot, a restore or a validation of a workspace file must see
the workspace still: those take the workspace exclusively, and wait for the runs in progress to end
(new runs wait behind them, so they are not starved). How many runs execute at once is pysandbox's
cap (``Sandbox(max_concurrent_runs=...)``); the server admits no more runs than that
(:class:`Admission`), so a run never queues inside the sandbox.

Admission, not abandonment: each kind of heavy work has its own :class:`anyio.CapacityLimiter`
(runs, validations, snapshot operations, exports), and the threads of light work (metrics,
status, listings) have theirs, so nothing waits behind a different kind of work and nothing
takes anyio's default thread limiter. A call that cannot start within the admission wait (a
token, or the workspace gate) is answered :class:`Busy` ("busy, retry"); a call that started
runs to its end or its own deadline, never killed halfway.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import anyio

__all__ = ["Admission", "Busy", "WorkspaceGate"]


class Busy(Exception):
    """A call could not start within the admission wait.

    The message says what it waited for, and to retry.
    """


def _busy(
    what: str,
    waited: float | None,
    why: str = "the server is at capacity for this kind of work",
) -> Busy:
    """``Busy`` for ``what``, saying ``why``.

    ``waited`` is shown to three significant digits; ``None`` leaves it out, for a call that
    waited for other things first (the number would be only what was left of its wait).
    """
    within = "" if waited is None else f" within {waited:.3g} s"
    return Busy(
        f"busy, retry: {what} did not get its turn{within} ({why}); call again in a few seconds"
    )


#: The end of the workspace gate's busy answers: what bounds the wait.
_GATE_WHY = "the server's --admission-wait is how long a call waits for them"


class WorkspaceGate:
    """A writer-preferring readers-writer lock for one workspace.

    Runs share it; a snapshot, a restore, a write or a read of a workspace file for validation
    holds it alone.
    """

    def __init__(self) -> None:
        self._condition = anyio.Condition()
        self._active_runs = 0
        self._exclusive = False
        self._waiting_exclusive = 0

    @property
    def active_runs(self) -> int:
        """Number of runs holding the workspace now: executing, or waiting for a sandbox slot."""
        return self._active_runs

    @property
    def held_exclusively(self) -> bool:
        """Whether a snapshot, restore or workspace read holds the workspace now."""
        return self._exclusive

    @asynccontextmanager
    async def run(self, patience: float = math.inf) -> AsyncIterator[None]:
        """Hold shared access to the workspace for the duration of the block.

        Raises:
            Busy: Not admitted within ``patience`` seconds.
        """
        if self._exclusive or self._waiting_exclusive:
            async with self._condition:
                admitted = False
                with anyio.move_on_after(patience):
                    while self._exclusive or self._waiting_exclusive:
                        await self._condition.wait()
                    self._active_runs += 1
                    admitted = True
                if not admitted:
                    raise _busy(
                        "the run",
                        None,
                        f"a snapshot operation holds the workspace or waits for it; {_GATE_WHY}",
                    )
        else:
            # No writer holds or awaits the workspace: admitted at once. The state is only
            # touched on the event loop's thread, so checking and counting without an await
            # cannot interleave with a writer's.
            self._active_runs += 1
        try:
            yield
        finally:
            self._active_runs -= 1
            if self._waiting_exclusive and not self._active_runs:
                # Only a writer waits for the runs to end (runs wait for writers, who notify).
                with anyio.CancelScope(shield=True):
                    async with self._condition:
                        self._condition.notify_all()

    @asynccontextmanager
    async def exclusive(
        self, patience: float = math.inf, what: str = "the call"
    ) -> AsyncIterator[None]:
        """Hold the workspace alone (no run, no other exclusive holder) for the block.

        Raises:
            Busy: Not admitted within ``patience`` seconds (runs in progress or another
                exclusive holder).
        """
        async with self._condition:
            self._waiting_exclusive += 1
            admitted = False
            try:
                with anyio.move_on_after(patience):
                    while self._exclusive or self._active_runs:
                        await self._condition.wait()
                    admitted = True
            except BaseException:
                # Cancelled while waiting: runs queued behind this writer may go on.
                self._waiting_exclusive -= 1
                self._condition.notify_all()
                raise
            self._waiting_exclusive -= 1
            if not admitted:
                self._condition.notify_all()
                raise _busy(
                    what,
                    None,
                    "runs in progress or another snapshot operation hold the workspace; "
                    + _GATE_WHY,
                )
            self._exclusive = True
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                async with self._condition:
                    self._exclusive = False
                    self._condition.notify_all()


class Admission:
    """One :class:`anyio.CapacityLimiter` per kind of work, and the wait for a token.

    Args:
        wait_s: Longest wait for a token, in seconds (the settings' ``admission_wait_s``).
        capacities: Tokens per kind (``"run"``, ``"validation"``, ``"snapshot"``,
            ``"export"``, ``"light"``...).
    """

    def __init__(self, wait_s: float, capacities: Mapping[str, int]) -> None:
        self.wait_s = wait_s
        self.limiters = {kind: anyio.CapacityLimiter(n) for kind, n in capacities.items()}
        self._threads = {kind: anyio.CapacityLimiter(n) for kind, n in capacities.items()}

    def limiter(self, kind: str) -> anyio.CapacityLimiter:
        """The thread limiter of ``kind``, for ``to_thread.run_sync(limiter=...)``.

        Apart from the admission tokens (a call admitted holds one of those while its thread
        takes one of these), and never anyio's default limiter.
        """
        return self._threads[kind]

    def in_use(self) -> dict[str, int]:
        """Tokens borrowed now, per kind."""
        return {kind: int(lim.borrowed_tokens) for kind, lim in self.limiters.items()}

    @asynccontextmanager
    async def admit(self, kind: str, what: str) -> AsyncIterator[None]:
        """Hold one token of ``kind`` for the block.

        Raises:
            Busy: No token within :attr:`wait_s` (the message names ``what``).
        """
        limiter = self.limiters[kind]
        token = object()
        try:
            limiter.acquire_on_behalf_of_nowait(token)  # a free token, nobody queued before
        except anyio.WouldBlock:
            admitted = False
            with anyio.move_on_after(self.wait_s):
                await limiter.acquire_on_behalf_of(token)
                admitted = True
            if not admitted:
                raise _busy(what, self.wait_s) from None
        try:
            yield
        finally:
            limiter.release_on_behalf_of(token)
