"""Ordering of work on one workspace, and the one bounded queue every call waits its turn in.

Runs may overlap each other, but a snapshot, a restore, a write or a validation of a workspace
file must see the workspace still: those take the workspace exclusively (:class:`WorkspaceGate`),
and wait for the runs in progress to end (new runs wait behind them, so they are not starved).
How many runs execute at once is pysandbox's cap (``Sandbox(max_concurrent_runs=...)``); the
server admits no more runs than that, so a run never queues inside the sandbox.

Admission, not abandonment (:class:`AdmissionQueue`): each kind of heavy work has its own
number of slots (runs, validations, snapshot operations, exports), and a call that finds no free
slot, or finds the workspace held, waits in one queue shared by every kind, first come first
served within its kind, at most ``length`` calls in all. It is answered :class:`Busy`
("busy, retry") only when the queue is full (at once) or when its own wait bound passes. A call
that started runs to its end or its own deadline, never killed halfway; a call cancelled while
it waits leaves the queue and nothing of it runs. The threads of light work (metrics, status,
listings) have limiters of their own (:meth:`AdmissionQueue.limiter`), so nothing takes anyio's
default thread limiter and light work never waits behind heavy work.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Literal

import anyio

__all__ = [
    "ADMISSION_BOUND",
    "RUN_WAIT_GRACE_S",
    "AdmissionQueue",
    "Busy",
    "Progress",
    "WorkspaceBusy",
    "WorkspaceGate",
]

log = logging.getLogger("mcp_secure_sandbox")

#: How the bound of a call's wait is named when it passes, for every call but a run (a run's
#: bound is its own time-out plus a grace, named by its caller).
ADMISSION_BOUND = "the server's --admission-wait"

#: A run waits for its turn at most its own time-out plus this, in seconds (the wait does not
#: shorten the time-out: it starts when the run does).
RUN_WAIT_GRACE_S = 5.0

#: A waiting call's progress callback: called with the number of calls queued ahead of it
#: (for the same kind of slot, or for the workspace), when it starts waiting and at each change.
Progress = Callable[[int], Awaitable[None]]

#: What a call of each kind waits for, in busy answers.
_WAITS_FOR = {
    "run": "a run slot",
    "validation": "a validation worker",
    "snapshot": "the snapshot slot",
    "export": "an export slot",
}


class Busy(Exception):
    """A call could not start: the admission queue was full, or its wait bound passed.

    The message says why, what it waited for, and to retry.
    """


class WorkspaceBusy(Busy):
    """The workspace gate did not admit a call within its patience.

    The message says what holds the workspace (:class:`AdmissionQueue` puts it into its own
    busy answer).
    """


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

    def must_wait(self, exclusive: bool) -> bool:
        """Whether a call asking for the workspace (alone when ``exclusive``) would wait now."""
        if exclusive:
            return self._exclusive or self._active_runs > 0
        return self._exclusive or self._waiting_exclusive > 0

    @asynccontextmanager
    async def run(self, patience: float = math.inf) -> AsyncIterator[None]:
        """Hold shared access to the workspace for the duration of the block.

        Raises:
            WorkspaceBusy: Not admitted within ``patience`` seconds.
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
                    raise WorkspaceBusy("a snapshot operation holds the workspace or waits for it")
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
    async def exclusive(self, patience: float = math.inf) -> AsyncIterator[None]:
        """Hold the workspace alone (no run, no other exclusive holder) for the block.

        Raises:
            WorkspaceBusy: Not admitted within ``patience`` seconds (runs in progress or
                another exclusive holder).
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
                raise WorkspaceBusy("runs in progress or another snapshot operation hold it")
            self._exclusive = True
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                async with self._condition:
                    self._exclusive = False
                    self._condition.notify_all()


def _until(event: anyio.Event, deadline: float) -> Callable[[], Awaitable[None]]:
    """A wait for ``event`` that gives up at ``deadline`` (anyio's clock) without raising."""

    async def wait() -> None:
        with anyio.CancelScope(deadline=deadline):
            await event.wait()

    return wait


class _Entry:
    """One call waiting in an :class:`AdmissionQueue`."""

    def __init__(self, line: str) -> None:
        #: What it waits for now: a kind of slot, or ``"workspace"``.
        self.line = line
        #: Set when a slot of its kind is handed to it (it is then off its kind's line).
        self.granted = anyio.Event()
        #: Set whenever the queue ahead of it may have changed (replaced after each wake).
        self.moved = anyio.Event()


class AdmissionQueue:
    """Slots per kind of work, and one bounded FIFO queue of the calls waiting for them.

    A call takes a free slot of its kind at once when nobody of its kind waits; else it joins
    the queue (refused at once when ``length`` calls already wait) and gets the slots in the
    order calls of its kind arrived: a slot freed is handed to the first waiter, so a newcomer
    never overtakes. A call that also needs the workspace (shared for a run, alone for a
    snapshot operation, a write or a read of a workspace file) then waits for the
    :class:`WorkspaceGate`, still in the queue, within the same bound; the gate prefers
    exclusive waiters, so they are not starved by a stream of runs.

    Used from the event loop's thread only.

    Args:
        capacities: Slots per kind of queued work (``"run"``, ``"validation"``,
            ``"snapshot"``, ``"export"``), each at least 1.
        length: Calls that may wait at once, all kinds together (``--queue-length``), at least 1.
        gate: The workspace's gate (a fresh one when ``None``).
        threads: Worker threads per kind for :meth:`limiter` (light kinds such as
            ``"light"``, ``"metrics"``, ``"status"`` included); the capacities when ``None``.

    Raises:
        ValueError: A capacity or the length is below 1.
    """

    def __init__(
        self,
        capacities: Mapping[str, int],
        length: int,
        gate: WorkspaceGate | None = None,
        threads: Mapping[str, int] | None = None,
    ) -> None:
        if length < 1 or any(n < 1 for n in capacities.values()):
            raise ValueError("the queue length and every capacity must be at least 1")
        self.length = length
        self.capacities = dict(capacities)
        self.gate = WorkspaceGate() if gate is None else gate
        self._free = dict(capacities)
        self._lines: dict[str, deque[_Entry]] = {kind: deque() for kind in capacities}
        self._waiting: list[_Entry] = []  # every waiting call, in arrival order
        self._threads = {
            kind: anyio.CapacityLimiter(n) for kind, n in (threads or capacities).items()
        }

    def limiter(self, kind: str) -> anyio.CapacityLimiter:
        """The thread limiter of ``kind``, for ``to_thread.run_sync(limiter=...)``.

        Apart from the slots (a call admitted holds one of those while its thread takes one of
        these), and never anyio's default limiter.
        """
        return self._threads[kind]

    def in_use(self) -> dict[str, int]:
        """Slots held now, per kind."""
        return {kind: n - self._free[kind] for kind, n in self.capacities.items()}

    @property
    def queued(self) -> int:
        """Calls waiting now (for a slot or for the workspace), all kinds together."""
        return len(self._waiting)

    def ahead(self, entry: _Entry) -> int:
        """Calls that joined before ``entry`` and wait for the same thing (its position)."""
        count = 0
        for other in self._waiting:
            if other is entry:
                return count
            count += other.line == entry.line
        return count

    @asynccontextmanager
    async def admit(
        self,
        kind: str | None,
        what: str,
        wait_s: float,
        *,
        workspace: Literal["shared", "exclusive"] | None = None,
        progress: Progress | None = None,
        bound: str = ADMISSION_BOUND,
    ) -> AsyncIterator[None]:
        """Hold a slot of ``kind`` (and the workspace, if asked) for the block.

        Args:
            kind: The kind of slot (a key of the capacities), or ``None`` for the workspace
                only.
            what: The call, as busy answers name it (``"run_sandbox_code"``).
            wait_s: Longest wait for the slot and the workspace together, in seconds.
            workspace: ``"shared"`` (a run), ``"exclusive"`` (a snapshot operation, a write or
                a read of a workspace file), or ``None``.
            progress: Called while the call waits (see :data:`Progress`); not called for a
                call admitted at once. An exception from it stops the reports, not the wait.
            bound: What ``wait_s`` is, as the busy answer names it.

        Raises:
            Busy: At once when ``length`` calls already wait ("N calls are queued ahead
                (queue full at M)"), or when ``wait_s`` passes (what it waited for, the bound,
                how many calls are still ahead). Nothing of the call has run then.
        """
        deadline = anyio.current_time() + wait_s
        entry: _Entry | None = None
        slot = False
        async with AsyncExitStack() as stack:
            try:
                if kind is not None:
                    if self._free[kind] > 0 and not self._lines[kind]:
                        self._free[kind] -= 1
                        slot = True
                    else:
                        entry = self._join(kind, what)
                        await self._wait_reporting(entry, progress, _until(entry.granted, deadline))
                        slot = entry.granted.is_set()
                        if not slot:
                            raise self._late(entry, what, _WAITS_FOR.get(kind, kind), wait_s, bound)
                    stack.callback(self._release, kind)
                if workspace is not None:
                    exclusive = workspace == "exclusive"
                    hold = self.gate.exclusive if exclusive else self.gate.run
                    if not self.gate.must_wait(exclusive):
                        await stack.enter_async_context(hold())
                    else:
                        if entry is None:
                            entry = self._join("workspace", what)
                        else:
                            self._move(entry, "workspace")
                        patience = max(0.0, deadline - anyio.current_time())
                        try:
                            await self._wait_reporting(
                                entry,
                                progress,
                                lambda: stack.enter_async_context(hold(patience)),
                            )
                        except WorkspaceBusy as exc:
                            raise self._late(
                                entry, what, f"the workspace ({exc})", wait_s, bound
                            ) from None
            except BaseException:
                if entry is not None and entry.granted.is_set() and not slot and kind:
                    self._release(kind)  # handed over as the call was cancelled: pass it on
                raise
            finally:
                if entry is not None:
                    self._leave(entry)
            yield

    def _join(self, line: str, what: str) -> _Entry:
        """Put a new waiter at the end of the queue, or refuse it when the queue is full."""
        if len(self._waiting) >= self.length:
            queued = len(self._waiting)
            calls = "call is" if queued == 1 else "calls are"
            raise Busy(
                f"busy, retry: {queued} {calls} queued ahead (queue full at {self.length}); "
                f"{what} was not queued; call again in a few seconds"
            )
        entry = _Entry(line)
        self._waiting.append(entry)
        if line in self._lines:
            self._lines[line].append(entry)
        return entry

    def _move(self, entry: _Entry, line: str) -> None:
        """``entry`` now waits for ``line`` (it keeps its place in the queue)."""
        entry.line = line
        self._wake()

    def _leave(self, entry: _Entry) -> None:
        """Take ``entry`` out of the queue (admitted, refused, or cancelled)."""
        line = self._lines.get(entry.line)
        if line is not None and entry in line:
            line.remove(entry)
        if entry in self._waiting:
            self._waiting.remove(entry)
        self._wake()

    def _release(self, kind: str) -> None:
        """Hand a freed slot of ``kind`` to its first waiter, or make it free."""
        line = self._lines[kind]
        if line:
            entry = line.popleft()
            entry.line = ""  # between its slot and the workspace
            entry.granted.set()
            self._wake()
        else:
            self._free[kind] += 1

    def _wake(self) -> None:
        for entry in self._waiting:
            entry.moved.set()

    def _late(self, entry: _Entry, what: str, waited_for: str, wait_s: float, bound: str) -> Busy:
        """The busy answer of a call whose wait bound passed."""
        ahead = self.ahead(entry)
        calls = "call is" if ahead == 1 else "calls are"
        return Busy(
            f"busy, retry: {what} waited {wait_s:.3g} s for {waited_for}, its bound ({bound}); "
            f"{ahead} {calls} still queued ahead of it (queue full at {self.length}); call again "
            "in a few seconds"
        )

    async def _wait_reporting(
        self, entry: _Entry, progress: Progress | None, wait: Callable[[], Awaitable[object]]
    ) -> None:
        """Await ``wait()``, reporting ``entry``'s position through ``progress`` meanwhile.

        An exception of ``wait`` is raised as it is (not in an exception group).
        """
        if progress is None:
            await wait()
            return
        failure: Exception | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._report, entry, progress)
            try:
                await wait()
            except Exception as exc:
                failure = exc
            finally:
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure

    async def _report(self, entry: _Entry, progress: Progress) -> None:
        sent: int | None = None
        while True:
            moved = entry.moved = anyio.Event()
            ahead = self.ahead(entry)
            if ahead != sent:
                sent = ahead
                try:
                    await progress(ahead)
                except Exception as exc:  # a lost notification is no failure of the call
                    log.info("queue progress not sent: %s", type(exc).__name__)
                    return
            await moved.wait()
