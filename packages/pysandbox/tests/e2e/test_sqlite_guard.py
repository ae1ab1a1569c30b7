"""Issue 14 item 3: SQL that names files (ATTACH, VACUUM INTO, directory pragmas) is confined.

The audit hook confines the database ``sqlite3.connect`` opens; the SQLite authorizer that
pysandbox installs on every connection confines the files SQL names, with the Python layers
alone (the kernel layers stay the boundary, checked with all layers too).
"""

from __future__ import annotations

import pathlib

import pytest

from pysandbox import RunStatus, Sandbox
from pysandbox.child._sqlite_guard import SQLITE_DENY, SQLITE_OK, make_sqlite_authorizer
from sandbox_helpers import raw_run

TRY_SQL = """
import sqlite3
con = sqlite3.connect(DB)
def run(sql):
    try:
        con.execute(sql)
        print('ok')
    except sqlite3.DatabaseError as exc:
        print(type(exc).__name__, exc)
"""


@pytest.fixture
def outside(workspace: pathlib.Path) -> pathlib.Path:
    return workspace.parent


REFUSED_SQL = [
    "attach database '../outside.db' as o",
    "ATTACH '../outside.db' AS o",
    "attach database '/tmp/PWNED-sqlite.db' as o",
    "attach database 'sub/../../outside.db' as o",
    "attach database ('..' || '/outside.db') as o",
    "attach database 'file:../outside.db' as o",
    "attach database 'FILE:outside.db?mode=rwc' as o",
    "vacuum into '../outside.db'",
    "VACUUM main INTO '/tmp/PWNED-sqlite.db'",
    "vacuum into ('../' || 'outside.db')",
    "pragma temp_store_directory = '/tmp'",
    "PRAGMA main.TEMP_STORE_DIRECTORY = '/tmp'",
    "pragma data_store_directory = '/tmp'",
]


@pytest.mark.parametrize("db", ["':memory:'", "'work.db'", "''"])
@pytest.mark.parametrize("sql", REFUSED_SQL)
def test_sql_naming_files_outside_is_refused(
    python_only: Sandbox, outside: pathlib.Path, sql: str, db: str
) -> None:
    code = TRY_SQL.replace("DB", db) + f"run({sql!r})\n"
    result = raw_run(python_only, code, landlock=False, seccomp=False, python_guards=True)
    assert result.status is RunStatus.OK, result.stderr
    assert result.stdout.startswith("DatabaseError "), result.stdout
    assert "sandbox: " in result.stderr
    assert not (outside / "outside.db").exists()
    assert not pathlib.Path("/tmp/PWNED-sqlite.db").exists()


def test_ordinary_attach_and_vacuum_stay(python_only: Sandbox, workspace: pathlib.Path) -> None:
    code = TRY_SQL.replace("DB", "'main.db'") + (  # noqa: S608 - SQL is the test's input
        "run(\"attach database ':memory:' as scratch\")\n"
        "run(\"attach database 'other.db' as other\")\n"
        "run('create table other.t(x)')\n"
        "run('insert into other.t values (1)')\n"
        "con.commit()\n"
        "run(\"vacuum into 'copy.db'\")\n"
        "run('detach database other')\n"
        "run('pragma journal_mode')\n"
        "run('pragma temp_store = memory')\n"
        "print(sqlite3.connect('other.db').execute('select * from t').fetchall())\n"
    )
    result = raw_run(python_only, code, landlock=False, seccomp=False, python_guards=True)
    assert result.status is RunStatus.OK, result.stderr
    assert result.stdout.splitlines() == ["ok"] * 8 + ["[(1,)]"]
    assert (workspace / "copy.db").exists()


@pytest.mark.parametrize(
    "spelling",
    [
        "sqlite3.Connection(':memory:')",
        "sqlite3.dbapi2.Connection(':memory:')",
        "type(sqlite3.connect(':memory:'))(':memory:')",
        "sqlite3.connect(':memory:').__class__('x.db')",
        "sqlite3.connect(':memory:').__init__(':memory:')",
        "sqlite3.connect(':memory:', factory=sqlite3.Connection)",
        "sqlite3.connect(':memory:', 5, 0, None, True, sqlite3.Connection)",
        "sqlite3.connect(':memory:').set_authorizer(None)",
        "getattr(sqlite3.connect(':memory:'), 'set_' + 'authorizer')(None)",
    ],
)
def test_connections_without_the_authorizer_are_refused(
    python_only: Sandbox, spelling: str
) -> None:
    code = (
        "import sqlite3\n"
        f"try:\n    c = {spelling}\n"
        "    c.execute(\"attach database '/tmp/PWNED-sqlite.db' as o\")\n"
        "    print('attached')\n"
        "except Exception as exc:\n    print('refused', type(exc).__name__)\n"
    )
    result = raw_run(python_only, code, landlock=False, seccomp=False, python_guards=True)
    if result.status is RunStatus.REJECTED:  # set_authorizer is refused by astguard
        assert "set_authorizer" in str(result.violations)
        return
    assert result.status is RunStatus.OK, result.stderr
    assert result.stdout.startswith("refused "), result.stdout
    assert not pathlib.Path("/tmp/PWNED-sqlite.db").exists()


@pytest.mark.parametrize(
    ("hook", "call"),
    [
        ("__float__", "sqlite3.connect(':memory:', timeout=T())"),
        ("__float__", "sqlite3.connect(':memory:', T())"),
        ("__index__", "sqlite3.connect(':memory:', detect_types=T())"),
        ("__index__", "sqlite3.connect(':memory:', cached_statements=T())"),
        ("__bool__", "sqlite3.connect(':memory:', uri=T())"),
        ("__fspath__", "sqlite3.connect(T())"),
    ],
)
def test_conversions_cannot_open_a_connection_of_their_own(
    python_only: Sandbox, hook: str, call: str
) -> None:
    # Red team, 2026-12-01: user code run while connect() converted its arguments opened
    # sqlite3.Connection() with the ticket out, a connection without the authorizer.
    value = {"__float__": "5.0", "__index__": "0", "__bool__": "False", "__fspath__": "'x.db'"}
    code = (
        "import sqlite3\n"
        "inner = None\n"
        "class T:\n"
        f"    def {hook}(self):\n"
        "        global inner\n"
        "        try:\n"
        "            inner = sqlite3.Connection(':memory:')\n"
        "        except Exception as exc:\n"
        "            print('inner refused', type(exc).__name__)\n"
        f"        return {value[hook]}\n"
        f"try:\n    {call}\n    print('outer opened')\n"
        "except Exception as exc:\n    print('outer refused', type(exc).__name__)\n"
        "if inner is not None:\n"
        "    inner.execute(\"attach database '/tmp/PWNED-sqlite.db' as o\")\n"
        "    print('attached')\n"
    )
    result = raw_run(python_only, code, landlock=False, seccomp=False, python_guards=True)
    assert result.status is RunStatus.OK, result.stderr
    assert "attached" not in result.stdout
    if hook == "__fspath__":  # a path object is fine: converted before any connection opens
        assert result.stdout.splitlines() == ["inner refused SandboxDenied", "outer opened"]
    else:  # options must be plain values
        assert result.stdout.splitlines() == ["outer refused TypeError"], result.stdout
    assert not pathlib.Path("/tmp/PWNED-sqlite.db").exists()


def test_from_import_and_dbapi2_connect_are_guarded(python_only: Sandbox) -> None:
    code = TRY_SQL.replace("DB", "':memory:'") + (
        "from sqlite3 import connect\n"
        "from sqlite3.dbapi2 import connect as connect2\n"
        "for f in (connect, connect2, sqlite3.dbapi2.connect):\n"
        "    con = f(':memory:')\n"
        "    run(\"attach database '../outside.db' as o\")\n"
    )
    result = raw_run(python_only, code, landlock=False, seccomp=False, python_guards=True)
    assert result.status is RunStatus.OK, result.stderr
    assert result.stdout.splitlines() == ["DatabaseError not authorized"] * 3


def test_attach_outside_fails_with_all_layers(sandbox: Sandbox, outside: pathlib.Path) -> None:
    # The default sandbox: every layer that is available (as root too: the authorizer and,
    # where the kernel has it, Landlock).
    (outside / "secret.db").write_bytes(b"")
    code = TRY_SQL.replace("DB", "':memory:'") + (
        "run(\"attach database '../secret.db' as s\")\nrun(\"vacuum into '../copied.db'\")\n"
    )
    result = sandbox.run(code)
    assert result.status is RunStatus.OK, result.stderr
    assert result.stdout.splitlines() == [
        "DatabaseError not authorized",
        "DatabaseError authorization denied",
    ]
    assert not (outside / "copied.db").exists()
    assert (outside / "secret.db").stat().st_size == 0


def test_authorizer_unit(tmp_path: pathlib.Path) -> None:
    messages: list[str] = []

    class Err:
        def write(self, text: str) -> None:
            messages.append(text)

    (tmp_path / "ws").mkdir()
    inside = str(tmp_path / "ws")

    def within(path: str, roots: tuple[str, ...]) -> bool:
        return any(path == r or path.startswith(r + "/") for r in roots)

    auth = make_sqlite_authorizer(inside, lambda p: str(pathlib.Path(inside, p)), within, Err())
    assert auth(24, "", None, None, None) == SQLITE_OK
    assert auth(24, ":memory:", None, None, None) == SQLITE_OK
    assert auth(24, "a.db", None, None, None) == SQLITE_OK
    assert auth(24, None, None, None, None) == SQLITE_DENY
    assert auth(24, "File:a.db", None, None, None) == SQLITE_DENY
    assert auth(24, "/etc/x.db", None, None, None) == SQLITE_DENY
    assert auth(19, "Temp_Store_Directory", "/tmp", "main", None) == SQLITE_DENY
    assert auth(19, "journal_mode", None, "main", None) == SQLITE_OK
    assert auth(21, None, None, None, None) == SQLITE_OK
    assert len(messages) == 4 and all(m.startswith("sandbox: ") for m in messages)
