"""Result types, their text and JSON forms, and the raising wrapper."""

from __future__ import annotations

import json

import pytest

import astguard
from astguard import AstGuardError, CheckResult, UnsafeCodeError, Violation, check, ensure_safe


def test_violation_str_and_dict() -> None:
    v = Violation("AG101", "import of 'os' is refused", 1, 8, 1, 10)
    assert str(v) == "1:8: AG101 import of 'os' is refused"
    assert v.to_dict() == {
        "rule_id": "AG101",
        "message": "import of 'os' is refused",
        "line": 1,
        "col": 8,
        "end_line": 1,
        "end_col": 10,
    }


def test_check_result_str_dict_and_json() -> None:
    result = check("import os\neval('1')", filename="job.py")
    assert str(result).splitlines() == [str(v) for v in result.violations]
    assert str(result).startswith("1:8: AG101 ")
    data = result.to_dict()
    assert data["ok"] is False
    assert data["filename"] == "job.py"
    assert [v["rule_id"] for v in data["violations"]] == ["AG101", "AG201"]
    assert json.loads(json.dumps(data)) == data
    assert not result
    assert result.rule_ids == ("AG101", "AG201")


def test_clean_result() -> None:
    result = check("x = 1", filename="ok.py")
    assert result == CheckResult(ok=True, violations=(), filename="ok.py")
    assert str(result) == "ok.py: ok"
    assert result


def test_ensure_safe_returns_clean_result() -> None:
    assert ensure_safe("print(1)").ok


def test_ensure_safe_raises_with_structured_attributes() -> None:
    with pytest.raises(UnsafeCodeError) as info:
        ensure_safe("import os", filename="job.py")
    err = info.value
    assert isinstance(err, AstGuardError)
    assert err.filename == "job.py"
    assert [v.rule_id for v in err.violations] == ["AG101"]
    assert err.result.ok is False
    assert str(err).splitlines()[0] == "job.py: refused by astguard (1 violation)"
    assert str(err).splitlines()[1].startswith("  1:8: AG101 ")


def test_rule_table() -> None:
    table = astguard.rule_table_markdown()
    assert table.splitlines()[0] == "| id | family | refuses | example |"
    assert len(table.splitlines()) == len(astguard.RULES) + 2
    for rule_id, rule in astguard.RULES.items():
        assert rule.rule_id == rule_id
        assert (
            rule_id[:3]
            == "AG"
            + {"imports": "1", "builtins": "2", "attributes": "3", "format": "4", "syntax": "9"}[
                rule.family
            ]
        )
        assert set(rule.to_dict()) == {"rule_id", "family", "summary", "example"}


def test_every_reported_rule_is_documented() -> None:
    sources = ["import os", "exec(1)", "x.__globals__", "'{0.__class__}'.format(1)", "def f(:"]
    for source in sources:
        for v in check(source).violations:
            assert v.rule_id in astguard.RULES


def test_readme_rule_table_is_current() -> None:
    from pathlib import Path

    readme = Path(__file__).resolve().parents[1] / "README.md"
    assert astguard.rule_table_markdown() in readme.read_text(encoding="utf-8")
