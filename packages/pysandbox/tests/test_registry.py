"""SessionRegistry without processes: handles, principals, limits, lifetimes, the sweep.

Fake sessions and a fake clock (no sleeps); the e2e file drives real sessions.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import anyio
import pytest

from pysandbox import (
    RunResult,
    RunStatus,
    SandboxClosedError,
    SessionBudgetExceeded,
    SessionRegistry,
    TooManySessions,
    UnknownSession,
)
from pysandbox._registry import HANDLE_BYTES, HANDLE_PREFIX


class FakeSession:
    def __init__(self, description: str, rss: int = 1000) -> None:
        self.description = description
        self.rss = rss
        self.closed = 0
        self.end: str | None = None
        self.codes: list[str] = []

    @property
    def ended(self) -> bool:
        return self.end is not None or self.closed > 0

    @property
    def rss_bytes(self) -> int:
        return 0 if self.ended else self.rss

    def run(self, code: str, timeout: float | None = None) -> RunResult:
        self.codes.append(code)
        if code == "exit":
            self.end = "exit"
            return RunResult(
                RunStatus.OK, cpu_time_ms=1.5, session_ended=True, session_end_reason="exit"
            )
        return RunResult(RunStatus.OK, cpu_time_ms=2.0, session_ended=False)

    async def arun(self, code: str, timeout: float | None = None) -> RunResult:
        return self.run(code, timeout)

    def close(self) -> None:
        self.closed += 1


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make(**kw: Any) -> tuple[SessionRegistry, Clock, list[FakeSession]]:
    clock = Clock()
    opened: list[FakeSession] = []
    children = kw.pop("children", 0)
    rss = kw.pop("rss", 1000)

    def opener(description: str) -> FakeSession:
        session = FakeSession(description, rss)
        opened.append(session)
        return session

    args: dict[str, Any] = {
        "max_sessions": 4,
        "max_per_principal": 2,
        "memory_budget_bytes": 10**9,
        "idle_timeout_s": 60.0,
        "max_lifetime_s": 600.0,
    }
    args.update(kw)
    reg = SessionRegistry(None, clock=clock, opener=opener, children_rss=lambda: children, **args)
    return reg, clock, opened


def test_handles_are_opaque_with_128_random_bits_and_never_repeat() -> None:
    reg, _, _ = make(max_sessions=64, max_per_principal=64)
    ids = [reg.create("a").session_id for _ in range(64)]
    assert len(set(ids)) == 64
    assert HANDLE_BYTES * 8 >= 128
    for sid in ids:
        assert re.fullmatch(rf"{HANDLE_PREFIX}[A-Za-z0-9_-]{{22}}", sid), sid


def test_a_session_runs_and_counts_its_calls_and_cpu() -> None:
    reg, clock, opened = make()
    info = reg.create("a", "analysis")
    assert info.description == "analysis" and info.calls == 0 and info.principal == "a"
    clock.now += 5
    result = reg.run(info.session_id, "a", "x = 1")
    assert result.status is RunStatus.OK
    listed = reg.list("a")
    assert [i.session_id for i in listed] == [info.session_id]
    assert listed[0].calls == 1 and listed[0].cpu_time_ms == 2.0
    assert listed[0].last_used_at == info.created_at + 5
    assert opened[0].codes == ["x = 1"]


def test_another_principals_handle_is_exactly_unknown() -> None:
    reg, _, opened = make()
    sid = reg.create("alice").session_id
    with pytest.raises(UnknownSession) as theirs:
        reg.run(sid, "bob", "x = 1")
    with pytest.raises(UnknownSession) as never:
        reg.run(HANDLE_PREFIX + "A" * 22, "bob", "x = 1")
    assert str(theirs.value) == f"unknown session {sid} (it may have been closed or expired)"
    assert str(never.value) == (
        f"unknown session {HANDLE_PREFIX}{'A' * 22} (it may have been closed or expired)"
    )
    for attempt in (
        lambda: reg.close(sid, "bob"),
        lambda: reg.info(sid, "bob"),
        lambda: reg.run(sid.upper(), "alice", "1"),
        lambda: reg.run(sid[:-1], "alice", "1"),
        lambda: reg.run(sid + "x", "alice", "1"),
    ):
        with pytest.raises(UnknownSession):
            attempt()
    assert reg.list("bob") == []
    assert opened[0].codes == [] and opened[0].closed == 0  # untouched
    assert [i.session_id for i in reg.list("alice")] == [sid]


@pytest.mark.parametrize("bad", [None, 42, b"sess_x", "", "x" * 100_000, "sess_\n\x00\u202e"])
def test_a_hostile_id_is_unknown_and_shown_bounded(bad: object) -> None:
    reg, _, _ = make()
    reg.create("a")
    with pytest.raises(UnknownSession) as err:
        reg.run(bad, "a", "1")  # type: ignore[arg-type]
    assert len(str(err.value)) < 120
    assert "\n" not in str(err.value) and "\u202e" not in str(err.value)


def test_max_sessions_and_per_principal_with_counts() -> None:
    reg, _, _ = make(max_sessions=3, max_per_principal=2)
    reg.create("a")
    reg.create("a")
    with pytest.raises(TooManySessions) as mine:
        reg.create("a")
    assert (mine.value.total, mine.value.yours, mine.value.limit) == (2, 2, 3)
    reg.create("b")
    with pytest.raises(TooManySessions) as full:
        reg.create("c")
    assert (full.value.total, full.value.yours, full.value.limit) == (3, 0, 3)
    with pytest.raises(TooManySessions) as b_full:
        reg.create("b")
    assert (b_full.value.total, b_full.value.yours) == (3, 1)


def test_the_memory_budget_is_checked_at_create_and_at_each_call() -> None:
    reg, _, opened = make(memory_budget_bytes=5000, rss=2000, children=500)
    first = reg.create("a").session_id  # 500 in use
    reg.create("a")  # 2500 in use
    reg.run(first, "a", "1")  # 4500 in use: below the budget
    opened[1].rss = 3000  # 5500 in use
    with pytest.raises(SessionBudgetExceeded) as at_call:
        reg.run(first, "a", "2")
    assert (at_call.value.budget, at_call.value.used) == (5000, 5500)
    assert opened[0].codes == ["1"]
    reg2, _, _ = make(memory_budget_bytes=5000, children=5000)
    with pytest.raises(SessionBudgetExceeded):
        reg2.create("a")
    assert reg2.count() == 0


def test_idle_expiry_and_maximum_lifetime() -> None:
    reg, clock, opened = make(idle_timeout_s=60.0, max_lifetime_s=100.0)
    info = reg.create("a")
    assert info.expires_at == info.created_at + 60
    clock.now += 50
    reg.run(info.session_id, "a", "1")
    # the idle time-out counts from the last call's end, capped by the maximum lifetime
    assert reg.info(info.session_id, "a").expires_at == info.created_at + 100
    clock.now += 49.9
    assert reg.sweep() == 0
    clock.now += 0.1  # created + 100
    assert reg.list("a") == []
    assert reg.sweep() == 1 and opened[0].closed == 1
    with pytest.raises(UnknownSession):
        reg.run(info.session_id, "a", "1")


def test_an_expired_session_is_unknown_at_its_next_call_before_any_sweep() -> None:
    reg, clock, opened = make(idle_timeout_s=10.0)
    sid = reg.create("a").session_id
    clock.now += 10
    with pytest.raises(UnknownSession):
        reg.run(sid, "a", "1")
    assert opened[0].codes == [] and opened[0].closed == 1


def test_a_call_that_ends_its_session_forgets_it() -> None:
    reg, _, opened = make()
    sid = reg.create("a").session_id
    result = reg.run(sid, "a", "exit")
    assert result.session_ended is True and result.session_end_reason == "exit"
    assert reg.count() == 0 and opened[0].closed == 1
    with pytest.raises(UnknownSession):
        reg.run(sid, "a", "1")


def test_close_close_all_and_closed_registry() -> None:
    reg, _, opened = make()
    sid = reg.create("a").session_id
    reg.create("b")
    reg.close(sid, "a")
    assert opened[0].closed == 1
    with pytest.raises(UnknownSession):
        reg.close(sid, "a")
    assert reg.close_all() == 1 and opened[1].closed == 1
    with pytest.raises(SandboxClosedError):
        reg.create("a")


def test_a_busy_session_is_not_swept() -> None:
    reg, clock, opened = make(idle_timeout_s=10.0, max_lifetime_s=10_000.0)
    sid = reg.create("a").session_id
    session = reg.begin_call(sid, "a")
    clock.now += 1000
    assert reg.sweep() == 0 and opened[0].closed == 0
    reg.end_call(sid, "a", session.run("1"))
    clock.now += 9.9
    assert reg.sweep() == 0
    clock.now += 0.1
    assert reg.sweep() == 1


def test_concurrent_creates_never_pass_the_limits() -> None:
    reg, _, _ = make(max_sessions=5, max_per_principal=5)
    barrier = threading.Barrier(12)
    outcomes: list[str] = []

    def create() -> None:
        barrier.wait()
        try:
            reg.create("a")
            outcomes.append("ok")
        except TooManySessions:
            outcomes.append("full")

    threads = [threading.Thread(target=create) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ok") == 5 and outcomes.count("full") == 7
    assert reg.count() == 5


def test_arun_runs_in_the_session() -> None:
    reg, _, opened = make()
    sid = reg.create("a").session_id

    async def main() -> RunResult:
        return await reg.arun(sid, "a", "y = 2")

    assert anyio.run(main).status is RunStatus.OK
    assert opened[0].codes == ["y = 2"]


@pytest.mark.parametrize(
    ("kw", "error"),
    [
        ({"max_sessions": 0}, ValueError),
        ({"max_sessions": 2.5}, TypeError),
        ({"max_per_principal": 5}, ValueError),
        ({"memory_budget_bytes": -1}, ValueError),
        ({"idle_timeout_s": float("inf")}, ValueError),
        ({"max_lifetime_s": True}, TypeError),
    ],
)
def test_bad_limits_are_refused(kw: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        make(**kw)


def test_a_sweep_as_a_long_call_ends_does_not_take_the_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The call's end is its last use in the same step that makes it sweepable again: a sweep
    in the window before the call is counted finds it freshly used (review 2026-12-07)."""
    reg, clock, opened = make(idle_timeout_s=10.0, max_lifetime_s=10_000.0)
    sid = reg.create("a").session_id
    account = reg._account

    def swept_first(entry: Any, result: RunResult) -> RunResult:
        assert reg.sweep() == 0  # another thread's sweep, right as the call ended
        return account(entry, result)

    monkeypatch.setattr(reg, "_account", swept_first)
    session = reg.begin_call(sid, "a")
    clock.now += 1000  # the call outlasted the idle time-out
    reg.end_call(sid, "a", session.run("long"))
    assert opened[0].closed == 0 and [i.session_id for i in reg.list("a")] == [sid]
    result = reg.run(sid, "a", "next")  # the next call finds it
    assert result.status is RunStatus.OK


def test_a_session_swept_between_lookup_and_call_is_unknown_and_runs_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reg, clock, opened = make(idle_timeout_s=10.0)
    sid = reg.create("a").session_id
    take = reg._take

    def then_swept(session_id: object, principal: str) -> Any:
        entry = take(session_id, principal)
        clock.now += 10  # expired now, and another thread's sweep takes it
        assert reg.sweep() == 1
        return entry

    monkeypatch.setattr(reg, "_take", then_swept)
    for call in (lambda: reg.run(sid, "a", "x = 1"), lambda: reg.begin_call(sid, "a")):
        with pytest.raises(UnknownSession):
            call()
    assert opened[0].codes == []
