"""Round-trip latency of ``Sandbox.run("print(1)")`` against a bare interpreter spawn.

Run with the package installed, from the package folder::

    python bench/bench_latency.py [--runs 200]

Prints min / p50 / p95 (ms) of both and the p50 ratio against the target (<= 1.5x). Then warm
execution (``execution="warm"``, the fork server): ``print(1)`` against the bare spawn (target
warm p50 <= 0.35x bare) and a small json+csv+statistics script against spawn mode (target warm
p50 <= 0.25x spawn). Always exits 0 unless it crashes.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

from _stats import describe

from pysandbox import Sandbox

TARGET = 1.5
WARM_VS_BARE = 0.35
WARM_VS_SPAWN_IMPORTS = 0.25
IMPORT_SCRIPT = """
import csv, io, json, statistics
rows = list(csv.reader(io.StringIO("a,b\\n1,2\\n3,5\\n")))
values = [int(r[1]) for r in rows[1:]]
print(json.dumps({"mean": statistics.mean(values), "n": len(values)}))
"""


def measure(fn: object, runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append((time.perf_counter() - start) * 1000.0)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pysandbox-bench-") as tmp:
        sandbox = Sandbox(tmp, require=(), execution="spawn")
        layers = sandbox.capabilities().active_layers
        result = sandbox.run("print(1)")
        assert result.stdout == "1\n", result

        def bare() -> None:
            subprocess.run(
                [sys.executable, "-I", "-S", "-c", "print(1)"],
                capture_output=True,
                check=True,
                cwd=tmp,
            )

        last_cpu = [0.0]

        def sandboxed() -> None:
            last_cpu[0] = sandbox.run("print(1)").cpu_time_ms

        bare()
        # Interleave so that machine noise hits both alike. CPU time (child user+system from
        # rusage, plus the parent's own CPU for the sandbox) is far less sensitive to load.
        bare_samples: list[float] = []
        box_samples: list[float] = []
        bare_cpu: list[float] = []
        box_cpu: list[float] = []
        for _ in range(args.runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            bare_samples += measure(bare, 1)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            bare_cpu.append(
                (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000.0
            )
            parent = time.process_time()
            box_samples += measure(sandboxed, 1)
            parent = time.process_time() - parent
            box_cpu.append(last_cpu[0] + parent * 1000.0)
    b = describe(bare_samples)
    s = describe(box_samples)
    print(f"python {sys.version.split()[0]}; layers: {', '.join(layers)}")
    print(f"runs: {args.runs}")
    print(f"bare  python -I -S -c 'print(1)'  min {b[0]:7.2f}  p50 {b[1]:7.2f}  p95 {b[2]:7.2f} ms")
    print(f"Sandbox.run('print(1)')           min {s[0]:7.2f}  p50 {s[1]:7.2f}  p95 {s[2]:7.2f} ms")
    ratio = s[1] / b[1]
    verdict = "meets" if ratio <= TARGET else "misses"
    print(f"p50 ratio {ratio:.2f}x (target <= {TARGET}x: {verdict}); min ratio {s[0] / b[0]:.2f}x")
    bc = describe(bare_cpu)
    sc = describe(box_cpu)
    print(
        f"CPU ms (child + sandbox parent)  bare p50 {bc[1]:.2f}  sandbox p50 {sc[1]:.2f}  "
        f"ratio {sc[1] / bc[1]:.2f}x"
    )
    warm_section(tmp_root=None, runs=args.runs, bare_p50=b[1], spawn_p50=s[1])
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


def warm_section(tmp_root: str | None, runs: int, bare_p50: float, spawn_p50: float) -> None:
    """Warm mode: ``print(1)`` and the import script, interleaved with spawn mode."""
    with (
        tempfile.TemporaryDirectory(prefix="pysandbox-bench-", dir=tmp_root) as tmp_w,
        tempfile.TemporaryDirectory(prefix="pysandbox-bench-", dir=tmp_root) as tmp_s,
    ):
        warm = Sandbox(tmp_w, require=(), execution="warm")
        spawn = Sandbox(tmp_s, require=(), execution="spawn")
        try:
            result = warm.run("print(1)")
            assert result.stdout == "1\n", result
            execution = dict(warm.capabilities().execution)
            print(f"warm execution: {execution}")
            warm_print = measure(lambda: warm.run("print(1)"), runs)
            expected = warm.run(IMPORT_SCRIPT).stdout
            assert expected == spawn.run(IMPORT_SCRIPT).stdout, expected
            warm_imp: list[float] = []
            spawn_imp: list[float] = []
            for _ in range(runs):
                warm_imp += measure(lambda: warm.run(IMPORT_SCRIPT), 1)
                spawn_imp += measure(lambda: spawn.run(IMPORT_SCRIPT), 1)
        finally:
            warm.close()
            spawn.close()
    w = describe(warm_print)
    print(f"warm Sandbox.run('print(1)')      min {w[0]:7.2f}  p50 {w[1]:7.2f}  p95 {w[2]:7.2f} ms")
    ratio = w[1] / bare_p50
    verdict = "meets" if ratio <= WARM_VS_BARE else "misses"
    print(
        f"warm p50 / bare p50 {ratio:.2f}x (target <= {WARM_VS_BARE}x: {verdict}); "
        f"warm p50 / spawn p50 {w[1] / spawn_p50:.2f}x"
    )
    wi = describe(warm_imp)
    si = describe(spawn_imp)
    print(
        f"import script, warm               min {wi[0]:7.2f}  p50 {wi[1]:7.2f}  p95 {wi[2]:7.2f} ms"
    )
    print(
        f"import script, spawn              min {si[0]:7.2f}  p50 {si[1]:7.2f}  p95 {si[2]:7.2f} ms"
    )
    ratio = wi[1] / si[1]
    verdict = "meets" if ratio <= WARM_VS_SPAWN_IMPORTS else "misses"
    print(
        f"import script warm p50 / spawn p50 {ratio:.2f}x "
        f"(target <= {WARM_VS_SPAWN_IMPORTS}x: {verdict})"
    )


if __name__ == "__main__":
    main()
