"""Typed shapes of the tools' structured output (their JSON Schema is derived from these)."""

from __future__ import annotations

from typing import TypedDict

__all__ = ["RunOutput", "ViolationOutput"]


class ViolationOutput(TypedDict):
    """One finding of the static checker (astguard), 1-based lines, 0-based columns."""

    rule_id: str
    message: str
    line: int
    col: int
    end_line: int | None
    end_col: int | None


class RunOutput(TypedDict):
    """The outcome of one sandbox run (pysandbox ``RunResult``)."""

    status: str
    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    duration_ms: float
    cpu_time_ms: float
    peak_memory_bytes: int
    violations: list[ViolationOutput]
    layers: list[str]
