"""The final value of a run or a session call: its bounded ``repr`` and its result frame.

Standard library only, loaded in every confined interpreter (:mod:`pysandbox._bootstrap`).
The parent compiles a last top-level expression statement as an assignment to
:data:`RESULT_NAME` (:func:`pysandbox._session.compile_session_code`); after the code the child
pops that name and sends ``{"type", "text"}`` of a value that is not ``None`` in a frame
(:func:`frame`), the text bounded here, in the child, before it is sent: a ``repr`` of 10**8
elements is never built. The parent parses a frame by checked slicing only
(:func:`pysandbox._session.parse_frames`): the bytes are the user's code's.
"""

from __future__ import annotations

import os
import reprlib
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "FRAME_HEADER_BYTES",
    "REPR_TEXT_MAX",
    "RESULT_FRAME_MAX",
    "RESULT_NAME",
    "TYPE_TEXT_MAX",
    "bounded_repr",
    "frame",
    "send_value",
]

#: The global the parent's compiled code stores the value of a final expression statement in
#: (not an identifier: no source can name it). Popped by the child after each call.
RESULT_NAME = "<pysandbox result>"
#: Most characters of a value's ``repr`` the child sends (cut in the child, before sending).
REPR_TEXT_MAX = 4000
#: Most characters of a value's type name (``module.qualname``) the child sends.
TYPE_TEXT_MAX = 256
#: A frame's header: ``b"V"``, the call's number (8 bytes big-endian), status
#: (``b"o"``/``b"e"``), has-value (``b"0"``/``b"1"``), the type's and the text's UTF-8
#: lengths (4 bytes big-endian each).
FRAME_HEADER_BYTES = 19
#: Most bytes of a result frame (a longer frame is malformed).
RESULT_FRAME_MAX = FRAME_HEADER_BYTES + 4 * (REPR_TEXT_MAX + TYPE_TEXT_MAX)
#: pandas display options while a value is represented (rows, columns, cell width).
_PANDAS_OPTIONS = ("display.max_rows", 20, "display.max_columns", 20, "display.max_colwidth", 80)


class _BoundedRepr(reprlib.Repr):
    """``reprlib`` limits, applied to subclasses of the builtin types too (by their base)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxtuple = self.maxlist = self.maxarray = self.maxdeque = 20
        self.maxdict = self.maxset = self.maxfrozenset = 20
        self.maxstring = self.maxother = self.maxlong = REPR_TEXT_MAX

    def repr1(self, x: Any, level: int) -> str:
        for base in (str, int, list, tuple, dict, set, frozenset):
            if isinstance(x, base):
                if type(x).__repr__ is base.__repr__:
                    return str(getattr(self, "repr_" + base.__name__)(x, level))
                break
        if isinstance(x, (bytes, bytearray)) and type(x).__repr__ in (
            bytes.__repr__,
            bytearray.__repr__,
        ):
            shown = REPR_TEXT_MAX // 8  # a byte takes at most 4 characters
            head = repr(bytes(x[:shown]))
            return head if len(x) <= shown else head + "..."
        return str(super().repr1(x, level))

    def repr_int(self, x: Any, level: int) -> str:
        try:
            return int.__repr__(x)
        except ValueError:  # over sys.get_int_max_str_digits(): never built
            return f"<int of {x.bit_length()} bits>"


def bounded_repr(value: object) -> str:
    """The ``repr`` of ``value`` with ``reprlib``'s limits, at most :data:`REPR_TEXT_MAX` long.

    Containers show their first elements only (a list of 10**8 elements is never walked);
    pandas objects are shown under small display options when pandas is loaded; a failing
    ``repr`` gives a placeholder naming its exception.

    Args:
        value: The final value of a call.

    Returns:
        The bounded text.
    """
    try:
        pandas = sys.modules.get("pandas")
        if pandas is not None:
            with pandas.option_context(*_PANDAS_OPTIONS):
                text = _BoundedRepr().repr(value)
        else:
            text = _BoundedRepr().repr(value)
    except BaseException as exc:  # the value's own __repr__ is user code
        try:
            name = type(exc).__name__
        except BaseException:
            name = "exception"
        text = f"<repr failed: {name}>"
    return text[:REPR_TEXT_MAX]


_TYPE_MODULE = type.__dict__["__module__"]
_TYPE_QUALNAME = type.__dict__["__qualname__"]


def _type_name(value: object) -> str:
    try:
        cls = type(value)
        # type's own descriptors, never a metaclass's: a C type's module is in its tp_name
        # (numpy.ndarray, datetime.date), a class's in its __dict__.
        module = _TYPE_MODULE.__get__(cls, type)
        qualname = _TYPE_QUALNAME.__get__(cls, type)
        module = str.__str__(module) if isinstance(module, str) else "?"
        return (module + "." + str.__str__(qualname))[:TYPE_TEXT_MAX]
    except BaseException:
        return "?"


def frame(seq: int, ok: bool, value: object, has_value: bool) -> bytes:
    """One result frame: the call's claimed status and, if any, its value's type and text.

    Args:
        seq: The call's number (from its :class:`pysandbox._wire.SessionCall`).
        ok: The code ended without an exception.
        value: The final expression statement's value.
        has_value: ``value`` is there (a final expression statement whose value is not None).

    Returns:
        At most :data:`RESULT_FRAME_MAX` bytes.
    """
    kind = text = b""
    if has_value:
        kind = _type_name(value).encode("utf-8", "backslashreplace")
        text = bounded_repr(value).encode("utf-8", "backslashreplace")
    return (
        b"V"
        + (seq & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big")
        + (b"o" if ok else b"e")
        + (b"1" if has_value else b"0")
        + len(kind).to_bytes(4, "big")
        + len(text).to_bytes(4, "big")
        + kind
        + text
    )


def send_value(fd: int, value: object) -> None:
    """Send a one-shot run's final value on the figure channel (a ``V`` frame; ``None``: none).

    The frame is ``b"V"``, a 4-byte big-endian length and a :func:`frame` of call number 0
    (:mod:`pysandbox._figures`). Nothing is sent without a channel or for ``None``; a failure
    to write is ignored (the run's status stands).

    Args:
        fd: The figure channel's write end, or -1.
        value: The final expression statement's value.
    """
    if fd < 0 or value is None:
        return
    try:
        data = frame(0, True, value, True)
        view = memoryview(b"V" + len(data).to_bytes(4, "big") + data)
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:  # noqa: S110 - the user's value or a closed channel: no result
        pass
