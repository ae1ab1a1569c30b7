"""A session child: one confined interpreter that runs many calls in one namespace.

Standard library only, loaded by the warm zygote (:mod:`pysandbox._bootstrap`). The zygote
forks a session child like a ready child (:mod:`pysandbox._pool`): every layer is applied by
the same :func:`pysandbox.child._main._set_up`, the setup channel says ready, and the child
moves into the workspace. Then it loops:

1. it stops itself (``SIGSTOP`` to its own pid): the parent confirms that every thread is
   stopped and resumes it (``SIGCONT``) only to run a call;
2. it reads one call from its code pipe (an 8-byte little-endian length and a ``marshal`` dump
   of :class:`pysandbox._wire.SessionCall`, written by the parent only); end of file ends the
   child;
3. it runs the code object in the session's one globals dict (what earlier calls defined
   stays), renders and closes the figures left open, flushes stdout and stderr;
4. it writes one *result frame* to its result pipe (see :func:`frame`: the call's number, its
   claimed status and value) and goes back to 1.

``SystemExit`` ends the child as it ends a one-shot run (:func:`pysandbox.child._main.finalize`,
then ``os._exit`` with the status). ``SIGINT`` raises ``KeyboardInterrupt`` in the call (the
parent's first answer to a time-out); an interrupt that arrives between calls is dropped.

Everything the child writes after its first call is written by an interpreter the user's code
controls: the parent takes the frame's status (``ok``/``error``) and value as the user's own
claims, bounded in size and checked in shape, and decides every outcome (time-out, memory,
exit, kill) from its own observations (:mod:`pysandbox._session`).
"""

from __future__ import annotations

import marshal
import os
import reprlib
import signal
import sys

from pysandbox.child import _kernel, _main
from pysandbox.child._wire_check import WireError, check_message

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pysandbox._wire import ChildConfig, SessionCall

__all__ = [
    "FRAME_HEADER_BYTES",
    "REPR_TEXT_MAX",
    "RESULT_FRAME_MAX",
    "RESULT_NAME",
    "TYPE_TEXT_MAX",
    "bounded_repr",
    "frame",
    "serve",
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


def _type_name(value: object) -> str:
    try:
        cls = type(value)
        module = cls.__dict__.get("__module__", "builtins")
        module = str.__str__(module) if isinstance(module, str) else "?"
        return (module + "." + str.__str__(cls.__qualname__))[:TYPE_TEXT_MAX]
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


def _receive(fd: int, limit: int) -> SessionCall | None:
    """Read one call from the code pipe; ``None`` at its end (or a malformed call)."""
    data = b""
    while len(data) < 8:
        chunk = os.read(fd, 8 - len(data))
        if not chunk:
            return None
        data += chunk
    size = int.from_bytes(data, "little")
    if size > limit:
        return None
    parts = []
    while size > 0:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        size -= len(chunk)
    call = marshal.loads(b"".join(parts))  # noqa: S302 - written by the parent only
    try:
        check_message(_main.WIRE_SCHEMAS, "SessionCall", call)
    except WireError as exc:
        os.write(2, f"pysandbox: the call was refused ({exc})\n".encode())
        return None
    received: SessionCall = call
    return received


def _exit_status(code: object) -> int:
    """The process status of ``sys.exit(code)``, as a one-shot run exits."""
    if code is None:
        return 0
    if isinstance(code, int):
        return int(code) & 0xFF
    try:  # noqa: SIM105
        sys.stderr.write(f"{code}\n")
    except Exception:  # noqa: S110
        pass
    return 1


def _close_figures() -> None:
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        try:  # noqa: SIM105
            pyplot.close("all")
        except BaseException:  # noqa: S110 - user code may have broken pyplot
            pass


def serve(cfg: ChildConfig, libc: Any, ruleset: int) -> int:
    """Apply every layer, then serve calls until the code pipe ends or the code exits.

    Args:
        cfg: The session's configuration (``code_fd``, ``result_fd`` and ``max_code_bytes``
            set; checked by the zygote already).
        libc: The zygote's libc.
        ruleset: The zygote's prebuilt Landlock ruleset, or -1.

    Returns:
        The exit status (0 at the end of the code pipe; the code's own after ``sys.exit``).
    """
    try:
        user_ns = _main._set_up(cfg, libc, ruleset)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    except BaseException as exc:
        _kernel._fail(f"{type(exc).__name__}: {exc}")
        raise  # pragma: no cover - _fail does not return
    _kernel.report_setup(_kernel.SETUP_READY)
    os.chdir(cfg["workspace"])
    code_fd, result_fd = cfg["code_fd"], cfg["result_fd"]
    limit = cfg["max_code_bytes"]
    figure_fd, caps = cfg.get("figure_fd", -1), cfg.get("figure_caps") or (0, 0)
    me = os.getpid()
    stop = True
    while True:
        try:
            if stop:
                stop = False
                os.kill(me, signal.SIGSTOP)
            call = _receive(code_fd, limit)
            if call is None:
                return 0
            stop = True
            code_obj, compile_error = _main._prepare_code(
                {**cfg, "code": call["code"], "code_object": call["code_object"]}
            )
            ok, value, has_value = False, None, False
            if compile_error is not None:
                _main._print_exception(compile_error)
            else:
                user_ns.pop(RESULT_NAME, None)
                try:
                    exec(code_obj, user_ns)  # noqa: S102 - the point of the sandbox
                except SystemExit as exc:
                    status = _exit_status(exc.code)
                    _main.finalize()
                    return status
                except BaseException as exc:
                    tb = exc.__traceback__
                    # Without this loop's own frame (the user's start at the exec).
                    _main._print_exception(exc.with_traceback(tb.tb_next if tb else None))
                else:
                    ok = True
                value = user_ns.pop(RESULT_NAME, None)
                has_value = ok and value is not None
            _main.show_figures(figure_fd, caps)
            _close_figures()
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except Exception:  # noqa: S110 - the user's code may have replaced them
                pass
            _main._send(result_fd, frame(call["seq"], ok, value, has_value))
            del value
        except KeyboardInterrupt:
            continue
