"""Ready children: warm ``Sandbox.run("print(1)")`` with and without the pool, against a bare spawn.

Run with the package installed, from the package folder::

    python bench/bench_pool.py [--runs 200]

Interleaves a bare ``python -I -S -c 'print(1)'`` spawn, a warm run without ready children
(``ready_children=0``: the zygote forks and the child confines itself after the request) and
a warm run with the pool (``ready_children=2``: the child was forked and confined before the
request). Prints min / p50 / p95 (ms) of each and the pool's p50 against the bare spawn
(target <= 0.10x). Always exits 0 unless it crashes.
"""

from __future__ import annotations

import argparse
import inspect
import os
import subprocess
import sys
import tempfile
import time

from _stats import describe

from pysandbox import Sandbox

POOL_VS_BARE = 0.10


def timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return (time.perf_counter() - start) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    has_pool = "ready_children" in inspect.signature(Sandbox).parameters
    with (
        tempfile.TemporaryDirectory(prefix="pysandbox-bench-") as tmp_a,
        tempfile.TemporaryDirectory(prefix="pysandbox-bench-") as tmp_b,
    ):
        plain_kw = {"ready_children": 0} if has_pool else {}
        plain = Sandbox(tmp_a, require=(), execution="warm", **plain_kw)
        pool = Sandbox(tmp_b, require=(), execution="warm", ready_children=2) if has_pool else None
        try:
            for box in (plain, pool):
                if box is not None:
                    for _ in range(3):
                        assert box.run("print(1)").stdout == "1\n"

            def bare() -> None:
                subprocess.run(
                    [sys.executable, "-I", "-S", "-c", "print(1)"],
                    capture_output=True,
                    check=True,
                    cwd=tmp_a,
                )

            samples: dict[str, list[float]] = {"bare": [], "warm": [], "pool": []}
            for _ in range(args.runs):
                samples["bare"].append(timed(bare))
                samples["warm"].append(timed(lambda: plain.run("print(1)")))
                if pool is not None:
                    samples["pool"].append(timed(lambda: pool.run("print(1)")))
            layers = plain.capabilities().active_layers
        finally:
            plain.close()
            if pool is not None:
                pool.close()
    print(f"python {sys.version.split()[0]}; layers: {', '.join(layers)}; runs: {args.runs}")
    b = describe(samples["bare"])
    print(
        f"bare  python -I -S -c 'print(1)'     min {b[0]:7.2f}  p50 {b[1]:7.2f}  p95 {b[2]:7.2f} ms"
    )
    w = describe(samples["warm"])
    print(
        f"warm, no ready children            min {w[0]:7.2f}  p50 {w[1]:7.2f}  p95 {w[2]:7.2f} ms"
    )
    print(f"  warm p50 / bare p50 {w[1] / b[1]:.3f}x")
    if samples["pool"]:
        p = describe(samples["pool"])
        print(f"warm, ready children (2)  min {p[0]:7.2f}  p50 {p[1]:7.2f}  p95 {p[2]:7.2f} ms")
        ratio = p[1] / b[1]
        verdict = "meets" if ratio <= POOL_VS_BARE else "misses"
        print(f"  pool p50 / bare p50 {ratio:.3f}x (target <= {POOL_VS_BARE}x: {verdict})")
        print(f"  pool p50 / warm p50 {p[1] / w[1]:.3f}x")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
