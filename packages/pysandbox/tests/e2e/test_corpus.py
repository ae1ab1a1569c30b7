"""The red-team corpora, one test per case, judged by the harness's own rules.

The corpora are found by the harness's ``default_corpus`` (the sdist's ``tests/data/redteam``,
then the repository's ``redteam/``); when they are missing, collection fails.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys
from types import ModuleType
from typing import Any

import pytest

from pysandbox import Sandbox
from sandbox_helpers import KERNEL, PACKAGE_DIR

HARNESS_PATH = PACKAGE_DIR / "harness" / "harness.py"


def load_harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pysandbox_redteam_harness", HARNESS_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def cases(name: str) -> list[dict[str, Any]]:
    path = CORPUS / name
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


harness = load_harness()
CORPUS: pathlib.Path = harness.default_corpus()


def factory(ws: pathlib.Path) -> Sandbox:
    require = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()
    return Sandbox(ws, limits=harness.LIMITS, require=require)


@pytest.fixture(scope="module")
def listener() -> Any:
    lst = harness.Listener()
    yield lst
    lst.close()


@pytest.mark.parametrize("case", cases("escapes.jsonl"), ids=lambda c: c["id"])
def test_escape_case(
    case: dict[str, Any], tmp_path: pathlib.Path, listener: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {"SANDBOX_CANARY_SECRET": "secret-canary-value", "CANARY_PROXY": "http://c.invalid:9"}
    for key, value in secrets.items():
        monkeypatch.setenv(key, value)
    report = harness.run_escape(factory, case, tmp_path, listener, secrets)
    assert report.problems == []
    assert report.passed


@pytest.mark.parametrize("case", cases("benign.jsonl"), ids=lambda c: c["id"])
def test_benign_case(case: dict[str, Any], tmp_path: pathlib.Path) -> None:
    report = harness.run_benign(factory, case, tmp_path)
    assert report.problems == []


ORDINARY = cases("benign-ordinary.jsonl") if (CORPUS / "benign-ordinary.jsonl").exists() else []


def test_ordinary_corpus_is_present_and_broad() -> None:
    # Issue 14: at least 30 ordinary scripts beside the original benign corpus.
    assert len(ORDINARY) >= 30
    imports = {name for case in ORDINARY for name in case["imports"]}
    assert {"unittest", "sqlite3", "shlex", "asyncio", "dataclasses"} <= imports
    # Every module the standard-library audit allowed has an ordinary script.
    reviewed = {"argparse", "getopt", "configparser", "tomllib", "email", "gzip", "bz2", "lzma"}
    reviewed |= {"ipaddress", "plistlib", "wave", "xml.etree.ElementTree"}
    assert reviewed <= imports


@pytest.mark.parametrize("case", ORDINARY, ids=lambda c: c["id"])
def test_ordinary_case(case: dict[str, Any], tmp_path: pathlib.Path) -> None:
    needs = tuple(case.get("requires_python", (3, 10)))
    if sys.version_info < needs:
        pytest.skip(f"needs Python {needs[0]}.{needs[1]} (the module does not exist before)")
    report = harness.run_benign(factory, case, tmp_path)
    assert report.problems == []
