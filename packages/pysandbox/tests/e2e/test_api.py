from __future__ import annotations

import asyncio
import json
import os
import pathlib
import time

import pytest

import astguard
import pysandbox
from pysandbox import (
    IsolationUnavailable,
    Limits,
    RunResult,
    RunStatus,
    Sandbox,
    SandboxClosedError,
)
from sandbox_helpers import KERNEL, needs_kernel


def test_public_names() -> None:
    for name in pysandbox.__all__:
        assert hasattr(pysandbox, name), name
    assert pysandbox.__version__ == "0.1.0"


def test_statuses_match_design() -> None:
    assert [s.value for s in RunStatus] == [
        "ok",
        "error",
        "rejected",
        "timeout",
        "memory_limit",
        "output_limit",
        "disk_limit",
        "killed",
    ]
    assert RunStatus("ok") is RunStatus.OK
    assert str(RunStatus.TIMEOUT) == "timeout"


def test_limits_defaults_and_validation() -> None:
    lim = Limits()
    assert lim.timeout_s == 10.0
    assert lim.memory_bytes == 512 * 1024 * 1024
    assert lim.output_bytes == 8 * 1024 * 1024
    assert lim.to_dict()["workspace_files"] == 10_000
    with pytest.raises(ValueError, match="timeout_s"):
        Limits(timeout_s=0)
    with pytest.raises(ValueError, match="timeout_s"):
        Limits(timeout_s=float("inf"))
    with pytest.raises(TypeError, match="memory_bytes"):
        Limits(memory_bytes=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cpu_time_s"):
        Limits(cpu_time_s=True)
    with pytest.raises(ValueError, match="open_files"):
        Limits(open_files=3)


def test_ok_run(sandbox: Sandbox) -> None:
    result = sandbox.run("print(1 + 1)")
    assert result.status is RunStatus.OK
    assert result.ok
    assert result.stdout == "2\n"
    assert result.stderr == ""
    assert result.exit_code == 0
    assert result.signal is None
    assert result.duration_ms > 0
    assert result.peak_memory_bytes > 1024 * 1024
    data = result.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["status"] == "ok"
    assert "rlimits" in data["layers"]


def test_error_run_strips_bootstrap_frames(sandbox: Sandbox) -> None:
    code = "def f():\n    raise ValueError('boom')\n\nf()\n"
    result = sandbox.run(code)
    assert result.status is RunStatus.ERROR
    assert result.exit_code == 1
    assert result.stderr.startswith("Traceback (most recent call last):\n")
    assert 'File "<sandbox>", line 4, in <module>' in result.stderr
    assert 'File "<sandbox>", line 2, in f' in result.stderr
    assert "raise ValueError('boom')" not in result.stderr  # no source echo
    assert result.stderr.endswith("ValueError: boom\n")
    assert "_child" not in result.stderr
    assert "pysandbox" not in result.stderr


def test_rejected_never_spawns(sandbox: Sandbox, workspace: pathlib.Path) -> None:
    result = sandbox.run("import os\nopen('spawned', 'w').write('x')\n")
    assert result.status is RunStatus.REJECTED
    assert result.exit_code is None
    assert result.violations
    assert result.to_dict()["violations"][0]["rule_id"].startswith("AG1")
    assert not (workspace / "spawned").exists()


def test_source_too_large_is_rejected(workspace: pathlib.Path) -> None:
    policy = astguard.Policy().with_limits(max_source_bytes=100)
    with Sandbox(workspace, require=(), policy=policy) as sb:
        result = sb.run("x = 1\n" * 50)
    assert result.status is RunStatus.REJECTED
    violation = result.to_dict()["violations"][0]
    assert violation["rule_id"] == "PS001"
    assert violation["message"] == "source is 300 bytes; the limit is 100"


def _source_of(size: int) -> str:
    """A script of exactly ``size`` bytes of UTF-8 that prints ``ran``."""
    head = "print('ran')\n#"
    source = head + "é" * ((size - len(head) - 1) // 2)
    source += "a" * (size - len(source.encode()) - 1) + "\n"
    assert len(source.encode()) == size
    return source


def test_source_limit_is_astguards_one_number(sandbox: Sandbox) -> None:
    limit = astguard.DEFAULT_MAX_SOURCE_BYTES
    assert limit == 200_000
    result = sandbox.run(_source_of(limit))
    assert (result.status, result.stdout) == (RunStatus.OK, "ran\n"), result.stderr
    result = sandbox.run(_source_of(limit + 1))
    assert result.status is RunStatus.REJECTED
    assert result.exit_code is None
    assert [v["rule_id"] for v in result.to_dict()["violations"]] == ["PS001"]
    assert result.to_dict()["violations"][0]["message"] == (
        "source is 200001 bytes; the limit is 200000"
    )
    # The limit is not a field of Limits any more (it was 256 KiB there).
    with pytest.raises(TypeError, match="source_bytes"):
        Limits(source_bytes=262_144)  # type: ignore[call-arg]


def test_system_exit_codes(sandbox: Sandbox) -> None:
    assert sandbox.run("raise SystemExit(0)").status is RunStatus.OK
    result = sandbox.run("raise SystemExit(3)")
    assert (result.status, result.exit_code) == (RunStatus.ERROR, 3)
    # No code is reserved: each is the user's own (the parent decides from its own channel).
    for code in (120, 121, 255):
        result = sandbox.run(f"raise SystemExit({code})")
        assert (result.status, result.exit_code) == (RunStatus.ERROR, code)
    result = sandbox.run("raise SystemExit('bye')")
    assert (result.status, result.exit_code, result.stderr) == (RunStatus.ERROR, 1, "bye\n")


def test_printed_status_cannot_forge(sandbox: Sandbox) -> None:
    result = sandbox.run("print('{\"status\": \"ok\"}')\nraise RuntimeError('x')")
    assert result.status is RunStatus.ERROR


def test_undecodable_output_is_backslash_escaped(sandbox: Sandbox) -> None:
    result = sandbox.run("print('\\udcff', end='')")
    # The child writes UTF-8 with surrogateescape disabled: the error is the user's.
    assert result.status in (RunStatus.OK, RunStatus.ERROR)
    result = sandbox.run("print(bytes([0xff, 0x41]).decode('latin-1'))")
    assert result.stdout == "\u00ffA\n"


def test_timeout(sandbox: Sandbox) -> None:
    started = time.monotonic()
    result = sandbox.run("while True:\n    pass\n", timeout=1)
    assert result.status is RunStatus.TIMEOUT
    assert result.signal == 9
    assert time.monotonic() - started < 5


def test_timeout_is_capped_by_limits(workspace: pathlib.Path) -> None:
    sb = Sandbox(workspace, require=(), limits=Limits(timeout_s=1))
    started = time.monotonic()
    result = sb.run("import time\ntime.sleep(30)", timeout=60)
    assert result.status is RunStatus.TIMEOUT
    assert time.monotonic() - started < 6


def test_bad_arguments(sandbox: Sandbox, workspace: pathlib.Path) -> None:
    with pytest.raises(TypeError, match="code must be a str"):
        sandbox.run(b"print(1)")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        sandbox.run("pass", timeout=-1)
    with pytest.raises(ValueError, match="timeout"):
        sandbox.run("pass", timeout=float("nan"))
    with pytest.raises(ValueError, match="unknown layer"):
        Sandbox(workspace, require=("bwrap",))
    with pytest.raises(TypeError, match="require"):
        Sandbox(workspace, require="landlock")
    with pytest.raises(ValueError, match="not an existing directory"):
        Sandbox(workspace / "missing")
    with pytest.raises(ValueError, match="root directory"):
        Sandbox("/")
    with pytest.raises(ValueError, match="home directory"):
        Sandbox(pathlib.Path.home())
    with pytest.raises(ValueError, match="system directory"):
        Sandbox("/usr/lib")
    with pytest.raises(ValueError, match="dotted module name"):
        Sandbox(workspace, extra_modules=["os; rm"])
    with pytest.raises(ValueError, match="not installed"):
        Sandbox(workspace, extra_modules=["no_such_module_xyz"])
    with pytest.raises(ValueError, match="does not exist"):
        Sandbox(workspace, extra_read_paths=[workspace / "nope"])


def test_workspace_overlapping_interpreter_refused() -> None:
    stdlib = pathlib.Path(json.__file__).parent
    with pytest.raises(ValueError, match=r"overlaps|system directory"):
        Sandbox(stdlib)


def test_closed_sandbox_refuses(workspace: pathlib.Path) -> None:
    sb = Sandbox(workspace, require=())
    sb.close()
    with pytest.raises(SandboxClosedError, match="closed"):
        sb.run("print(1)")


def test_kernel_layers_off_requires_explicit_opt_out(workspace: pathlib.Path) -> None:
    sb = Sandbox(workspace, kernel_layers=False)
    with pytest.raises(IsolationUnavailable) as info:
        sb.run("print(1)")
    assert set(info.value.missing) == {"landlock", "seccomp"}
    assert "require=()" in str(info.value)
    assert "kernel_layers=False" in str(info.value)


def test_python_only_mode_runs(python_only: Sandbox) -> None:
    result = python_only.run("print('hi')")
    assert result.status is RunStatus.OK
    assert "landlock" not in result.layers
    assert "seccomp" not in result.layers
    assert "rlimits" in result.layers
    caps = python_only.capabilities()
    assert caps.layer("landlock").active is False
    assert caps.layer("rlimits").active is True


def test_capabilities_report(sandbox: Sandbox) -> None:
    caps = sandbox.capabilities()
    data = caps.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["layers"]["rlimits"]["details"]["open_files"] == 64
    assert data["layers"]["landlock"]["available"] is (KERNEL.landlock_abi > 0)
    assert data["layers"]["landlock"]["details"]["abi"] == KERNEL.landlock_abi
    assert data["layers"]["seccomp"]["available"] is KERNEL.seccomp
    assert "killpg" in data["tree_kill"]
    with pytest.raises(KeyError):
        caps.layer("nope")


@needs_kernel
def test_capabilities_kernel_details(sandbox: Sandbox) -> None:
    caps = sandbox.capabilities()
    ll = caps.layer("landlock")
    assert ll.active
    assert "make_fifo" not in next(
        r["rights"] for r in ll.details["rules"] if r["path"] == sandbox.workspace
    )
    sc = caps.layer("seccomp")
    assert sc.active
    assert any("clone3" in rule for rule in sc.details["rules"])
    assert caps.missing_required == ()


def test_result_to_dict_roundtrip() -> None:
    violation = astguard.Violation("X", "m", line=1, col=2, end_line=3, end_col=4)
    result = RunResult(RunStatus.REJECTED, violations=(violation,))
    assert result.to_dict()["violations"] == [
        {"rule_id": "X", "message": "m", "line": 1, "col": 2, "end_line": 3, "end_col": 4}
    ]
    assert result.to_dict()["status"] == "rejected"


def test_arun(sandbox: Sandbox) -> None:
    async def main() -> list[RunResult]:
        return list(await asyncio.gather(sandbox.arun("print(7)"), sandbox.arun("print(8)")))

    results = asyncio.run(main())
    assert [r.stdout for r in results] == ["7\n", "8\n"]


def test_arun_does_not_block_loop(sandbox: Sandbox) -> None:
    async def main() -> tuple[RunResult, int]:
        ticks = 0
        task = asyncio.ensure_future(sandbox.arun("import time\ntime.sleep(0.5)\nprint('done')"))
        while not task.done():
            ticks += 1
            await asyncio.sleep(0.01)
        return await task, ticks

    result, ticks = asyncio.run(main())
    assert result.stdout == "done\n"
    assert ticks >= 10


def test_arun_cancel_kills_tree(sandbox: Sandbox, workspace: pathlib.Path) -> None:
    code = "import time\nwhile True:\n    time.sleep(0.05)\n"

    async def main() -> None:
        task = asyncio.ensure_future(sandbox.arun(code, timeout=30))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    started = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - started < 5
    # The sandbox is usable again, and the run left nothing behind.
    assert sandbox.run("print(1)").stdout == "1\n"


def test_kernel_verification_demotes_a_layer_that_cannot_apply(
    monkeypatch: pytest.MonkeyPatch, workspace: pathlib.Path
) -> None:
    from pysandbox import Layer, _landlock, _probe
    from pysandbox._probe import probe_kernel

    real = probe_kernel()
    if real.landlock_abi < 1:
        pytest.skip("Landlock unavailable")
    roots = Sandbox(workspace, require=())._read_roots
    assert _probe._probe_child(Layer.LANDLOCK, real, roots) is None
    # Rights the kernel does not know: it refuses the ruleset in the probe child, and the
    # report says so instead of every run failing later.
    monkeypatch.setattr(_landlock, "fs_rights_for_abi", lambda abi: (1 << 40) - 1)
    problem = _probe._probe_child(Layer.LANDLOCK, real, roots)
    assert problem is not None
    assert problem.startswith("the probe child could not apply it: landlock_create_ruleset")


def test_arun_cancel_while_queued_returns_promptly(workspace: pathlib.Path) -> None:
    sandbox = Sandbox(workspace, require=_REQUIRE, max_concurrent_runs=1)

    async def main() -> float:
        first = asyncio.ensure_future(sandbox.arun("import time\ntime.sleep(6)", timeout=10))
        await asyncio.sleep(0.3)
        queued = asyncio.ensure_future(sandbox.arun("print('never')"))
        await asyncio.sleep(0.2)
        started = time.monotonic()
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        elapsed = time.monotonic() - started
        result = await first
        assert result.status is RunStatus.OK
        return elapsed

    try:
        assert asyncio.run(main()) < 3.0  # not queued behind the 6 s run
    finally:
        sandbox.close()


_REQUIRE = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()

# Each run announces itself with a file, then waits (up to its time-out) for the other's file.
_RENDEZVOUS = """
import time
open("{me}", "w").close()
while True:
    try:
        open("{other}").close()
        break
    except FileNotFoundError:
        time.sleep(0.01)
print("met")
"""


def _pair(sandbox: Sandbox, timeout: float) -> list[RunResult]:
    async def main() -> list[RunResult]:
        one = sandbox.arun(_RENDEZVOUS.format(me="a", other="b"), timeout=timeout)
        two = sandbox.arun(_RENDEZVOUS.format(me="b", other="a"), timeout=timeout)
        return list(await asyncio.gather(one, two))

    return asyncio.run(main())


def test_runs_of_one_sandbox_execute_at_once(workspace: pathlib.Path) -> None:
    with Sandbox(workspace, require=_REQUIRE, max_concurrent_runs=2) as sandbox:
        assert sandbox.max_concurrent_runs == 2
        results = _pair(sandbox, timeout=30)
    # Each run could only end after the other had started: they overlapped.
    assert [r.status for r in results] == [RunStatus.OK, RunStatus.OK], results
    assert [r.stdout for r in results] == ["met\n", "met\n"]


def test_max_concurrent_runs_bounds_the_overlap(workspace: pathlib.Path) -> None:
    with Sandbox(workspace, require=_REQUIRE, max_concurrent_runs=1) as sandbox:
        results = _pair(sandbox, timeout=1.5)
    # One at a time: the first waits for a file nobody can write until it has ended.
    statuses = sorted(r.status.value for r in results)
    assert statuses == ["ok", "timeout"], results


def test_max_concurrent_runs_is_validated(workspace: pathlib.Path) -> None:
    assert Sandbox(workspace, require=()).max_concurrent_runs == (os.cpu_count() or 1)
    with pytest.raises(ValueError, match="at least 1"):
        Sandbox(workspace, max_concurrent_runs=0)
    with pytest.raises(TypeError, match="max_concurrent_runs"):
        Sandbox(workspace, max_concurrent_runs=1.5)  # type: ignore[arg-type]


def test_extra_modules_are_importable_and_nothing_beside_them(workspace: pathlib.Path) -> None:
    import astguard

    require = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()
    sb = Sandbox(workspace, require=require, extra_modules=["astguard"])
    result = sb.run("import astguard\nprint(astguard.check('import os').ok)")
    assert (result.status, result.stdout) == (RunStatus.OK, "False\n"), result.stderr
    package_dir = pathlib.Path(astguard.__file__).resolve().parent
    outside = [
        p
        for p in (*package_dir.parent.iterdir(), *package_dir.parent.parent.iterdir())
        if p.is_file()
    ]
    for path in outside[:3]:
        result = sb.run(f"print(open({str(path)!r}).read()[:10])")
        assert result.status is RunStatus.ERROR, path
        assert "PermissionError" in result.stderr
    plain = Sandbox(workspace, require=require)
    assert plain.run("import astguard").status is RunStatus.REJECTED
