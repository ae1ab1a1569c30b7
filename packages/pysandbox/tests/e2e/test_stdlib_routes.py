"""Issue 14: the file routes of the standard modules the audit allowed, with the kernel layers off.

Each module that opens a file by name (``gzip.open``, ``bz2.open``, ``lzma.open``,
``wave.open``, ``ConfigParser.read``, ``ElementTree.parse``, ``argparse.FileType`` and
``fromfile_prefix_chars``) must be confined by the Python layers alone (the guarded ``open()`` or
the audit hook's same rule), for reads outside the workspace and for writes anywhere outside it.
"""

from __future__ import annotations

import pathlib

import pytest

from pysandbox import RunStatus, Sandbox

ATTEMPT = """
def attempt(name, fn):
    try:
        fn()
        print(name, 'ok')
    except BaseException as exc:
        print(name, type(exc).__name__, 'sandbox:' in str(exc))
"""

#: (module import, call with PATH and MODE placeholders) for each route that opens by name;
#: the refusal is a PermissionError (argparse wraps it in ArgumentTypeError, naming the file).
ROUTES = {
    "gzip": ("import gzip", "gzip.open(PATH, MODE).close()"),
    "bz2": ("import bz2", "bz2.open(PATH, MODE).close()"),
    "lzma": ("import lzma", "lzma.open(PATH, MODE).close()"),
    "gzip_file": ("import gzip", "gzip.GzipFile(PATH, MODE).close()"),
    "bz2_file": ("import bz2", "bz2.BZ2File(PATH, MODE).close()"),
    "lzma_file": ("import lzma", "lzma.LZMAFile(PATH, MODE).close()"),
    "wave": ("import wave", "wave.open(PATH, MODE + 'b')"),
    "filetype": ("import argparse", "argparse.FileType(MODE)(PATH).close()"),
}


@pytest.fixture
def outside(workspace: pathlib.Path) -> pathlib.Path:
    (workspace.parent / "CANARY.txt").write_text("token-xyz")
    return workspace.parent


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_open_by_name_is_confined(python_only: Sandbox, outside: pathlib.Path, route: str) -> None:
    imports, call = ROUTES[route]
    targets = {
        "read_parent": ("'../CANARY.txt'", "'r'"),
        "read_abs": ("'/etc/hostname'", "'r'"),
        "write_tmp": ("'/tmp/PWNED-stdlib-route'", "'w'"),
        "write_parent": ("'../PWNED'", "'w'"),
    }
    code = ATTEMPT + imports + "\n"
    for name, (path, mode) in targets.items():
        code += f"attempt({name!r}, lambda: {call.replace('PATH', path).replace('MODE', mode)})\n"
    result = python_only.run(code)
    assert result.status is RunStatus.OK, result.stderr
    refusal = "ArgumentTypeError" if route == "filetype" else "PermissionError"
    assert result.stdout.splitlines() == [f"{name} {refusal} True" for name in targets]
    assert not pathlib.Path("/tmp/PWNED-stdlib-route").exists()
    assert not (outside / "PWNED").exists()


def test_parsers_reading_files_by_name_are_confined(
    python_only: Sandbox, outside: pathlib.Path
) -> None:
    code = ATTEMPT + (
        "import argparse, configparser\n"
        "import xml.etree.ElementTree as ET\n"
        "attempt('configparser_read', lambda: print(configparser.ConfigParser().read("
        "['../CANARY.txt', '/etc/hostname'])))\n"
        "attempt('etree_parse', lambda: ET.parse('../CANARY.txt'))\n"
        "attempt('etree_iterparse', lambda: list(ET.iterparse('/etc/hostname')))\n"
        "p = argparse.ArgumentParser(prog='t', fromfile_prefix_chars='@')\n"
        "p.add_argument('rest', nargs='*')\n"
        "attempt('argparse_fromfile', lambda: p.parse_args(['@../CANARY.txt']))\n"
        "open('args.txt', 'w').write('one\\ntwo\\n')\n"
        "print(p.parse_args(['@args.txt']).rest)\n"
    )
    result = python_only.run(code)
    assert result.status is RunStatus.OK, result.stderr
    # ConfigParser.read skips files it cannot open (OSError) and lists the ones it read.
    assert result.stdout.splitlines() == [
        "[]",
        "configparser_read ok",
        "etree_parse PermissionError True",
        "etree_iterparse PermissionError True",
        "argparse_fromfile SystemExit False",
        "['one', 'two']",
    ]
    assert "token-xyz" not in result.stdout + result.stderr
    assert "sandbox: access outside the workspace is not permitted" in result.stderr
