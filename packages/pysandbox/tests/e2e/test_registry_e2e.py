"""SessionRegistry over real sessions: state across calls, principals, the budget, no leftovers.

Each test opens a warm sandbox without ready children (their RSS would count in the budget)
and checks that every session's process is gone once closed, swept or the registry closed.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator

import pytest

from pysandbox import (
    Sandbox,
    SessionBudgetExceeded,
    SessionRegistry,
    UnknownSession,
)
from sandbox_helpers import KERNEL

MiB = 1 << 20


class Clock:
    def __init__(self) -> None:
        self.now = 5_000.0

    def __call__(self) -> float:
        return self.now


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:  # noqa: PTH123
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


@pytest.fixture
def sandbox(workspace: pathlib.Path) -> Iterator[Sandbox]:
    require = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()
    with Sandbox(workspace, execution="warm", ready_children=0, require=require) as sb:
        yield sb


def _registry(sandbox: Sandbox, clock: Clock, budget: int = 1 << 30) -> SessionRegistry:
    return SessionRegistry(
        sandbox,
        max_sessions=4,
        max_per_principal=2,
        memory_budget_bytes=budget,
        idle_timeout_s=30.0,
        max_lifetime_s=300.0,
        clock=clock,
    )


def _pids(sandbox: Sandbox) -> list[int]:
    with sandbox._sessions_lock:
        return [s.pid for s in sandbox._sessions]


def test_state_persists_per_handle_and_principals_are_apart(sandbox: Sandbox) -> None:
    clock = Clock()
    reg = _registry(sandbox, clock)
    a = reg.create("alice", "a").session_id
    b = reg.create("bob", "b").session_id
    assert reg.run(a, "alice", "x = 42").ok
    r = reg.run(a, "alice", "print(x + 1)\nx * 2")
    assert r.stdout == "43\n" and r.result == {"type": "builtins.int", "text": "84"}
    # bob's session is another interpreter, and alice's handle is unknown to bob
    r_b = reg.run(b, "bob", "x")
    assert r_b.status.value == "error" and "NameError" in r_b.stderr
    with pytest.raises(UnknownSession):
        reg.run(a, "bob", "x")
    (info,) = reg.list("alice")
    assert info.calls == 2 and info.rss_bytes > 1 * MiB
    pids = _pids(sandbox)
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    reg.close(a, "alice")
    clock.now += 31  # bob's idles out
    assert reg.sweep() == 1
    assert not any(_alive(p) for p in pids)
    assert reg.count() == 0


def test_exit_ends_and_forgets_the_session(sandbox: Sandbox) -> None:
    reg = _registry(sandbox, Clock())
    sid = reg.create("p").session_id
    r = reg.run(sid, "p", "raise SystemExit(3)")
    assert r.session_ended is True and r.session_end_reason == "exit"
    assert reg.count() == 0
    with pytest.raises(UnknownSession):
        reg.run(sid, "p", "1")


def test_the_budget_counts_real_sessions(sandbox: Sandbox) -> None:
    reg = _registry(sandbox, Clock(), budget=1 * MiB)
    sid = reg.create("p").session_id  # nothing live before it: 0 bytes in use
    with pytest.raises(SessionBudgetExceeded) as at_create:
        reg.create("p")  # the first session's resident set is over 1 MiB
    assert at_create.value.budget == 1 * MiB and at_create.value.used > 1 * MiB
    with pytest.raises(SessionBudgetExceeded):
        reg.run(sid, "p", "1")
    assert reg.count() == 1
    reg.close_all()


def test_close_all_leaves_no_process(sandbox: Sandbox) -> None:
    reg = _registry(sandbox, Clock())
    for principal in ("a", "a", "b"):
        reg.create(principal)
    pids = _pids(sandbox)
    assert len(pids) == 3
    assert reg.close_all() == 3
    assert not any(_alive(p) for p in pids)
    assert os.getpid() not in pids


def test_children_rss_counts_the_ready_children(workspace: pathlib.Path) -> None:
    with Sandbox(workspace, execution="warm", ready_children=1, require=()) as sb:
        assert sb.run("print(1)").stdout == "1\n"  # starts the zygote and fills the pool
        pids = sb._ready_pids()
        assert len(pids) == 1
        assert sb.children_rss_bytes() > 1 * MiB
