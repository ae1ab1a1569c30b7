"""Issue 14 item 5: ordinary code accepted, and the rules that keep it friendly.

Routed format templates, unittest's string-driven entry points, the messages of refused
``input()`` and installed-but-unallowed imports, and modules reached through other modules.
"""

from __future__ import annotations

import ast

import pytest

import astguard
from astguard import (
    FORMAT_ROUTER,
    RECEIVER_ROUTER,
    Policy,
    check,
    route_format_calls,
    route_private_receivers,
)

SANDBOX = Policy().with_runtime_attribute_guard().with_runtime_format_guard()


@pytest.mark.parametrize(
    "source",
    [
        "t = 'a {x}'\nprint(t.format(x=1))",
        "t = 'a {x}'\nprint(t.format_map({'x': 1}))",
        "rows = [('{0:>5}', 3)]\nfor t, v in rows:\n    print(t.format(v))",
        "print(str.format(input_template, 1))".replace("input_template", "tpl"),
        "class Shell:\n    def do_x(self):\n        return 1\n"
        "    def run(self, cmd):\n        return getattr(self, 'do_' + cmd)()",
        "import shlex\nprint(shlex.split('a \"b c\"'), shlex.quote('x y'))",
        "import sqlite3\ncon = sqlite3.connect(':memory:')\nprint(con.execute('select 1'))",
        "import unittest\nclass T(unittest.TestCase):\n    def test(self):\n        pass\n"
        "unittest.main()\nunittest.main(exit=False)\nunittest.main(argv=[''], exit=False)\n"
        "unittest.main(module='__main__', verbosity=2)",
    ],
)
def test_ordinary_code_is_accepted_in_the_sandbox_policy(source: str) -> None:
    result = check(source, SANDBOX)
    assert result.ok, result


@pytest.mark.parametrize(
    ("rule_id", "source"),
    [
        # not routed: a bound method used as a value, or behind __call__
        ("AG402", "t = '{0.__globals__}'\nf = t.format\nf(1)"),
        ("AG402", "t = '{0}'\nt.format.__call__(1)"),
        ("AG402", "t = '{0}'\nlist(map(str.format, [t], [1]))"),
        ("AG402", "getattr('{0}', 'format')(1)"),
        # literal templates stay checked statically
        ("AG401", "'{0.__class__}'.format(1)"),
        # unittest's string-driven test selection
        ("AG205", "import unittest\nunittest.main(module='os')"),
        ("AG205", "import unittest\nunittest.main(defaultTest='x.y')"),
        ("AG205", "import unittest\nunittest.main(argv=['p', 'os.system'])"),
        ("AG205", "import unittest\nunittest.main('os')"),
        ("AG205", "import unittest\nunittest.main(**{'module': 'os'})"),
        ("AG205", "import unittest\nrun = unittest.main"),
        ("AG205", "from unittest import main\nm = main"),
        ("AG205", "import unittest\nunittest.TestProgram(module='os')"),
        ("AG302", "import unittest\nunittest.defaultTestLoader.loadTestsFromName('os')"),
        ("AG302", "import unittest\nunittest.TestLoader().loadTestsFromNames(['os'])"),
        ("AG101", "import unittest.mock"),
        ("AG103", "from unittest import mock"),
        # library helpers that write into a module named by user data
        ("AG304", "import enum\n@enum.global_enum\nclass E(enum.Enum):\n    A = 1"),
        ("AG103", "from enum import global_enum"),
        ("AG302", "import enum\nenum.IntEnum._convert_('X', 'json', lambda n: True)"),
        ("AG202", "import enum\ngetattr(enum.IntEnum, '_convert_')"),
        # an allowed module reached through another one (its value is judged)
        ("AG304", "import typing\ntyping.operator.attrgetter('x')"),
        ("AG304", "import shlex\nshlex.os.system('id')"),
        ("AG304", "import sqlite3\nsqlite3.dbapi2.datetime"),
    ],
)
def test_unsafe_spellings_stay_refused(rule_id: str, source: str) -> None:
    result = check(source, SANDBOX)
    assert rule_id in result.rule_ids, result


def test_non_literal_templates_need_the_runtime_format_guard() -> None:
    source = "t = 'a {x}'\nprint(t.format(x=1))"
    assert check(source, Policy().with_runtime_attribute_guard()).rule_ids == ("AG402",)
    assert check(source, SANDBOX).ok
    assert SANDBOX.to_dict()["runtime_format_guard"] is True


def test_route_format_calls_rewrites_only_non_literal_receivers() -> None:
    tree = ast.parse("t.format(1, k=2)\n'{}'.format(3)\nstr.format_map(t, m)\nx.y.format()")
    routed = ast.unparse(route_format_calls(tree))
    assert routed.splitlines() == [
        f"{FORMAT_ROUTER}(t, 'format', 1, k=2)",
        "'{}'.format(3)",
        f"{FORMAT_ROUTER}(str, 'format_map', t, m)",
        f"{FORMAT_ROUTER}(x.y, 'format')",
    ]
    compile(route_format_calls(ast.parse("t.format(1)")), "<t>", "exec")


def test_the_router_name_cannot_be_named_by_code() -> None:
    assert check(f"{FORMAT_ROUTER}('{{0}}', 'format', 1)", SANDBOX).rule_ids == ("AG207",)


def test_route_private_receivers_keeps_every_context() -> None:
    source = (
        "self._a = 1\nself._a += 1\ndel self._a\nprint(cls._b, self.__c, self._asdict())\n"
        "print(self.__dict__, self.a, x.y._z)"
    )
    routed = ast.unparse(route_private_receivers(ast.parse(source)))
    assert routed.splitlines() == [
        f"{RECEIVER_ROUTER}(self, '_a')._a = 1",
        f"{RECEIVER_ROUTER}(self, '_a')._a += 1",
        f"del {RECEIVER_ROUTER}(self, '_a')._a",
        f"print({RECEIVER_ROUTER}(cls, '_b')._b, {RECEIVER_ROUTER}(self, '__c').__c, "
        "self._asdict())",
        "print(self.__dict__, self.a, x.y._z)",  # other receivers: AG309 refuses them
    ]
    compile(route_private_receivers(ast.parse(source)), "<t>", "exec")


def test_the_receiver_router_name_cannot_be_named_by_code() -> None:
    code = f"class C:\n    def m(self):\n        return {RECEIVER_ROUTER}(self, '_x')._x"
    assert "AG207" in check(code, SANDBOX.with_private_attribute_rule()).rule_ids


def test_input_says_there_is_no_standard_input() -> None:
    (violation,) = check("name = input('name? ')").violations
    assert violation.rule_id == "AG201"
    assert "no standard input" in violation.message


def test_installed_module_message_names_the_operator_setting() -> None:
    # pytest is installed in the test environment and is not a standard module.
    (violation,) = check("import pytest").violations
    assert violation.rule_id == "AG101"
    assert "an operator can allow it" in violation.message
    assert "--extra-modules" in violation.message
    (missing,) = check("import surely_not_installed_zz").violations
    assert "operator" not in missing.message
    (stdlib,) = check("import os").violations
    assert "operator" not in stdlib.message


@pytest.mark.parametrize("name", ["shlex", "sqlite3", "unittest", "unittest.case"])
def test_newly_allowed_modules(name: str) -> None:
    assert astguard.is_module_allowed(name)
    assert not astguard.reaches_system(name)
