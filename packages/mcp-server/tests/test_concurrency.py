from __future__ import annotations

import anyio
import pytest

from mcp_secure_sandbox.concurrency import Admission, Busy, WorkspaceGate


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


def test_admission_takes_a_free_token_and_never_overtakes_a_waiter() -> None:
    admission = Admission(5.0, {"run": 1})
    order: list[str] = []

    async def main() -> None:
        release = anyio.Event()
        queued = anyio.Event()

        async def holder() -> None:
            async with admission.admit("run", "holder"):
                order.append("holder")
                await release.wait()
            # At once, before the waiter has run: the freed token is the waiter's already.
            async with admission.admit("run", "newcomer"):
                order.append("newcomer")

        async def waiter() -> None:
            queued.set()
            async with admission.admit("run", "waiter"):
                order.append("waiter")

        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            while admission.in_use()["run"] == 0:
                await anyio.sleep(0.001)
            tg.start_soon(waiter)
            await queued.wait()
            await anyio.sleep(0.01)
            release.set()
        assert admission.in_use() == {"run": 0}

    anyio.run(main)
    assert order == ["holder", "waiter", "newcomer"]


def test_admission_refuses_busy_after_the_wait() -> None:
    admission = Admission(0.05, {"run": 1})

    async def main() -> str:
        async with admission.admit("run", "first"):
            try:
                async with admission.admit("run", "the second run"):
                    return "admitted"
            except Busy as exc:
                return str(exc)

    message = anyio.run(main)
    assert message.startswith("busy, retry: the second run did not get its turn within 0.05 s")


@pytest.mark.parametrize("patience", [0.05, 0.049998, 0.1])
def test_the_gates_busy_answers_say_what_holds_the_workspace(patience: float) -> None:
    """New-user trial and load session 2026-12-01: a snapshot during a run read "within
    1.49998 s (the server is at capacity for this kind of work)", and a run behind a restore
    "within 0.0667 s" (what was left of its wait after its token). It is the workspace that is
    held, and the number is left out."""
    gate = WorkspaceGate()

    async def exclusive_behind_a_run() -> str:
        async with gate.run():
            try:
                async with gate.exclusive(patience, "create_state_snapshot"):
                    return "admitted"
            except Busy as exc:
                return str(exc)

    async def run_behind_a_restore() -> str:
        async with gate.exclusive():
            try:
                async with gate.run(patience):
                    return "admitted"
            except Busy as exc:
                return str(exc)

    tail = (
        "the server's --admission-wait is how long a call waits for them); call again in a "
        "few seconds"
    )
    assert anyio.run(exclusive_behind_a_run) == (
        "busy, retry: create_state_snapshot did not get its turn (runs in progress or another "
        f"snapshot operation hold the workspace; {tail}"
    )
    assert anyio.run(run_behind_a_restore) == (
        "busy, retry: the run did not get its turn (a snapshot operation holds the workspace or "
        f"waits for it; {tail}"
    )
