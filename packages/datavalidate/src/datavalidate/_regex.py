r"""Linear-time regular expressions for untrusted patterns (RE2 via ``google-re2``).

Python's ``re`` backtracks: ``^(a+)+$`` against ``"a" * 40 + "b"`` runs for ages while holding
the interpreter, and no time budget can interrupt it. Every pattern that comes from a schema
(JSON Schema ``pattern`` / ``patternProperties``, the ``regex`` format, the CSV ``pattern``
constraint) therefore runs on RE2, whose matching time is linear in the input. Patterns RE2
cannot express (back-references, look-around) or whose automaton exceeds the memory budget are
refused with :class:`~datavalidate.UnsupportedPatternError`; they are never handed to ``re``.

JSON Schema patterns are ECMA-262 regular expressions; :func:`ecma_to_re2` rewrites the ECMA
escapes RE2 spells differently (``\uXXXX``, ``\u{...}``, ``\p{Letter}``, ``\cX``, Unicode
``\s``, ``(?<name>``) before compiling.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

import re2  # type: ignore[import-untyped]

from datavalidate.exceptions import UnsupportedPatternError

__all__ = ["SafePattern", "compile_pattern", "ecma_to_re2", "is_deterministic"]

#: Longest pattern accepted, in characters. Longer ones are refused before compiling.
MAX_PATTERN_CHARS = 16_384
#: RE2 memory budget per compiled pattern, in bytes (RE2's default is 8 MiB).
MAX_PATTERN_MEMORY_BYTES = 8 << 20

# ECMA-262 general category long names (and a few aliases) -> RE2's short names.
_GENERAL_CATEGORIES = {
    "Letter": "L",
    "Uppercase_Letter": "Lu",
    "Lowercase_Letter": "Ll",
    "Titlecase_Letter": "Lt",
    "Modifier_Letter": "Lm",
    "Other_Letter": "Lo",
    "Mark": "M",
    "Combining_Mark": "M",
    "Nonspacing_Mark": "Mn",
    "Spacing_Mark": "Mc",
    "Enclosing_Mark": "Me",
    "Number": "N",
    "Decimal_Number": "Nd",
    "digit": "Nd",
    "Letter_Number": "Nl",
    "Other_Number": "No",
    "Punctuation": "P",
    "punct": "P",
    "Connector_Punctuation": "Pc",
    "Dash_Punctuation": "Pd",
    "Open_Punctuation": "Ps",
    "Close_Punctuation": "Pe",
    "Initial_Punctuation": "Pi",
    "Final_Punctuation": "Pf",
    "Other_Punctuation": "Po",
    "Symbol": "S",
    "Math_Symbol": "Sm",
    "Currency_Symbol": "Sc",
    "Modifier_Symbol": "Sk",
    "Other_Symbol": "So",
    "Separator": "Z",
    "Space_Separator": "Zs",
    "Line_Separator": "Zl",
    "Paragraph_Separator": "Zp",
    "Other": "C",
    "Control": "Cc",
    "cntrl": "Cc",
    "Format": "Cf",
    "Surrogate": "Cs",
    "Private_Use": "Co",
}
# ECMA-262 WhiteSpace and LineTerminator code points (what ECMA's \s matches).
_ECMA_SPACE = "".join(
    (
        r"\t\n\x{0B}\f\r \x{A0}\x{1680}\x{2000}-\x{200A}",
        r"\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}",
    )
)
_HEX = frozenset("0123456789abcdefABCDEF")


class _RE2Regexp(Protocol):
    def ok(self) -> bool: ...
    def error(self) -> bytes: ...
    def Match(
        self, anchor: object, text: bytes, pos: int, endpos: int
    ) -> list[tuple[int, int]]: ...


def _property(body: str, negate: bool) -> str:
    name = body
    for prefix in ("General_Category=", "gc=", "Script=", "sc=", "Script_Extensions=", "scx="):
        if body.startswith(prefix):
            name = body[len(prefix) :]
            break
    name = _GENERAL_CATEGORIES.get(name, name)
    return ("\\P{" if negate else "\\p{") + name + "}"


def ecma_to_re2(pattern: str) -> str:
    """Rewrite an ECMA-262 (JSON Schema) regular expression into RE2 syntax.

    Only spellings differ; the language accepted stays the same. Back-references and
    look-around are left as they are, and RE2 refuses them when compiling.

    Args:
        pattern: The ECMA-262 pattern.

    Returns:
        The equivalent RE2 pattern.
    """
    out: list[str] = []
    in_class = False
    i = 0
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt in "pP" and i + 2 < n and pattern[i + 2] == "{":
                end = pattern.find("}", i + 3)
                if end != -1:
                    out.append(_property(pattern[i + 3 : end], nxt == "P"))
                    i = end + 1
                    continue
            if nxt == "u":
                if i + 2 < n and pattern[i + 2] == "{":
                    end = pattern.find("}", i + 3)
                    digits = pattern[i + 3 : end] if end != -1 else ""
                    if digits and set(digits) <= _HEX:
                        out.append("\\x{" + digits + "}")
                        i = end + 1
                        continue
                digits = pattern[i + 2 : i + 6]
                if len(digits) == 4 and set(digits) <= _HEX:
                    out.append("\\x{" + digits + "}")
                    i += 6
                    continue
            if nxt == "c" and i + 2 < n and pattern[i + 2].isascii() and pattern[i + 2].isalpha():
                out.append("\\x{%02X}" % (ord(pattern[i + 2]) % 32))
                i += 3
                continue
            if nxt == "s":
                out.append(_ECMA_SPACE if in_class else "[" + _ECMA_SPACE + "]")
                i += 2
                continue
            if nxt == "S" and not in_class:
                out.append("[^" + _ECMA_SPACE + "]")
                i += 2
                continue
            if nxt == "/":
                out.append("/")
                i += 2
                continue
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
            out.append(ch)
        elif ch == "[":
            in_class = True
            out.append(ch)
            # A leading "]" or "^]" is literal in RE2 but an empty class in ECMA; keep as is.
        elif (
            ch == "(" and pattern.startswith("(?<", i) and pattern[i + 3 : i + 4] not in ("=", "!")
        ):
            out.append("(?P<")
            i += 3
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


class SafePattern:
    """A compiled RE2 pattern with ``search`` / ``fullmatch`` returning booleans.

    Instances are immutable and thread-safe. Obtain them from :func:`compile_pattern`.

    Attributes:
        pattern: The pattern as given.
    """

    __slots__ = ("fullmatch", "fullmatch_all", "pattern", "search")

    #: Whether the pattern matches anywhere in the text (linear time).
    search: Callable[[str], bool]
    #: Whether the pattern matches all of the text (linear time).
    fullmatch: Callable[[str], bool]
    #: Whether the pattern matches all of each of the texts (linear time).
    fullmatch_all: Callable[[Sequence[str]], bool]

    def __init__(self, pattern: str, regexp: _RE2Regexp, anchors: Any) -> None:
        self.pattern = pattern
        match = regexp.Match
        unanchored = anchors.UNANCHORED
        both = anchors.ANCHOR_BOTH

        def search(text: str) -> bool:
            data = text.encode("utf-8", "surrogatepass")
            return match(unanchored, data, 0, len(data))[0][0] != -1

        def fullmatch(text: str) -> bool:
            data = text.encode("utf-8", "surrogatepass")
            return match(both, data, 0, len(data))[0][0] != -1

        def fullmatch_all(values: Sequence[str]) -> bool:
            return all(map(fullmatch, set(values)))  # repeated values are matched once

        # Plain attributes, not methods: one Python frame less per match.
        self.search = search
        self.fullmatch = fullmatch
        self.fullmatch_all = fullmatch_all

    def __repr__(self) -> str:
        return f"SafePattern({self.pattern!r})"


_lock = threading.Lock()


@functools.lru_cache(maxsize=4096)
def _compile(pattern: str, ecma: bool) -> SafePattern:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise UnsupportedPatternError(pattern, f"longer than {MAX_PATTERN_CHARS} characters")
    translated = ecma_to_re2(pattern) if ecma else pattern
    options = re2.Options()
    options.log_errors = False
    options.never_capture = True
    options.max_mem = MAX_PATTERN_MEMORY_BYTES
    binding = cast("Any", re2)._re2
    try:
        encoded = translated.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsupportedPatternError(pattern, "contains a lone surrogate") from None
    regexp = cast("_RE2Regexp", binding.RE2(encoded, options))
    if not regexp.ok():
        reason = regexp.error().decode("utf-8", "replace")
        raise UnsupportedPatternError(pattern, reason)
    compiled = SafePattern(pattern, regexp, binding.RE2.Anchor)
    length = None if ecma else _fixed_length(pattern)
    if length is not None:
        # Backtracking cannot happen in this subset (see is_deterministic): Python's re
        # matches it in one pass, without RE2's per-call binding overhead.
        try:
            python = re.compile(pattern, re.ASCII)
            batch = re.compile(f"(?:{pattern}\n)*", re.ASCII).fullmatch
        except re.error:
            return compiled  # e.g. a range RE2 accepts and re does not: stay on RE2
        compiled.fullmatch = cast("Callable[[str], bool]", python.fullmatch)
        compiled.fullmatch_all = _fixed_batch(batch, length)
    return compiled


def _fixed_batch(batch: Callable[[str], object], length: int) -> Callable[[Sequence[str]], bool]:
    r"""All-values check for a deterministic pattern: one scan over the joined values.

    Every match of the pattern is exactly ``length`` characters long, so a value of another
    length cannot match, and in ``v1 + LF + v2 + LF ...`` each repetition of ``(?:P LF)`` is
    forced onto exactly one value: the single match is exact, and linear.
    """

    def fullmatch_all(values: Sequence[str]) -> bool:
        if not values:
            return True
        if set(map(len, values)) != {length}:
            return False
        return batch("\n".join(values) + "\n") is not None

    return fullmatch_all


# Escapes with the same meaning in RE2 and in Python's re (with re.ASCII).
_SAME_ESCAPES = frozenset("dDwWntr") | frozenset("\\.^$*+?{}[]()|-/#&~:;,<>=!@%'\" _")
_METACHARS = frozenset("\\.^$*+?{}[]()|")


def is_deterministic(pattern: str) -> bool:
    r"""Whether a pattern is in the backtracking-free subset shared by RE2 and Python's re.

    The subset: literal characters, ``.``, the escapes ``\d \D \w \W \n \t \r`` and
    escaped punctuation, character classes of those (ranges allowed, no nested ``[``), each
    optionally repeated an exact number of times ``{n}`` (n <= 1000). No alternation, groups,
    anchors or variable quantifiers (``* + ? {m,n}``). Every such pattern consumes exactly one
    character per atom, so a full match is one left-to-right pass in any engine, and with
    ``re.ASCII`` both engines give it the same meaning.

    Args:
        pattern: The pattern (RE2 / Python syntax).

    Returns:
        True when the pattern is in the subset.
    """
    return _fixed_length(pattern) is not None


def _fixed_length(pattern: str) -> int | None:
    """The length of every match of a deterministic pattern, or None outside the subset."""
    i, n, length = 0, len(pattern), 0
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= n or pattern[i + 1] not in _SAME_ESCAPES:
                return None
            i += 2
        elif ch == "[":
            end = _class_end(pattern, i)
            if end < 0:
                return None
            i = end + 1
        elif ch in _METACHARS and ch != ".":
            return None
        else:
            i += 1
        repeat = 1
        if i < n and pattern[i] == "{":
            close = pattern.find("}", i)
            count = pattern[i + 1 : close] if close > 0 else ""
            if not (count.isascii() and count.isdigit() and len(count) <= 4 and int(count) <= 1000):
                return None
            repeat = int(count)
            i = close + 1
        length += repeat
    return length


def _class_end(pattern: str, start: int) -> int:
    """Index of the ``]`` closing a simple character class at ``start``, or -1."""
    i = start + 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    first = True
    while i < len(pattern):
        ch = pattern[i]
        if ch == "]" and not first:
            return i
        if ch in "[]" or pattern[i : i + 2] in ("--", "&&", "~~", "||"):
            return -1
        if ch == "\\":
            if i + 1 >= len(pattern) or pattern[i + 1] not in _SAME_ESCAPES:
                return -1
            i += 2
        else:
            i += 1
        first = False
    return -1


def compile_pattern(pattern: str, *, ecma: bool = True) -> SafePattern:
    """Compile an untrusted pattern for linear-time matching (cached, thread-safe).

    Args:
        pattern: The regular expression. ECMA-262 syntax when ``ecma`` (JSON Schema),
            otherwise RE2 syntax (a superset of the common Python/XML Schema subset).
        ecma: Translate ECMA-262 spellings first (see :func:`ecma_to_re2`).

    Returns:
        The compiled pattern.

    Raises:
        UnsupportedPatternError: RE2 refuses the pattern (invalid, back-references,
            look-around, too long, or over the memory budget).
        TypeError: ``pattern`` is not a string.
    """
    if not isinstance(pattern, str):
        raise TypeError(f"a pattern must be a string, not {type(pattern).__name__}")
    with _lock:
        return _compile(pattern, ecma)
