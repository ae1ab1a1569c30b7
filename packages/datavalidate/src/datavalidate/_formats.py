"""Linear-time checkers for the URI and IRI formats.

``jsonschema`` checks ``iri`` and ``iri-reference`` with an Earley parser (``rfc3987-syntax``)
that needs about a second per thousand characters: a hostile 20 KB string holds the caller for
tens of seconds. ``uri`` and ``uri-reference`` use a backtracking regex. Here all four run on
RE2 instead, with the RFC 3986 grammar regexes of ``rfc3986-validator`` (a dependency of
a format dependency of ``datavalidate``) compiled by RE2; the IRI forms add RFC 3987's ``ucschar``
ranges to the unreserved characters.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from datavalidate._regex import compile_pattern

__all__ = ["uri_checkers"]

# RFC 3987 ucschar: the non-ASCII characters an IRI may hold (noncharacters left out).
_UCSCHAR = (
    r"\x{A0}-\x{D7FF}\x{F900}-\x{FDCF}\x{FDF0}-\x{FFEF}\x{10000}-\x{1FFFD}\x{20000}-\x{2FFFD}"
    r"\x{30000}-\x{3FFFD}\x{40000}-\x{4FFFD}\x{50000}-\x{5FFFD}\x{60000}-\x{6FFFD}"
    r"\x{70000}-\x{7FFFD}\x{80000}-\x{8FFFD}\x{90000}-\x{9FFFD}\x{A0000}-\x{AFFFD}"
    r"\x{B0000}-\x{BFFFD}\x{C0000}-\x{CFFFD}\x{D0000}-\x{DFFFD}\x{E1000}-\x{EFFFD}"
)
_UNRESERVED = r"a-zA-Z0-9_.~\-"


def _strip_verbose(pattern: str) -> str:
    """Turn a ``re.VERBOSE`` pattern into a plain one (RE2 has no verbose mode)."""
    out: list[str] = []
    i = 0
    in_class = False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            out.append(ch)
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            out.append(ch)
        elif ch == "#":
            end = pattern.find("\n", i)
            i = len(pattern) if end < 0 else end
            continue
        elif not ch.isspace():
            out.append(ch)
        i += 1
    return "".join(out).replace("{,", "{0,")  # RE2 spells "at most n" {0,n}


def uri_checkers() -> dict[str, Callable[[object], bool]]:
    """Return RE2-based checkers for ``uri``, ``uri-reference``, ``iri``, ``iri-reference``.

    Returns:
        Format name -> checker (non-strings pass, as for every format); empty when
        ``rfc3986-validator`` is not installed (those formats are then not asserted).
    """
    try:
        grammar = importlib.import_module("rfc3986_validator")
        uri = _strip_verbose(grammar.URI_RE)
        relative = _strip_verbose(grammar.RELATIVE_REF_RE)
    except (ImportError, AttributeError):  # pragma: no cover - the extra is a dependency
        return {}
    iri, iri_relative = (p.replace(_UNRESERVED, _UNRESERVED + _UCSCHAR) for p in (uri, relative))
    patterns = {
        "uri": uri,
        "uri-reference": f"(?:{uri})|(?:{relative})",
        "iri": iri,
        "iri-reference": f"(?:{iri})|(?:{iri_relative})",
    }
    checkers: dict[str, Callable[[object], bool]] = {}
    for name, pattern in patterns.items():
        compiled = compile_pattern(pattern, ecma=False)

        def check(instance: object, _full: Callable[[str], bool] = compiled.fullmatch) -> bool:
            return not isinstance(instance, str) or bool(_full(instance))

        checkers[name] = check
    return checkers
