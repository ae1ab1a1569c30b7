"""Issue 14: every standard module has a decision, and the README's tables are the policy.

The README lists the allowed modules in "Default allow-list" and every other standard module in
"Every other standard module", each with its reason; these tests keep both tables equal to the
policy, and check the routes the review found in the modules allowed by it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from astguard import Policy, check, is_module_allowed
from astguard._policy import DEFAULT_ALLOWED_MODULES, STDLIB_MODULE_NAMES

README = Path(__file__).resolve().parents[1] / "README.md"
SANDBOX = Policy().with_runtime_attribute_guard().with_runtime_format_guard()


def table_names(heading: str) -> list[str]:
    """Backticked module names in the first column of the first table after ``heading``.

    A parenthesised remark in the cell (``xml`` (all but ``xml.etree``)) is not a name.
    """
    text = README.read_text(encoding="utf-8")
    start = text.index(heading)
    names: list[str] = []
    in_table = False
    for line in text[start:].splitlines()[1:]:
        if line.startswith("|"):
            in_table = True
            first = line.split("|")[1]
            first = re.sub(r"\(.*?\)", "", first)
            names += [n for n in re.findall(r"`([A-Za-z_][\w.]*)`", first) if n != "module"]
        elif in_table and line.strip() and not line.startswith("|"):
            break
    return names


ALLOWED_TABLE = table_names("## Default allow-list")
REFUSED_TABLE = table_names("### Every other standard module")


def test_readme_allowed_table_is_the_policy() -> None:
    assert len(ALLOWED_TABLE) == len(set(ALLOWED_TABLE))
    assert set(ALLOWED_TABLE) == DEFAULT_ALLOWED_MODULES


def test_readme_refused_table_is_refused_and_complete() -> None:
    assert len(REFUSED_TABLE) == len(set(REFUSED_TABLE))
    for name in REFUSED_TABLE:
        assert not is_module_allowed(name), name
    allowed_tops = {name.partition(".")[0] for name in DEFAULT_ALLOWED_MODULES}
    public = {name for name in STDLIB_MODULE_NAMES if not name.startswith("_")}
    # A package allowed only in part (urllib.parse, xml.etree) is in the refused table too.
    partly = {name.partition(".")[0] for name in DEFAULT_ALLOWED_MODULES if "." in name}
    assert public - allowed_tops - set(REFUSED_TABLE) == set()
    assert set(REFUSED_TABLE) & (allowed_tops - partly) == set()
    assert "not reviewed" not in README.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "name",
    [
        "argparse",
        "bz2",
        "configparser",
        "email",
        "email.mime.text",
        "email.utils",
        "getopt",
        "gzip",
        "ipaddress",
        "lzma",
        "plistlib",
        "tomllib",
        "wave",
        "xml.etree.ElementTree",
        "xml.etree.ElementPath",
    ],
)
def test_reviewed_modules_are_allowed(name: str) -> None:
    assert is_module_allowed(name)
    assert check(f"import {name}", SANDBOX).ok


@pytest.mark.parametrize(
    "name",
    [
        "aifc",
        "antigravity",
        "audioop",
        "cgi",
        "cgitb",
        "chunk",
        "gettext",
        "imghdr",
        "mailcap",
        "msilib",
        "optparse",
        "ossaudiodev",
        "pipes",
        "sndhdr",
        "sunau",
        "this",
        "uu",
        "xdrlib",
        "xml",
        "xml.dom",
        "xml.dom.minidom",
        "xml.dom.xmlbuilder",
        "xml.sax",
        "xml.sax.saxutils",
        "xml.parsers.expat",
    ],
)
def test_reviewed_modules_are_refused(name: str) -> None:
    assert not is_module_allowed(name)
    for source in (f"import {name}", f"from {name} import x", f"import {name} as m"):
        assert [v.rule_id for v in check(source, SANDBOX).violations][:1] in (
            ["AG101"],
            ["AG103"],
        ), source


@pytest.mark.parametrize(
    "source",
    [
        # the modules the allowed ones hold stay out of reach (AG304)
        "import gzip\nb = gzip.builtins",
        "import lzma\nb = lzma.builtins",
        "import wave\nb = wave.builtins",
        "import bz2\no = bz2._builtin_open",
        "import gzip\no = gzip.os",
        "import email.utils\ns = email.utils.socket",
        "import email.utils\nu = email.utils.urllib",
        "import configparser\ns = configparser.sys",
        "import getopt\no = getopt.os",
        "import plistlib\no = plistlib.os",
        "import xml.etree.ElementTree as ET\ns = ET.sys",
        "import xml.etree.ElementTree\nm = xml.dom",
        "import xml.etree.ElementTree\nm = xml.sax.make_parser",
        "import argparse\ns = argparse._sys",
        "import tomllib\np = tomllib._parser",
        # the gzip command-line tool reads the process's argv and stdin
        "import gzip\ngzip.main()",
        "from gzip import main",
        # a module is never the namespace argparse or configparser write into
        "import argparse, json\nargparse.ArgumentParser().parse_args([], json)",
        "import argparse, json\nargparse.ArgumentParser().parse_args([], namespace=json)",
        "import argparse, math\np = argparse.ArgumentParser()\n"
        "a = p.add_argument('--pi')\na(p, math, 3)",
        "import configparser, json\nconfigparser.ConverterMapping(json)",
        # the sandbox's SQLite authorizer stays installed
        "import sqlite3\nc = sqlite3.connect(':memory:')\nc.set_authorizer(None)",
        "import sqlite3\nsqlite3.Connection.set_authorizer(c, None)",
        "import sqlite3\nf = sqlite3.connect(':memory:').set_authorizer",
    ],
)
def test_routes_out_of_allowed_modules_are_refused(source: str) -> None:
    assert not check(source, SANDBOX).ok, source


@pytest.mark.parametrize(
    "source",
    [
        "import argparse\np = argparse.ArgumentParser(prog='t')\np.add_argument('--n', type=int)\n"
        "print(p.parse_args(['--n', '3']).n)",
        "import configparser\nc = configparser.ConfigParser()\nc.read_string('[a]\\nx = 1')\n"
        "print(c.getint('a', 'x'))",
        "import email\nm = email.message_from_string('Subject: hi\\n\\nbody')\nprint(m['Subject'])",
        "from email.message import EmailMessage\nm = EmailMessage()\nm['To'] = 'a@b.c'\n"
        "m.set_content('x')\nprint(m.as_string())",
        "import getopt\nprint(getopt.getopt(['-a', 'x'], 'a:'))",
        "import gzip, bz2, lzma\nprint(gzip.decompress(gzip.compress(b'x')))\n"
        "print(bz2.decompress(bz2.compress(b'x')), lzma.decompress(lzma.compress(b'x')))",
        "import gzip\nwith gzip.open('out.gz', 'wt') as f:\n    f.write('x')",
        "import ipaddress\nprint(list(ipaddress.ip_network('10.0.0.0/30')))",
        "import plistlib\nprint(plistlib.loads(plistlib.dumps({'a': 1})))",
        "import tomllib\nprint(tomllib.loads('a = 1'))",
        "import io, wave\nb = io.BytesIO()\nw = wave.open(b, 'wb')\nw.setnchannels(1)",
        "import xml.etree.ElementTree as ET\nprint(ET.fromstring('<a><b/></a>')[0].tag)",
        "from xml.etree import ElementTree\nprint(ElementTree.tostring(ElementTree.Element('a')))",
    ],
)
def test_ordinary_uses_are_accepted(source: str) -> None:
    result = check(source, SANDBOX)
    assert result.ok, result


def test_this_interpreter_knows_the_reviewed_names() -> None:
    # The removed modules stay in the table on 3.13, where sys.stdlib_module_names lacks them.
    for name in ("aifc", "cgi", "xdrlib"):
        assert name in STDLIB_MODULE_NAMES
    if sys.version_info >= (3, 11):
        assert "tomllib" in sys.stdlib_module_names
