"""RunResult.violations are astguard Violations, pysandbox's own PS001 refusals included."""

from __future__ import annotations

import pathlib

import pytest

import astguard
from pysandbox import RunStatus, Sandbox


@pytest.mark.parametrize(
    ("source", "limit"),
    [
        ("x = 1\n" * 50, 100),  # many lines
        ("s = '" + "a" * 500 + "'\n", 200),  # one long line
        ("# " + "é" * 100 + "\n", 150),  # multi-byte characters: counted in UTF-8 bytes
    ],
    ids=["lines", "long-line", "utf-8"],
)
def test_a_source_over_the_limit_is_one_ps001_violation(
    workspace: pathlib.Path, source: str, limit: int
) -> None:
    policy = astguard.Policy().with_limits(max_source_bytes=limit)
    with Sandbox(workspace, require=(), policy=policy) as sb:
        result = sb.run(source)
    assert result.status is RunStatus.REJECTED
    (violation,) = result.violations
    assert type(violation) is astguard.Violation
    size = len(source.encode())
    assert violation == astguard.Violation(
        rule_id="PS001",
        message=f"source is {size} bytes; the limit is {limit}",
        line=1,
        col=0,
        end_line=1,
        end_col=0,
    )
    assert result.to_dict()["violations"] == [violation.to_dict()]
    assert result.layers == ("ast_gate",)
    assert result.to_dict()["layers"] == ["ast_gate"]


@pytest.mark.parametrize("code", ["import os\n", "open('/etc/passwd')\n__import__('sys')\n"])
def test_gate_violations_are_astguard_violations(workspace: pathlib.Path, code: str) -> None:
    with Sandbox(workspace, require=()) as sb:
        result = sb.run(code)
    assert result.status is RunStatus.REJECTED
    assert result.violations
    assert all(type(v) is astguard.Violation for v in result.violations)
    assert result.violations == astguard.check(code, sb._policy).violations
