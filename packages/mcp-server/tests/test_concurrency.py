from __future__ import annotations

import math

import anyio
import pytest

from mcp_secure_sandbox.concurrency import AdmissionQueue, Busy, WorkspaceBusy, WorkspaceGate


def test_runs_share_the_workspace() -> None:
    """The gate holds no cap of its own: five runs hold the workspace together."""
    gate = WorkspaceGate()
    seen: list[int] = []

    async def main() -> None:
        release = anyio.Event()

        async def one_run() -> None:
            async with gate.run():
                await release.wait()

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(one_run)
                while gate.active_runs < 5:
                    await anyio.sleep(0.001)
                seen.append(gate.active_runs)
                release.set()
        seen.append(gate.active_runs)

    anyio.run(main)
    # How many runs execute at once is pysandbox's max_concurrent_runs, applied there only.
    assert seen == [5, 0]


def test_exclusive_waits_for_runs_and_blocks_new_ones() -> None:
    gate = WorkspaceGate()
    order: list[str] = []

    async def main() -> None:
        run_started = anyio.Event()
        release_run = anyio.Event()

        async def long_run() -> None:
            async with gate.run():
                order.append("run1-start")
                run_started.set()
                await release_run.wait()
                order.append("run1-end")

        async def snapshot() -> None:
            async with gate.exclusive():
                order.append("snapshot")

        async def late_run() -> None:
            async with gate.run():
                order.append("run2")

        async with anyio.create_task_group() as tg:
            tg.start_soon(long_run)
            await run_started.wait()
            tg.start_soon(snapshot)
            await anyio.sleep(0.01)
            tg.start_soon(late_run)
            await anyio.sleep(0.01)
            assert order == ["run1-start"]
            release_run.set()

    anyio.run(main)
    assert order == ["run1-start", "run1-end", "snapshot", "run2"]


def test_cancelled_exclusive_waiter_does_not_block_runs() -> None:
    gate = WorkspaceGate()
    done: list[str] = []

    async def main() -> None:
        release = anyio.Event()

        async def holder() -> None:
            async with gate.run():
                await release.wait()

        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            await anyio.sleep(0.01)
            with anyio.move_on_after(0.02):
                async with gate.exclusive():
                    done.append("never")
            release.set()
        async with gate.run():
            done.append("run-after")

    anyio.run(main)
    assert done == ["run-after"]


@pytest.mark.parametrize("patience", [0.0, 0.05])
def test_the_gates_busy_answers_say_what_holds_the_workspace(patience: float) -> None:
    """The gate says what holds the workspace; the queue puts it into its busy answer."""
    gate = WorkspaceGate()

    async def exclusive_behind_a_run() -> str:
        async with gate.run():
            try:
                async with gate.exclusive(patience):
                    return "admitted"
            except WorkspaceBusy as exc:
                return str(exc)

    async def run_behind_a_restore() -> str:
        async with gate.exclusive():
            try:
                async with gate.run(patience):
                    return "admitted"
            except WorkspaceBusy as exc:
                return str(exc)

    assert anyio.run(exclusive_behind_a_run) == (
        "runs in progress or another snapshot operation hold it"
    )
    assert anyio.run(run_behind_a_restore) == (
        "a snapshot operation holds the workspace or waits for it"
    )


class _Caller:
    """One call through the queue whose progress and admission the test can wait for."""

    def __init__(self, queue: AdmissionQueue, name: str, order: list[str], **how: object) -> None:
        self.queue, self.name, self.order, self.how = queue, name, order, how
        self.positions: list[int] = []
        self.queued = anyio.Event()
        self.admitted = anyio.Event()
        self.release = anyio.Event()
        self.moved = anyio.Event()
        self.error: str | None = None

    async def progress(self, ahead: int) -> None:
        self.positions.append(ahead)
        self.queued.set()
        self.moved.set()

    async def moved_to(self, ahead: int) -> None:
        while not self.positions or self.positions[-1] != ahead:
            self.moved = anyio.Event()
            await self.moved.wait()

    async def __call__(self) -> None:
        kind = self.how.get("kind", "run")
        try:
            async with self.queue.admit(
                kind,  # type: ignore[arg-type]
                self.name,
                self.how.get("wait_s", math.inf),  # type: ignore[arg-type]
                workspace=self.how.get("workspace"),  # type: ignore[arg-type]
                progress=self.progress,
                bound="the test's bound",
            ):
                self.order.append(self.name)
                self.admitted.set()
                await self.release.wait()
        except Busy as exc:
            self.error = str(exc)
            self.admitted.set()


def test_queue_hands_slots_in_arrival_order_and_reports_positions() -> None:
    """Four calls on two slots all complete, in the order they came; the waiters are told
    their place (2, then 1, then 0 calls ahead), and a newcomer never overtakes a waiter."""
    queue = AdmissionQueue({"run": 2}, length=8)
    order: list[str] = []

    async def main() -> None:
        calls = [_Caller(queue, f"run{i}", order) for i in range(5)]
        with anyio.fail_after(10):  # a guard against a hang, not a measurement
            async with anyio.create_task_group() as tg:
                for c in calls[:2]:
                    tg.start_soon(c)
                    await c.admitted.wait()
                for c in calls[2:]:
                    tg.start_soon(c)
                    await c.queued.wait()
                assert (queue.in_use(), queue.queued) == ({"run": 2}, 3)
                assert [c.positions for c in calls] == [[], [], [0], [1], [2]]
                calls[0].release.set()
                await calls[2].admitted.wait()
                await calls[4].moved_to(1)
                calls[1].release.set()
                await calls[3].admitted.wait()
                await calls[4].moved_to(0)
                for c in calls:
                    c.release.set()
        assert (queue.in_use(), queue.queued) == ({"run": 0}, 0)
        assert calls[4].positions == [2, 1, 0]
        assert all(c.error is None for c in calls)

    anyio.run(main)
    assert order == ["run0", "run1", "run2", "run3", "run4"]


def test_a_full_queue_answers_busy_at_once_and_the_others_still_run() -> None:
    queue = AdmissionQueue({"run": 1, "validation": 1}, length=2)
    order: list[str] = []

    async def main() -> None:
        holder = _Caller(queue, "holder", order)
        waiters = [_Caller(queue, f"w{i}", order) for i in range(2)]
        # Another kind of work finds the queue full too (one queue for every kind); its wait
        # bound is infinite: only the full queue can answer it.
        late = _Caller(queue, "validate_csv_data", order, kind="validation")
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(holder)
                await holder.admitted.wait()
                for w in waiters:
                    tg.start_soon(w)
                    await w.queued.wait()
                # The validation slot is taken, so the late call would have to wait.
                async with queue.admit("validation", "other", 0):
                    await late()
                assert late.error == (
                    "busy, retry: 2 calls are queued ahead (queue full at 2); validate_csv_data "
                    "was not queued; call again in a few seconds"
                )
                assert late.positions == []
                holder.release.set()
                for w in waiters:
                    w.release.set()

    anyio.run(main)
    assert order == ["holder", "w0", "w1"]


def test_a_cancelled_waiter_leaves_the_queue_and_never_runs() -> None:
    queue = AdmissionQueue({"snapshot": 1}, length=4)
    order: list[str] = []

    async def main() -> None:
        holder = _Caller(queue, "holder", order, kind="snapshot")
        doomed = _Caller(queue, "doomed", order, kind="snapshot")
        behind = _Caller(queue, "behind", order, kind="snapshot")
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(holder)
                await holder.admitted.wait()
                with anyio.CancelScope() as doomed_scope:
                    async with anyio.create_task_group() as inner:
                        inner.start_soon(doomed)
                        await doomed.queued.wait()
                        tg.start_soon(behind)
                        await behind.queued.wait()
                        assert (queue.queued, behind.positions) == (2, [1])
                        doomed_scope.cancel()  # the client cancelled the queued call
                await behind.moved_to(0)  # its place was freed
                assert queue.queued == 1
                holder.release.set()
                await behind.admitted.wait()
                behind.release.set()
        assert (queue.in_use(), queue.queued) == ({"snapshot": 0}, 0)

    anyio.run(main)
    assert order == ["holder", "behind"]


def test_a_waiter_whose_bound_passes_is_told_what_it_waited_for() -> None:
    queue = AdmissionQueue({"run": 1}, length=4)
    order: list[str] = []

    async def main() -> None:
        holder = _Caller(queue, "holder", order)
        ahead = _Caller(queue, "ahead", order)
        late = _Caller(queue, "run_sandbox_code", order, wait_s=0.0)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(holder)
                await holder.admitted.wait()
                tg.start_soon(ahead)
                await ahead.queued.wait()
                await late()  # a bound of 0 s: it passes at the first wait, whatever the clock
                assert late.error == (
                    "busy, retry: run_sandbox_code waited 0 s for a run slot, its bound (the "
                    "test's bound); 1 call is still queued ahead of it (queue full at 4); call "
                    "again in a few seconds"
                )
                assert queue.queued == 1
                holder.release.set()
                ahead.release.set()

    anyio.run(main)
    assert order == ["holder", "ahead"]


def test_workspace_waits_are_queued_and_exclusive_ones_keep_their_preference() -> None:
    """A snapshot sent during a run waits for it in the queue (not refused); a run sent after
    the snapshot waits behind it although a run slot is free (writer preference)."""
    queue = AdmissionQueue({"run": 2, "snapshot": 1}, length=4)
    order: list[str] = []

    async def main() -> None:
        run1 = _Caller(queue, "run1", order, workspace="shared")
        snapshot = _Caller(queue, "snapshot", order, kind="snapshot", workspace="exclusive")
        run2 = _Caller(queue, "run2", order, workspace="shared")
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run1)
                await run1.admitted.wait()
                tg.start_soon(snapshot)
                await snapshot.queued.wait()
                tg.start_soon(run2)
                await run2.queued.wait()
                assert (queue.queued, snapshot.positions, run2.positions) == (2, [0], [1])
                assert queue.in_use() == {"run": 2, "snapshot": 1}
                run1.release.set()
                await snapshot.admitted.wait()
                assert order == ["run1", "snapshot"]
                snapshot.release.set()
                await run2.admitted.wait()
                run2.release.set()
        assert (queue.in_use(), queue.queued) == ({"run": 0, "snapshot": 0}, 0)

    anyio.run(main)
    assert order == ["run1", "snapshot", "run2"]


def test_a_workspace_wait_past_its_bound_names_what_holds_the_workspace() -> None:
    queue = AdmissionQueue({"snapshot": 1}, length=4)

    async def main() -> str:
        async with queue.gate.run():
            try:
                async with queue.admit(
                    "snapshot", "create_state_snapshot", 0.0, workspace="exclusive", bound="B"
                ):
                    return "admitted"
            except Busy as exc:
                assert (queue.queued, queue.in_use()) == (0, {"snapshot": 0})
                return str(exc)

    assert anyio.run(main) == (
        "busy, retry: create_state_snapshot waited 0 s for the workspace (runs in progress or "
        "another snapshot operation hold it), its bound (B); 0 calls are still queued ahead of "
        "it (queue full at 4); call again in a few seconds"
    )


def test_a_queue_refuses_a_length_or_capacity_below_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        AdmissionQueue({"run": 1}, length=0)
    with pytest.raises(ValueError, match="at least 1"):
        AdmissionQueue({"run": 0}, length=1)
