from __future__ import annotations

import anyio

from mcp_secure_sandbox.concurrency import WorkspaceGate


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
