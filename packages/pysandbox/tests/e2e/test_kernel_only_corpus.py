"""The public escape corpus in kernel-only mode, judged by effect (issue 13), and the judge itself.

``harness.run_kernel_only`` runs every escape case with the AST gate and the Python guards off
(``Sandbox(_testing_kernel_only=True)``) and checks effects, not ``expect`` labels: no file
outside the workspace written or created, no canary read, no connection, no signal delivered,
no process left. The positive controls run the same judge over code that is not sandboxed at all,
so that each detector is shown to fire.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest

from pysandbox import RunResult, RunStatus
from sandbox_helpers import needs_kernel
from test_corpus import CORPUS, harness

ENV = "PYSANDBOX_TESTING_KERNEL_ONLY"


def escapes() -> list[dict[str, Any]]:
    path = CORPUS / "escapes.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


@needs_kernel
@pytest.mark.slow
def test_the_escape_corpus_has_no_effect_in_kernel_only_mode(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "1")  # the factory sets it too; monkeypatch removes it afterwards
    corpus = escapes()
    reports = harness.run_kernel_only(corpus, "warm", tmp_path)
    assert [r.id for r in reports] == [c["id"] for c in corpus]
    assert {r.id: r.problems for r in reports if r.problems} == {}
    summary = harness.summarize_effects(reports)
    assert summary["violations"] == []
    # the kernel layers and limits, not luck, stop the families that reach them
    stopped = summary["stopped"]
    assert stopped["open-plain-read-canary"] == "kernel:EACCES"
    assert stopped["net-socket-import-udp"] == "kernel:EPERM"
    assert stopped["dos-fork-bomb-multiprocessing"] == "kernel:EPERM"
    assert stopped["dos-infinite-loop"] == "limit:timeout"
    assert stopped["dos-disk-fill"] == "limit:disk_limit"
    # every case ran in the testing mode
    assert all(r.status != "rejected" for r in reports)


class Unsandboxed:
    """A stand-in for ``Sandbox`` that runs code as a plain child process (no isolation)."""

    def __init__(self, workspace: pathlib.Path, extra_env: dict[str, str]) -> None:
        self.workspace = workspace
        self.env = {**os.environ, **extra_env}

    def run(self, code: str) -> RunResult:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            cwd=self.workspace,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
        status = RunStatus.OK if proc.returncode == 0 else RunStatus.ERROR
        return RunResult(status=status, stdout=proc.stdout, stderr=proc.stderr)

    def close(self) -> None:
        pass


CONTROLS = {
    "write-beside": ("open('../PWNED', 'w').write('x')", "files outside the workspace"),
    "change-victim": ("open('../VICTIM/keep.txt', 'a').write('x')", "files outside the workspace"),
    "create-in-earlier-case": (
        "open('../../earlier/note', 'w').write('x')",
        "files outside the workspace",
    ),
    "tmp-pwned": (
        "import os\nos.mkdir(os.path.join(os.environ['CONTROL_TMP'], 'PWNED-control'))",
        "files outside the workspace",
    ),
    "canary-to-file": (
        "open('copy.txt', 'w').write(open('../CANARY.txt').read())",
        "canary or secret in workspace files",
    ),
    "canary-printed": ("print(open('../CANARY.txt').read())", "canary or secret in the result"),
    "secret-printed": (
        "import os\nprint(os.environ['SANDBOX_CANARY_SECRET'])",
        "canary or secret in the result",
    ),
    "connect": (
        "import os, socket\n"
        "socket.create_connection(('127.0.0.1', int(os.environ['LISTENER_PORT'])), 5).close()",
        "a connection reached the listener",
    ),
    "signal-sentinel": (
        "import os, signal\nos.kill(int(os.environ['SENTINEL_PID']), signal.SIGUSR1)",
        "signals reached the sentinel",
    ),
    "kill-sentinel": (
        "import os, signal\nos.kill(int(os.environ['SENTINEL_PID']), signal.SIGKILL)",
        "the sentinel died",
    ),
    "signal-harness": (
        "import os, signal\nos.kill(int(os.environ['HARNESS_PID']), signal.SIGUSR2)",
        "signals reached the harness",
    ),
    "process-left": (
        "import subprocess\n"
        "subprocess.Popen(['sleep', '60'], start_new_session=True, stdout=subprocess.DEVNULL,\n"
        "                 stderr=subprocess.DEVNULL)",
        "processes of the run remained",
    ),
}


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_the_effect_judge_sees_each_effect(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # The controls run unsandboxed and really do what they do: their shared effects go where
    # only this judge looks (a temporary directory and a listener of their own), never where
    # the corpus tests on other pytest-xdist workers look (/tmp, 127.0.0.1:8765).
    code, problem = CONTROLS[name]
    (tmp_path / "earlier").mkdir()
    (tmp_path / "earlier" / "ws").mkdir()
    control_tmp = tmp_path / "tmp"
    control_tmp.mkdir()
    monkeypatch.setattr(harness, "TMP_DIR", control_tmp)
    listener = harness.Listener(0)
    sentinel = harness.Sentinel()
    extra = {
        "SENTINEL_PID": str(sentinel.proc.pid),
        "HARNESS_PID": str(os.getpid()),
        "CONTROL_TMP": str(control_tmp),
        "LISTENER_PORT": str(listener.port),
    }
    try:
        with harness.canary_environment() as secret_env, harness.counting_own_signals() as own:
            report = harness.run_escape_effects(
                lambda ws: Unsandboxed(ws, extra),
                {"id": name, "code": code},
                tmp_path,
                listener=listener,
                secrets_env=secret_env,
                sentinel=sentinel,
                own_signals=own,
            )
    finally:
        listener.close()
        sentinel.close()
    assert not report.passed
    assert any(problem in p for p in report.problems), report.problems


def test_a_harmless_run_passes_the_effect_judge(tmp_path: pathlib.Path) -> None:
    listener = harness.Listener(0)
    sentinel = harness.Sentinel()
    try:
        with harness.canary_environment() as secret_env, harness.counting_own_signals() as own:
            report = harness.run_escape_effects(
                lambda ws: Unsandboxed(ws, {}),
                {"id": "harmless", "code": "open('inside.txt', 'w').write('ok')\nprint(2)"},
                tmp_path,
                listener=listener,
                secrets_env=secret_env,
                sentinel=sentinel,
                own_signals=own,
            )
    finally:
        listener.close()
        sentinel.close()
    assert (report.problems, report.got, report.passed) == ([], "no effect", True)
