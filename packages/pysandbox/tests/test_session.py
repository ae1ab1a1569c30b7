"""Sessions without processes: the /proc parsing, the result frame, the final value, the repr.

Everything here reads bytes the session's code chose (its thread names in ``stat``, its result
frame, its values): each test feeds hostile variants.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from pysandbox import RunStatus, _figures
from pysandbox._config import compile_user_code
from pysandbox._session import (
    claim_of,
    one_shot_value,
    parse_frames,
    stat_cpu_seconds,
    stat_state,
)
from pysandbox.child import _values as child_values
from pysandbox.child._values import RESULT_FRAME_MAX, RESULT_NAME, bounded_repr, frame

TICK = os.sysconf("SC_CLK_TCK")


def _stat(comm: bytes, state: bytes, utime: int = 7, stime: int = 3) -> bytes:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    rest = b" ".join([state, b"1", b"2", b"2", b"0", b"-1", b"4194560", b"5", b"0", b"0", b"0"])
    return b"4242 (" + comm + b") " + rest + b" %d %d 0 0 20 0 1 0" % (utime, stime)


@pytest.mark.parametrize(
    "comm",
    [
        b"python",
        b"x) T (y",  # a fake state after a fake end of the name
        b") T",
        b"a) t 1 2 3 4 5 6 7 8 9 10 99999 99999 (b",  # fake fields and times too
        b"T) T) T",
        b"",
        b"((((",
    ],
)
def test_the_state_is_read_after_the_last_parenthesis(comm: bytes) -> None:
    assert stat_state(_stat(comm, b"R")) == "R"
    assert stat_state(_stat(comm, b"S")) == "S"
    assert stat_state(_stat(comm, b"T")) == "T"
    assert stat_cpu_seconds(_stat(comm, b"R", 700, 300)) == 1000 / TICK


@pytest.mark.parametrize("line", [b"", b"4242 (x", b"4242 (x)", b"4242 (x) RR 1", b"garbage"])
def test_a_malformed_stat_line_is_not_stopped(line: bytes) -> None:
    assert stat_state(line) not in ("T", "t")


@pytest.mark.parametrize("line", [b"", b"4242 (x) R 1 2", b"4242 (x) R" + b" z" * 20])
def test_a_malformed_stat_line_has_no_cpu(line: bytes) -> None:
    assert stat_cpu_seconds(line) is None


# -- the result frame -------------------------------------------------------------------------
def test_the_childs_frames_parse() -> None:
    assert claim_of(frame(1, True, None, False), 1) == (True, None)
    assert claim_of(frame(2, False, None, False), 2) == (False, None)
    value = {"type": "builtins.list", "text": "[1, 2]"}
    assert claim_of(frame(3, True, [1, 2], True), 3) == (True, value)
    assert parse_frames(frame(1, True, 5, True) + frame(2, False, None, False)) == [
        (1, True, {"type": "builtins.int", "text": "5"}),
        (2, False, None),
    ]


def test_the_frames_of_earlier_calls_are_skipped() -> None:
    # The tail of a call that stopped itself early ends during the next one.
    data = frame(4, True, "old", True) + frame(5, True, "new", True)
    assert claim_of(data, 5) == (True, {"type": "builtins.str", "text": "'new'"})


@pytest.mark.parametrize(
    "data",
    [
        frame(5, True, "a", True) + frame(5, True, "b", True),  # two claims for one call
        frame(4, True, "a", True),  # none for this call
        b"",
    ],
)
def test_not_exactly_one_frame_of_the_call_is_no_claim(data: bytes) -> None:
    assert claim_of(data, 5) is None


def _raw(status: bytes, has: bytes, kind: bytes, text: bytes, kind_len: int = -1) -> bytes:
    klen = len(kind) if kind_len < 0 else kind_len
    lengths = klen.to_bytes(4, "big") + len(text).to_bytes(4, "big")
    return b"V" + (1).to_bytes(8, "big") + status + has + lengths + kind + text


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"V",
        _raw(b"o", b"1", b"builtins.int", b"1") + b"extra",  # trailing bytes
        _raw(b"o", b"1", b"builtins.int", b"1")[:-1],  # cut
        _raw(b"x", b"1", b"builtins.int", b"1"),  # unknown status
        _raw(b"o", b"2", b"builtins.int", b"1"),  # unknown flag
        _raw(b"o", b"0", b"builtins.int", b"1"),  # no value, but a value
        _raw(b"o", b"1", b"builtins.int", b"1", kind_len=2**31),  # lengths that lie
        b"W" + _raw(b"o", b"1", b"a", b"1")[1:],  # wrong tag
        _raw(b"o", b"1", b"t", b"x" * RESULT_FRAME_MAX),  # over the size bound
        _raw(b"o", b"1", b"t" * 1000, b"x"),  # a type name over its bound
    ],
)
def test_a_malformed_frame_is_refused(data: bytes) -> None:
    assert claim_of(data, 1) is None
    if data[:1] == b"V" and len(data) > 30 and not data.endswith(b"extra"):
        assert parse_frames(data) is None


# -- the final value --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("code", "value"),
    [
        ("1 + 1", 2),
        ("x = 3\nx * 3", 9),
        ("def f():\n    return 4\nf()", 4),
        ("'s'", "s"),
    ],
)
def test_a_final_expression_is_stored_under_a_name_no_source_can_spell(
    code: str, value: Any
) -> None:
    compiled = compile_user_code(code)
    assert compiled is not None
    namespace: dict[str, Any] = {}
    exec(compiled, namespace)  # noqa: S102 - trusted test code
    assert namespace[RESULT_NAME] == value
    assert not RESULT_NAME.isidentifier()


@pytest.mark.parametrize("code", ["x = 1", "if True:\n    2", "for i in []:\n    i", "pass"])
def test_no_final_expression_stores_nothing(code: str) -> None:
    compiled = compile_user_code(code)
    assert compiled is not None
    namespace: dict[str, Any] = {}
    exec(compiled, namespace)  # noqa: S102 - trusted test code
    assert RESULT_NAME not in namespace


@pytest.mark.parametrize("code", ["def (", "x = ", "\x00"])
def test_code_that_does_not_compile_is_left_to_the_child(code: str) -> None:
    assert compile_user_code(code) is None


# -- the bounded repr -------------------------------------------------------------------------
class _Sub(list):  # type: ignore[type-arg]
    pass


class _Text(str):
    __slots__ = ()


class _Huge:
    def __repr__(self) -> str:
        return "y" * 10**6


class _Raises:
    def __repr__(self) -> str:
        raise KeyboardInterrupt


_LARGE: dict[str, Callable[[], object]] = {
    "list": lambda: list(range(10**6)),
    "list-subclass": lambda: _Sub(range(10**6)),
    "tuple": lambda: tuple(range(10**6)),
    "set": lambda: set(range(10**5)),
    "dict": lambda: {i: i for i in range(10**5)},
    "str": lambda: "x" * 10**7,
    "str-subclass": lambda: _Text("x" * 10**7),
    "bytes": lambda: b"x" * 10**7,
    "bytearray": lambda: bytearray(10**7),
    "int-over-the-digits-limit": lambda: 10**100_000,
    "nested": lambda: [[list(range(1000))] * 1000] * 10,
    "own-repr": _Huge,
    "range": lambda: range(10**8),
}


@pytest.mark.parametrize("name", sorted(_LARGE))
def test_a_repr_is_bounded(name: str) -> None:
    value = _LARGE[name]()
    text = bounded_repr(value)
    assert len(text) <= child_values.REPR_TEXT_MAX
    assert len(frame(1, True, value, True)) <= RESULT_FRAME_MAX


def test_a_repr_that_raises_anything_is_a_placeholder() -> None:
    assert bounded_repr(_Raises()) == "<repr failed: KeyboardInterrupt>"


def test_a_value_of_a_builtin_type_reads_as_itself() -> None:
    assert bounded_repr([1, "a", None]) == "[1, 'a', None]"
    assert bounded_repr({"k": (1, 2)}) == "{'k': (1, 2)}"
    assert bounded_repr(b"ab") == "b'ab'"


# -- a one-shot run's value on the figure channel ---------------------------------------------
def _v(data: bytes) -> bytes:
    return b"V" + len(data).to_bytes(4, "big") + data


def _f(data: bytes) -> bytes:
    return b"F" + len(data).to_bytes(4, "big") + data


VALUE = frame(0, True, 7, True)


def test_the_value_frame_follows_the_figures() -> None:
    channel = _f(b"png-1") + b"O" + (10).to_bytes(4, "big") + _v(VALUE)
    assert _figures.value_frame(channel) == VALUE
    assert _figures.parse_frames(channel, False) == ((b"png-1",), 1)  # the value is no figure
    assert one_shot_value(channel, RunStatus.OK) == {"type": "builtins.int", "text": "7"}


@pytest.mark.parametrize(
    "channel",
    [
        _v(VALUE) + _v(VALUE),  # two values
        _v(VALUE)[:-1],  # cut
        b"X" + _v(VALUE),  # garbage first
        _f(b"png")[:-1] + _v(VALUE),  # a cut figure swallows it
        _v(frame(1, True, 7, True)),  # not the number of a one-shot run
        _v(frame(0, False, None, False)),  # a failure claims no value
        b"",
    ],
)
def test_no_value_from_a_malformed_channel(channel: bytes) -> None:
    assert one_shot_value(channel, RunStatus.OK) is None


@pytest.mark.parametrize("status", [s for s in RunStatus if s is not RunStatus.OK])
def test_only_an_ok_run_has_a_value(status: RunStatus) -> None:
    assert one_shot_value(_v(VALUE), status) is None


def test_the_channel_cap_leaves_room_for_the_value() -> None:
    assert _figures.read_cap() >= (
        _figures.FIGURE_CHANNEL_BYTES + RESULT_FRAME_MAX + _figures.FRAME_HEADER_BYTES
    )


def test_the_type_of_a_value_names_the_module_of_c_types_too() -> None:
    """A C type keeps its module in its name, not its ``__dict__`` (new-user trial 2026-12-04:
    ``builtins.ndarray``, ``builtins.date``); a metaclass cannot change what is reported."""
    import collections
    import datetime

    from pysandbox.child._values import _type_name

    class Lying(type):
        @property
        def __module__(cls) -> str:  # type: ignore[override]
            return "somewhere.else"

    class Mine(metaclass=Lying):
        pass

    assert _type_name(datetime.date(2026, 12, 4)) == "datetime.date"
    assert _type_name(collections.OrderedDict()) == "collections.OrderedDict"
    assert _type_name(1) == "builtins.int"
    assert _type_name(Mine()).startswith(f"{__name__}.test_the_type_of_a_value")
    assert _type_name(Mine()).endswith(".<locals>.Mine")
    np = pytest.importorskip("numpy")
    assert _type_name(np.zeros(2)) == "numpy.ndarray"
    assert _type_name(np.float64(1.5)) == "numpy.float64"
