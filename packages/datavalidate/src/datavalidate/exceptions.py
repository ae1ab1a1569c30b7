"""The exception tree of ``datavalidate``, rooted in :class:`DataValidateError`.

Validation *findings* (an instance that does not match its schema, a CSV cell of the wrong type)
are never exceptions: they are entries of a report. Exceptions mean the request itself cannot be
carried out: the schema is invalid, names something unknown, or needs something we refuse to do.
Caller mistakes in arguments (a wrong type, an unknown CSV type name) are ``TypeError`` /
``ValueError`` as documented on each function.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "DataValidateError",
    "JsonNumberError",
    "SchemaError",
    "UnknownSchemaError",
    "UnresolvableReferenceError",
    "UnsupportedPatternError",
]


class DataValidateError(Exception):
    """Base class of every exception raised by ``datavalidate``."""


class SchemaError(DataValidateError):
    """A JSON Schema is invalid, or cannot be used safely.

    Raised before any instance is checked.

    Attributes:
        message: What is wrong, as a sentence.
        location: Where in the schema, as an RFC 6901 JSON Pointer (``""`` is the root).
        keyword: The metaschema keyword that failed (``"type"``, ``"pattern"``...), if known.
    """

    def __init__(self, message: str, *, location: str = "", keyword: str | None = None) -> None:
        super().__init__(message, location, keyword)
        self.message = message
        self.location = location
        self.keyword = keyword

    def __str__(self) -> str:
        where = self.location or "the root"
        return f"invalid schema at {where}: {self.message}"


class UnsupportedPatternError(SchemaError):
    r"""A ``pattern`` (or ``patternProperties`` key, or CSV ``pattern``) is refused.

    Patterns run on RE2, a linear-time engine. Syntax that needs backtracking (back-references
    such as ``\1``, look-ahead ``(?=``, look-behind ``(?<=``) or an automaton larger than the
    memory budget cannot be evaluated safely and is refused instead of risking a hang.

    Attributes:
        pattern: The refused pattern (shortened to 200 characters).
        reason: The engine's explanation.
    """

    def __init__(self, pattern: str, reason: str, *, location: str = "") -> None:
        short = pattern if len(pattern) <= 200 else pattern[:199] + "\u2026"
        super().__init__(
            f"pattern {short!r} is not supported by the linear-time regex engine (RE2): {reason}",
            location=location,
            keyword="pattern",
        )
        self.pattern = short
        self.reason = reason


class UnresolvableReferenceError(SchemaError):
    """A ``$ref`` points at a schema that is not registered.

    Nothing is ever fetched: an ``http``, ``https`` or ``file`` reference must be registered
    first with :meth:`datavalidate.SchemaRegistry.register` under that URI.

    Attributes:
        ref: The reference as written or resolved (an absolute URI when known).
        remote: Whether the reference needed a fetch (a scheme other than a local ``$id``).
    """

    def __init__(self, ref: str, *, remote: bool, detail: str = "") -> None:
        if remote:
            message = (
                f"$ref {ref!r} is not registered and remote references are never fetched; "
                "register that schema with SchemaRegistry.register(name, schema, uri=...)"
            )
        else:
            message = f"$ref {ref!r} cannot be resolved" + (f": {detail}" if detail else "")
        super().__init__(message, keyword="$ref")
        self.ref = ref
        self.remote = remote


class JsonNumberError(DataValidateError, ValueError):
    """JSON text holds a number that cannot be kept exactly.

    ``NaN``, ``Infinity``, a literal outside the range of a 64-bit float (``-1e999``,
    ``1e-400``), or an integer of more than 50,000 digits.

    Attributes:
        literal: The number as written (shortened to 40 characters).
    """

    def __init__(self, literal: str, reason: str) -> None:
        self.literal = literal if len(literal) <= 40 else literal[:39] + "\u2026"
        super().__init__(f"the JSON number {self.literal} is refused: {reason}")


class UnknownSchemaError(DataValidateError, LookupError):
    """A schema name is not registered.

    Attributes:
        name: The name that was asked for.
        known: The registered names, sorted.
    """

    def __init__(self, name: str, known: Iterable[str]) -> None:
        self.name = name
        self.known = tuple(sorted(known))
        super().__init__(name, self.known)

    def __str__(self) -> str:
        names = ", ".join(self.known) or "(none)"
        return f"unknown schema {self.name!r}; registered schemas: {names}"
