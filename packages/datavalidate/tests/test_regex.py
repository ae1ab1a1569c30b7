from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from datavalidate import UnsupportedPatternError
from datavalidate._regex import compile_pattern, ecma_to_re2, is_deterministic

_ATOMS = st.sampled_from(
    ["a", "b", "-", ".", r"\d", r"\D", r"\w", r"\W", r"\.", "[a-c]", "[^a]", r"[\d_]", "é", " "]
)
_DETERMINISTIC = st.lists(
    st.tuples(_ATOMS, st.sampled_from(["", "{2}", "{1}", "{3}"])), min_size=1, max_size=6
).map(lambda parts: "".join(a + c for a, c in parts))
_TEXT = st.text(alphabet="ab-.1٣_ é\nxZ", max_size=12)


@settings(max_examples=300, deadline=None)
@given(pattern=_DETERMINISTIC, text=_TEXT)
def test_python_fast_path_agrees_with_re2(pattern: str, text: str) -> None:
    assert is_deterministic(pattern)
    fast = compile_pattern(pattern, ecma=False)
    assert fast.fullmatch is not compile_pattern(pattern, ecma=True).fullmatch
    # The ECMA-compiled twin always runs on RE2; both must agree on every text.
    on_re2 = compile_pattern(pattern, ecma=True).fullmatch(text)
    assert bool(fast.fullmatch(text)) is on_re2


@pytest.mark.parametrize(
    "pattern",
    [
        "a*",
        "a+",
        "a?",
        "a{1,3}",
        "(a)",
        "a|b",
        "^a",
        "a$",
        r"\s",
        r"\b",
        r"\1",
        "[[:alpha:]]",
        "[a--b]",
        r"\p{L}",
        "[]a]",
        "a{1001}",
        "a{",
        "[a",
        "(?i)a",
    ],
)
def test_not_deterministic(pattern: str) -> None:
    assert not is_deterministic(pattern)


def test_deterministic_examples() -> None:
    for pattern in ["[A-Z]{2}-[0-9]{4}", r"\d{3}\.\d", "[^a-z]{3}", ".{5}", r"[\w-]{2}", "é{2}"]:
        assert is_deterministic(pattern), pattern
    code = compile_pattern("[A-Z]{2}-[0-9]{4}", ecma=False)
    assert code.fullmatch("DE-1234") and not code.fullmatch("DE-12345")
    assert code.search("xDE-1234") and not code.search("de-1234")


def test_ecma_translation() -> None:
    assert ecma_to_re2(r"\u0041\u{1F600}") == r"\x{0041}\x{1F600}"
    assert ecma_to_re2(r"\p{Letter}\P{Lu}\p{Script=Greek}") == r"\p{L}\P{Lu}\p{Greek}"
    assert ecma_to_re2(r"\cJ") == r"\x{0A}"
    assert ecma_to_re2("(?<year>[0-9]{4})") == "(?P<year>[0-9]{4})"
    assert ecma_to_re2(r"\/") == "/"
    assert compile_pattern(r"^\s$").search("\u3000")
    assert not compile_pattern(r"^\S$").search("\u00a0")
    assert compile_pattern(r"[\s]").search("\u2028")


def test_compile_errors() -> None:
    with pytest.raises(TypeError):
        compile_pattern(5)  # type: ignore[arg-type]
    with pytest.raises(UnsupportedPatternError, match="longer than"):
        compile_pattern("a" * 20_000)
    with pytest.raises(UnsupportedPatternError, match="lone surrogate"):
        compile_pattern("\ud800")
    with pytest.raises(UnsupportedPatternError, match="missing"):
        compile_pattern("(")


@settings(max_examples=300, deadline=None)
@given(pattern=_DETERMINISTIC, texts=st.lists(_TEXT, max_size=6))
def test_batch_check_agrees_with_per_value(pattern: str, texts: list[str]) -> None:
    fast = compile_pattern(pattern, ecma=False)
    on_re2 = compile_pattern(pattern, ecma=True)
    expected = all(on_re2.fullmatch(t) for t in texts)
    assert fast.fullmatch_all(texts) is expected
    assert on_re2.fullmatch_all(texts) is expected


def test_batch_check_cannot_shift_across_values() -> None:
    # "." and "\W" can match the separator; the fixed length keeps each value in its slot.
    for pattern, texts, expected in [
        ("..", ["ab", "cd"], True),
        ("..", ["a", "bcd"], False),
        (r"\W.", ["\n\n", "!x"], False),
        (r"\W.", ["\nx", "!x"], True),
        ("a.", ["a\n", "ab"], False),
        ("a.", ["ab", "b\na"], False),
        (r"a\W", ["a\n", "a!"], True),
    ]:
        assert compile_pattern(pattern, ecma=False).fullmatch_all(texts) is expected, pattern
