"""The command line: output formats, exit statuses, stdin, the rule table."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import astguard
from astguard.__main__ import main


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    clean = tmp_path / "clean.py"
    clean.write_text("import math\nprint(math.pi)\n", encoding="utf-8")
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nx = eval('1')\n", encoding="utf-8")
    return {"clean": clean, "bad": bad}


def test_clean_file_exits_0_and_prints_nothing(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(files["clean"])]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == ("", "")


def test_violations_exit_1_linter_lines(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(files["clean"]), str(files["bad"])]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{files['bad']}:1:8: AG101 ")
    assert lines[1].startswith(f"{files['bad']}:2:5: AG201 ")


def test_json_format(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--format", "json", str(files["clean"]), str(files["bad"])]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False
    assert data["errors"] == []
    assert [r["path"] for r in data["results"]] == [str(files["clean"]), str(files["bad"])]
    assert data["results"][0]["ok"] is True
    assert [v["rule_id"] for v in data["results"][1]["violations"]] == ["AG101", "AG201"]


def test_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake = io.TextIOWrapper(io.BytesIO(b"exec('1')\n"))
    monkeypatch.setattr(sys, "stdin", fake)
    assert main(["-"]) == 1
    assert capsys.readouterr().out.startswith("<stdin>:1:1: AG201 ")


def test_missing_file_exits_2_and_checks_the_rest(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.py"
    assert main([str(missing), str(files["bad"])]) == 2
    out, err = capsys.readouterr()
    assert f"astguard: error: {missing}: " in err
    assert "AG101" in out


def test_directory_is_an_io_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--format", "json", str(tmp_path)]) == 2
    data = json.loads(capsys.readouterr().out)
    assert data["errors"][0]["path"] == str(tmp_path)
    assert "not a regular file" in data["errors"][0]["error"]


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "at least one FILE" in capsys.readouterr().err
    assert main(["--format", "xml", "x.py"]) == 2
    assert main(["--no-such-option"]) == 2
    assert main(["--allow-module", "bad name", "x.py"]) == 2


def test_list_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list-rules"]) == 0
    assert capsys.readouterr().out == astguard.rule_table_markdown()
    assert main(["--list-rules", "--format", "json"]) == 0
    rules: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    assert [r["rule_id"] for r in rules] == list(astguard.RULES)


def test_policy_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "s.py"
    script.write_text("import numpy\ngetattr(x, name)\n", encoding="utf-8")
    assert main([str(script)]) == 1
    capsys.readouterr()
    args = ["--allow-module", "numpy", "--runtime-attribute-guard", str(script)]
    assert main(args) == 0


def test_oversized_file_is_a_violation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = tmp_path / "big.py"
    big.write_bytes(b"x = 1\n" * 200_000)
    assert main([str(big)]) == 1
    assert "AG902" in capsys.readouterr().out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"astguard {astguard.__version__}"


@pytest.mark.e2e
def test_python_dash_m(files: dict[str, Path]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "astguard", str(files["bad"])],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[0].startswith(f"{files['bad']}:1:8: AG101 ")
