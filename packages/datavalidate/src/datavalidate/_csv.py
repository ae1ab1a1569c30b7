"""Streaming CSV validation in the Frictionless Table Schema vocabulary."""

from __future__ import annotations

import codecs
import csv
import encodings
import encodings.aliases
import functools
import io
import itertools
import math
import operator
import os
import pkgutil
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, cast

from datavalidate._csv_fields import (
    INFERRED_ORDER,
    FieldSpec,
    compile_fields,
    type_accepts_all,
)
from datavalidate._report_limits import DEFAULT_MAX_ERRORS, check_max_errors
from datavalidate._unique import DigestSet, UniqueBudget

__all__ = [
    "ERROR_CODES",
    "MAX_ENCODING_CHARS",
    "CsvColumn",
    "CsvError",
    "CsvReport",
    "delimiter_hint",
    "encoding_hint",
    "text_encoding",
    "validate_csv",
]

#: Every error code a :class:`CsvError` can carry (stable; see the README table).
ERROR_CODES = (
    "missing-header",
    "duplicate-header",
    "blank-header",
    "extra-cell",
    "missing-cell",
    "type-error",
    "constraint-error",
    "unique-error",
    "blank-row",
    "encoding-error",
    "nul-byte",
    "unique-limit",
    "source-error",
)
# A NUL character is replaced by this lone surrogate before csv sees it (Python 3.10's csv
# refuses NUL, 3.11+ accepts it): rows holding it are then reported, the same on every version.
_NUL_MARK = "\udc00"
_BATCH_ROWS = 512
_VALUE_CHARS = 80
_SNIFF_CHARS = 64 * 1024
_SNIFF_DELIMITERS = (",", ";", "\t", "|")
_DIALECT_KEYS = ("delimiter", "quoteChar", "doubleQuote", "escapeChar", "skipInitialSpace")
_ERROR_HANDLER = "datavalidate.csv-decode"
_SURROGATE = re.compile("[\udc00-\udcff]")
_first = operator.itemgetter(0)
_LINE_END = re.compile("(\r\n|\r|\n)")
_local = threading.local()


def _decode_error_handler(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    bad = exc.object[exc.start : exc.end]
    _local.decode_errors = getattr(_local, "decode_errors", 0) + len(bad)
    return "".join(chr(0xDC00 + b) for b in bad), exc.end


codecs.register_error(_ERROR_HANDLER, _decode_error_handler)


@dataclass(frozen=True)
class CsvError:
    r"""One finding in a CSV file.

    Attributes:
        code: A stable code from :data:`ERROR_CODES`.
        message: What is wrong, for a person.
        row: The line number where the record starts, as a person counts lines in the file
            (the header is row 1; a quoted field with newlines makes a record span lines).
            ``None`` when the finding is about the whole file.
        column: The column name, when the finding is about one column.
        column_number: The column's position, counting from 1, when known.
        value: The offending text shortened to 80 characters (undecodable bytes shown as
            ``\\xNN``), when there is one.
    """

    code: str
    message: str
    row: int | None = None
    column: str | None = None
    column_number: int | None = None
    value: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the error as JSON-compatible data."""
        return {
            "code": self.code,
            "message": self.message,
            "row": self.row,
            "column": self.column,
            "column_number": self.column_number,
            "value": self.value,
        }


@dataclass(frozen=True)
class CsvColumn:
    """One column of the header.

    Attributes:
        name: The header text.
        number: Position counting from 1.
        type: The declared type, or the type inferred from the values when undeclared
            (the first of integer, number, boolean, date, datetime, time that every
            non-missing value fits, else string).
        declared: Whether ``constraints`` or ``table_schema`` declared the column.
    """

    name: str
    number: int
    type: str
    declared: bool

    def to_dict(self) -> dict[str, Any]:
        """Return the column as JSON-compatible data."""
        return {
            "name": self.name,
            "number": self.number,
            "type": self.type,
            "declared": self.declared,
        }


@dataclass(frozen=True)
class CsvReport:
    """The outcome of :func:`validate_csv`.

    Attributes:
        valid: Whether no error was found.
        row_count: Data records read (the header excluded, blank rows included).
        columns: The header's columns with their types.
        errors: The first ``max_errors`` errors, in file order.
        error_count: How many errors there are in all.
        truncated: Whether there were more errors than ``max_errors``.
        delimiter: The delimiter used (given, sniffed or ``","``).
        warnings: Findings that are not errors but may mean the check was not the one meant:
            no rules were given (only the structure was checked), or the header was read as
            one column that contains ``;``, a tab or ``|`` with the default delimiter.
        error_summary: How many errors of each code each column has, ``{column: {code:
            count}}``, counting every error (also those past ``max_errors``), columns and codes
            in the order first found; findings about no one column (a blank row, an extra
            cell, the whole file) count under the column ``""``.
    """

    valid: bool
    row_count: int
    columns: tuple[CsvColumn, ...]
    errors: tuple[CsvError, ...]
    error_count: int
    truncated: bool
    delimiter: str = ","
    warnings: tuple[str, ...] = ()
    error_summary: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return the report as JSON-compatible data."""
        return {
            "valid": self.valid,
            "row_count": self.row_count,
            "columns": [c.to_dict() for c in self.columns],
            "error_count": self.error_count,
            "truncated": self.truncated,
            "delimiter": self.delimiter,
            "errors": [e.to_dict() for e in self.errors],
            "warnings": list(self.warnings),
            "error_summary": {c: dict(codes) for c, codes in self.error_summary.items()},
        }


#: Delimiters a one-column header read with the default comma may betray: name and spelling.
_BETRAYED_DELIMITERS = {";": ("semicolon", '";"'), "\t": ("tab", '"\\t"'), "|": ("pipe", '"|"')}
#: The warning when neither a Table Schema, column types nor required headers were given.
_NO_RULES_WARNING = (
    "no rules were given (a Table Schema, column types or required headers): only the CSV "
    "structure was checked"
)


def delimiter_hint(column: str, *, give: str = "the delimiter", sniff: str = "sniff it") -> str:
    """The hint for a one-column header that may betray a ``;``, tab or ``|`` delimiter.

    The one home of the sentence: the report's warning uses the default spellings (the MCP
    tool's argument is named ``delimiter``), the command line its flags.

    Args:
        column: The header's only column, as read with the default comma (cleaned).
        give: How to name the delimiter option before its value (``"--delimiter"``).
        sniff: How to name the sniffing alternative (``"--dialect sniff"``).

    Returns:
        The sentence, or ``""`` when the column holds none of those characters.
    """
    for char, (name, spelled) in _BETRAYED_DELIMITERS.items():
        if char in column:
            return (
                f"the header was read as the single column {_show(column)!r} with the "
                f'default delimiter ","; if the file is {name}-separated, give {give} '
                f"{spelled} (or {sniff})"
            )
    return ""


#: The longest encoding name accepted (Python's codec names and aliases are far shorter).
MAX_ENCODING_CHARS = 64
_ENCODING_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._ -]*")
_ENCODING_EXAMPLES = '"utf-8", "latin-1" or "cp1252"'


def text_encoding(name: object, *, option: str = "encoding") -> str:
    """Check an encoding name given by a user; return the codec's canonical name.

    The one home of the rule for every caller (the library's ``encoding``, the command line's
    ``--encoding``, the MCP tool's ``encoding`` argument): at most
    :data:`MAX_ENCODING_CHARS` characters of ASCII letters, digits, ``.``, ``_``, ``-`` and
    spaces, a codec Python knows, and a *text* encoding (bytes to text): codecs such as
    ``rot13``, ``zlib``, ``base64``, ``hex`` and ``undefined`` are refused.

    Args:
        name: The name as given (``"latin-1"``, ``"UTF8"``).
        option: How the caller names the option, for the messages (``"--encoding"``).

    Returns:
        The canonical name (``"utf-8"``, ``"iso8859-1"``).

    Raises:
        TypeError: ``name`` is not a string.
        ValueError: Too long, odd characters, unknown, or not a text encoding; the message
            names the option, the name (shortened) and examples of names to give.
    """
    if not isinstance(name, str):
        raise TypeError(f"{option} must be a string, not {type(name).__name__}")
    if len(name) > MAX_ENCODING_CHARS:
        raise ValueError(
            f"{option}: a name of {len(name):,} characters is not an encoding (at most "
            f"{MAX_ENCODING_CHARS}); give one such as {_ENCODING_EXAMPLES}"
        )
    if _ENCODING_NAME.fullmatch(name) is None:
        raise ValueError(
            f"{option} {_show(name)!r}: unknown encoding (a name has ASCII letters, digits, "
            f"'.', '_', '-' and spaces); give one such as {_ENCODING_EXAMPLES}"
        )
    unknown = ValueError(
        f"{option} {name!r}: unknown encoding; give one Python knows, such as {_ENCODING_EXAMPLES}"
    )
    key = encodings.normalize_encoding(name.lower())
    if key not in _standard_codecs() and key.replace(".", "_") not in _standard_codecs():
        # Not looked up: the codec registry caches every name it fails to find, for good
        # (red team 2026-12-01: 500,000 distinct names, 85 MB of the server's memory).
        raise unknown
    try:
        info = codecs.lookup(name)
    except LookupError:
        raise unknown from None
    if not getattr(info, "_is_text_encoding", True) or info.name == "undefined":
        raise ValueError(
            f"{option} {name!r}: {info.name} is not a text encoding (it does not decode bytes "
            f"to text); give one such as {_ENCODING_EXAMPLES}"
        )
    try:
        codecs.getincrementaldecoder(info.name)(_ERROR_HANDLER).decode(b"", final=True)
    except UnicodeError:
        # idna and punycode take no error handler: every file would fail (red team).
        raise ValueError(
            f"{option} {name!r}: {info.name} cannot report undecodable bytes by position "
            f"(it decodes strictly or not at all); give one such as {_ENCODING_EXAMPLES}"
        ) from None
    return info.name


@functools.lru_cache(maxsize=1)
def _standard_codecs() -> frozenset[str]:
    """The normalised names of the standard library's codecs and their aliases."""
    modules = {m.name for m in pkgutil.iter_modules(encodings.__path__)}
    return frozenset(modules | set(encodings.aliases.aliases))


def encoding_hint(encoding: str, *, give: str = "the encoding") -> str:
    """The hint for bytes that are not valid in the encoding a CSV file was read with.

    The one home of the sentence: the report's warning uses the default spelling (the MCP
    tool's argument is named ``encoding``), the command line its flag.

    Args:
        encoding: The canonical name of the encoding used (:func:`text_encoding`).
        give: How to name the encoding option (``"--encoding"``).

    Returns:
        The sentence.
    """
    return (
        f"the file was read as {encoding} and some bytes are not valid {encoding}; if it is in "
        f'another encoding, give {give} (for example "latin-1" or "cp1252")'
    )


def _clean(text: str) -> str:
    r"""Make text encodable as UTF-8: undecodable bytes as ``\xNN``, lone surrogates escaped."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = "".join(
            f"\\x{ord(c) - 0xDC00:02x}" if "\udc00" <= c <= "\udcff" else c for c in text
        )
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _show(value: str) -> str:
    value = _clean(value[: _VALUE_CHARS * 4])
    return value if len(value) <= _VALUE_CHARS else value[: _VALUE_CHARS - 1] + "\u2026"


@dataclass
class _Sink:
    """Keeps the first ``limit`` errors and counts them all.

    The report's sink also counts them per column and code (``summary``); a batch's sink
    passes its errors on to it.
    """

    limit: int
    errors: list[CsvError] = field(default_factory=list)
    count: int = 0
    summary: dict[str, dict[str, int]] | None = None

    def add(self, error: CsvError) -> None:
        self.count += 1
        if len(self.errors) < self.limit:
            self.errors.append(error)
        if self.summary is not None:
            codes = self.summary.setdefault(error.column or "", {})
            codes[error.code] = codes.get(error.code, 0) + 1


class _Column:
    """Checks one declared column over batches of values."""

    def __init__(
        self, spec: FieldSpec, index: int, missing: frozenset[str], budget: UniqueBudget
    ) -> None:
        self.spec = spec
        self.index = index
        self.number = index + 1
        self.missing = spec.missing if spec.missing is not None else missing
        self.bounded = spec.type == "number" and (
            spec.minimum is not None or spec.maximum is not None
        )
        self.seen = DigestSet(budget) if spec.unique else None

    def check(self, values: Sequence[str], rows: Sequence[int], sink: _Sink) -> None:
        spec = self.spec
        if self.missing.isdisjoint(values):
            if self._fast(values):
                return
        elif not spec.required:
            present = [v for v in values if v not in self.missing]
            if self._fast(present):
                return
        self._slow(values, rows, sink)

    def _fast(self, present: Sequence[str]) -> bool:
        """Whether the whole batch passes; no side effects unless it does."""
        spec = self.spec
        if not present:
            return True
        parsed = spec.batch_parse(present) if spec.batch_parse is not None else None
        if parsed is None:
            return False
        if spec.min_length is not None and min(map(len, present)) < spec.min_length:
            return False
        if spec.max_length is not None and max(map(len, present)) > spec.max_length:
            return False
        if spec.pattern is not None and not spec.pattern.fullmatch_all(present):
            return False
        if self.bounded and any(map(math.isnan, parsed)):  # min()/max() would skip a NaN
            return False
        try:
            if spec.minimum is not None and min(parsed) < spec.minimum:
                return False
            if spec.maximum is not None and max(parsed) > spec.maximum:
                return False
        except TypeError:
            return False
        if spec.enum is not None and not spec.enum.issuperset(parsed):
            return False
        return self.seen is None or self.seen.add_all(parsed)

    def _slow(self, values: Sequence[str], rows: Sequence[int], sink: _Sink) -> None:
        spec = self.spec
        for value, row in zip(values, rows, strict=True):
            problem = self._problem(value)
            if problem is not None:
                code, message = problem
                sink.add(CsvError(code, message, row, spec.name, self.number, _show(value)))

    def _problem(self, value: str) -> tuple[str, str] | None:
        spec = self.spec
        if value in self.missing:
            if spec.required:
                return (
                    "constraint-error",
                    f"column {spec.name!r} is required but the value is missing",
                )
            return None
        try:
            parsed = spec.parse(value)
        except (ValueError, KeyError, OverflowError):
            return "type-error", f"{_show(value)!r} is not a valid {spec.description}"
        length = len(value)
        if spec.min_length is not None and length < spec.min_length:
            return "constraint-error", f"length {length} is below minLength {spec.min_length}"
        if spec.max_length is not None and length > spec.max_length:
            return "constraint-error", f"length {length} is above maxLength {spec.max_length}"
        if spec.pattern is not None and not spec.pattern.fullmatch(value):
            return "constraint-error", f"value does not match pattern {spec.pattern.pattern!r}"
        if self.bounded and math.isnan(parsed):
            return "constraint-error", "NaN satisfies no minimum or maximum"
        try:
            if spec.minimum is not None and parsed < spec.minimum:
                return "constraint-error", f"value is below minimum {_text(spec.minimum)}"
            if spec.maximum is not None and parsed > spec.maximum:
                return "constraint-error", f"value is above maximum {_text(spec.maximum)}"
        except TypeError:
            return "constraint-error", "value cannot be compared with the minimum/maximum"
        if spec.enum is not None and parsed not in spec.enum:
            options = ", ".join(sorted(_text(v) for v in spec.enum))
            return "constraint-error", f"value is not one of the enum values: {_show(options)}"
        if self.seen is not None:
            new = self.seen.add(parsed)
            if new is False:
                return (
                    "unique-error",
                    f"value repeats an earlier value of unique column {spec.name!r}",
                )
            if new is None:
                return _limit_message(self.seen.budget.limit, f"unique column {spec.name!r}")
        return None


def _lines_in(record: Sequence[str]) -> int:
    """Physical lines a parsed record spans (line ends inside quoted fields, CRLF = one)."""
    extra = 0
    for cell in record:
        if "\n" in cell or "\r" in cell:
            extra += cell.count("\n") + cell.count("\r") - cell.count("\r\n")
    return 1 + extra


def _start_lines(batch: Sequence[Sequence[str]], previous_end: int) -> list[int]:
    starts = []
    line = previous_end + 1
    for record in batch:
        starts.append(line)
        line += _lines_in(record)
    return starts


def _has_surrogate(record: Sequence[str]) -> bool:
    return any(_SURROGATE.search(cell) for cell in record)


def _text(value: object) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


class _Inferred:
    """Narrows an undeclared column's type over the batches (constant memory)."""

    def __init__(self, index: int, missing: frozenset[str]) -> None:
        self.index = index
        self.missing = missing
        self.candidates = list(INFERRED_ORDER)
        self.seen_value = False

    def check(self, values: Sequence[str], rows: Sequence[int], sink: _Sink) -> None:
        if not self.candidates:
            return
        present = (
            values
            if self.missing.isdisjoint(values)
            else [v for v in values if v not in self.missing]
        )
        if not present:
            return
        self.seen_value = True
        self.candidates = [t for t in self.candidates if type_accepts_all(t, present)]

    @property
    def type(self) -> str:
        return self.candidates[0] if self.seen_value and self.candidates else "string"


def _limit_message(limit: int, what: str) -> tuple[str, str]:
    return (
        "unique-limit",
        f"more than {limit:,} distinct values to remember for {what} (max_unique_values): "
        "uniqueness is not checked from this row on; raise max_unique_values to check it all",
    )


class _PrimaryKey:
    def __init__(
        self,
        names: Sequence[str],
        indexes: Sequence[int],
        specs: Sequence[FieldSpec],
        budget: UniqueBudget,
    ) -> None:
        self.names = tuple(names)
        self.indexes = tuple(indexes)
        self.specs = tuple(specs)
        self.seen = DigestSet(budget)

    def check(self, batch: Sequence[Sequence[str]], rows: Sequence[int], sink: _Sink) -> None:
        label = ", ".join(self.names)
        for record, row in zip(batch, rows, strict=True):
            try:
                key = tuple(
                    s.parse(record[i]) for s, i in zip(self.specs, self.indexes, strict=True)
                )
            except (ValueError, KeyError, OverflowError):
                continue  # the type error is reported by the column itself
            new = self.seen.add(key)
            if new is not True:
                shown = _show(", ".join(record[i] for i in self.indexes))
                code, message = (
                    ("unique-error", f"primary key ({label}) repeats an earlier row")
                    if new is False
                    else _limit_message(self.seen.budget.limit, f"primary key ({label})")
                )
                sink.add(CsvError(code, message, row, label, self.indexes[0] + 1, shown))


def _guarded(lines: Iterator[str]) -> Iterator[str]:
    """The lines with a leading byte-order mark dropped and NUL characters marked.

    The mark goes before csv parses the first line, so a quoted first header (``\ufeff"id"``)
    is read as ``id``. Each NUL becomes :data:`_NUL_MARK` and counts as a decoding problem, so
    the row takes the slow path and is reported as ``nul-byte``.
    """
    local = _local
    first = next(lines, None)
    if first is None:
        return
    for line in itertools.chain((first.removeprefix("\ufeff"),), lines):
        if "\x00" in line:
            local.decode_errors = getattr(local, "decode_errors", 0) + line.count("\x00")
            yield line.replace("\x00", _NUL_MARK)
        else:
            yield line


def _open_text(source: object, encoding: str) -> tuple[Iterator[str], Callable[[], None], bool]:
    """Open the source as text lines (line ends kept).

    Returns:
        The lines, a function that cleans up, and whether the lines are decoded here (with
        ``encoding``, a canonical codec name) rather than given as text.
    """
    decoding = "utf-8-sig" if encoding == "utf-8" else encoding
    if isinstance(source, str):
        return iter(io.StringIO(source, newline="")), lambda: None, False
    if isinstance(source, (bytes, bytearray, memoryview)):
        wrapper = io.TextIOWrapper(
            io.BytesIO(bytes(source)), encoding=decoding, errors=_ERROR_HANDLER, newline=""
        )
        return iter(wrapper), lambda: None, True
    if isinstance(source, os.PathLike):
        path = os.fspath(source)
        if not isinstance(path, str):
            path = os.fsdecode(path)
        handle = open(path, encoding=decoding, errors=_ERROR_HANDLER, newline="")  # noqa: SIM115, PTH123
        return iter(handle), handle.close, True
    if isinstance(source, io.TextIOBase):
        return iter(source), lambda: None, False
    read = getattr(source, "read", None)
    if callable(read):
        if isinstance(source, (io.RawIOBase, io.BufferedIOBase)) or _reads_bytes(source):
            buffered = io.BufferedReader(_Unclosable(cast("IO[bytes]", source)))
            text = io.TextIOWrapper(buffered, encoding=decoding, errors=_ERROR_HANDLER, newline="")

            def release() -> None:
                text.detach()

            return iter(text), release, True
        return iter(_TextChunks(source)), lambda: None, False
    raise TypeError(
        "source must be CSV content (str, bytes, a text or binary stream) or a path given as "
        f"an os.PathLike, not {type(source).__name__}"
    )


def _reads_bytes(stream: Any) -> bool:
    probe = stream.read(0)
    return isinstance(probe, (bytes, bytearray))


class _Unclosable(io.RawIOBase):
    """A read-only view of a caller's binary stream that never closes it."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._stream.read(len(buffer))
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError("the binary stream returned something other than bytes")
        buffer[: len(data)] = data
        return len(data)


class _TextChunks:
    """Lines of a duck-typed text stream that has ``read`` but no line iteration."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[str]:
        pending = ""
        while True:
            chunk = self._stream.read(65536)
            if not chunk:
                break
            if not isinstance(chunk, str):
                raise TypeError("the text stream returned something other than str")
            pending += chunk
            # Split like newline="" does: at \r\n, \r or \n only. A trailing \r may be the
            # first half of \r\n, so it waits for the next chunk.
            parts = _LINE_END.split(pending)
            pending = parts.pop()
            if not pending and parts and parts[-1] == "\r":
                parts.pop()
                pending = parts.pop() + "\r"
            lines = parts[0::2]
            ends = parts[1::2]
            yield from (text + eol for text, eol in zip(lines, ends, strict=True))
        if pending:
            yield pending


def _dialect(dialect: object, lines: Iterator[str]) -> tuple[dict[str, Any], Iterator[str]]:
    """Return csv.reader keyword arguments and the (possibly re-chained) lines."""
    if dialect is None:
        return {}, lines
    if isinstance(dialect, str):
        if dialect not in ("sniff", "auto"):
            raise ValueError(f"dialect must be None, 'sniff' or a mapping, not {dialect!r}")
        sample: list[str] = []
        size = 0
        for line in lines:
            sample.append(line)
            size += len(line)
            if size >= _SNIFF_CHARS or len(sample) >= 200:
                break
        return {"delimiter": _sniff(sample)}, itertools.chain(sample, lines)
    if not isinstance(dialect, Mapping):
        raise TypeError("dialect must be None, 'sniff' or a mapping (Frictionless CSV Dialect)")
    unknown = [k for k in dialect if k not in (*_DIALECT_KEYS, "header", "lineTerminator")]
    if unknown:
        raise ValueError(
            f"unknown dialect key {unknown[0]!r}; allowed: {', '.join(_DIALECT_KEYS)}, "
            "lineTerminator (ignored: CRLF and LF both work), header (must be true)"
        )
    if dialect.get("header", True) is not True:
        raise ValueError("dialect header=false is not supported: the first row must be the header")
    options: dict[str, Any] = {}
    names = {"delimiter": "delimiter", "quoteChar": "quotechar", "escapeChar": "escapechar"}
    for key, arg in names.items():
        if key in dialect:
            value = dialect[key]
            if not isinstance(value, str) or len(value) != 1 or value in "\r\n":
                raise ValueError(f"dialect {key} must be one character other than CR or LF")
            options[arg] = value
    for key, arg in (("doubleQuote", "doublequote"), ("skipInitialSpace", "skipinitialspace")):
        if key in dialect:
            if not isinstance(dialect[key], bool):
                raise ValueError(f"dialect {key} must be true or false")
            options[arg] = dialect[key]
    return options, lines


def _sniff(sample: Sequence[str]) -> str:
    """Pick the delimiter among , ; tab | that splits the sample most consistently."""
    best, best_score = ",", (-1.0, 0)
    for delimiter in _SNIFF_DELIMITERS:
        try:
            widths = [len(r) for r in csv.reader(sample, delimiter=delimiter) if r]
        except csv.Error:
            continue
        if not widths or widths[0] < 2:
            continue
        consistent = sum(1 for w in widths if w == widths[0]) / len(widths)
        score = (consistent, widths[0])
        if score > best_score:
            best, best_score = delimiter, score
    return best


def _validate_args(
    required_headers: Iterable[str], encoding: str, max_errors: int
) -> tuple[tuple[str, ...], str]:
    if isinstance(required_headers, str):
        raise TypeError("required_headers must be a list of names, not one string")
    headers = tuple(required_headers)
    if not all(isinstance(h, str) for h in headers):
        raise TypeError("required_headers must contain strings")
    name = text_encoding(encoding)
    check_max_errors(max_errors)
    return headers, name


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_csv(
    source: str | bytes | IO[str] | IO[bytes] | os.PathLike[str],
    *,
    required_headers: Iterable[str] = (),
    constraints: Mapping[str, Any] | None = None,
    table_schema: Mapping[str, Any] | None = None,
    dialect: str | Mapping[str, Any] | None = None,
    encoding: str = "utf-8",
    max_errors: int = DEFAULT_MAX_ERRORS,
    max_unique_values: int = 1_000_000,
) -> CsvReport:
    """Validate CSV data, streaming, against headers, column types and constraints.

    Types and constraints follow the Frictionless Table Schema: types ``string``, ``integer``,
    ``number``, ``boolean``, ``date``, ``time``, ``datetime``, ``year`` (default formats, plus
    ``format`` = ``"any"`` or a strptime pattern such as ``"%d/%m/%Y"`` for dates and times);
    constraints ``required``, ``unique``, ``minimum``, ``maximum``, ``minLength``,
    ``maxLength``, ``pattern`` (RE2 syntax, whole value, linear time) and ``enum``.

    Memory does not grow with the number of rows, except for what a ``unique`` constraint or
    ``primaryKey`` must remember: a 16-byte keyed BLAKE2b digest per distinct logical value
    (about 100 bytes each), at most ``max_unique_values`` of them in all. One physical line is
    read whole; a field is capped at 128 KiB (csv's ``field_size_limit``), past which a
    ``source-error`` ends the run.

    Args:
        source: CSV *content* as ``str`` or ``bytes``, a text stream, or a binary stream (for
            example a file object the caller opened in ``"rb"`` mode; it is read, never closed),
            or a file path given as an ``os.PathLike`` (``pathlib.Path``), opened here as is
            (symlinks followed): callers handling untrusted paths resolve and open the file
            themselves and pass the binary stream. A ``str`` is never taken for a path.
        required_headers: Column names that must be in the header.
        constraints: Column declarations, short form ``{"age": "integer"}`` or long form
            ``{"age": {"type": "integer", "minimum": 0, "required": True}}`` (Table Schema
            field keys ``format``, ``trueValues``, ``falseValues``, ``decimalChar``,
            ``groupChar`` and ``constraints`` are accepted too).
        table_schema: A Table Schema descriptor: ``fields``, ``missingValues`` (default
            ``[""]``), ``primaryKey``. ``constraints`` entries override its fields.
        dialect: ``None`` (comma, double quote), ``"sniff"`` (choose among ``,`` ``;`` tab
            ``|`` from the first 64 KiB), or a Frictionless CSV Dialect mapping
            (``delimiter``, ``quoteChar``, ``doubleQuote``, ``escapeChar``,
            ``skipInitialSpace``).
        encoding: Text encoding of bytes, binary streams and paths, checked by
            :func:`text_encoding` (a text codec Python knows). With UTF-8 a leading byte-order
            mark is dropped. Undecodable bytes are ``encoding-error`` findings naming the
            encoding, and the report warns once how to give another (:func:`encoding_hint`).
        max_errors: Most errors listed in the report, from 0 to
            :data:`~datavalidate.MAX_ERRORS_LIMIT` (1,000; default 100); ``error_count`` and
            ``error_summary`` count them all.
        max_unique_values: Most distinct values remembered for ``unique`` columns and the
            ``primaryKey`` together; past it a ``unique-limit`` error says from which row
            uniqueness is no longer checked.

    Returns:
        The report. Error codes: see :data:`ERROR_CODES`; rows are numbered as a person
        counts lines in the file, the header being row 1.

    Raises:
        ValueError: An unknown type, format, constraint, dialect key or encoding, or a codec
            that is not a text encoding (the message names the allowed ones), an ill-formed
            constraint value, a ``max_errors`` outside 0 to 1,000 or a ``max_unique_values``
            below 1.
        UnsupportedPatternError: A ``pattern`` constraint that RE2 refuses.
        TypeError: ``source`` is none of the accepted kinds, or an argument has a wrong type.
        OSError: The path cannot be opened or read.
    """
    headers_required, encoding = _validate_args(required_headers, encoding, max_errors)
    if not _is_count(max_unique_values) or max_unique_values < 1:
        raise ValueError(f"max_unique_values must be a positive integer, not {max_unique_values!r}")
    specs, missing, primary = compile_fields(constraints, table_schema)
    raw_lines, cleanup, decoded = _open_text(source, encoding)
    lines = _guarded(raw_lines)
    previous_errors = getattr(_local, "decode_errors", 0)
    _local.decode_errors = 0
    try:
        run = _Run(
            lines,
            dialect,
            required=headers_required,
            specs=specs,
            missing=missing,
            primary=primary,
            max_errors=max_errors,
            budget=UniqueBudget(max_unique_values),
            encoding=encoding if decoded else None,
        )
        return run.run()
    finally:
        _local.decode_errors = previous_errors
        cleanup()


class _Run:
    def __init__(
        self,
        lines: Iterator[str],
        dialect: str | Mapping[str, Any] | None,
        *,
        required: tuple[str, ...],
        specs: list[FieldSpec],
        missing: frozenset[str],
        primary: tuple[str, ...],
        max_errors: int,
        budget: UniqueBudget,
        encoding: str | None,
    ) -> None:
        self.budget = budget
        self.encoding = encoding
        self.encoding_warned = False
        self.options, self.lines = _dialect(dialect, lines)
        self.required = required
        self.specs = specs
        self.missing = missing
        self.primary = primary
        self.sink = _Sink(max_errors, summary={})
        self.row_count = 0
        self.header: list[str] = []
        self.dialect_given = dialect is not None
        self.warnings: list[str] = []
        if not (required or specs or primary):
            self.warnings.append(_NO_RULES_WARNING)

    def _report(self, columns: tuple[CsvColumn, ...]) -> CsvReport:
        sink = self.sink
        return CsvReport(
            valid=sink.count == 0,
            row_count=self.row_count,
            columns=columns,
            errors=tuple(sink.errors),
            error_count=sink.count,
            truncated=sink.count > len(sink.errors),
            delimiter=self.options.get("delimiter", ","),
            warnings=tuple(self.warnings),
            error_summary=sink.summary or {},
        )

    def run(self) -> CsvReport:
        sink = self.sink
        reader = csv.reader(self.lines, **self.options)
        try:
            header = next(reader, None)
            while header is not None and not any(header):
                # Blank lines above the header: reported, and the header is the first line
                # with text (its row number stays the line a person sees).
                sink.add(
                    CsvError(
                        "blank-row",
                        "a blank line comes before the header; the header is the first "
                        "non-blank line",
                        reader.line_num,
                    )
                )
                header = next(reader, None)
        except csv.Error as exc:
            sink.add(
                CsvError("source-error", f"the header cannot be parsed: {exc}", reader.line_num + 1)
            )
            return self._report(())
        if header is None:
            sink.add(CsvError("source-error", "the input is empty: there is no header row"))
            for name in dict.fromkeys((*self.required, *(s.name for s in self.specs))):
                message = self._missing_header(name, [])
                sink.add(CsvError("missing-header", message, None, _clean(name)))
            return self._report(())
        header_row = reader.line_num
        self.header = header
        if getattr(_local, "decode_errors", 0) and _has_surrogate(header):
            self._decode_errors(header, header_row)
        header = self.header = [_clean(name) for name in header]
        checkers = self._check_header(header, header_row)
        self._rows(reader, header_row, checkers)
        columns = tuple(
            CsvColumn(
                name,
                i + 1,
                c.spec.type
                if isinstance(c, _Column)
                else c.type
                if isinstance(c, _Inferred)
                else "string",
                isinstance(c, _Column),
            )
            for i, (name, c) in enumerate(zip(header, checkers, strict=True))
        )
        return self._report(columns)

    def _delimiter_hint(self, header: list[str]) -> None:
        """Warn when a one-column header read with the default comma holds ``;``/tab/``|``."""
        if self.dialect_given or len(header) != 1:
            return
        hint = delimiter_hint(header[0])
        if hint:
            self.warnings.append(hint)

    def _missing_header(self, name: str, header: list[str]) -> str:
        """The message for a required or constrained column absent from the header."""
        shown = ", ".join(_show(h) for h in header[:20]) or "no columns"
        if len(header) > 20:
            shown += f", ... ({len(header)} columns)"
        if name in self.required:
            return f"required column {_clean(name)!r} is missing (the header has: {shown})"
        return (
            f"column {_clean(name)!r} has constraints but is not in the header "
            f"(the header has: {shown})"
        )

    def _check_header(self, header: list[str], row: int) -> list[_Column | _Inferred | None]:
        sink = self.sink
        self._delimiter_hint(header)
        first: dict[str, int] = {}
        for i, name in enumerate(header):
            if not name.strip():
                sink.add(
                    CsvError(
                        "blank-header", f"column {i + 1} has a blank header", row, name, i + 1, name
                    )
                )
            elif name in first:
                sink.add(
                    CsvError(
                        "duplicate-header",
                        f"header {name!r} repeats column {first[name] + 1}",
                        row,
                        name,
                        i + 1,
                        _show(name),
                    )
                )
            else:
                first[name] = i
        declared = {s.name: s for s in self.specs}
        for name in dict.fromkeys((*self.required, *declared)):
            if name not in first:
                message = self._missing_header(name, header)
                sink.add(CsvError("missing-header", message, row, _clean(name)))
        checkers: list[_Column | _Inferred | None] = []
        for i, name in enumerate(header):
            if first.get(name) != i:
                checkers.append(None)
            elif name in declared:
                checkers.append(_Column(declared[name], i, self.missing, self.budget))
            else:
                checkers.append(_Inferred(i, self.missing))
        self.primary_key: _PrimaryKey | None = None
        if self.primary and all(name in first for name in self.primary):
            self.primary_key = _PrimaryKey(
                self.primary,
                [first[n] for n in self.primary],
                [declared[n] for n in self.primary],
                self.budget,
            )
        return checkers

    def _decode_errors(self, record: Sequence[str], row: int) -> None:
        bad = sum(len(_SURROGATE.findall(cell)) for cell in record)
        _local.decode_errors = max(0, _local.decode_errors - bad)
        for i, cell in enumerate(record):
            if _SURROGATE.search(cell):
                name = _clean(self.header[i]) if i < len(self.header) else None
                nul = _NUL_MARK in cell
                if nul:
                    message = (
                        "the cell holds a NUL character (U+0000), which CSV text must not hold"
                    )
                elif self.encoding is None:
                    message = "the cell holds text that is not valid Unicode (lone surrogates)"
                else:
                    message = (
                        f"the bytes are not valid {self.encoding} (the value shows them as \\xNN)"
                    )
                    if not self.encoding_warned:
                        self.encoding_warned = True
                        self.warnings.append(encoding_hint(self.encoding))
                self.sink.add(
                    CsvError(
                        "nul-byte" if nul else "encoding-error",
                        message,
                        row,
                        name,
                        i + 1,
                        _show(cell),
                    )
                )

    def _rows(
        self, reader: Any, header_row: int, checkers: list[_Column | _Inferred | None]
    ) -> None:
        """Read records in batches (C-level), check regular batches column by column."""
        width = len(self.header)
        active = [c for c in checkers if c is not None]
        previous_end = header_row
        local = _local
        islice = itertools.islice
        failure: csv.Error | None = None
        while failure is None:
            batch: list[list[str]] = []
            try:
                batch.extend(islice(reader, _BATCH_ROWS))
            except csv.Error as exc:
                failure = exc
            if not batch:
                break
            end = reader.line_num
            self.row_count += len(batch)
            if failure is None and end - previous_end == len(batch):
                rows: Sequence[int] = range(previous_end + 1, end + 1)
            else:
                rows = _start_lines(batch, previous_end)
            if failure is not None:
                end = rows[-1] + _lines_in(batch[-1]) - 1
            previous_end = end
            regular = (
                not local.decode_errors
                and len(batch[0]) == width
                and len(set(map(len, batch))) == 1
                and width > 0
                and ("" not in map(_first, batch) or all(any(r) for r in batch if not r[0]))
            )
            if regular:
                self._flush(batch, rows, active)
            else:
                self._mixed(batch, rows, width, active)
        if failure is not None:
            self.sink.add(
                CsvError("source-error", f"the CSV cannot be parsed: {failure}", previous_end + 1)
            )

    def _mixed(
        self,
        batch: list[list[str]],
        rows: Sequence[int],
        width: int,
        active: list[_Column | _Inferred],
    ) -> None:
        """Check a batch holding irregular rows, keeping file order."""
        regular: list[list[str]] = []
        regular_rows: list[int] = []
        for record, row in zip(batch, rows, strict=True):
            surrogate = _local.decode_errors and _has_surrogate(record)
            if not surrogate and len(record) == width and any(record):
                regular.append(record)
                regular_rows.append(row)
                continue
            if regular:
                self._flush(regular, regular_rows, active)
                regular, regular_rows = [], []
            if surrogate:
                self._decode_errors(record, row)
            else:
                self._irregular(record, row, width, active)
        if regular:
            self._flush(regular, regular_rows, active)

    def _flush(
        self, batch: list[list[str]], rows: Sequence[int], active: list[_Column | _Inferred]
    ) -> None:
        columns = list(zip(*batch, strict=True))
        found = _Sink(limit=len(batch) * (len(active) + 1))
        for checker in active:
            checker.check(columns[checker.index], rows, found)
        if self.primary_key is not None:
            self.primary_key.check(batch, rows, found)
        if found.count:
            found.errors.sort(key=lambda e: (e.row or 0, e.column_number or 0))
            for error in found.errors:
                self.sink.add(error)

    def _irregular(
        self, record: list[str], row: int, width: int, active: list[_Column | _Inferred]
    ) -> None:
        sink = self.sink
        if not any(record):
            sink.add(CsvError("blank-row", "the row is blank", row))
            return
        header = self.header
        for i in range(width, len(record)):
            sink.add(
                CsvError(
                    "extra-cell",
                    f"cell {i + 1} is beyond the {width} header columns",
                    row,
                    None,
                    i + 1,
                    _show(record[i]),
                )
            )
        for i in range(len(record), width):
            sink.add(
                CsvError(
                    "missing-cell",
                    f"the row has no cell for column {header[i]!r}",
                    row,
                    header[i],
                    i + 1,
                )
            )
        for checker in active:
            if checker.index < len(record):
                checker.check((record[checker.index],), (row,), sink)
            elif isinstance(checker, _Column) and checker.spec.required:
                pass  # reported as missing-cell above
        if self.primary_key is not None and all(i < len(record) for i in self.primary_key.indexes):
            self.primary_key.check((record,), (row,), sink)
