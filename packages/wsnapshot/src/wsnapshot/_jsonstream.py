"""An incremental reader of one JSON document from a binary file, in bounded memory.

The standard library parses JSON from a complete string only. Streaming import
(:meth:`wsnapshot._record.Records.import_stream`) reads a record whose content strings may be
hundreds of megabytes: :class:`JsonStream` reads the file a buffer at a time, returns small
values whole (bounded in length and depth) and hands the decoded text of chosen strings to a
callback piece by piece. Input is UTF-8 (RFC 8259); every syntax error raises
:class:`~wsnapshot.exceptions.InvalidRecord` with the byte offset.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable
from typing import Any, BinaryIO

from wsnapshot.exceptions import InvalidRecord

__all__ = ["JsonStream"]

_READ = 256 * 1024
_WS = b" \t\n\r"
_ESCAPES = {
    ord('"'): '"',
    ord("\\"): "\\",
    ord("/"): "/",
    ord("b"): "\b",
    ord("f"): "\f",
    ord("n"): "\n",
    ord("r"): "\r",
    ord("t"): "\t",
}
_SPECIAL = re.compile(rb'["\\\x00-\x1f]')
_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_MAX_NUMBER = 64


class JsonStream:
    """Tokens and values of one JSON document read from ``fh`` a buffer at a time.

    Args:
        fh: A binary file object (``read(n)``).
        max_string: Longest string returned whole by :meth:`value` or :meth:`string`, in
            characters.
        max_depth: Deepest nesting :meth:`value` accepts.
        max_items: Most elements (array items and object members, at every level) one
            :meth:`value` may hold.
    """

    def __init__(
        self,
        fh: BinaryIO,
        *,
        max_string: int = 1 << 16,
        max_depth: int = 16,
        max_items: int = 1024,
    ) -> None:
        self._fh = fh
        self._buf = b""
        self._pos = 0
        self._base = 0  # offset in the file of self._buf[0]
        self._eof = False
        self.max_string = max_string
        self.max_depth = max_depth
        self.max_items = max_items
        self._items = 0

    # -- the buffer --------------------------------------------------------------------------------

    def fail(self, reason: str) -> InvalidRecord:
        """An :class:`InvalidRecord` naming the current byte offset."""
        return InvalidRecord("", f"{reason} at byte {self._base + self._pos}")

    def _fill(self) -> bool:
        if self._eof:
            return False
        more = self._fh.read(_READ)
        if not more:
            self._eof = True
            return False
        self._base += self._pos
        self._buf = self._buf[self._pos :] + more
        self._pos = 0
        return True

    def _need(self, n: int) -> None:
        while len(self._buf) - self._pos < n:
            if not self._fill():
                raise self.fail("unexpected end of the record")

    def peek(self) -> bytes:
        """The next byte that is not white space (not consumed), or ``b""`` at the end."""
        while True:
            buf, pos = self._buf, self._pos
            while pos < len(buf) and buf[pos] in _WS:
                pos += 1
            self._pos = pos
            if pos < len(buf):
                return buf[pos : pos + 1]
            if not self._fill():
                return b""

    def expect(self, token: bytes) -> None:
        """Consume ``token`` (one byte) after white space.

        Raises:
            InvalidRecord: Something else comes next.
        """
        if self.peek() != token:
            raise self.fail(f"expected {token.decode()!r}")
        self._pos += 1

    def at_end(self) -> bool:
        """Whether only white space is left."""
        return self.peek() == b""

    # -- strings -----------------------------------------------------------------------------------

    def string_pieces(self, sink: Callable[[str], None]) -> int:
        """Read a string, handing its decoded text to ``sink`` piece by piece.

        Returns:
            Its length in characters.

        Raises:
            InvalidRecord: Not a string, bad escape, raw control character, not UTF-8.
        """
        self.expect(b'"')
        dec = codecs.getincrementaldecoder("utf-8")("strict")
        total = 0
        while True:
            self._need(1)
            buf = self._buf
            m = _SPECIAL.search(buf, self._pos)
            end = m.start() if m else len(buf)
            if end > self._pos:
                try:
                    text = dec.decode(buf[self._pos : end])
                except UnicodeDecodeError:
                    raise self.fail("string is not valid UTF-8") from None
                self._pos = end
                if text:
                    total += len(text)
                    sink(text)
            if m is None:
                continue
            ch = buf[end]
            if ch == 0x22:  # closing quote
                try:
                    dec.decode(b"", final=True)
                except UnicodeDecodeError:
                    raise self.fail("string is not valid UTF-8") from None
                self._pos = end + 1
                return total
            if ch != 0x5C:
                raise self.fail("raw control character in a string")
            text = self._escape()
            total += len(text)
            sink(text)

    def _escape(self) -> str:
        self._need(2)
        kind = self._buf[self._pos + 1]
        if kind in _ESCAPES:
            self._pos += 2
            return _ESCAPES[kind]
        if kind != ord("u"):
            raise self.fail("invalid escape in a string")
        code = self._hex4(2)
        self._pos += 6
        if 0xD800 <= code < 0xDC00:  # a high surrogate: join a low one that follows
            try:
                self._need(6)
            except InvalidRecord:
                return chr(code)
            if self._buf[self._pos : self._pos + 2] == b"\\u":
                low = self._hex4(2)
                if 0xDC00 <= low < 0xE000:
                    self._pos += 6
                    return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))
        return chr(code)

    def _hex4(self, at: int) -> int:
        self._need(at + 4)
        raw = self._buf[self._pos + at : self._pos + at + 4]
        try:
            if len(raw) != 4 or not all(c in b"0123456789abcdefABCDEF" for c in raw):
                raise ValueError
            return int(raw, 16)
        except ValueError:
            raise self.fail("invalid \\u escape") from None

    def string(self, limit: int | None = None) -> str:
        """Read a string of at most ``limit`` characters (default ``max_string``).

        Raises:
            InvalidRecord: Not a string, or too long.
        """
        parts: list[str] = []
        size = [0]
        most = self.max_string if limit is None else limit

        def keep(text: str) -> None:
            size[0] += len(text)
            if size[0] > most:
                raise self.fail(f"string longer than {most} characters")
            parts.append(text)

        self.string_pieces(keep)
        return "".join(parts)

    def _count(self) -> None:
        self._items += 1
        if self._items > self.max_items:
            raise self.fail(f"a value with more than {self.max_items} elements")

    # -- values ------------------------------------------------------------------------------------

    def value(self, depth: int = 0) -> Any:
        """Read one small JSON value (strings, nesting and element count bounded).

        Raises:
            InvalidRecord: Malformed, too deep, more than ``max_items`` elements, or a string
                too long.
        """
        if depth == 0:
            self._items = 0
        if depth > self.max_depth:
            raise self.fail(f"nested deeper than {self.max_depth}")
        head = self.peek()
        if head == b'"':
            return self.string()
        if head == b"{":
            self._pos += 1
            obj: dict[str, Any] = {}
            if self.peek() == b"}":
                self._pos += 1
                return obj
            while True:
                self._count()
                key = self.string()
                self.expect(b":")
                if key in obj:
                    raise self.fail(f"duplicate key {key!r}")
                obj[key] = self.value(depth + 1)
                if self.peek() == b",":
                    self._pos += 1
                    continue
                self.expect(b"}")
                return obj
        if head == b"[":
            self._pos += 1
            arr: list[Any] = []
            if self.peek() == b"]":
                self._pos += 1
                return arr
            while True:
                self._count()
                arr.append(self.value(depth + 1))
                if self.peek() == b",":
                    self._pos += 1
                    continue
                self.expect(b"]")
                return arr
        for word, val in ((b"true", True), (b"false", False), (b"null", None)):
            if head == word[:1]:
                self._need(len(word))
                if self._buf[self._pos : self._pos + len(word)] != word:
                    raise self.fail("invalid literal")
                self._pos += len(word)
                return val
        with_more = self._pos + _MAX_NUMBER
        while len(self._buf) < with_more and self._fill():
            with_more = self._pos + _MAX_NUMBER
        m = _NUMBER.match(self._buf, self._pos)
        if head == b"" or m is None or m.end() == with_more:
            raise self.fail("expected a JSON value")
        self._pos = m.end()
        return json.loads(m.group())
