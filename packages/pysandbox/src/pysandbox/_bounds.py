"""Bounds declared next to a frozen dataclass's fields, checked once in ``__post_init__``.

A field declared with :func:`bounded` carries its :class:`Bound` in its metadata;
:func:`check_fields` checks every such field of an instance, and :func:`bound_of` lets a caller
(the MCP server's settings, documentation) read a bound instead of copying it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Bound", "bound_of", "bounded", "bounded_factory", "check_fields"]

_KEY = "pysandbox.bound"


@dataclass(frozen=True)
class Bound:
    """What a numeric field accepts.

    Attributes:
        kind: ``int`` (an ``int``, never a ``bool``) or ``float`` (an ``int`` or a ``float``,
            never a ``bool``).
        minimum: The smallest value accepted, or ``None``.
        positive: The value must be greater than 0 (and finite).
        maximum: The largest value accepted, or ``None``.
        minimum_text: How a message spells ``minimum`` (``"64 MiB"``), or ``""`` for the number.
    """

    kind: type
    minimum: float | None = None
    positive: bool = False
    maximum: float | None = None
    minimum_text: str = ""

    def check(self, owner: str, name: str, value: object) -> None:
        """Refuse ``value`` for the field ``owner.name`` unless it is within the bound.

        Args:
            owner: The class's name, for the message (``"Limits"``).
            name: The field's name.
            value: The value given.

        Raises:
            TypeError: ``value`` is not of :attr:`kind` (a ``bool`` never is).
            ValueError: ``value`` is not finite, not positive when it must be, or outside
                ``[minimum, maximum]``.
        """
        where = f"{owner}.{name}"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{where} must be a number, not {type(value).__name__}")
        if self.kind is int and not isinstance(value, int):
            raise TypeError(f"{where} must be an int, got {value!r}")
        shown = self.minimum_text or ("" if self.minimum is None else f"{self.minimum:g}")
        if not math.isfinite(value):
            what = "a positive finite number" if self.positive else "a finite number"
            least = f" of at least {shown}" if self.minimum is not None else ""
            raise ValueError(f"{where} must be {what}{least}, got {value!r}")
        if self.positive and value <= 0:
            raise ValueError(f"{where} must be a positive finite number, got {value!r}")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"{where} must be at least {shown}, got {value!r}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"{where} must be at most {self.maximum:g}, got {value!r}")


def bounded(default: Any, bound: Bound) -> Any:
    """A dataclass field with ``default`` and ``bound`` (checked by :func:`check_fields`).

    Args:
        default: The field's default.
        bound: What the field accepts.

    Returns:
        The ``dataclasses.field`` to assign in the class body.
    """
    return dataclasses.field(default=default, metadata={_KEY: bound})


def bounded_factory(factory: Callable[[], Any], bound: Bound) -> Any:
    """A dataclass field whose default ``factory()`` makes, with ``bound``.

    Args:
        factory: Returns the field's default (called per instance).
        bound: What the field accepts.

    Returns:
        The ``dataclasses.field`` to assign in the class body.
    """
    return dataclasses.field(default_factory=factory, metadata={_KEY: bound})


def check_fields(instance: object) -> None:
    """Check every bounded field of the dataclass ``instance``.

    Args:
        instance: A dataclass instance whose fields were declared with :func:`bounded`.

    Raises:
        TypeError: A field's value has the wrong type.
        ValueError: A field's value is outside its bound.
    """
    owner = type(instance).__name__
    for field in dataclasses.fields(instance):  # type: ignore[arg-type]
        bound = field.metadata.get(_KEY)
        if bound is not None:
            bound.check(owner, field.name, getattr(instance, field.name))


def bound_of(cls: type, name: str) -> Bound:
    """The bound declared for the field ``name`` of the dataclass ``cls``.

    Args:
        cls: A dataclass (:class:`~pysandbox.Limits`, :class:`~pysandbox.SandboxConfig`).
        name: One of its bounded fields.

    Returns:
        The field's bound.

    Raises:
        KeyError: ``cls`` has no bounded field ``name``.
    """
    for field in dataclasses.fields(cls):
        if field.name == name and _KEY in field.metadata:
            bound: Bound = field.metadata[_KEY]
            return bound
    raise KeyError(f"{cls.__name__} has no bounded field {name!r}")
