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
        "bareNumber",
        "missingValues",
    }
)
# The keys of each type's options (Table Schema v1 and Data Package v2), with their meaning.
_TYPE_OPTIONS: dict[str, frozenset[str]] = {
    "number": frozenset({"decimalChar", "groupChar", "bareNumber"}),
    "integer": frozenset({"groupChar", "bareNumber"}),
    "boolean": frozenset({"trueValues", "falseValues"}),
}
_DIGITS = frozenset("0123456789")
# strptime directives a date/time/datetime format may use (others are refused, not ignored).
_STRPTIME_DIRECTIVES = frozenset("aAbBcdfGHIjmMpSuUVwWxXyYzZ%")
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
        missing: The field's own ``missingValues`` (Data Package v2), overriding the
            schema-level list; ``None`` when the field has none.
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
    missing: frozenset[str] | None = None


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
    _check_options(type_name, extra, where)
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
        group, bare = _number_options(extra, where, decimal=None)
        if not group and bare:
            return _parse_int, _charset_then("0-9+-", int)

        def parse_int_local(value: str) -> int:
            plain = value if bare else _unbare(value, "")
            if group:
                plain = _ungroup(plain, group, value)
            return _parse_int(plain)

        return parse_int_local, _map_or_none(parse_int_local)
    if type_name == "number":
        decimal = extra.get("decimalChar", ".")
        group, bare = _number_options(extra, where, decimal=decimal)
        if decimal == "." and not group and bare:
            return _parse_number, _charset_then("0-9eE+.-", float)

        def parse_local(value: str) -> float:
            if value in _NUMBER_WORDS:
                return _NUMBER_WORDS[value]
            plain = value if bare else _unbare(value, decimal)
            if group:
                plain = _ungroup(plain, group, value)
            if decimal != "." and "." in plain:
                raise ValueError(value)
            return _parse_number(plain.replace(decimal, "."))

        return parse_local, _map_or_none(parse_local)
    if type_name == "boolean":
        trues = extra.get("trueValues", _DEFAULT_TRUE)
        falses = extra.get("falseValues", _DEFAULT_FALSE)
        if not _strings(trues) or not _strings(falses):
            raise ValueError(f"{where}: trueValues and falseValues must be lists of strings")
        both = sorted(set(trues) & set(falses))
        if both:
            raise ValueError(f"{where}: {both[0]!r} is in both trueValues and falseValues")
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
        pattern = fmt.removeprefix("fmt:")  # Table Schema v1's deprecated "fmt:" prefix
        if "%" not in pattern:
            raise ValueError(
                f"{where}: {type_name} format must be 'default', 'any' or a strptime pattern "
                f"such as '%d/%m/%Y', not {fmt!r}"
            )
        _check_strptime(pattern, where)
        custom = _strptime_parser(pattern, type_name)
        return custom, _map_or_none(custom)
    if type_name == "year":
        return _parse_year, _charset_then("0-9", int, 4)
    raise AssertionError(type_name)  # pragma: no cover - callers check the type name


def _check_options(type_name: str, extra: Mapping[str, Any], where: str) -> None:
    """Refuse a type option on a type it does not apply to (it could not be honoured)."""
    for other, keys in _TYPE_OPTIONS.items():
        if other == type_name:
            continue
        for key in sorted(keys - _TYPE_OPTIONS.get(type_name, frozenset())):
            if key in extra:
                applies = [t for t, k in _TYPE_OPTIONS.items() if key in k]
                raise ValueError(
                    f"{where}: {key} applies to type {' and '.join(applies)}, not {type_name}"
                )


def _number_options(extra: Mapping[str, Any], where: str, *, decimal: object) -> tuple[str, bool]:
    """Check ``decimalChar``, ``groupChar``, ``bareNumber``; return ``(groupChar, bareNumber)``."""
    group = extra.get("groupChar", "")
    bare = extra.get("bareNumber", True)
    if decimal is not None and (
        not isinstance(decimal, str) or len(decimal) != 1 or decimal in "0123456789+-eE"
    ):
        raise ValueError(f"{where}: decimalChar must be one character other than a digit, sign, e")
    if not isinstance(group, str) or set(group) & set("0123456789+-eE"):
        raise ValueError(f"{where}: groupChar must be a string without digits, signs or e")
    if group and decimal is not None and decimal in group:
        raise ValueError(f"{where}: groupChar and decimalChar must differ")
    if not isinstance(bare, bool):
        raise ValueError(f"{where}: bareNumber must be true or false")
    return group, bare


def _ungroup(text: str, group: str, original: str) -> str:
    """Drop group separators; each must stand between two digits (``1 234``, not ``1  234``)."""
    parts = text.split(group)
    if len(parts) > 1 and not all(
        (i == 0 or part[:1] in _DIGITS) and (i == len(parts) - 1 or part[-1:] in _DIGITS)
        for i, part in enumerate(parts)
    ):
        raise ValueError(original)
    return "".join(parts)


def _unbare(value: str, decimal: str) -> str:
    """Strip the text around a number, for ``bareNumber: false`` (``€95``, ``95%``, ``EUR 1,5``)."""
    start, end = 0, len(value)
    leading = _DIGITS | {"+", "-", decimal}
    while start < end and value[start] not in leading:
        start += 1
    while end > start and value[end - 1] not in _DIGITS:
        end -= 1
    return value[start:end]


def _check_strptime(pattern: str, where: str) -> None:
    i = 0
    while i < len(pattern):
        if pattern[i] == "%":
            directive = pattern[i + 1 : i + 2]
            if directive not in _STRPTIME_DIRECTIVES or not directive:
                raise ValueError(
                    f"{where}: format {pattern!r} has an unknown directive %{directive}; "
                    f"allowed: {' '.join('%' + d for d in sorted(_STRPTIME_DIRECTIVES))}"
                )
            i += 2
        else:
            i += 1


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
    if "missingValues" in declared:
        values["missing"] = _missing_values(declared["missingValues"], where)
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


def _missing_values(value: object, where: str) -> frozenset[str]:
    """``missingValues``: strings (v1), or objects ``{"value": ..., "label": ...}`` (v2)."""
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{where}: missingValues must be a list")
    texts: list[str] = []
    for item in value:
        if isinstance(item, Mapping) and isinstance(item.get("value"), str):
            texts.append(item["value"])
        elif isinstance(item, str):
            texts.append(item)
        else:
            raise ValueError(
                f"{where}: missingValues must hold strings or objects with a string 'value'"
            )
    return frozenset(texts)


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
        missing = _missing_values(table_schema.get("missingValues", ("",)), "table_schema")
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
