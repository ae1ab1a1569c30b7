"""Issue 14 item 5 in the child: routed format templates, sqlite3 paths, unittest's argv.

The ordinary-script corpus (``redteam/benign-ordinary.jsonl``) runs in ``test_corpus.py``;
these are the guards that keep the newly accepted code inside the run.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from pysandbox import RunStatus, Sandbox
from pysandbox.child._main import make_safe_format
from sandbox_helpers import KERNEL

REQUIRE = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()


@pytest.fixture(scope="module", params=["warm", "spawn"])
def sb(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Sandbox]:
    ws = tmp_path_factory.mktemp(f"ordinary-{request.param}")
    with Sandbox(ws, require=REQUIRE, execution=request.param) as sandbox:
        yield sandbox


FORMAT_ESCAPES = [
    "t = '{0.__globals__}'\nprint(t.format(print))",
    "t = '{0.__init__.__globals__}'\nprint(t.format(Exception()))",
    "t = '{0.__class__.__base__}'\nprint(t.format(1))",
    "t = '{0._private}'\nclass C:\n    _private = 1\nprint(t.format(C()))",
    "t = '{0[__builtins__]}'\nprint(t.format({'__builtins__': 1}))",
    "t = '{0.f_globals}'\nprint(t.format(1))",
    "t = '{0:{1.__class__}}'\nprint(t.format(1, 2))",
    "t = '{x.__globals__}'\nprint(t.format_map({'x': print}))",
    "t = '{0.__globals__}'\nprint(str.format(t, print))",
    "t = '{0.__globals__}'\nprint(type(t).format(t, print))",
    "class S(str):\n    pass\nt = S('{0.__globals__}')\nprint(t.format(print))",
    "t = '{0.__globals__}'\nS = type('S', (str,), {})\nprint(S(t).format(print))",
]


@pytest.mark.parametrize("code", FORMAT_ESCAPES)
def test_routed_templates_refuse_internal_fields(sb: Sandbox, code: str) -> None:
    result = sb.run(code)
    assert result.status is RunStatus.ERROR, result
    assert "sandbox: the format field" in result.stderr, result.stderr
    assert "builtins" not in result.stdout


def test_routed_templates_format_like_str(sb: Sandbox) -> None:
    code = (
        "class P:\n"
        "    x = 3\n"
        "    def format(self, spec):\n"
        "        return 'P.format ' + spec\n"
        "rows = ['{0:>4}|{1:<3}|', '{name!r} {p.x} {d[k]}', '{{literal}} {0:.2f}']\n"
        "print(rows[0].format(7, 'ab'))\n"
        "print(rows[1].format(name='n', p=P(), d={'k': [1]}))\n"
        "print(rows[2].format(3.14159))\n"
        "print(str.format('{}-{}', 1, 2), str.format_map('{a}', {'a': 5}))\n"
        "print(P().format('x'))\n"
        "print('{0}'.format(1), f'{1 + 1}')\n"
    )
    result = sb.run(code)
    assert (result.status, result.stdout) == (
        RunStatus.OK,
        "   7|ab |\n'n' 3 [1]\n{literal} 3.14\n1-2 5\nP.format x\n1 2\n",
    ), result.stderr


def test_sqlite_databases_stay_in_the_workspace(sb: Sandbox) -> None:
    code = (
        "import sqlite3\n"
        "print(sqlite3.connect(':memory:').execute('select 2').fetchone())\n"
        "print(sqlite3.connect('db.sqlite').execute('select 3').fetchone())\n"
        "for bad in ('/tmp/x.db', '../x.db', 'file:db.sqlite?mode=ro', b'/etc/passwd'):\n"
        "    try:\n"
        "        sqlite3.connect(bad)\n"
        "        print('opened', bad)\n"
        "    except PermissionError as exc:\n"
        "        print('refused', exc.strerror)\n"
        "con = sqlite3.connect(':memory:')\n"
        "try:\n"
        "    con.enable_load_extension(True)\n"
        "except (PermissionError, AttributeError):\n"
        "    print('no extensions')\n"
    )
    result = sb.run(code)
    assert result.status is RunStatus.OK, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["(2,)", "(3,)"]
    assert lines[2:6] == [
        "refused sandbox: databases outside the workspace are not permitted",
        "refused sandbox: databases outside the workspace are not permitted",
        "refused sandbox: sqlite3 URI file names are not permitted",
        "refused sandbox: databases outside the workspace are not permitted",
    ]
    assert lines[6] == "no extensions"


def test_unittest_main_sees_no_bootstrap_arguments(sb: Sandbox) -> None:
    code = (
        "import unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_one(self):\n"
        "        self.assertTrue(True)\n"
        "unittest.main()\n"
    )
    result = sb.run(code)
    assert result.status is RunStatus.OK, result.stderr
    assert result.stderr.splitlines()[-1] == "OK"
    assert "Ran 1 test" in result.stderr


@pytest.mark.parametrize(
    "call",
    [
        "getattr(unittest, 'ma' + 'in')(module=None, argv=['p', 'tempfile.mkdtemp'], exit=False)",
        "getattr(unittest, 'ma' + 'in')(module=None, argv=['p', 'os.getcwd'], exit=False)",
        "getattr(unittest, 'ma' + 'in')(module='os', argv=['p'], exit=False)",
        "getattr(unittest, 'Test' + 'Loader')().loadTestsFromName('os.getcwd')",
        "getattr(getattr(unittest, 'Test' + 'Loader')(), 'loadTestsFrom' + 'Names')(['os'])",
        "getattr(unittest, 'default' + 'TestLoader').loadTestsFromName('tempfile.mkdtemp')",
    ],
)
def test_unittest_loads_no_test_named_by_a_string(sb: Sandbox, call: str) -> None:
    # Red team, 2026-12-01: reached dynamically, unittest imported any module by name with its
    # own (real) __import__ and called zero-argument callables (AG205 stops the spellings).
    code = (
        "import unittest\n"
        f"try:\n    {call}\n    print('loaded')\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    result = sb.run(code)
    if result.status is RunStatus.REJECTED:  # a spelling astguard sees
        return
    assert result.status is RunStatus.OK, result.stderr
    refusals = (
        "SandboxDenied [Errno 1] sandbox: unittest does not load",
        "AttributeError sandbox: attribute 'loadTestsFromNames' is not accessible",
    )
    assert result.stdout.startswith(refusals), result.stdout


def test_input_is_refused_with_a_reason(sb: Sandbox) -> None:
    result = sb.run("name = input('name? ')\nprint(name)")
    assert result.status is RunStatus.REJECTED
    assert "no standard input" in result.violations[0].message


def test_safe_format_routes_other_objects_to_their_method(tmp_path: pathlib.Path) -> None:
    route = make_safe_format(lambda name: name == "f_globals")

    class Report:
        def format(self, *args: object) -> str:
            return f"report {args}"

    assert route(Report(), "format", 1) == "report (1,)"
    assert route("{0.real}", "format", 3) == "3"
    assert route(str, "format_map", "{a}", {"a": 1}) == "1"
    with pytest.raises(AttributeError, match="f_globals"):
        route("{0.f_globals}", "format", 1)
    with pytest.raises(AttributeError, match="not a format method"):
        route("x", "upper")
    with pytest.raises(TypeError):
        route("{a}", "format_map", {}, {})


@pytest.mark.parametrize(("code", "exit_code"), [("False", 0), ("True", 1), ("3", 3)])
def test_exit_status_of_bools_is_their_int(sb: Sandbox, code: str, exit_code: int) -> None:
    # unittest.main() ends with sys.exit(not result.wasSuccessful()): a bool.
    result = sb.run(f"raise SystemExit({code})")
    assert (result.exit_code, result.stderr) == (exit_code, "")
