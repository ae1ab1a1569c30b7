"""Ordering of work on one workspace.

Runs may overlap each other, but a snapshot, a restore or a validation of a workspace file must see
the workspace still: those take the workspace exclusively, and wait for the runs in progress to end
(new runs wait behind them, so they are not starved). How many runs execute at once is pysandbox's
cap (``Sandbox(max_concurrent_runs=...)``), applied there only: a run holds shared access from
the moment it is asked for, including while it waits for one of the sandbox's slots.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

__all__ = ["WorkspaceGate"]


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

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Hold shared access to the workspace for the duration of the block."""
        async with self._condition:
            while self._exclusive or self._waiting_exclusive:
                await self._condition.wait()
            self._active_runs += 1
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                async with self._condition:
                    self._active_runs -= 1
                    self._condition.notify_all()

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """Hold the workspace alone (no run, no other exclusive holder) for the block."""
        async with self._condition:
            self._waiting_exclusive += 1
            try:
                while self._exclusive or self._active_runs:
                    await self._condition.wait()
            except BaseException:
                # Cancelled while waiting: runs queued behind this writer may go on.
                self._waiting_exclusive -= 1
                self._condition.notify_all()
                raise
            self._waiting_exclusive -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                async with self._condition:
                    self._exclusive = False
                    self._condition.notify_all()
