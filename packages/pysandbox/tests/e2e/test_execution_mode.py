"""The suite's execution mode is pysandbox's own documented default, not a patched signature.

``PYSANDBOX_EXECUTION`` (``spawn`` or ``warm``) is the default of every ``Sandbox`` built without
``execution=``; ``nox -s tests`` runs pysandbox's suite a second time with
``PYSANDBOX_EXECUTION=spawn``. These tests show the pass runs in the mode it was asked for, that
an explicit argument wins, and that a wrong value is refused rather than ignored.
"""

from __future__ import annotations

import os
import pathlib

import pytest

from pysandbox import EXECUTION_ENV, ExecutionMode, Sandbox, SandboxConfig, default_execution
from sandbox_helpers import KERNEL

REQUIRE = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()


def test_the_suite_runs_in_the_mode_its_environment_asks_for(
    tmp_path: pathlib.Path, sandbox: Sandbox
) -> None:
    """The spawn pass is a spawn pass: the fixture's and a bare ``Sandbox``'s requested mode."""
    asked = os.environ.get(EXECUTION_ENV, "warm")
    assert asked in tuple(ExecutionMode)
    assert sandbox.capabilities().execution["requested"] == asked
    with Sandbox(tmp_path, require=REQUIRE) as sb:
        assert sb.capabilities().execution["requested"] == asked
        assert sb.run("print(6 * 7)").stdout == "42\n"
        if asked == "spawn":  # spawn never falls back; warm may (no zygote on this machine)
            assert sb.capabilities().execution["mode"] == "spawn"


@pytest.mark.parametrize("mode", [str(mode) for mode in ExecutionMode])
def test_the_environment_sets_the_default(
    mode: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EXECUTION_ENV, mode)
    assert default_execution() is ExecutionMode(mode)
    assert SandboxConfig().execution is ExecutionMode(mode)
    with Sandbox(tmp_path, require=()) as sb:
        assert sb.capabilities().execution["requested"] == mode


def test_without_the_variable_the_default_is_warm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EXECUTION_ENV, raising=False)
    assert default_execution() is ExecutionMode.WARM
    assert SandboxConfig().execution is ExecutionMode.WARM


@pytest.mark.parametrize("mode", [str(mode) for mode in ExecutionMode])
def test_an_explicit_argument_wins_over_the_environment(
    mode: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = next(str(m) for m in ExecutionMode if m != mode)
    monkeypatch.setenv(EXECUTION_ENV, other)
    with Sandbox(tmp_path, require=(), execution=mode) as sb:
        assert sb.capabilities().execution["requested"] == mode


@pytest.mark.parametrize("value", ["", "fork", "Spawn", " warm", "spawn\n", "warm,spawn"])
def test_a_wrong_value_is_refused_not_ignored(
    value: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EXECUTION_ENV, value)
    with pytest.raises(ValueError, match=EXECUTION_ENV) as raised:
        default_execution()
    assert repr(value) in str(raised.value)
    with pytest.raises(ValueError, match=EXECUTION_ENV):
        Sandbox(tmp_path, require=())
    with pytest.raises(ValueError, match=EXECUTION_ENV):
        SandboxConfig()
    # An explicit mode does not read the variable at all.
    with Sandbox(tmp_path, require=(), execution="spawn") as sb:
        assert sb.capabilities().execution["requested"] == "spawn"
