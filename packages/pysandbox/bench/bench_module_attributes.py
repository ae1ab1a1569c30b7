"""Cost of judging attribute chains from allowed modules by the value they reach (issue 14 item 3).

Two designs were measured:

- static tables (chosen): astguard refuses, at check time, a module attribute that is another
  standard module (``typing.operator``, ``shlex.os``) and the known dangerous names; nothing is
  added to the run.
- a run-time check limited to attribute loads on module objects: the parent would compile every
  ``a.b`` load as a call to a guard that, when ``a`` is a module, judges the value (a module off
  the allow-list, the builtins module, a frame or code object). Every attribute load pays for the
  call, since which objects are modules is only known at run time.

Prints the per-load cost of both forms of an attribute load and the slowdown of an
attribute-heavy loop; timings are noisy, so only ratios are printed, and it exits 0 unless it
crashes. Run with the package installed: ``python bench/bench_module_attributes.py``.
"""

from __future__ import annotations

import gc
import math
import sys
import time
from collections.abc import Callable
from types import CodeType, FrameType, ModuleType
from typing import Any

LOADS = 200_000
ROUNDS = 7


def make_guard(allowed: frozenset[str]) -> Callable[[Any, str], Any]:
    """The run-time alternative: one call per attribute load, value judged on modules."""
    module_type = ModuleType
    refused_types = (FrameType, CodeType)
    builtins_module = sys.modules["builtins"]

    def load(obj: Any, name: str) -> Any:
        value = getattr(obj, name)
        if type(obj) is module_type:
            if type(value) is module_type and (
                value is builtins_module or value.__name__.partition(".")[0] not in allowed
            ):
                raise AttributeError(f"{obj.__name__}.{name} is a module off the allow-list")
            if isinstance(value, refused_types):
                raise AttributeError(f"{obj.__name__}.{name} is refused")
        return value

    return load


def plain(n: int) -> float:
    total = 0.0
    for _ in range(n):
        total += math.pi + math.e
    return total


def guarded(n: int, load: Callable[[Any, str], Any]) -> float:
    total = 0.0
    for _ in range(n):
        total += load(math, "pi") + load(math, "e")
    return total


def best(fn: Callable[[], object]) -> float:
    times = []
    for _ in range(ROUNDS):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    load = make_guard(frozenset({"math", "json", "typing"}))
    assert guarded(10, load) == plain(10)
    t_plain = best(lambda: plain(LOADS))
    t_guard = best(lambda: guarded(LOADS, load))
    per_plain = t_plain / (2 * LOADS) * 1e9
    per_guard = t_guard / (2 * LOADS) * 1e9
    print(f"attribute load on a module, plain:   {per_plain:6.1f} ns")
    print(f"attribute load on a module, guarded: {per_guard:6.1f} ns")
    print(f"run-time check slowdown of an attribute-heavy loop: {t_guard / t_plain:.1f}x")
    print("static tables (chosen): 0 ns per load at run time (check time: astguard's bench)")


if __name__ == "__main__":
    main()
