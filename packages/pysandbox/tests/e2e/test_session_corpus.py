"""The public red-team corpora run inside sessions: a fresh session per case.

Each case's code runs as the second call of a fresh session (after a first call that defines a
global, so the child has been resumed once already) and is judged by the harness's own rules,
as for one-shot runs (``test_corpus.py``): the escapes hold, the benign cases print exactly
their expected output. The session is closed after the call, so the harness's check that no
process of the run remains applies to the session's child too.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from pysandbox import RunResult, Sandbox
from pysandbox.runner import TESTING_KERNEL_ONLY_ENV
from sandbox_helpers import KERNEL, needs_kernel
from test_corpus import cases, harness


class _InSession:
    """A sandbox whose ``run`` runs the code as the second call of a fresh session."""

    def __init__(self, workspace: pathlib.Path, *, kernel_only: bool = False) -> None:
        require = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()
        extra: dict[str, Any] = {"_testing_kernel_only": True} if kernel_only else {}
        self._sandbox = Sandbox(
            workspace,
            limits=harness.LIMITS,
            require=require,
            execution="warm",
            ready_children=0,
            **extra,
        )

    def run(self, code: str, *, timeout: float | None = None) -> RunResult:
        with self._sandbox.open_session("corpus") as session:
            first = session.run("warmed = True")
            assert first.ok, first.stderr
            return session.run(code, timeout=timeout)

    def close(self) -> None:
        self._sandbox.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sandbox, name)


@pytest.fixture(scope="module")
def listener() -> Any:
    lst = harness.Listener()
    yield lst
    lst.close()


@pytest.mark.parametrize("case", cases("escapes.jsonl"), ids=lambda c: c["id"])
def test_escape_case_in_a_session(
    case: dict[str, Any], tmp_path: pathlib.Path, listener: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {"SANDBOX_CANARY_SECRET": "secret-canary-value", "CANARY_PROXY": "http://c.invalid:9"}
    for key, value in secrets.items():
        monkeypatch.setenv(key, value)
    report = harness.run_escape(_InSession, case, tmp_path, listener, secrets)
    assert report.problems == []
    assert report.passed


@pytest.mark.parametrize("case", cases("benign.jsonl"), ids=lambda c: c["id"])
def test_benign_case_in_a_session(case: dict[str, Any], tmp_path: pathlib.Path) -> None:
    report = harness.run_benign(_InSession, case, tmp_path)
    assert report.problems == []


@needs_kernel
@pytest.mark.slow
def test_the_escape_corpus_has_no_effect_in_sessions_in_kernel_only_mode(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The harness's kernel-only run (judged by effect, test_kernel_only_corpus.py), each case
    # as the second call of a fresh session with the AST gate and the Python guards off.
    monkeypatch.setenv(TESTING_KERNEL_ONLY_ENV, "1")

    def factory(execution: str) -> Any:
        assert execution == "warm"
        return lambda ws: _InSession(ws, kernel_only=True)

    monkeypatch.setattr(harness, "kernel_only_factory", factory)
    corpus = cases("escapes.jsonl")
    reports = harness.run_kernel_only(corpus, "warm", tmp_path)
    assert [r.id for r in reports] == [c["id"] for c in corpus]
    assert {r.id: r.problems for r in reports if r.problems} == {}
    summary = harness.summarize_effects(reports)
    assert summary["violations"] == []
    assert summary["stopped"]["open-plain-read-canary"] == "kernel:EACCES"
    assert summary["stopped"]["dos-infinite-loop"] == "limit:timeout"
    assert all(r.status != "rejected" for r in reports)
