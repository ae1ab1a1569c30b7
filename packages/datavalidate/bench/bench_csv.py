"""CSV benchmark: rows per second of ``validate_csv`` on a 1,000,000-row, 8-column file.

Compared, in one run, with iterating the same file with bare ``csv.reader`` and with
frictionless-py validating it against the same Table Schema (if installed: the ``bench``
dependency group). Targets (issue 5): at least 5x frictionless, at most 4x slower than
``csv.reader``, peak memory growth under 50 MB. Prints the numbers; exits 0 unless it crashes.

    python bench/bench_csv.py [ROWS]
"""

from __future__ import annotations

import csv
import datetime as dt
import gc
import pathlib
import random
import sys
import tempfile
import time
import tracemalloc
from typing import Any

from datavalidate import validate_csv

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
COUNTRIES = ["DE", "FR", "GB", "JP", "US", "BR", "IN", "NG"]
TABLE_SCHEMA: dict[str, Any] = {
    "fields": [
        {"name": "id", "type": "integer", "constraints": {"required": True, "minimum": 1}},
        {
            "name": "name",
            "type": "string",
            "constraints": {"required": True, "minLength": 1, "maxLength": 40},
        },
        # A fixed-width pattern: in the backtracking-free subset, so matched by Python's re.
        {"name": "code", "type": "string", "constraints": {"pattern": "[A-Z]{2}-[0-9]{4}"}},
        {"name": "age", "type": "integer", "constraints": {"minimum": 0, "maximum": 150}},
        {"name": "score", "type": "number", "constraints": {"minimum": 0, "maximum": 100}},
        {"name": "active", "type": "boolean"},
        {"name": "joined", "type": "date", "constraints": {"minimum": "2000-01-01"}},
        {"name": "country", "type": "string", "constraints": {"enum": COUNTRIES}},
    ]
}


def generate(path: pathlib.Path, rows: int) -> None:
    rng = random.Random(5)
    start = dt.date(2000, 1, 1)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([f["name"] for f in TABLE_SCHEMA["fields"]])
        for i in range(1, rows + 1):
            writer.writerow(
                [
                    i,
                    f"user {rng.randrange(10**6)}",
                    f"{rng.choice(COUNTRIES)}-{rng.randrange(10000):04d}",
                    rng.randrange(0, 100),
                    f"{rng.random() * 100:.2f}",
                    rng.choice(("true", "false")),
                    (start + dt.timedelta(days=rng.randrange(9000))).isoformat(),
                    rng.choice(COUNTRIES),
                ]
            )


def best_of(runs: int, action: Any) -> float:
    """Lowest CPU time (seconds) of ``runs`` calls: other work on the machine adds noise."""
    best = float("inf")
    for _ in range(runs):
        started = time.process_time()
        action()
        best = min(best, time.process_time() - started)
    return best


def bare_reader(path: pathlib.Path) -> None:
    with path.open(newline="", encoding="utf-8") as handle:
        for _ in csv.reader(handle):
            pass


def ours(path: pathlib.Path, schema: dict[str, Any]) -> None:
    report = validate_csv(path, table_schema=schema)
    assert report.valid, report.errors[:3]
    assert report.row_count == ROWS


def peak_growth(path: pathlib.Path) -> int:
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    validate_csv(path, table_schema=TABLE_SCHEMA)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def frictionless_time(path: pathlib.Path) -> float | None:
    try:
        import frictionless
    except ImportError:
        return None
    started = time.process_time()
    resource = frictionless.Resource(
        path=path.name,
        basepath=str(path.parent),
        schema=frictionless.Schema.from_descriptor(TABLE_SCHEMA),
    )
    report = frictionless.validate(resource, limit_errors=100)
    elapsed = time.process_time() - started
    if not report.valid:
        print("  (frictionless reported errors:", report.flatten(["type", "message"])[:2], ")")
    return elapsed


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main() -> None:
    def with_pattern(pattern: str | None) -> dict[str, Any]:
        fields = []
        for field in TABLE_SCHEMA["fields"]:
            constraints = dict(field.get("constraints", {}))
            if field["name"] == "code":
                constraints.pop("pattern")
                if pattern is not None:
                    constraints["pattern"] = pattern
            fields.append({**field, "constraints": constraints})
        return {"fields": fields}

    re2_schema = with_pattern("[A-Z]+-[0-9]+")  # variable repetition: runs on RE2
    no_pattern = with_pattern(None)
    with tempfile.TemporaryDirectory(prefix="dv-bench-") as tmp:
        path = pathlib.Path(tmp) / "data.csv"
        generate(path, ROWS)
        size_mb = path.stat().st_size / 1e6
        print(f"CSV benchmark: {ROWS:,} rows x 8 columns, {size_mb:.0f} MB (generation not timed)")
        print("  CPU seconds, best of 3 (frictionless: 1 run)")
        reader_s = best_of(3, lambda: bare_reader(path))
        ours_s = best_of(3, lambda: ours(path, TABLE_SCHEMA))
        ours_np_s = best_of(3, lambda: ours(path, no_pattern))
        ours_re2_s = best_of(3, lambda: ours(path, re2_schema))
        peak = peak_growth(path)
        fl_s = frictionless_time(path)
        print(f"  csv.reader alone            {ROWS / reader_s:>12,.0f} rows/s  ({reader_s:.2f} s)")
        print(f"  datavalidate                {ROWS / ours_s:>12,.0f} rows/s  ({ours_s:.2f} s)")
        for label, seconds in (("no pattern", ours_np_s), ("RE2 pattern", ours_re2_s)):
            print(f"  datavalidate, {label:13s} {ROWS / seconds:>12,.0f} rows/s  ({seconds:.2f} s)")
        if fl_s is None:
            print("  frictionless-py             unavailable (not installed: `bench` group)")
        else:
            print(f"  frictionless-py             {ROWS / fl_s:>12,.0f} rows/s  ({fl_s:.2f} s)")
        slower = ours_s / reader_s
        print(f"  slowdown vs csv.reader      {slower:.2f}x (target <= 4x: {verdict(slower <= 4)})")
        print(f"    without the pattern       {ours_np_s / reader_s:.2f}x")
        print(f"    with a pattern on RE2     {ours_re2_s / reader_s:.2f}x")
        if fl_s is not None:
            speedup = fl_s / ours_s
            met = verdict(speedup >= 5)
            print(f"  speed-up vs frictionless    {speedup:.1f}x (target >= 5x: {met})")
        mb = peak / 2**20
        print(
            f"  peak memory growth          {mb:.1f} MiB (target < 50 MB: {verdict(peak < 50e6)})"
        )


if __name__ == "__main__":
    main()
