"""Time astguard.check on a ~300-line ordinary script against ast.parse alone of the same source.

Target: check() under 3x ast.parse (check includes its own parse). Prints the measurements and
the ratio; exits 0 unless it crashes. Run with the package installed, cwd = packages/astguard.
"""

from __future__ import annotations

import ast
import gc
import statistics
import time
from collections.abc import Callable

import astguard

TARGET_RATIO = 3.0

_BLOCK = """
import csv
import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(order=True)
class Item{n}:
    sku: str
    name: str = field(compare=False)
    quantity: int = field(default=0, compare=False)
    price: float = field(default=0.0, compare=False)
    tags: list[str] = field(default_factory=list, compare=False)

    def __post_init__(self) -> None:
        if self.quantity < 0:
            raise ValueError(f"negative quantity for {{self.sku}}")
        self.name = self.name.strip().title()

    @property
    def value(self) -> float:
        return self.quantity * self.price

    def __repr__(self) -> str:
        return f"{{type(self).__name__}}({{self.sku!r}}, {{self.quantity}})"


def load_rows_{n}(path: str) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def summarize_{n}(rows: list[dict[str, str]]) -> dict[str, float]:
    totals: defaultdict[str, float] = defaultdict(float)
    for row in rows:
        try:
            totals[row["region"]] += int(row["units"]) * float(row["unit_price"])
        except (KeyError, ValueError) as err:
            print("skip", row, err.__class__.__name__)
    return dict(totals)


def report_{n}(totals: dict[str, float]) -> str:
    grand = sum(totals.values()) or 1.0
    lines = [f"{{'Region':<8}}{{'Revenue':>12}}{{'Share':>8}}"]
    for region, amount in sorted(totals.items(), key=lambda kv: kv[1], reverse=True):
        lines.append(f"{{region:<8}}{{amount:>12,.2f}}{{amount / grand:>8.1%}}")
    words = Counter(w for line in lines for w in line.split() if len(w) > 2)
    lines.append("top: " + ", ".join(w for w, _ in words.most_common(3)))
    lines.append("norm: {{0:.3f}}".format(math.sqrt(sum(v * v for v in totals.values()))))
    return "\\n".join(lines)


async def gather_{n}(values: list[int]) -> list[int]:
    out = [v * v async for v in _agen_{n}(values)]
    return [x for x in out if x % 2 == 0]


async def _agen_{n}(values: list[int]):
    for v in values:
        yield v


def main_{n}() -> None:
    out = Path("out")
    out.mkdir(exist_ok=True)
    rows = load_rows_{n}("sales.csv") if Path("sales.csv").exists() else []
    text = report_{n}(summarize_{n}(rows))
    (out / "report_{n}.json").write_text(json.dumps({{"report": text}}, indent=2))
    match text.split():
        case [first, *rest] if rest:
            print(first, len(rest))
        case _:
            print("empty")
"""


def build_script(target_lines: int = 300) -> str:
    """Concatenate numbered copies of an ordinary block until the script has ~300 lines."""
    parts: list[str] = []
    n = 0
    while sum(p.count("\n") for p in parts) < target_lines:
        parts.append(_BLOCK.format(n=n))
        n += 1
    return "".join(parts) + '\nif __name__ == "__main__":\n    main_0()\n'


def sample(fn: Callable[[], object], number: int) -> float:
    """Mean time of one call over ``number`` calls, in seconds, with the GC paused (timeit)."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - start) / number
    finally:
        gc.enable()


def measure(source: str, *, repeat: int = 15, number: int = 10) -> tuple[list[float], list[float]]:
    """Interleave parse and check samples so that machine load hits both alike."""
    parse_samples: list[float] = []
    check_samples: list[float] = []
    for _ in range(repeat):
        parse_samples.append(sample(lambda: ast.parse(source), number))
        check_samples.append(sample(lambda: astguard.check(source), number))
    return parse_samples, check_samples


def main() -> None:
    source = build_script()
    lines = source.count("\n")
    result = astguard.check(source)
    if not result.ok:
        raise SystemExit(f"benchmark script refused:\n{result}")
    nodes = sum(1 for _ in ast.walk(ast.parse(source)))
    for _ in range(3):  # warm up
        ast.parse(source)
        astguard.check(source)
    parse_samples, check_samples = measure(source)
    parse_s, check_s = min(parse_samples), min(check_samples)
    ratio = check_s / parse_s
    median_ratio = statistics.median(
        c / p for p, c in zip(parse_samples, check_samples, strict=True)
    )
    # The median of interleaved pairs is robust to machine load; the best-of ratio is shown too.
    verdict = "OK" if median_ratio < TARGET_RATIO else "OVER TARGET"
    print(f"script: {lines} lines, {len(source.encode())} bytes, {nodes} AST nodes")
    print(f"ast.parse:      {parse_s * 1e3:8.3f} ms (best of {len(parse_samples)})")
    print(
        f"astguard.check: {check_s * 1e3:8.3f} ms "
        f"(parse + single pass, best of {len(check_samples)})"
    )
    print(
        f"ratio check/parse: {ratio:.2f}x best, {median_ratio:.2f}x median of pairs "
        f"(target < {TARGET_RATIO:.0f}x) {verdict}"
    )


if __name__ == "__main__":
    main()
