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
import signal
import sys

from pysandbox.child import _kernel, _main
from pysandbox.child._values import RESULT_NAME, frame
from pysandbox.child._wire_check import WireError, check_message

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pysandbox._wire import ChildConfig, SessionCall

__all__ = ["serve"]


def _receive(fd: int, limit: int, key: bytes) -> SessionCall | None:
    """Read one call from the code pipe; ``None`` at its end, or a malformed or unkeyed call.

    A call is the session's key, an 8-byte little-endian length, then the marshalled call. A
    header that does not begin with the key ends the session (``None``): the stream is never
    read from the middle of a call, so bytes of the user's own source cannot pass for a call.
    """
    header = len(key) + 8
    data = b""
    while len(data) < header:
        chunk = os.read(fd, header - len(data))
        if not chunk:
            return None
        data += chunk
    if not key or data[: len(key)] != key:  # one try: a wrong header ends the session
        os.write(2, b"pysandbox: a call without the session's key: the session ends\n")
        return None
    size = int.from_bytes(data[len(key) :], "little")
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
    key = cfg.get("session_key", b"")
    figure_fd, caps = cfg.get("figure_fd", -1), cfg.get("figure_caps") or (0, 0)
    me = os.getpid()
    stop = True
    while True:
        try:
            # An interrupt (the parent's time-out) is ignored between calls: it never breaks a
            # read of the code pipe in the middle of a call (for every thread: the disposition
            # is the process's). The call's code runs with the default handler.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            if stop:
                stop = False
                os.kill(me, signal.SIGSTOP)
            call = _receive(code_fd, limit, key)
            if call is None:
                return 0
            stop = True
            signal.signal(signal.SIGINT, signal.default_int_handler)
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
            # A result pipe the code closed or replaced raises here and ends the session (an
            # exit the parent sees), rather than leaving a call without a claim to resume.
            _main._send(result_fd, frame(call["seq"], ok, value, has_value))
            del value
        except KeyboardInterrupt:
            continue  # raised while the call's code ran or its result was sent, never mid-read
