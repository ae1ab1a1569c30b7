"""Ready children (warm mode): one run per child, the pool's rules, the code channel's bound."""

from __future__ import annotations

import os
import pathlib
import re
import time
from collections.abc import Iterator

import pytest

import astguard
from pysandbox import Limits, RunStatus, Sandbox, _pool
from pysandbox.child._main import EXIT_CODE_REFUSED
from sandbox_helpers import KERNEL

MiB = 1024 * 1024
REQUIRE = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()
LIMITS = Limits(memory_bytes=128 * MiB, output_bytes=4096, timeout_s=10.0)

pytestmark = pytest.mark.skipif(
    not hasattr(os, "pidfd_open"), reason="warm mode needs os.pidfd_open (Linux)"
)


def _sandbox(tmp: pathlib.Path, **kwargs: object) -> Sandbox:
    ws = tmp / "ws"
    ws.mkdir(parents=True)
    options: dict[str, object] = {"limits": LIMITS, "require": REQUIRE, "execution": "warm"}
    options.update(kwargs)
    return Sandbox(ws, **options)  # type: ignore[arg-type]


@pytest.fixture
def pooled(tmp_path: pathlib.Path) -> Iterator[Sandbox]:
    with _sandbox(tmp_path, ready_children=2) as sb:
        assert sb.run("print(1)").stdout == "1\n"  # starts the zygote, then fills the pool
        yield sb


def _gone(pid: int) -> bool:
    """Whether ``pid`` has ended and been reaped (the zygote reaps; wait for it, bounded)."""
    for _ in range(1000):
        if not os.path.exists(f"/proc/{pid}"):  # noqa: PTH110
            return True
        time.sleep(0.01)
    return False


def _claimed(sb: Sandbox, code: str) -> tuple[str, int | None]:
    """Run ``code``; return its stdout and the ready child's pid it claimed (or ``None``)."""
    before = sb._ready_pids()
    result = sb.run(code)
    assert result.status is RunStatus.OK, result
    taken = set(before) - set(sb._ready_pids())
    assert len(taken) <= 1
    return result.stdout, taken.pop() if taken else None


def test_a_run_claims_a_ready_child_and_the_pool_is_refilled(pooled: Sandbox) -> None:
    assert pooled.capabilities().execution["ready_children"] == 2
    before = pooled._ready_pids()
    assert len(before) == 2
    out, pid = _claimed(pooled, "print(6 * 7)")
    assert out == "42\n"
    assert pid in before
    after = pooled._ready_pids()
    assert len(after) == 2
    assert pid not in after  # one run per child, never reused
    assert _gone(pid)


def test_globals_descriptors_and_open_files_are_not_seen_by_the_next_run(
    pooled: Sandbox,
) -> None:
    # (Threads: the default policy refuses ``threading``; each run is its own process.)
    first = (
        "secret = 41\n"
        "kept = open('kept.txt', 'w')\n"
        "kept.write('x')\n"
        "probe = open('probe1.txt', 'w')\n"
        "print(probe.fileno())\n"
    )
    out1, pid1 = _claimed(pooled, first)
    second = (
        "probe = open('probe2.txt', 'w')\n"
        "seen = []\n"
        "try:\n"
        "    seen.append(secret)\n"
        "except NameError:\n"
        "    seen.append(False)\n"
        "try:\n"
        "    seen.append(kept)\n"
        "except NameError:\n"
        "    seen.append(False)\n"
        "print(probe.fileno() + 1, *seen)\n"
    )
    out2, pid2 = _claimed(pooled, second)
    assert pid1 is not None and pid2 is not None and pid1 != pid2
    # The first run held one more descriptor (kept.txt) when it opened its probe: a
    # descriptor carried over would push the second probe's number up.
    assert out2.split() == [out1.strip(), "False", "False"]
    assert (pathlib.Path(pooled.workspace) / "kept.txt").read_text() == "x"  # flushed at exit


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        # a module's table changed (attribute assignment on modules is refused by the gate)
        (
            "import json\njson.decoder.BACKSLASH['q'] = 'leak'\n",
            "import json\nprint(json.decoder.BACKSLASH.get('q'))\n",
            "None\n",
        ),
        # a module's state changed (the random generator seeded to a known value)
        (
            "import random\nrandom.seed(7)\n",
            "import random\nrandom.seed(7)\nx = random.random()\nrandom.seed(7)\n"
            "print(random.random() == x)\n",
            "True\n",
        ),
        # a global of the module the code runs in, and a name bound in builtins' place
        (
            "leak = 'one'\nlen = None\n",
            "try:\n    print(leak)\nexcept NameError:\n    print('unset', len('ab'))\n",
            "unset 2\n",
        ),
        # the interpreter-wide warning filters
        (
            "import warnings\nwarnings.simplefilter('error')\n",
            "import warnings\nprint(warnings.filters[0][0] == 'error')\n",
            "False\n",
        ),
    ],
    ids=["module-table", "random-state", "globals", "warning-filters"],
)
def test_one_runs_python_state_is_not_seen_by_the_next(
    pooled: Sandbox, first: str, second: str, expected: str
) -> None:
    _, pid1 = _claimed(pooled, first)
    out, pid2 = _claimed(pooled, second)
    assert pid1 is not None and pid2 is not None and pid1 != pid2
    assert out == expected


def test_each_ready_child_draws_its_own_random_numbers(pooled: Sandbox) -> None:
    # Forked from one zygote before any run: each reseeds, or every run would draw the same.
    code = "import random\nprint(random.getrandbits(64))\n"
    draws = {_claimed(pooled, code)[0] for _ in range(4)}
    assert len(draws) == 4


def test_a_runs_threads_are_not_seen_by_the_next(tmp_path: pathlib.Path) -> None:
    with _sandbox(tmp_path, ready_children=2, extra_modules=("threading",)) as sb:
        assert sb.run("print(1)").ok
        first = (
            "import threading, time\n"
            "def spin():\n"
            "    while True:\n"
            "        time.sleep(0.01)\n"
            "threading.Thread(target=spin, daemon=True, name='left-behind').start()\n"
            "print(threading.active_count())\n"
        )
        out1, pid1 = _claimed(sb, first)
        assert out1 == "2\n"
        second = "import threading\nprint([t.name for t in threading.enumerate()])\n"
        out2, pid2 = _claimed(sb, second)
        assert pid1 is not None and pid2 is not None and pid1 != pid2
        assert out2 == "['MainThread']\n"
        assert _gone(pid1)  # the first child and its thread are gone


def test_a_descriptor_left_open_is_not_inherited_by_the_next(pooled: Sandbox) -> None:
    # The first run leaves several files open; the next run's child has only its own.
    first = "fs = [open(f'f{i}.txt', 'w') for i in range(5)]\nprint(fs[-1].fileno())\n"
    second = "f = open('g.txt', 'w')\nprint(f.fileno())\n"
    out1, pid1 = _claimed(pooled, first)
    out2, pid2 = _claimed(pooled, second)
    assert pid1 != pid2
    assert int(out2) == int(out1) - 4  # the same first free descriptor as the first run had


def test_a_shrink_only_run_never_gets_a_ready_child(tmp_path: pathlib.Path) -> None:
    limits = Limits(memory_bytes=128 * MiB, output_bytes=4096, timeout_s=10.0, workspace_files=3)
    with _sandbox(tmp_path, limits=limits, ready_children=2) as sb:
        for name in "abcde":
            (pathlib.Path(sb.workspace) / name).write_text("x")
        sb.invalidate_workspace_manifest()
        # The workspace is over its limits from the start: every run is shrink-only.
        result = sb.run("open('new.txt', 'w')")
        assert result.status is not RunStatus.OK
        assert "shrink-only" in result.detail or "over" in result.detail, result
        ready = sb._ready_pids()
        assert len(ready) == 2  # the pool was filled for the sandbox's own configuration
        result = sb.run("open('new2.txt', 'w')")
        assert result.status is not RunStatus.OK, result
        assert not (pathlib.Path(sb.workspace) / "new2.txt").exists()
        assert sb._ready_pids() == ready  # neither claimed nor replaced


def test_a_run_that_leaves_the_workspace_over_its_bytes_makes_the_next_shrink_only(
    tmp_path: pathlib.Path,
) -> None:
    limits = Limits(
        memory_bytes=128 * MiB, output_bytes=4096, timeout_s=10.0, workspace_bytes=64 * 1024
    )
    with _sandbox(tmp_path, limits=limits, ready_children=2) as sb:
        assert sb.run("print(1)").ok
        (pathlib.Path(sb.workspace) / "big").write_bytes(b"x" * 100 * 1024)  # outside a run
        sb.invalidate_workspace_manifest()
        assert sb.run("print(2)").ok  # fills the pool again (a shrink-only run may print)
        ready = sb._ready_pids()
        assert len(ready) == 2
        result = sb.run("open('new.txt', 'w').write('y')")
        assert result.status is not RunStatus.OK, result
        assert not (pathlib.Path(sb.workspace) / "new.txt").exists()
        assert sb._ready_pids() == ready  # a shrink-only run forked its own child


def test_the_pool_is_emptied_on_invalidate_and_discard(pooled: Sandbox) -> None:
    first = pooled._ready_pids()
    assert len(first) == 2
    pooled.invalidate_workspace_manifest()  # what a restore calls
    assert pooled._ready_pids() == []
    assert all(_gone(pid) for pid in first)
    assert pooled.run("print(2)").stdout == "2\n"
    second = pooled._ready_pids()
    assert len(second) == 2 and not set(second) & set(first)
    pooled.discard_ready_children()
    assert pooled._ready_pids() == []
    assert all(_gone(pid) for pid in second)


def test_the_pool_is_emptied_on_a_settings_change(pooled: Sandbox) -> None:
    config = pooled._child_config()
    zygote = pooled._zygote
    assert zygote is not None
    ready = pooled._ready_pids()
    # Another configuration (here the shrink-only one) never takes a child prepared for the
    # default one, and clears them out.
    assert pooled._pool.claim(zygote, config.shrink_only()) is None
    assert pooled._ready_pids() == []
    assert all(_gone(pid) for pid in ready)


def test_close_kills_the_ready_children(tmp_path: pathlib.Path) -> None:
    sb = _sandbox(tmp_path, ready_children=2)
    assert sb.run("print(1)").ok
    ready = sb._ready_pids()
    assert len(ready) == 2
    sb.close()  # a server that changes its settings replaces its sandbox
    assert all(_gone(pid) for pid in ready)


def _replaced(sb: Sandbox, old: list[int]) -> list[int]:
    """Wait (bounded, 20 s) until no pid of ``old`` is ready and the pool is full again."""
    for _ in range(2000):
        now = sb._ready_pids()
        if len(now) == sb._pool.size and not set(now) & set(old):
            return now
        time.sleep(0.01)
    return sb._ready_pids()


def test_a_ready_child_idle_past_its_age_is_replaced_without_a_run(
    tmp_path: pathlib.Path,
) -> None:
    with _sandbox(tmp_path, ready_children=2, ready_max_idle_s=0.5) as sb:
        assert sb.run("print(1)").ok
        old = sb._ready_pids()
        assert len(old) == 2
        new = _replaced(sb, old)  # no run: the pool's ager replaces them
        assert len(new) == 2 and not set(new) & set(old)
        assert all(_gone(pid) for pid in old)
        newer = _replaced(sb, new)  # and again: the ager keeps going
        assert len(newer) == 2 and not set(newer) & set(new)
        assert sb.run("print(3)").stdout == "3\n"


def test_the_ager_stops_and_adds_nothing_once_the_sandbox_is_closed(
    tmp_path: pathlib.Path,
) -> None:
    sb = _sandbox(tmp_path, ready_children=2, ready_max_idle_s=0.1)
    assert sb.run("print(1)").ok
    ager = sb._pool._ager
    assert ager is not None and ager.is_alive()
    old = sb._ready_pids()
    sb.close()
    ager.join(timeout=20)
    assert not ager.is_alive()
    assert sb._ready_pids() == []
    assert all(_gone(pid) for pid in old)


def test_each_ready_child_has_its_own_run_marker_and_session(pooled: Sandbox) -> None:
    entries = list(pooled._pool._ready)
    assert len(entries) == 2
    assert len({entry.marker for entry in entries}) == 2
    for entry in entries:
        pid = entry.resolve().pid
        for _ in range(1000):  # the child may still be setting up: wait for its setsid
            if os.getsid(pid) == pid:
                break
            time.sleep(0.01)
        assert os.getsid(pid) == pid  # the sweep's session: its own, made before any code


def _send_code(sb: Sandbox, limit: int, message: bytes) -> bytes:
    """Write ``message`` to a fresh ready child's code pipe (code limit ``limit`` bytes); check
    the child ended with ``EXIT_CODE_REFUSED``; return its stderr."""
    zygote = sb._zygote
    assert zygote is not None
    pool = _pool.ReadyPool(1, 60.0, limit)
    pool.fill(zygote, sb._child_config())
    ready = pool.claim(zygote, sb._child_config())
    assert ready is not None
    child = ready.resolve()
    os.write(ready.code_w, message)
    os.close(ready.code_w)
    ready.code_w = -1
    chunks = []
    while chunk := os.read(ready.err_r, 4096):
        chunks.append(chunk)
    reaped = child.reap()
    assert reaped is not None
    assert os.WIFEXITED(reaped[0]) and os.WEXITSTATUS(reaped[0]) == EXIT_CODE_REFUSED
    for fd in (ready.out_r, ready.err_r, ready.setup_r, ready.figure_r):
        os.close(fd)
    return b"".join(chunks)


def test_oversized_code_is_refused_by_the_child_before_it_runs(pooled: Sandbox) -> None:
    stderr = _send_code(pooled, 100, (101).to_bytes(8, "little") + b"x" * 101)
    assert b"the code was refused (101 bytes, over the limit of 100)" in stderr


@pytest.mark.parametrize(
    ("announce", "send"),
    [
        (None, 4),  # the length itself cut short
        (10_000, 100),  # the body cut short
        (101, None),  # a whole, valid message over the limit
    ],
    ids=["length-cut-short", "body-cut-short", "over-the-limit"],
)
def test_a_bad_code_message_runs_nothing(
    pooled: Sandbox, announce: int | None, send: int | None
) -> None:
    import marshal

    marker = pathlib.Path(pooled.workspace) / "ran"
    code = f"open({str(marker)!r}, 'w').close()"
    payload = marshal.dumps({"code": code, "code_object": compile(code, "<run>", "exec")})
    assert 100 < len(payload) < 10_000
    size = len(payload) if announce == 101 else (announce or 0)
    message = size.to_bytes(8, "little") + payload
    limit = 100 if announce == 101 else 10_000
    stderr = _send_code(pooled, limit, message[:send] if send is not None else message)
    assert b"the code was refused" in stderr
    assert not marker.exists()


def test_code_over_the_ready_limit_runs_in_a_fresh_child(pooled: Sandbox) -> None:
    pooled._pool.max_code_bytes = 10  # every code message is over it now
    before = pooled._ready_pids()
    assert pooled.run("print(5)").stdout == "5\n"
    after = pooled._ready_pids()
    taken = set(before) - set(after)
    assert len(taken) == 1 and _gone(taken.pop())  # discarded, not run


def _folding_bomb(lines: int, prefix: str = "") -> str:
    """Source whose compiled form is about 4 KiB per ~20-byte line (constant folding, up to
    4096 items per constant; each constant distinct, as equal ones are stored once)."""
    body = "".join(f"x{i} = {prefix}'{i:05d}' * 819\n" for i in range(lines))
    return body + "print(len(x7))\n"


@pytest.fixture
def folding_allowed(tmp_path: pathlib.Path) -> Iterator[Sandbox]:
    """A pooled sandbox whose policy lets constant folding through (AG907 off in effect), so
    that the compiled-size bound behind it is what answers."""
    policy = astguard.Policy().with_limits(max_folded_bytes=1 << 30)
    with _sandbox(tmp_path / "folding", ready_children=2, policy=policy) as sb:
        assert sb.run("print(1)").stdout == "1\n"
        yield sb


@pytest.mark.parametrize(
    ("lines", "prefix"), [(600, ""), (3000, ""), (600, "b")], ids=["2-MiB", "12-MiB", "bytes"]
)
def test_code_that_compiles_over_its_limit_is_refused_before_it_runs(
    pooled: Sandbox, folding_allowed: Sandbox, lines: int, prefix: str
) -> None:
    """Red team 2026-12-01 (F3): ~60 KB of source compiled to a 12 MB code object, which the
    server held and sent to the zygote with no limit once the ready child refused it. astguard
    refuses such code before anything compiles it (AG907); behind it, a run whose compiled
    form is over :func:`pysandbox._pool.max_compiled_bytes` is refused (PS001) before any
    child is used. The pool is untouched either way."""
    code = _folding_bomb(lines, prefix)
    before = pooled._ready_pids()
    result = pooled.run(code)
    assert (result.status, [v.rule_id for v in result.violations]) == (
        RunStatus.REJECTED,
        ["AG907"],
    )
    assert pooled._ready_pids() == before

    folding_allowed._max_compiled_bytes = 1 << 21
    before = folding_allowed._ready_pids()
    result = folding_allowed.run(code)
    assert result.status is RunStatus.REJECTED, result
    (violation,) = result.violations
    assert isinstance(violation, astguard.Violation)
    assert violation.rule_id == "PS001"
    assert re.fullmatch(
        r"the code compiles to \d+ bytes; the limit is 2097152 \(constant expressions such as "
        r"'ab' \* 2000 are stored expanded: build large values at run time, from a variable or "
        r"in a loop\)",
        violation.message,
    ), violation.message
    assert folding_allowed._ready_pids() == before


def test_code_under_the_compiled_limit_runs_in_a_ready_child(pooled: Sandbox) -> None:
    pooled._max_compiled_bytes = 1 << 21
    stdout, claimed = _claimed(pooled, _folding_bomb(200))  # about 0.8 MB folded
    assert (stdout, claimed is not None) == ("4095\n", True)
    n = 50_000  # the same values built at run time are not limited
    stdout, claimed = _claimed(pooled, f"n = {n}\nx = 'ab' * n\nprint(len(x))\n")
    assert (stdout, claimed is not None) == (f"{2 * n}\n", True)


def test_pool_off_forks_per_run_as_before(tmp_path: pathlib.Path) -> None:
    with _sandbox(tmp_path, ready_children=0) as sb:
        for n in range(3):
            assert sb.run(f"print({n})").stdout == f"{n}\n"
            assert sb._ready_pids() == []
        assert len(sb._pool) == 0


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"ready_children": -1}, ValueError),
        ({"ready_children": True}, TypeError),
        ({"ready_children": 1.5}, TypeError),
        ({"ready_max_idle_s": 0}, ValueError),
        ({"ready_max_idle_s": 0.05}, ValueError),  # below READY_MIN_IDLE_S: a fork storm
        ({"ready_max_idle_s": float("inf")}, ValueError),
        ({"ready_max_idle_s": float("nan")}, ValueError),
        ({"ready_max_idle_s": "1"}, TypeError),
    ],
)
def test_pool_arguments_are_checked(
    tmp_path: pathlib.Path, kwargs: dict[str, object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        _sandbox(tmp_path, **kwargs)
