"""Percentiles shared by the benchmark scripts of this folder (run as ``python bench/x.py``)."""

from __future__ import annotations

import statistics

__all__ = ["describe"]


def describe(samples: list[float]) -> tuple[float, float, float]:
    """Return ``(min, p50, p95)`` of ``samples`` (milliseconds in, milliseconds out)."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return ordered[0], statistics.median(ordered), p95
