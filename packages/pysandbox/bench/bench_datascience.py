"""The data-science profile's latency: a pandas script warm with the stack preloaded vs spawn.

Run with the package and the data-science stack installed (the ``bench`` dependency group),
from the package folder::

    python bench/bench_datascience.py [--warm-runs 30] [--spawn-runs 6]

Prints min / p50 / p95 (ms) of a small pandas script (read a CSV, group, aggregate) in warm
execution with numpy, pandas and matplotlib preloaded in the zygote, and in spawn execution
(every run imports the stack), with the ratio against the target (warm p50 <= 0.05x spawn);
then the per-run cost of ``import numpy, pandas`` with the preload (a warm run of the import
minus a warm run of ``pass``; target <= 10 ms p50). Both kernel layers are required, as the
profile requires them. Always exits 0 unless it crashes; without the stack it says so.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import statistics
import sys
import tempfile
import time

from pysandbox import DATASCIENCE, ExecutionMode, Limits, Sandbox

STACK = DATASCIENCE.extra_modules
PRELOAD = DATASCIENCE.preload
WARM_VS_SPAWN = 0.05
IMPORT_MS = 10.0
PANDAS_SCRIPT = """
import io
import pandas as pd
csv = "region,amount\\nnorth,3\\nsouth,5\\nnorth,4\\neast,1\\nsouth,2\\n"
frame = pd.read_csv(io.StringIO(csv))
totals = frame.groupby("region")["amount"].sum().sort_index()
print(", ".join(f"{k}={v}" for k, v in totals.items()))
"""
EXPECTED = "east=1, north=7, south=7\n"


def measure(sandbox: Sandbox, code: str, runs: int, expected: str | None = None) -> list[float]:
    """Wall-clock milliseconds of ``runs`` runs of ``code`` (each checked to succeed)."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        result = sandbox.run(code)
        samples.append((time.perf_counter() - start) * 1000.0)
        if result.status.value != "ok" or (expected is not None and result.stdout != expected):
            raise SystemExit(f"bench_datascience: a run failed: {result.status} {result.stderr}")
    return samples


def describe(name: str, samples: list[float]) -> float:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    p50 = statistics.median(ordered)
    print(f"{name:<46} min {ordered[0]:8.2f}  p50 {p50:8.2f}  p95 {p95:8.2f} ms")
    return p50


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warm-runs", type=int, default=30)
    parser.add_argument("--spawn-runs", type=int, default=6)
    args = parser.parse_args()
    missing = [name for name in STACK if importlib.util.find_spec(name) is None]
    if missing:
        print(f"bench_datascience: skipped, the stack is not installed ({missing})")
        return
    limits = dataclasses.replace(Limits(), memory_bytes=DATASCIENCE.memory_bytes, timeout_s=60.0)
    kwargs = {"limits": limits, "require": DATASCIENCE.required_layers, "extra_modules": STACK}
    with tempfile.TemporaryDirectory(prefix="pysandbox-bench-ds-") as tmp:
        warm = Sandbox(tmp, execution=ExecutionMode.WARM, preload=PRELOAD, **kwargs)  # type: ignore[arg-type]
        spawn = Sandbox(tmp, execution=ExecutionMode.SPAWN, **kwargs)  # type: ignore[arg-type]
        try:
            layers = ", ".join(warm.capabilities().active_layers)
            print(f"python {sys.version.split()[0]}; layers: {layers}")
            measure(warm, PANDAS_SCRIPT, 3, EXPECTED)  # the zygote's start and preload
            measure(spawn, PANDAS_SCRIPT, 1, EXPECTED)
            warm_p50 = describe(
                "pandas script, warm with preload",
                measure(warm, PANDAS_SCRIPT, args.warm_runs, EXPECTED),
            )
            spawn_p50 = describe(
                "pandas script, spawn", measure(spawn, PANDAS_SCRIPT, args.spawn_runs, EXPECTED)
            )
            ratio = warm_p50 / spawn_p50
            verdict = "meets" if ratio <= WARM_VS_SPAWN else "misses"
            print(f"  warm / spawn p50 {ratio:.3f}x (target <= {WARM_VS_SPAWN}x: {verdict})")
            base = describe("pass, warm with preload", measure(warm, "pass", args.warm_runs))
            imported = describe(
                "import numpy, pandas, warm with preload",
                measure(warm, "import numpy, pandas", args.warm_runs),
            )
            cost = imported - base
            verdict = "meets" if cost <= IMPORT_MS else "misses"
            target = f"target <= {IMPORT_MS} ms: {verdict}"
            print(f"  per-run cost of the import p50 {cost:.2f} ms ({target})")
        finally:
            warm.close()
            spawn.close()


if __name__ == "__main__":
    main()
