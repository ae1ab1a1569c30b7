"""Table Schema field types and constraints, compiled into per-column checkers.

Each column check runs on a batch of values at once: a fast path made of C-level operations
(``map`` over a compiled regex, ``min``/``max``, set operations) decides that the whole batch is
fine, and only a batch with a problem is walked value by value to produce errors.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from datavalidate._formats import CSV_ONLY_FORMATS, FORMATS
from datavalidate._regex import SafePattern, compile_pattern
from datavalidate.exceptions import UnsupportedPatternError

__all__ = [
    "CONSTRAINTS",
    "INFERRED_ORDER",
    "TYPES",
    "FieldSpec",
    "Issue",
    "cast_value",
    "compile_fields",
    "type_accepts_all",
]

#: Field types, as in Frictionless Table Schema.
TYPES = ("string", "integer", "number", "boolean", "date", "time", "datetime", "year")
#: Constraint names, as in Frictionless Table Schema.
CONSTRAINTS = (
    "required",
    "unique",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "enum",
)
#: Order in which an undeclared column's type is inferred (first type all values fit).
INFERRED_ORDER = ("integer", "number", "boolean", "date", "datetime", "time")
_FIELD_KEYS = frozenset(
    {
        "name",
        "type",
        "format",
        "constraints",
        "title",
        "description",
        "example",
        "rdfType",
        "trueValues",
        "falseValues",
        "decimalChar",
        "groupChar",
    }
)
_ORDERED_TYPES = frozenset({"integer", "number", "date", "time", "datetime", "year"})
_MAX_INT_DIGITS = 4300
_DEFAULT_TRUE = ("true", "True", "TRUE", "1")
_DEFAULT_FALSE = ("false", "False", "FALSE", "0")

# Fixed, unambiguous patterns of our own (no nested quantifiers): safe for Python's re.
_INT = re.compile(r"[+-]?[0-9]+\Z").match
_NUM = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z").match
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z").match
_TIME = re.compile(
    r"([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6})[0-9]*)?(Z|[+-][0-9]{2}:?[0-9]{2})?\Z"
).match
_DATETIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]{1,6})[0-9]*)?(Z|[+-][0-9]{2}:?[0-9]{2})?\Z"
).match
_YEAR = re.compile(r"[0-9]{4}\Z").match
_NUMBER_WORDS = {"NaN": math.nan, "INF": math.inf, "+INF": math.inf, "-INF": -math.inf}


@dataclass(frozen=True)
class Issue:
    """One problem with one value: ``(position in batch, code, message)``."""

    index: int
    code: str
    message: str


def _offset(text: str | None) -> dt.timedelta:
    if not text or text == "Z":
        return dt.timedelta(0)
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return sign * dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))


def _parse_time(value: str) -> dt.time:
    found = _TIME(value)
    if not found:
        raise ValueError(value)
    hour, minute, second, fraction, _ = found.groups()
    micro = int((fraction or "0").ljust(6, "0"))
    return dt.time(int(hour), int(minute), int(second), micro)


def _parse_datetime(value: str) -> dt.datetime:
    found = _DATETIME(value)
    if not found:
        raise ValueError(value)
    year, month, day, hour, minute, second, fraction, zone = found.groups()
    micro = int((fraction or "0").ljust(6, "0"))
    naive = dt.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micro)
    return naive - _offset(zone)


def _parse_date(value: str) -> dt.date:
    if not _DATE(value):
        raise ValueError(value)
    return dt.date.fromisoformat(value)


def _parse_year(value: str) -> int:
    if not _YEAR(value):
        raise ValueError(value)
    return int(value)


def _parse_int(value: str) -> int:
    if not _INT(value) or len(value) > _MAX_INT_DIGITS:
        raise ValueError(value)
    return int(value)


def _parse_number(value: str) -> float:
    word = _NUMBER_WORDS.get(value)
    if word is not None:
        return word
    if not _NUM(value):
        raise ValueError(value)
    return float(value)


def _strptime_parser(fmt: str, kind: str) -> Callable[[str], Any]:
    def parse(value: str) -> Any:
        parsed = dt.datetime.strptime(value, fmt)
        if kind == "date":
            return parsed.date()
        if kind == "time":
            return parsed.time()
        if parsed.tzinfo is not None:
            return parsed.replace(tzinfo=None) - (parsed.utcoffset() or dt.timedelta(0))
        return parsed

    return parse


def _any_date(value: str) -> dt.date:
    for fmt in ("%Y-%m-%d", "%Y/%m/%d", "%d/%m/%Y", "%d.%m.%Y", "%Y%m%d", "%d %b %Y", "%b %d %Y"):
        try:
            return dt.datetime.strptime(value, fmt).date()
        except ValueError:
            continue
    raise ValueError(value)


@dataclass(frozen=True)
class FieldSpec:
    """A declared column: its type, how to parse it, and its constraints.

    Attributes:
        name: Column name (matched against the header).
        type: One of :data:`TYPES`.
        format: The Table Schema ``format`` (``"default"``, ``"any"`` or a strptime pattern).
        parse: Text -> typed value; raises ``ValueError`` for text that is not of the type.
        required: Whether a missing value is an error.
        unique: Whether values must not repeat.
        minimum: Lowest allowed typed value, if any.
        maximum: Highest allowed typed value, if any.
        min_length: Fewest characters allowed, if any.
        max_length: Most characters allowed, if any.
        pattern: RE2 pattern the whole text must match, if any.
        enum: Allowed typed values, if restricted.
        batch_parse: Texts of a batch -> their typed values, or ``None`` when any text is not
            of the type; built from C-level operations. ``None`` when the type has none.
        description: Short text naming the expected type and format, for messages.
    """

    name: str
    type: str
    format: str
    parse: Callable[[str], Any]
    required: bool = False
    unique: bool = False
    minimum: Any = None
    maximum: Any = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: SafePattern | None = None
    enum: frozenset[Any] | None = None
    batch_parse: _BatchParse | None = None
    description: str = ""


_BatchParse = Callable[[Sequence[str]], Sequence[Any] | None]
_Parsers = tuple[Callable[[str], Any], _BatchParse | None]
_OLD_INT = sys.version_info < (3, 11)  # no int() digit limit before 3.11


def _charset_then(
    outside: str, convert: Callable[[str], Any], width: int | None = None
) -> _BatchParse:
    """Batch parser: every character in the allowed set, then a C-level conversion."""
    bad = re.compile(f"[^{outside}]").search

    def parse(values: Sequence[str]) -> Sequence[Any] | None:
        if bad("".join(values)):
            return None
        if width is not None and set(map(len, values)) != {width}:
            return None
        if convert is int and _OLD_INT and max(map(len, values), default=0) > _MAX_INT_DIGITS:
            return None
        try:
            return list(map(convert, values))
        except (ValueError, OverflowError):
            return None

    return parse


def _map_or_none(parse: Callable[[str], Any]) -> _BatchParse:
    def batch(values: Sequence[str]) -> Sequence[Any] | None:
        try:
            return list(map(parse, values))
        except (ValueError, KeyError, OverflowError):
            return None

    return batch


def _same(values: Sequence[str]) -> Sequence[str]:
    return values


def _parser_for(type_name: str, fmt: str, extra: Mapping[str, Any], where: str) -> _Parsers:
    """Return the parser and the batch parser of a type/format pair."""
    if type_name == "string":
        if fmt == "default":
            return str, _same
        if fmt not in _STRING_FORMATS:
            raise ValueError(
                f"{where}: unknown string format {fmt!r}; allowed: default, "
                f"{', '.join(_STRING_FORMATS)}"
            )
        check = _string_parser(fmt, _STRING_FORMATS[fmt])
        return check, _map_or_none(check)
    if type_name == "integer":
        return _parse_int, _charset_then("0-9+-", int)
    if type_name == "number":
        decimal, group = extra.get("decimalChar", "."), extra.get("groupChar", "")
        if not isinstance(decimal, str) or not isinstance(group, str) or len(decimal) != 1:
            raise ValueError(f"{where}: decimalChar must be one character, groupChar a string")
        if decimal == "." and not group:
            return _parse_number, _charset_then("0-9eE+.-", float)

        def parse_local(value: str) -> float:
            plain = value.replace(group, "") if group else value
            if decimal != "." and "." in plain:
                raise ValueError(value)
            return _parse_number(plain.replace(decimal, "."))

        return parse_local, _map_or_none(parse_local)
    if type_name == "boolean":
        trues = extra.get("trueValues", _DEFAULT_TRUE)
        falses = extra.get("falseValues", _DEFAULT_FALSE)
        if not _strings(trues) or not _strings(falses):
            raise ValueError(f"{where}: trueValues and falseValues must be lists of strings")
        table = {**dict.fromkeys(falses, False), **dict.fromkeys(trues, True)}
        allowed = frozenset(table)

        def parse_bool(value: str) -> bool:
            try:
                return table[value]
            except KeyError:
                raise ValueError(value) from None

        def batch_bool(values: Sequence[str]) -> Sequence[Any] | None:
            return list(map(table.__getitem__, values)) if allowed.issuperset(values) else None

        return parse_bool, batch_bool
    if type_name in ("date", "time", "datetime"):
        if fmt == "default":
            default_parsers = {
                "date": _parse_date,
                "time": _parse_time,
                "datetime": _parse_datetime,
            }
            parse_default = default_parsers[type_name]
            if type_name == "date":
                return parse_default, _charset_then("0-9-", dt.date.fromisoformat, 10)
            return parse_default, _map_or_none(parse_default)
        if fmt == "any":
            any_parse = {"date": _any_date, "time": _parse_time, "datetime": _parse_datetime}
            return any_parse[type_name], _map_or_none(any_parse[type_name])
        if "%" not in fmt:
            raise ValueError(
                f"{where}: {type_name} format must be 'default', 'any' or a strptime pattern "
                f"such as '%d/%m/%Y', not {fmt!r}"
            )
        custom = _strptime_parser(fmt, type_name)
        return custom, _map_or_none(custom)
    if type_name == "year":
        return _parse_year, _charset_then("0-9", int, 4)
    raise AssertionError(type_name)  # pragma: no cover - callers check the type name


def _strings(value: object) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


#: Table Schema string formats, each the same strict checker as the JSON Schema format.
_STRING_FORMATS: dict[str, Callable[[str], bool]] = {
    "email": FORMATS["email"],
    "uri": FORMATS["uri"],
    "uuid": FORMATS["uuid"],
    **CSV_ONLY_FORMATS,
}


def _string_parser(name: str, check: Callable[[str], bool]) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if not check(value):
            raise ValueError(value)
        return value

    return parse


def cast_value(spec: FieldSpec, value: str) -> Any:
    """Parse ``value`` as the field's type; raises ``ValueError`` when it is not of the type."""
    return spec.parse(value)


def type_accepts_all(type_name: str, values: Sequence[str]) -> bool:
    """Whether every value is of ``type_name`` in its default format (used for inference)."""
    _, batch = _DEFAULT_PARSERS[type_name]
    return batch is not None and batch(values) is not None


_DEFAULT_PARSERS = {name: _parser_for(name, "default", {}, "") for name in TYPES}


def _bound(spec_type: str, parse: Callable[[str], Any], value: object, what: str) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a {spec_type}, not a boolean")
    if spec_type in ("integer", "year") and isinstance(value, int):
        return value
    if spec_type == "number" and isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return parse(value)
        except ValueError:
            pass
    raise ValueError(f"{what} {value!r} is not a valid {spec_type}")


def _length(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a non-negative integer, not {value!r}")
    return value


def compile_field(name: str, declared: object, *, where: str) -> FieldSpec:
    """Compile one column declaration (short form, long form or Table Schema field).

    Raises:
        ValueError: Unknown type, format, constraint or key (the message names the allowed
            ones), or a constraint value that does not fit the type.
        UnsupportedPatternError: The ``pattern`` constraint is refused by RE2.
    """
    if isinstance(declared, str):
        declared = {"type": declared}
    if not isinstance(declared, Mapping):
        raise ValueError(f"{where}: a column declaration must be a type name or an object")
    type_name = declared.get("type", "string")
    if type_name not in TYPES:
        raise ValueError(f"{where}: unknown type {type_name!r}; allowed types: {', '.join(TYPES)}")
    fmt = declared.get("format", "default")
    if not isinstance(fmt, str):
        raise ValueError(f"{where}: format must be a string")
    constraints: dict[str, Any] = {}
    nested = declared.get("constraints", {})
    if not isinstance(nested, Mapping):
        raise ValueError(f"{where}: constraints must be an object")
    constraints.update(nested)
    for key, value in declared.items():
        if key in CONSTRAINTS:
            constraints[key] = value
        elif key not in _FIELD_KEYS:
            allowed = sorted(_FIELD_KEYS | set(CONSTRAINTS))
            raise ValueError(f"{where}: unknown key {key!r}; allowed: {', '.join(allowed)}")
    unknown = [key for key in constraints if key not in CONSTRAINTS]
    if unknown:
        raise ValueError(
            f"{where}: unknown constraint {unknown[0]!r}; allowed constraints: "
            f"{', '.join(CONSTRAINTS)}"
        )
    parse, batch_parse = _parser_for(type_name, fmt, declared, where)
    values: dict[str, Any] = {}
    for flag in ("required", "unique"):
        if flag in constraints:
            if not isinstance(constraints[flag], bool):
                raise ValueError(f"{where}: {flag} must be true or false")
            values[flag] = constraints[flag]
    for bound in ("minimum", "maximum"):
        if bound in constraints:
            if type_name not in _ORDERED_TYPES:
                raise ValueError(
                    f"{where}: {bound} applies to {', '.join(sorted(_ORDERED_TYPES))}, "
                    f"not {type_name}"
                )
            values[bound] = _bound(type_name, parse, constraints[bound], f"{where}: {bound}")
    for key, attr in (("minLength", "min_length"), ("maxLength", "max_length")):
        if key in constraints:
            values[attr] = _length(constraints[key], f"{where}: {key}")
    if "pattern" in constraints:
        regex = constraints["pattern"]
        if not isinstance(regex, str):
            raise ValueError(f"{where}: pattern must be a string")
        try:
            values["pattern"] = compile_pattern(regex, ecma=False)
        except UnsupportedPatternError as exc:
            raise UnsupportedPatternError(regex, exc.reason, location=where) from None
    if "enum" in constraints:
        options = constraints["enum"]
        if not isinstance(options, (list, tuple)) or not options:
            raise ValueError(f"{where}: enum must be a non-empty list")
        values["enum"] = frozenset(
            _bound(type_name, parse, option, f"{where}: enum value")
            if type_name != "string"
            else _enum_string(option, where)
            for option in options
        )
    description = type_name if fmt == "default" else f"{type_name} (format {fmt!r})"
    return FieldSpec(
        name=name,
        type=type_name,
        format=fmt,
        parse=parse,
        batch_parse=batch_parse,
        description=description,
        **values,
    )


def _listed(value: object) -> list[object]:
    if not isinstance(value, (list, tuple)):
        raise ValueError("table_schema: primaryKey must be a field name or a list of names")
    return list(value)


def _enum_string(option: object, where: str) -> str:
    if not isinstance(option, str):
        raise ValueError(f"{where}: enum values of a string column must be strings")
    return option


def compile_fields(
    constraints: Mapping[str, Any] | None, table_schema: Mapping[str, Any] | None
) -> tuple[list[FieldSpec], frozenset[str], tuple[str, ...]]:
    """Compile ``constraints`` and/or a Table Schema into field specs.

    Returns:
        The field specs (in declaration order), the missing-value texts, and the primary key
        column names.

    Raises:
        ValueError: Anything unknown or ill-formed, with the allowed names.
        TypeError: ``constraints`` or ``table_schema`` is not a mapping.
    """
    specs: dict[str, FieldSpec] = {}
    missing: Iterable[Any] = ("",)
    primary: tuple[str, ...] = ()
    if table_schema is not None:
        if not isinstance(table_schema, Mapping):
            raise TypeError("table_schema must be a mapping (a Table Schema descriptor)")
        for key in table_schema:
            if key not in ("fields", "missingValues", "primaryKey", "$schema"):
                raise ValueError(
                    f"table_schema: unsupported key {key!r}; supported: fields, missingValues, "
                    "primaryKey"
                )
        fields = table_schema.get("fields", [])
        if not isinstance(fields, list):
            raise ValueError("table_schema: fields must be a list")
        for i, field in enumerate(fields):
            if not isinstance(field, Mapping) or not isinstance(field.get("name"), str):
                raise ValueError(f"table_schema: fields[{i}] must be an object with a 'name'")
            name = field["name"]
            if name in specs:
                raise ValueError(f"table_schema: field {name!r} is declared twice")
            specs[name] = compile_field(name, field, where=f"field {name!r}")
        missing = table_schema.get("missingValues", ("",))
        if not _strings(missing):
            raise ValueError("table_schema: missingValues must be a list of strings")
        pk: object = table_schema.get("primaryKey", ())
        keys: tuple[object, ...] = (pk,) if isinstance(pk, str) else tuple(_listed(pk))
        if not all(isinstance(k, str) and k in specs for k in keys):
            raise ValueError("table_schema: primaryKey must name declared fields")
        primary = tuple(str(k) for k in keys)
    if constraints is not None:
        if not isinstance(constraints, Mapping):
            raise TypeError("constraints must be a mapping of column name -> type or object")
        for name, declared in constraints.items():
            if not isinstance(name, str):
                raise ValueError("constraints: column names must be strings")
            specs[name] = compile_field(name, declared, where=f"column {name!r}")
    return list(specs.values()), frozenset(missing), primary
