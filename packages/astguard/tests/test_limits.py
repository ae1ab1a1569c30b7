"""Bad input never raises: syntax errors, size, node count and nesting are violations."""

from __future__ import annotations

import pytest

from astguard import Policy, check


def test_syntax_error_has_location() -> None:
    result = check("x = 1\ndef f(:\n    pass\n")
    assert result.rule_ids == ("AG901",)
    v = result.violations[0]
    assert v.line == 2
    assert v.col >= 1
    assert v.message.startswith("syntax error")


@pytest.mark.parametrize(
    "source",
    [
        "x = 1\0",
        "\ud800 = 1",
        "x = '\ud800'",
        b"\xff\xfe = 1",
        b"\xef\xbb\xbf# -*- coding: latin-1 -*-\nx = 1\n",
        "(" * 300 + ")" * 300,
        "",
    ],
    ids=["null", "surrogate-name", "surrogate-str", "bad-utf8", "bom-cookie", "parens", "empty"],
)
def test_odd_input_never_raises(source: str | bytes) -> None:
    result = check(source)
    assert result.ok == (not result.violations)
    if source:
        assert result.rule_ids in {("AG901",), ("AG904",), ("AG906",), ()}


def test_empty_source_is_clean() -> None:
    assert check("").ok
    assert check("\n\n# only a comment\n").ok


def test_warnings_from_the_parser_are_not_raised() -> None:
    # An invalid escape is a SyntaxWarning (3.12+) or DeprecationWarning; with warnings as
    # errors (our pytest config) the checker must still parse the code.
    assert check("import re\nre.compile('\\d+')").ok


def test_concurrent_checks_leave_warning_filters_alone() -> None:
    import threading
    import warnings

    before = list(warnings.filters)
    sources = ["import re\nre.compile('\\d')\n" * 50, "x: 'list[\\d]' = 1\n" * 50]
    results: list[bool] = []

    def work(source: str) -> None:
        for _ in range(20):
            results.append(check(source).ok)

    threads = [threading.Thread(target=work, args=(sources[i % 2],)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 120
    assert warnings.filters == before


def test_bytes_source_with_utf8_coding_cookie() -> None:
    source = "# -*- coding: utf-8 -*-\nname = 'caf\xe9'\nexec(name)\n".encode()
    result = check(source)
    assert result.rule_ids == ("AG201",)
    assert result.violations[0].line == 3


@pytest.mark.parametrize(
    "source",
    [
        # As text this is a comment; a file with this cookie runs print("ESCAPED").
        "# -*- coding: utf_7 -*-\n# +AAo-print(+ACI-ESCAPED+ACI-)\n",
        b"# -*- coding: utf_7 -*-\n# +AAo-import os\n",
        "#!/usr/bin/env python\n# vim: set fileencoding=latin-1 :\nx = 1\n",
        "# coding=nosuchcodec\nx = 1\n",
        "#\x1c\n# coding: utf-7\n# +AAo-import os\n",
    ],
    ids=["utf7-str", "utf7-bytes", "latin1-line2", "unknown", "odd-separator"],
)
def test_non_utf8_coding_declaration_refused(source: str | bytes) -> None:
    result = check(source)
    assert result.rule_ids == ("AG906",)
    assert result.violations[0].line == 1


@pytest.mark.parametrize(
    "source",
    [
        "# -*- coding: utf-8 -*-\nx = 1\n",
        "#!/usr/bin/env python3\n# coding: UTF8\nx = 1\n",
        "x = 1\n# coding: latin-1\n",  # not a declaration on line 2 after code
        "x = 1\ny = 2\n# coding: utf-7\n",  # line 3 is never a declaration
    ],
)
def test_utf8_or_no_coding_declaration_accepted(source: str) -> None:
    assert check(source).ok


def test_source_size_limit_in_bytes() -> None:
    policy = Policy(max_source_bytes=100)
    assert check("x = 1\n" * 16, policy).ok  # 96 bytes
    result = check("x = 1\n" * 17, policy)
    assert result.rule_ids == ("AG902",)
    assert "102 bytes" in result.violations[0].message
    # Multi-byte characters count as their UTF-8 size.
    assert check("s = '" + "é" * 60 + "'", policy).rule_ids == ("AG902",)


def test_node_count_limit() -> None:
    policy = Policy(max_nodes=50)
    result = check("x = [" + "0, " * 100 + "]", policy)
    assert result.rule_ids == ("AG903",)
    assert check("x = [0, 0]", policy).ok


def test_depth_limit() -> None:
    policy = Policy(max_depth=20)
    result = check("x = " + "(" * 30 + "1" + ")" * 30 + " + 1" * 30, policy)
    assert "AG904" in result.rule_ids
    assert check("x = 1 + 2", policy).ok


@pytest.mark.parametrize(
    "source",
    [
        "x = " + " + ".join(["a"] * 20000),
        "x = " + "-" * 5000 + "1",
        "x = " + "not " * 5000 + "y",
        "x = a" + ".b" * 20000,
        "x = " + "f(" * 150 + ")" * 150,
        "x = " + "[" * 150 + "]" * 150,
        "if x:\n" + "".join(" " * i + "if x:\n" for i in range(1, 150)) + " " * 150 + "pass\n",
        "x: '" + "list[" * 150 + "int" + "]" * 150 + "' = 1",
    ],
    ids=["long-sum", "unary", "not-chain", "attr-chain", "calls", "lists", "ifs", "annot"],
)
def test_deep_or_long_code_is_a_violation_not_a_crash(source: str) -> None:
    result = check(source)
    assert not result.ok
    assert set(result.rule_ids) <= {"AG901", "AG903", "AG904"}


def test_deep_code_within_a_high_limit_never_raises() -> None:
    policy = Policy(max_depth=1_000_000, max_nodes=10_000_000)
    result = check("x = " + " + ".join(["a"] * 20000), policy)
    assert result.rule_ids == ("AG904",)


def test_walk_deeper_than_the_interpreter_stack_is_a_violation() -> None:
    # The parser accepts 900 nested unary operators; walking them recursively exceeds
    # Python's recursion limit, which must become a violation, not an exception.
    policy = Policy(max_depth=1_000_000)
    result = check("x = " + "-" * 900 + "1", policy)
    assert result.rule_ids == ("AG904",)


@pytest.mark.parametrize("count", [1000, 5000, 50000])
def test_deep_string_annotation_is_a_violation_not_a_crash(count: int) -> None:
    # 3.12+ raise MemoryError ("parser stack overflowed") on the deepest of these.
    result = check('x: "' + "-" * count + '1" = 1')
    assert result.rule_ids == ("AG904",)


def test_checker_bug_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    from astguard import _checker

    def boom(self: object, node: object, depth: int) -> None:
        raise KeyError("simulated bug")

    monkeypatch.setattr(_checker._Checker, "_call", boom)
    result = check("print(1)")
    assert result.rule_ids == ("AG900",)
    assert "KeyError" in result.violations[0].message
    assert check("x = 1").ok


def test_wrong_types_are_caller_errors() -> None:
    with pytest.raises(TypeError, match="source must be str or bytes"):
        check(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"policy must be an astguard\.Policy"):
        check("x = 1", {"allowed_modules": []})  # type: ignore[arg-type]
