"""The answer checks of ConfinedPool, without a process: a worker's answer is hostile."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pysandbox._answer_schema import compile_schema
from pysandbox._confined_pool import RESERVED_KINDS, _answer_error, _loads
from pysandbox.exceptions import WorkerProtocolError

REPORT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["valid", "errors"],
    "properties": {
        "valid": {"type": "boolean"},
        "count": {"type": "integer", "minimum": 0, "maximum": 100},
        "errors": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 5}},
        "draft": {"enum": ["draft2020-12", "draft7"]},
        "kind": {"const": 1},
    },
}


@pytest.mark.parametrize(
    "answer",
    [
        {"valid": "yes", "errors": []},
        {"valid": 1, "errors": []},
        {"valid": True},
        {"valid": True, "errors": [], "__class__": "os.system"},
        {"valid": True, "errors": ["toolong"]},
        {"valid": True, "errors": ["a", "b", "c"]},
        {"valid": True, "errors": [1]},
        {"valid": True, "errors": [], "count": -1},
        {"valid": True, "errors": [], "count": 101},
        {"valid": True, "errors": [], "count": True},
        {"valid": True, "errors": [], "count": 1.5},
        {"valid": True, "errors": [], "draft": "draft4"},
        {"valid": True, "errors": [], "kind": True},
        [],
        None,
    ],
)
def test_an_answer_of_the_wrong_shape_is_refused(answer: Any) -> None:
    with pytest.raises(ValueError, match=r"^answer"):
        compile_schema(REPORT)(answer)


@pytest.mark.parametrize(
    "answer",
    [
        {"valid": True, "errors": []},
        {"valid": False, "errors": ["a", "bcdef"], "count": 0, "draft": "draft7", "kind": 1},
    ],
)
def test_an_answer_of_the_right_shape_is_returned_as_is(answer: Any) -> None:
    assert compile_schema(REPORT)(answer) is answer


@pytest.mark.parametrize(
    "schema",
    [
        {"pattern": "^a"},
        {"type": "object", "properties": {"a": {"anyOf": []}}},
        {"items": {"$ref": "#"}},
        {"type": "float"},
        {"type": []},
        {"additionalProperties": {"format": "email"}},
        [],
    ],
)
def test_a_schema_with_a_keyword_that_would_not_be_checked_is_refused(schema: Any) -> None:
    with pytest.raises(ValueError, match=r"^answer_schema"):
        compile_schema(schema)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"NaN\n", "not JSON (ValueError)"),
        (b'{"ok": Infinity}\n', "not JSON (ValueError)"),
        (b'{"ok": -Infinity}\n', "not JSON (ValueError)"),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON (RecursionError)"),
        (b"{'ok': 1}", "not JSON (JSONDecodeError)"),
    ],
)
def test_an_answer_line_that_is_not_strict_json_is_malformed(line: bytes, reason: str) -> None:
    with pytest.raises(WorkerProtocolError, match=re.escape(reason)):
        _loads(line)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"ok": 1, "error": 2}, "exactly one key"),
        ({"result": 1}, "'error' is not an object"),
        ({"error": {"kind": "schema", "message": "m"}}, "unknown error kind 'schema'"),
        ({"error": {"kind": ["memory"], "message": "m"}}, "unknown error kind"),
        ({"error": {"kind": "failed", "message": "m" * 4001}}, "at most 4000"),
        ({"error": {"kind": "failed", "message": "m", "extra": 1}}, "'error' is not an object"),
    ],
)
def test_an_answer_envelope_outside_the_protocol_is_malformed(answer: Any, reason: str) -> None:
    with pytest.raises(WorkerProtocolError, match=reason):
        _answer_error(answer, RESERVED_KINDS)


def test_the_kinds_the_pool_accepts_pass() -> None:
    assert _answer_error({"ok": None}, RESERVED_KINDS) is None
    kinds = RESERVED_KINDS | {"schema"}
    assert _answer_error({"error": {"kind": "schema", "message": "m"}}, kinds) == ("schema", "m")
