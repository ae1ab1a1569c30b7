"""A session call in the library (issue 28): ``x += 1`` through ``Session.run`` and the registry.

Run with the package installed, from the package folder::

    python bench/bench_sessions.py [--calls 300]

Opens a warm sandbox (no ready children) over an empty temporary workspace and one session,
then times ``Session.run("x += 1")`` (the astguard check, the resume, the confirmed stop, the
workspace measurement and the result) and the same call through ``SessionRegistry.run`` (the
handle's lookup and the memory budget's ``/proc`` reads on top). Prints the p50s against the
target (<= 0.5 ms) and a bare ``python -I -S -c pass`` spawn. Always exits 0.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _stats import describe

from pysandbox import Sandbox, SessionRegistry

TARGET_MS = 0.5
WARMUP = 30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as name,
        Sandbox(Path(name), execution="warm", ready_children=0) as sandbox,
    ):
        direct: list[float] = []
        via: list[float] = []
        bare: list[float] = []
        with sandbox.open_session("bench") as session:
            session.run("x = 0")
            for i in range(WARMUP + args.calls):
                start = time.perf_counter()
                session.run("x += 1")
                if i >= WARMUP:
                    direct.append((time.perf_counter() - start) * 1000.0)
        registry = SessionRegistry(
            sandbox,
            max_sessions=1,
            max_per_principal=1,
            memory_budget_bytes=1 << 30,
            idle_timeout_s=600.0,
            max_lifetime_s=3600.0,
        )
        sid = registry.create("bench").session_id
        registry.run(sid, "bench", "x = 0")
        for i in range(WARMUP + args.calls):
            start = time.perf_counter()
            registry.run(sid, "bench", "x += 1")
            if i >= WARMUP:
                via.append((time.perf_counter() - start) * 1000.0)
            if i % 10 == 0:
                start = time.perf_counter()
                subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True)
                bare.append((time.perf_counter() - start) * 1000.0)
        registry.close_all()
    for label, samples in (("Session.run('x += 1')", direct), ("SessionRegistry.run", via)):
        low, mid, high = describe(samples)
        verdict = "meets" if mid <= TARGET_MS else "misses"
        print(
            f"{label:<24} min {low:6.3f}  p50 {mid:6.3f}  p95 {high:6.3f} ms "
            f"(target p50 <= {TARGET_MS} ms: {verdict})"
        )
    print(f"{'bare python -I -S':<24} p50 {describe(bare)[1]:7.2f} ms")


if __name__ == "__main__":
    main()
