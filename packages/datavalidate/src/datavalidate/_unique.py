"""``unique`` and ``primaryKey`` in bounded memory: keyed digests of logical values.

Table Schema compares *logical* values (``1`` equals ``1.0``; ``017`` equals ``17`` in an
integer column), so each value is first normalised to bytes (:func:`logical_bytes`), then
remembered as a 16-byte BLAKE2b digest keyed with a random key drawn per validation: a file
cannot be crafted to collide, and memory per remembered value is a fixed ~100 bytes whatever
the text's length. Past a cap on remembered values the check stops with an error instead of
growing without bound.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import os
from collections.abc import Sequence

__all__ = ["DigestSet", "UniqueBudget", "logical_bytes"]

_DIGEST_SIZE = 16


def logical_bytes(value: object) -> bytes:
    """The normalised logical value as bytes: equal logical values give equal bytes.

    Numbers: an integral float is its integer (``1.0`` -> ``1``); other floats their shortest
    ``repr``; NaN equals NaN. Dates and times: ISO 8601. Strings: UTF-8 (lone surrogates kept).
    A type tag keeps ``"1"`` (text) apart from ``1`` (number).
    """
    if isinstance(value, bool):
        return b"b1" if value else b"b0"
    if isinstance(value, int):
        return b"n" + str(value).encode()
    if isinstance(value, float):
        if math.isnan(value):
            return b"nnan"
        if math.isinf(value) or not value.is_integer():
            return b"n" + repr(value).encode()
        return b"n" + str(int(value)).encode()
    if isinstance(value, str):
        return b"s" + value.encode("utf-8", "surrogatepass")
    if isinstance(value, (dt.date, dt.time)):  # datetime is a date
        return b"t" + value.isoformat().encode()
    if isinstance(value, tuple):
        parts = [logical_bytes(item) for item in value]
        return b"k" + b"".join(len(p).to_bytes(4, "big") + p for p in parts)
    raise TypeError(f"no logical value for {type(value).__name__}")  # pragma: no cover


class UniqueBudget:
    """How many more digests one validation may remember (shared by its unique checks).

    Args:
        limit: The cap; at least 1.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.remaining = limit
        self.key = os.urandom(16)


class DigestSet:
    """Keyed digests of the logical values seen so far in one column (or primary key)."""

    def __init__(self, budget: UniqueBudget) -> None:
        self.budget = budget
        self.digests: set[bytes] = set()
        self.exhausted = False

    def _digest(self, value: object) -> bytes:
        return hashlib.blake2b(
            logical_bytes(value), digest_size=_DIGEST_SIZE, key=self.budget.key
        ).digest()

    def add_all(self, values: Sequence[object]) -> bool:
        """Remember a batch at once, or change nothing.

        Returns:
            ``True`` when no value repeats (within the batch or an earlier one) and the budget
            allows them all; ``False`` otherwise (the caller then goes value by value).
        """
        if self.exhausted:
            return True
        digest = self._digest
        batch = {digest(v) for v in values}
        if (
            len(batch) != len(values)
            or len(batch) > self.budget.remaining
            or not self.digests.isdisjoint(batch)
        ):
            return False
        self.digests |= batch
        self.budget.remaining -= len(batch)
        return True

    def add(self, value: object) -> bool | None:
        """Remember one value.

        Returns:
            ``True`` if new, ``False`` if it repeats, ``None`` when the budget has just run out
            (the check stops: later calls return ``True`` without remembering anything).
        """
        if self.exhausted:
            return True
        digest = self._digest(value)
        if digest in self.digests:
            return False
        if self.budget.remaining <= 0:
            self.exhausted = True
            self.digests = set()
            return None
        self.digests.add(digest)
        self.budget.remaining -= 1
        return True
