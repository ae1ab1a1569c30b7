"""One strict checker per ``format`` name, shared by JSON Schema and CSV.

Each checker takes a ``str`` and returns whether it is of the format; JSON Schema applies them
to strings only (other types pass, as the specifications say) and CSV string columns use the
same functions for ``format: "email"``, ``"uri"``, ``"uuid"``, so the two never disagree.
Checkers are strict where the RFCs are: an asserted format never passes because a check is weak
(``a@`` is not an email). Patterns are ours and fixed (no untrusted regex runs here); the long
URI/IRI grammars run on RE2.

``uri``, ``uri-reference``, ``iri`` and ``iri-reference``: ``jsonschema`` checks the IRI forms
with an Earley parser (``rfc3987-syntax``) that needs about a second per thousand characters,
and the URI forms with a backtracking regex. Here all four run on RE2 with the RFC 3986 grammar
regexes of ``rfc3986-validator`` (decimal octets without leading zeros, ``IPvFuture`` with
either case of ``v``); the IRI forms add RFC 3987's ``ucschar`` ranges to the unreserved
characters.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import importlib
import ipaddress
import re
import unicodedata
from collections.abc import Callable

import idna

from datavalidate._regex import compile_pattern
from datavalidate.exceptions import UnsupportedPatternError

__all__ = ["CSV_ONLY_FORMATS", "FORMATS", "check_format", "uri_checkers"]

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


_LOOSE_OCTET = "(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"


def _strictly(pattern: str) -> str:
    """RFC 3986 exactly: dec-octet has no leading zero; the ``v`` of IPvFuture is any case."""
    return pattern.replace(_LOOSE_OCTET, _OCTET).replace("|v[0-9A-Fa-f]+", "|[vV][0-9A-Fa-f]+")


def uri_checkers() -> dict[str, Callable[[object], bool]]:
    """Return RE2-based checkers for ``uri``, ``uri-reference``, ``iri``, ``iri-reference``.

    Returns:
        Format name -> checker (non-strings pass, as for every format); empty when
        ``rfc3986-validator`` is not installed (those formats are then not asserted).
    """
    try:
        grammar = importlib.import_module("rfc3986_validator")
        uri = _strictly(_strip_verbose(grammar.URI_RE))
        relative = _strictly(_strip_verbose(grammar.RELATIVE_REF_RE))
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


_ASCII_DIGITS = "0-9"
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})\Z").match
_TIME = re.compile(
    r"([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))\Z"
).match
_DURATION = re.compile(
    r"P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)"
    r"(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?"
    r"|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
    r"|[0-9]+W)\Z"
).match
_UUID = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z"
).match
_IPV4 = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}\Z").match
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\Z").match
_ATOM = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_DOT_STRING = re.compile(rf"{_ATOM}(?:\.{_ATOM})*\Z").match
_QUOTED = re.compile(r'"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"\Z').match
_ATOM_IDN = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~\x80-\U0010ffff-]+"
_DOT_STRING_IDN = re.compile(rf"{_ATOM_IDN}(?:\.{_ATOM_IDN})*\Z").match
_QUOTED_IDN = re.compile(
    r'"(?:[\x20\x21\x23-\x5b\x5d-\x7e\x80-\U0010ffff]|\\[\x20-\x7e])*"\Z'
).match
_JSON_POINTER = re.compile(r"(?:/(?:[^/~]|~[01])*)*\Z").match
_RELATIVE_POINTER = re.compile(r"(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^/~]|~[01])*)*)\Z").match
_IDN_DOTS = re.compile("[.\u3002\uff0e\uff61]")
_UCS = _UCSCHAR + r"\x{E000}-\x{F8FF}\x{F0000}-\x{FFFFD}\x{100000}-\x{10FFFD}"
_VARCHAR = r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})"
_VARSPEC = rf"{_VARCHAR}(?:\.?{_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\*)?"
_URI_TEMPLATE = compile_pattern(
    rf"(?:[\x21\x23\x24\x26-\x3B\x3D\x3F-\x5B\x5D\x5F\x61-\x7A\x7E{_UCS}]"
    rf"|%[0-9A-Fa-f]{{2}}|\{{[+#./;?&=,!@|]?{_VARSPEC}(?:,{_VARSPEC})*\}})*",
    ecma=False,
)


def _date(value: str) -> bool:
    found = _DATE(value)
    if not found:
        return False
    try:
        dt.date(*map(int, found.groups()))
    except ValueError:
        return False
    return True


def _time(value: str) -> bool:
    """RFC 3339 ``full-time``: an offset is required; a leap second only at 23:59:60 UTC."""
    found = _TIME(value)
    if not found:
        return False
    hour, minute, second = int(found[1]), int(found[2]), int(found[3])
    sign, off_hour, off_minute = found[4], int(found[5] or 0), int(found[6] or 0)
    if hour > 23 or minute > 59 or second > 60 or off_hour > 23 or off_minute > 59:
        return False
    if second == 60:
        offset = (off_hour * 60 + off_minute) * (-1 if sign == "-" else 1)
        utc = (hour * 60 + minute - offset) % (24 * 60)
        return utc == 23 * 60 + 59
    return True


def _date_time(value: str) -> bool:
    date, separator, time = value[:10], value[10:11], value[11:]
    return separator in ("T", "t") and _date(date) and _time(time)


def _hostname_labels(labels: list[str]) -> bool:
    for label in labels:
        if not _LABEL(label):
            return False
        if label[2:4] == "--":
            if label[:4].lower() != "xn--":
                return False
            try:
                idna.decode(label.lower())
            except (idna.IDNAError, UnicodeError, ValueError):
                return False
    return True


def _hostname(value: str) -> bool:
    """RFC 1123 host name; ``xn--`` labels must be valid IDNA2008 A-labels."""
    if not value.isascii() or not 1 <= len(value) <= 253:
        return False
    return _hostname_labels(value.split("."))


def _idn_hostname(value: str) -> bool:
    """RFC 5890 internationalized host name (IDNA2008), no trailing or empty label."""
    if not value or len(value) > 253:
        return False
    labels = _IDN_DOTS.split(value)
    if any(not label for label in labels):
        return False
    if all(label.isascii() for label in labels):
        return _hostname_labels(labels)
    try:
        encoded = idna.encode(".".join(labels))
    except (idna.IDNAError, UnicodeError, ValueError):
        return False
    return len(encoded) <= 253 and _hostname_labels(encoded.decode("ascii").split("."))


def _ipv4(value: str) -> bool:
    return bool(_IPV4(value))


def _ipv6(value: str) -> bool:
    if not value.isascii() or "%" in value or not value or value[-1] == "\n":
        return False
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    return True


def _address_literal(domain: str) -> bool:
    inner = domain[1:-1]
    if inner[:5].lower() == "ipv6:":
        return _ipv6(inner[5:])
    return _ipv4(inner)


def _mailbox(value: str, *, idn: bool) -> bool:
    """RFC 5321 ``Mailbox`` (RFC 6531 for ``idn-email``): local part at the last ``@``."""
    local, at, domain = value.rpartition("@")
    if not at or not local or not domain or len(local.encode("utf-8")) > 64:
        return False
    if local.startswith('"'):
        if not (_QUOTED_IDN if idn else _QUOTED)(local):
            return False
    elif not (_DOT_STRING_IDN if idn else _DOT_STRING)(local):
        return False
    if domain.startswith("[") and domain.endswith("]"):
        return _address_literal(domain)
    return _idn_hostname(unicodedata.normalize("NFC", domain)) if idn else _hostname(domain)


def _email(value: str) -> bool:
    return value.isascii() and _mailbox(value, idn=False)


def _idn_email(value: str) -> bool:
    return _mailbox(value, idn=True)


def _uuid(value: str) -> bool:
    return bool(_UUID(value))


def _duration(value: str) -> bool:
    return bool(_DURATION(value))


def _json_pointer(value: str) -> bool:
    return bool(_JSON_POINTER(value))


def _relative_json_pointer(value: str) -> bool:
    return bool(_RELATIVE_POINTER(value))


def _uri_template(value: str) -> bool:
    return _URI_TEMPLATE.fullmatch(value)


def _regex(value: str) -> bool:
    try:
        compile_pattern(value)
    except UnsupportedPatternError:
        return False
    return True


def _binary(value: str) -> bool:
    """Table Schema ``binary``: base64 text (RFC 4648 alphabet, padding required)."""
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _wrap(check: Callable[[object], bool]) -> Callable[[str], bool]:
    def strict(value: str) -> bool:
        return check(value)

    return strict


_URI_FORMATS = {name: _wrap(check) for name, check in uri_checkers().items()}

#: Format name -> strict checker of a ``str``. JSON Schema asserts every one of them (in every
#: draft); CSV string columns use ``email``, ``uri``, ``uuid`` and ``binary``.
FORMATS: dict[str, Callable[[str], bool]] = {
    "date": _date,
    "time": _time,
    "date-time": _date_time,
    "duration": _duration,
    "email": _email,
    "idn-email": _idn_email,
    "hostname": _hostname,
    "idn-hostname": _idn_hostname,
    "ipv4": _ipv4,
    "ipv6": _ipv6,
    **_URI_FORMATS,
    "uri-template": _uri_template,
    "uuid": _uuid,
    "json-pointer": _json_pointer,
    "relative-json-pointer": _relative_json_pointer,
    "regex": _regex,
}
#: Formats only CSV knows (Table Schema ``binary``); not JSON Schema format names.
CSV_ONLY_FORMATS: dict[str, Callable[[str], bool]] = {"binary": _binary}


def check_format(name: str, value: str) -> bool:
    """Whether ``value`` is of format ``name``.

    Raises:
        KeyError: ``name`` is not a known format (see :data:`FORMATS`).
    """
    return FORMATS[name](value)
