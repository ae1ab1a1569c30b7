"""Property-based tests: check() never raises, on arbitrary text and on random valid ASTs."""

from __future__ import annotations

import ast

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import astguard
from astguard import Policy, check

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
AST_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

NAMES = [
    "x",
    "y",
    "self",
    "exec",
    "eval",
    "getattr",
    "random",
    "os",
    "__import__",
    "__builtins__",
    "__name__",
    "print",
    "vars",
    "str",
    "math",
    "_private",
]
ATTRS = [
    "a",
    "_b",
    "__class__",
    "__globals__",
    "__init__",
    "gi_frame",
    "f_back",
    "format",
    "format_map",
    "os",
    "_os",
    "system",
    "create_subprocess_shell",
    "events",
    "abc",
]
MODULES = [
    "math",
    "os",
    "random",
    "asyncio",
    "asyncio.events",
    "collections.abc",
    "logging",
    "logging.config",
    "json",
    "string",
]
STRINGS = [
    "",
    "x",
    "{0}",
    "{0.__class__}",
    "{x[__globals__]}",
    "{0.}",
    "{",
    "__globals__",
    "list[int]",
    "eval('1')",
    "a.b",
]


def _name(ctx: ast.expr_context) -> st.SearchStrategy[ast.Name]:
    return st.builds(ast.Name, id=st.sampled_from(NAMES), ctx=st.just(ctx))


constants = st.one_of(
    st.integers(-5, 5).map(lambda v: ast.Constant(value=v)),
    st.sampled_from(STRINGS).map(lambda v: ast.Constant(value=v)),
    st.just(ast.Constant(value=None)),
)

expressions: st.SearchStrategy[ast.expr] = st.deferred(
    lambda: st.one_of(
        constants,
        _name(ast.Load()),
        st.builds(
            ast.Attribute, value=expressions, attr=st.sampled_from(ATTRS), ctx=st.just(ast.Load())
        ),
        st.builds(
            ast.Call,
            func=expressions,
            args=st.lists(expressions, max_size=3),
            keywords=st.lists(
                st.builds(
                    ast.keyword, arg=st.sampled_from(["style", "k", None]), value=expressions
                ),
                max_size=2,
            ).map(lambda ks: [k for k in ks if k.arg is not None]),
        ),
        st.builds(
            ast.BinOp,
            left=expressions,
            op=st.sampled_from([ast.Add(), ast.Mod()]),
            right=expressions,
        ),
        st.builds(ast.Subscript, value=expressions, slice=expressions, ctx=st.just(ast.Load())),
        st.builds(ast.List, elts=st.lists(expressions, max_size=3), ctx=st.just(ast.Load())),
        st.builds(
            ast.Lambda,
            args=st.just(
                ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
            ),
            body=expressions,
        ),
        st.builds(
            ast.JoinedStr,
            values=st.lists(
                st.builds(
                    ast.FormattedValue,
                    value=expressions,
                    conversion=st.just(-1),
                    format_spec=st.none(),
                ),
                max_size=2,
            ),
        ),
    )
)


def _alias() -> st.SearchStrategy[ast.alias]:
    return st.builds(
        ast.alias,
        name=st.sampled_from(MODULES),
        asname=st.sampled_from([None, "m", "__builtins__"]),
    )


statements: st.SearchStrategy[ast.stmt] = st.deferred(
    lambda: st.one_of(
        st.builds(ast.Expr, value=expressions),
        st.builds(
            ast.Assign,
            targets=st.lists(_name(ast.Store()), min_size=1, max_size=1),
            value=expressions,
        ),
        st.builds(ast.Import, names=st.lists(_alias(), min_size=1, max_size=2)),
        st.builds(
            ast.ImportFrom,
            module=st.sampled_from(MODULES),
            names=st.lists(
                st.builds(ast.alias, name=st.sampled_from([*ATTRS, "*"]), asname=st.none()),
                min_size=1,
                max_size=2,
            ),
            level=st.just(0),
        ),
        st.builds(
            ast.If,
            test=expressions,
            body=st.lists(statements, min_size=1, max_size=3),
            orelse=st.lists(statements, max_size=2),
        ),
        st.builds(
            ast.FunctionDef,
            name=st.sampled_from(["f", "__init__", "__import__"]),
            args=st.builds(
                ast.arguments,
                posonlyargs=st.just([]),
                args=st.lists(
                    st.builds(
                        ast.arg,
                        arg=st.sampled_from(["a", "b"]),
                        annotation=st.one_of(st.none(), constants),
                    ),
                    max_size=2,
                    unique_by=lambda a: a.arg,
                ),
                kwonlyargs=st.just([]),
                kw_defaults=st.just([]),
                defaults=st.just([]),
            ),
            body=st.lists(statements, min_size=1, max_size=3),
            decorator_list=st.lists(expressions, max_size=1),
            returns=st.one_of(st.none(), constants),
            type_params=st.just([]),
        ),
        st.builds(ast.Return, value=st.one_of(st.none(), expressions)),
        st.builds(ast.Pass),
    )
)

modules = st.builds(
    ast.Module, body=st.lists(statements, min_size=1, max_size=5), type_ignores=st.just([])
)


def _source(tree: ast.Module) -> str:
    ast.fix_missing_locations(tree)
    try:
        return ast.unparse(tree)
    except Exception:
        assume(False)
        raise


@SETTINGS
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str) -> None:
    result = check(text)
    assert result.ok == (not result.violations)
    assert "AG900" not in result.rule_ids
    for v in result.violations:
        assert v.rule_id in astguard.RULES
        assert v.line >= 1
        assert v.col >= 1


@SETTINGS
@given(st.binary())
def test_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    result = check(data)
    assert result.ok == (not result.violations)
    assert "AG900" not in result.rule_ids


@SETTINGS
@given(
    st.lists(
        st.sampled_from(
            [
                "(",
                ")",
                "[",
                "]",
                "{",
                "}",
                "x",
                ".",
                "'",
                '"',
                "\\",
                "\n",
                " ",
                ":",
                "lambda",
                "if",
                "f'",
                "{0.",
                "__",
                "import ",
                "*",
                "@",
                "\0",
                "é",
            ]
        ),
        max_size=80,
    ).map("".join)
)
def test_never_raises_on_token_soup(text: str) -> None:
    result = check(text)
    assert result.ok == (not result.violations)
    assert "AG900" not in result.rule_ids


_SOUP = st.lists(
    st.sampled_from(
        [
            "(",
            ")",
            "[",
            "]",
            "{",
            "}",
            "-",
            "x",
            ".",
            "__class__",
            "0",
            "!r",
            ":",
            ">10",
            "lambda",
            ",",
            "'",
            "\\",
            "eval",
        ]
    ),
    max_size=300,
).map("".join)


@SETTINGS
@given(_SOUP)
def test_never_raises_inside_strings_that_are_checked(text: str) -> None:
    """String annotations and format templates are parsed by the checker too."""
    literal = repr(text)
    for source in (f"x: {literal} = 1", f"{literal}.format(1, x=2)", f"def f(a: {literal}): pass"):
        result = check(source)
        assert result.ok == (not result.violations)
        assert "AG900" not in result.rule_ids


@AST_SETTINGS
@given(modules)
def test_never_raises_on_random_asts(tree: ast.Module) -> None:
    source = _source(tree)
    result = check(source)
    assert result.ok == (not result.violations)
    assert "AG900" not in result.rule_ids
    assert list(result.violations) == sorted(
        result.violations,
        key=lambda v: (v.line, v.col, v.end_line, v.end_col, v.rule_id, v.message),
    )


@AST_SETTINGS
@given(modules)
def test_denied_builtin_anywhere_is_refused(tree: ast.Module) -> None:
    source = _source(tree)
    result = check(source)
    assume("AG901" not in result.rule_ids)
    reparsed = ast.parse(source)
    if any(
        isinstance(n, ast.Name) and n.id in Policy().denied_builtins for n in ast.walk(reparsed)
    ):
        assert "AG201" in result.rule_ids


@AST_SETTINGS
@given(
    modules,
    st.sampled_from(["import os", "exec('1')", "x.__globals__", "import random\nrandom._os"]),
)
def test_wrapping_does_not_hide_a_refusal(tree: ast.Module, bad: str) -> None:
    """A refused snippet stays refused inside a function, a class, a loop, a try or a with."""
    source = _source(tree)
    body = "\n".join("        " + line for line in bad.splitlines())
    wrapped = f"{source}\nclass K:\n    def m(self):\n{body}\n"
    assert not check(wrapped).ok


try:
    import hypothesmith

    HAVE_HYPOTHESMITH = True
except ImportError:  # pragma: no cover - hypothesmith is in the test group
    HAVE_HYPOTHESMITH = False


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_HYPOTHESMITH, reason="hypothesmith is not installed")
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_never_raises_on_hypothesmith_programs(data: st.DataObject) -> None:
    source = data.draw(hypothesmith.from_node())
    result = check(source)
    assert result.ok == (not result.violations)
    assert "AG900" not in result.rule_ids
    guarded = check(source, Policy(runtime_attribute_guard=True))
    assert set(guarded.rule_ids) <= set(result.rule_ids)
