"""Round-trip latency of ``Sandbox.run("print(1)")`` against a bare interpreter spawn.

Run with the package installed, from the package folder::

    python bench/bench_latency.py [--runs 200]

Prints min / p50 / p95 (ms) of both and the p50 ratio against the target (<= 1.5x). Always
exits 0 unless it crashes.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

from pysandbox import Sandbox

TARGET = 1.5


def measure(fn: object, runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append((time.perf_counter() - start) * 1000.0)
    return samples


def describe(samples: list[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return ordered[0], statistics.median(ordered), p95


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pysandbox-bench-") as tmp:
        sandbox = Sandbox(tmp, require=())
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

        def sandboxed() -> None:
            sandbox.run("print(1)")

        bare()
        # Interleave so that machine noise hits both alike.
        bare_samples: list[float] = []
        box_samples: list[float] = []
        for _ in range(args.runs):
            bare_samples += measure(bare, 1)
            box_samples += measure(sandboxed, 1)
    b = describe(bare_samples)
    s = describe(box_samples)
    print(f"python {sys.version.split()[0]}; layers: {', '.join(layers)}")
    print(f"runs: {args.runs}")
    print(f"bare  python -I -S -c 'print(1)'  min {b[0]:7.2f}  p50 {b[1]:7.2f}  p95 {b[2]:7.2f} ms")
    print(f"Sandbox.run('print(1)')           min {s[0]:7.2f}  p50 {s[1]:7.2f}  p95 {s[2]:7.2f} ms")
    ratio = s[1] / b[1]
    verdict = "meets" if ratio <= TARGET else "misses"
    print(f"p50 ratio {ratio:.2f}x (target <= {TARGET}x: {verdict})")


if __name__ == "__main__":
    main()
