"""ConfinedPool distrusts its workers: every malformed answer is refused with a clear error,
the worker killed and replaced, no process left (fake workers stand in for compromised ones)."""

from __future__ import annotations

import pathlib
import sys
from typing import Any

import psutil
import pytest

from pysandbox import ConfinedPool
from pysandbox._confined_pool import ANSWER_MAX_BYTES
from pysandbox.exceptions import WorkerProtocolError, WorkerStartError

FAKE = str(pathlib.Path(__file__).resolve().parent.parent / "fake_pool_worker.py")

MALFORMED = {
    "garbage": "not JSON (JSONDecodeError)",
    "nan": "not JSON (ValueError)",
    "huge": f"an answer line over {ANSWER_MAX_BYTES:,} bytes",
    "deep": "not JSON (RecursionError)",
    "not-object": "not an object with exactly one key, 'ok' or 'error'",
    "two-keys": "not an object with exactly one key, 'ok' or 'error'",
    "unknown-kind": "unknown error kind 'pwned'",
    "message-type": "'message' is not a string of at most 4000 characters",
    "long-message": "'message' is not a string of at most 4000 characters",
}


def _pool(mode: str, **options: Any) -> ConfinedPool:
    settings: dict[str, Any] = {
        "deadline_s": 20.0,
        "memory_bytes": 1 << 30,
        "command": [sys.executable, FAKE, mode],
    }
    settings.update(options)
    return ConfinedPool("json:loads", **settings)


def _live_children() -> list[int]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                found.append(child.pid)
        except psutil.NoSuchProcess:
            pass
    return found


@pytest.mark.parametrize("mode", sorted(MALFORMED))
def test_a_malformed_answer_is_refused_and_its_worker_replaced(mode: str) -> None:
    with _pool(mode) as pool:
        for attempt in (1, 2):
            with pytest.raises(WorkerProtocolError) as caught:
                pool.call({"x": 1}, what="check")
            assert str(caught.value) == (
                f"check failed: its worker gave a malformed answer ({MALFORMED[mode]}); the "
                "worker was killed and replaced, call again"
            )
            assert pool.pool.replaced == attempt
            assert pool.pids == []
    assert _live_children() == []


def test_a_well_formed_answer_of_the_wrong_shape_is_refused_by_the_callers_schema() -> None:
    schema = {"type": "object", "required": ["valid"], "properties": {"valid": {"type": "string"}}}
    with _pool("good", answer_schema=schema) as pool:
        with pytest.raises(WorkerProtocolError, match=r"wrong shape \(ValueError\)"):
            pool.call(1)
        # The call's own check replaces the pool's.
        assert pool.call(1, check=lambda v: v["valid"]) is True


def test_a_worker_that_misstates_readiness_does_not_start() -> None:
    with _pool("bad-ready") as pool:
        with pytest.raises(WorkerStartError, match=r"failed to start.*WorkerProtocolError"):
            pool.call(1)
        assert pool.pids == []
    assert _live_children() == []
