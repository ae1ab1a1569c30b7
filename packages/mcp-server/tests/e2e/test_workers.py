"""The worker pool distrusts its workers and retires them before their CPU limit bites.

Fake workers (``_fake_worker.py``) stand in for a compromised worker: every malformed answer is
refused with a clear error, the worker killed and replaced, no process left; and a worker's
``RLIMIT_CPU`` (which counts every job it ran) never kills a legitimate job.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import psutil
import pytest

from _paths import TESTS_DIR
from mcp_secure_sandbox._answers import csv_report, diff, json_report
from mcp_secure_sandbox.workers import (
    ANSWER_MAX_BYTES,
    WorkerPool,
    WorkerProtocolError,
)

FAKE = str(TESTS_DIR / "_fake_worker.py")

MALFORMED = {
    "garbage": "not JSON (JSONDecodeError)",
    "invalid-json": "not JSON (JSONDecodeError)",
    "huge": f"an answer line over {ANSWER_MAX_BYTES:,} bytes",
    "deep": "not JSON (RecursionError)",
    "not-object": "not an object with exactly one key, 'ok' or 'error'",
    "two-keys": "not an object with exactly one key, 'ok' or 'error'",
    "unknown-kind": "unknown error kind 'pwned'",
    "message-type": "'message' is not a string of at most 4000 characters",
    "wrong-types": "the result has the wrong shape (ValidationError)",
    "missing-key": "the result has the wrong shape (ValidationError)",
    "extra-key": "the result has the wrong shape (ValidationError)",
    "error-item": "the result has the wrong shape (ValidationError)",
}


def _pool(mode: str, **kwargs: Any) -> WorkerPool:
    options: dict[str, Any] = {
        "size": 1,
        "deadline_s": 20.0,
        "memory_bytes": 1 << 30,
        "workspace": None,
        "require_kernel_layers": False,
        "command": [sys.executable, FAKE, mode],
    }
    options.update(kwargs)
    return WorkerPool(**options)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("mode", sorted(MALFORMED))
def test_a_malformed_answer_is_refused_and_its_worker_replaced(mode: str) -> None:
    async def scenario() -> None:
        pool = _pool(mode)
        try:
            with pytest.raises(WorkerProtocolError) as caught:
                await pool.call({"op": "validate_json"}, what="validation", check=json_report)
            assert str(caught.value) == (
                f"validation failed: its worker gave a malformed answer ({MALFORMED[mode]}); "
                "the worker was killed and replaced, call again"
            )
            assert pool.replaced == 1
            assert pool.pids == []  # killed and reaped; the next job starts a fresh one
        finally:
            await pool.aclose()

    anyio.run(scenario)


def test_the_malformed_worker_process_is_gone_and_the_pool_goes_on() -> None:
    async def scenario() -> None:
        bad = _pool("garbage")
        good = _pool("good")
        try:
            await good.call({"op": "ping"}, what="validation", check=json_report)
            (pid,) = good.pids
            with pytest.raises(WorkerProtocolError):
                await bad.call({"op": "ping"}, what="validation")
            # The same pool, job after job: each malformed worker is replaced by a new one.
            seen = set()
            for _ in range(3):
                with pytest.raises(WorkerProtocolError):
                    await bad.call({"op": "ping"}, what="validation")
                seen.add(bad.replaced)
            assert seen == {2, 3, 4}
            assert bad.pids == []
            children = psutil.Process().children(recursive=True)
            assert [c.pid for c in children if not _gone(c.pid)] == [pid]
            report = await good.call({"op": "ping"}, what="validation", check=json_report)
            assert report == {
                "valid": True,
                "draft": "draft2020-12",
                "error_count": 0,
                "truncated": False,
                "errors": [],
            }
        finally:
            await bad.aclose()
            await good.aclose()
        assert [c for c in psutil.Process().children(recursive=True) if not _gone(c.pid)] == []

    anyio.run(scenario)


def test_a_worker_that_misstates_readiness_does_not_start() -> None:
    async def scenario() -> None:
        pool = _pool("bad-ready")
        try:
            with pytest.raises(RuntimeError, match=r"failed to start.*WorkerProtocolError"):
                await pool.call({"op": "ping"}, what="validation")
            assert pool.pids == []
        finally:
            await pool.aclose()

    anyio.run(scenario)


def test_a_json_report_is_not_accepted_as_a_csv_report() -> None:
    async def scenario() -> None:
        pool = _pool("good")
        try:
            with pytest.raises(WorkerProtocolError, match="wrong shape"):
                await pool.call({"op": "validate_csv"}, what="validation", check=csv_report)
            assert pool.replaced == 1
        finally:
            await pool.aclose()

    anyio.run(scenario)


def test_a_json_report_is_not_accepted_as_a_diff() -> None:
    async def scenario() -> None:
        pool = _pool("good", too_expensive="the snapshots are too large to compare")
        try:
            with pytest.raises(WorkerProtocolError, match=r"^diff failed: .*wrong shape"):
                await pool.call({"op": "diff"}, what="diff", check=diff)
            assert pool.replaced == 1
            assert pool.limit_message("diff") == (
                "diff stopped after 20 s / 1024 MiB: the snapshots are too large to compare"
            )
        finally:
            await pool.aclose()

    anyio.run(scenario)


@pytest.mark.parametrize(
    "answer",
    [
        {"a": "x", "b": None, "added": [1], "removed": [], "modified": [], "metadata_changed": []},
        {"a": "x", "b": None, "added": [], "removed": [], "modified": []},
        {"a": "x", "b": 5, "added": [], "removed": [], "modified": [], "metadata_changed": []},
        {"a": "x", "b": None, "added": "a", "removed": [], "modified": [], "metadata_changed": []},
    ],
)
def test_a_diff_answer_of_the_wrong_shape_is_refused(answer: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="validation error"):
        diff(answer)


def test_a_diff_answer_of_the_right_shape_becomes_a_diff() -> None:
    found = diff(
        {
            "a": "x",
            "b": None,
            "added": ["n"],
            "removed": [],
            "modified": ["m"],
            "metadata_changed": [],
        }
    )
    assert (found.a, found.b, found.added, found.modified) == ("x", None, ("n",), ("m",))


def test_workers_retire_after_max_jobs() -> None:
    async def scenario() -> None:
        pool = _pool("good", max_jobs=3)
        try:
            pids = []
            for _ in range(7):
                await pool.call({"op": "ping"}, what="validation")
                pids.append(pool.pids[0] if pool.pids else None)
            # A worker is ended after its third job; the next job starts a fresh one.
            assert pids[2] is None and pids[5] is None
            assert len({p for p in pids if p is not None}) == 3
            assert pool.retired == 2
            assert pool.replaced == 0
        finally:
            await pool.aclose()

    anyio.run(scenario)


@pytest.mark.slow
def test_cheap_jobs_in_a_row_never_cost_a_later_job_its_cpu_budget() -> None:
    """RLIMIT_CPU counts every job a worker did: without retirement the last job would get
    SIGXCPU (a 5 s limit: start-up rounded up to 1 s, a job's 2 s and 2 s; 9 x 0.4 s spent,
    then 1.8 s more); with it, it succeeds. The wall-clock deadline is far away: only CPU
    time decides."""

    async def scenario() -> None:
        pool = _pool("spin", deadline_s=120.0, job_cpu_s=2.0, cpu_reserve_s=0)
        try:
            for _ in range(9):
                await pool.call({"op": "spin", "cpu_s": 0.4}, what="validation")
            report = await pool.call(
                {"op": "spin", "cpu_s": 1.8}, what="validation", check=json_report
            )
            assert report["valid"] is True
            assert pool.replaced == 0  # never killed: retired between jobs
            assert pool.retired >= 2
        finally:
            await pool.aclose()

    anyio.run(scenario)
