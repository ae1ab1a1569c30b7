"""AG907: constant folding bounded before anything is compiled (red team 2026-12-01).

CPython folds ``'a' * 4096 + 'b' * 4096 + ...`` while compiling, keeping every intermediate
string: 13 KB of source made the server's compile allocate 1 GB before any limit of the run
applied. astguard bounds what folding would create from the syntax tree.
"""

from __future__ import annotations

import ast
import sys

import pytest

import astguard
from astguard._folding import folded_bytes

WIDE = chr(0x20000)  # a 4-byte character: the widest str


def _chain(n: int, item: str = "'{c}' * 4096", sep: str = " + ") -> str:
    return "x = " + sep.join(item.format(c=chr(0x20000 + i)) for i in range(n)) + "\n"


REFUSED = {
    "str-chain-4-byte": _chain(110),
    # 40 terms: the chain's nesting stays under AG904's 120 levels.
    "str-chain-ascii": "x = " + " + ".join(f"'{i:04d}' * 1024" for i in range(40)) + "\n",
    "bytes-chain": "x = " + " + ".join(f"b'{i:04d}' * 1024" for i in range(40)) + "\n",
    "tuple-chain": "t = " + " + ".join(f"({i},) * 256" for i in range(40)) + "\n",
    "many-statements": "".join(f"x{i} = '{i:05d}' * 819\n" for i in range(600)),
    "nested-in-a-call": "print(len(" + _chain(60)[4:-1] + "))\n",
    "in-a-function": "def f():\n    return " + _chain(60)[4:],
}

ACCEPTED = {
    "separator": "print('=' * 80)\n",
    "many-separators": "".join(f"print('-' * {40 + i % 40})\n" for i in range(300)),
    "unknown-count": "n = 10 ** 6\nx = 'a' * n\nprint(len(x))\n",
    "over-the-fold-limit": "x = 'ab' * 100_000\nprint(len(x))\n",  # not folded: built at run time
    "numbers": "x = 2 ** 100 + 3 * 7 - 1\nprint(x)\n",
    "table": "ROWS = " + repr(tuple(range(200))) + "\nprint(sum(ROWS))\n",
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_code_that_folds_to_too_many_bytes_is_refused(name: str) -> None:
    result = astguard.check(REFUSED[name])
    assert result.rule_ids == ("AG907",), str(result)
    (violation,) = result.violations
    assert violation.message.startswith("the constant expressions of this code would expand to")
    assert violation.message.endswith(
        "over the limit of 1048576; build large strings, bytes and tuples when the code runs "
        "(from a variable, a loop or str.join)"
    )


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_ordinary_constants_are_accepted(name: str) -> None:
    assert astguard.check(ACCEPTED[name]).ok


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_the_bound_is_above_what_cpython_keeps(name: str) -> None:
    """The model's figure is an upper bound of the folded constants CPython's compile leaves
    in the code object (the intermediates are freed by then, so this checks the kept part)."""
    source = REFUSED[name]
    code = compile(source, "<t>", "exec")
    kept = 0
    stack = [code]
    while stack:
        c = stack.pop()
        for const in c.co_consts:
            if isinstance(const, (str, bytes, tuple)):
                kept += len(const)
            elif hasattr(const, "co_consts"):
                stack.append(const)
    assert folded_bytes(ast.parse(source)) >= kept


def test_the_limit_is_a_policy_setting() -> None:
    policy = astguard.Policy().with_limits(max_folded_bytes=100)
    assert policy.to_dict()["max_folded_bytes"] == 100
    assert astguard.check("x = 'ab' * 100\n", policy).rule_ids == ("AG907",)
    assert astguard.check("x = 'ab' * 10\n", policy).ok
    with pytest.raises(ValueError, match="max_folded_bytes"):
        astguard.Policy(max_folded_bytes=0)


def test_python_version_folds_as_modelled() -> None:
    """The model's fold limits are CPython's of 3.10-3.13 (ast_opt.c)."""
    assert sys.version_info[:2] <= (3, 13)
    code = compile("x = 'a' * 4096\ny = 'a' * 4097\n", "<t>", "exec")
    assert "a" * 4096 in code.co_consts and "a" * 4097 not in code.co_consts
