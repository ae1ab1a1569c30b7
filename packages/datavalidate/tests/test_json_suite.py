"""The official JSON-Schema-Test-Suite, run through ``validate_json``.

Every case of the required tests of drafts 4, 6, 7, 2019-09 and 2020-12 must give the expected
``valid``, except those in ``SKIPPED``. The suite's ``$ref``s to ``http://localhost:1234/...`` point
at its ``remotes/`` folder: each document there is registered with a ``SchemaRegistry`` under that
URI, the way a user registers their own schemas. Nothing is fetched (a fetch would raise).

The optional tests (``optional/`` and ``optional/format/``) run too; their pass rate per draft is
printed and must stay at or above ``OPTIONAL_FLOOR``.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from _support import data_dir
from datavalidate import SchemaError, SchemaRegistry, parse_json, validate_json

SUITE = data_dir("json-schema-test-suite")
DRAFT_FOLDERS = ("draft4", "draft6", "draft7", "draft2019-09", "draft2020-12")
REMOTE_BASE = "http://localhost:1234/"

# (draft folder, file stem, case description, test description) -> why it cannot pass.
# Keep this list explicit and commented; an entry that starts passing fails the test.
_NO_VALIDATION_VOCABULARY = (
    "jsonschema 4.x ignores $vocabulary: a custom metaschema that leaves out the validation "
    "vocabulary still gets validation keywords asserted"
)
SKIPPED: dict[tuple[str, str, str, str], str] = {
    (
        "draft2019-09",
        "vocabulary",
        "schema that uses custom metaschema with with no validation vocabulary",
        "no validation: invalid number, but it still validates",
    ): _NO_VALIDATION_VOCABULARY,
    (
        "draft2020-12",
        "vocabulary",
        "schema that uses custom metaschema with with no validation vocabulary",
        "no validation: invalid number, but it still validates",
    ): _NO_VALIDATION_VOCABULARY,
}

# Lowest accepted pass rate of the optional tests per draft (they are not required by the spec).
OPTIONAL_FLOOR = 0.95


def test_format_json_passes_in_annotation_mode() -> None:
    """2020-12 makes ``format`` an annotation by default; ``check_formats=False`` is that mode."""
    path = SUITE / "tests" / "draft2020-12" / "format.json"
    assert _run_file("draft2020-12", path, check_formats=False) == []
    cases = json.loads(path.read_text(encoding="utf-8"))
    assert sum(len(c["tests"]) for c in cases) >= 100


def test_unknown_formats_are_refused_in_assertion_mode() -> None:
    """``optional/format/unknown.json`` expects an unknown format to be ignored; we assert by
    default and refuse to leave a format unchecked, so each of its cases raises SchemaError."""
    for draft in DRAFT_FOLDERS:
        path = SUITE / "tests" / draft / "optional" / "format" / "unknown.json"
        failures = _run_file(draft, path, check_formats=True)
        assert failures
        assert all("unknown format 'unknown' cannot be asserted" in why for _, why in failures)
        assert _run_file(draft, path, check_formats=False) == []


def _remote_registry(draft: str) -> SchemaRegistry:
    registry = SchemaRegistry(builtins=False)
    remotes = SUITE / "remotes"
    for path in sorted(remotes.rglob("*.json")):
        relative = path.relative_to(remotes).as_posix()
        top = relative.split("/", 1)[0]
        remote_draft = top if top.startswith("draft") else draft
        name = relative.replace("/", "__")
        schema = json.loads(path.read_text(encoding="utf-8"))
        registry.register(name, schema, uri=REMOTE_BASE + relative, draft=remote_draft)
    return registry


_REGISTRIES: dict[str, SchemaRegistry] = {}


def _registry(draft: str) -> SchemaRegistry:
    if draft not in _REGISTRIES:
        _REGISTRIES[draft] = _remote_registry(draft)
    return _REGISTRIES[draft]


def _files(optional: bool) -> Iterator[tuple[str, pathlib.Path]]:
    for draft in DRAFT_FOLDERS:
        folder = SUITE / "tests" / draft
        paths = (
            sorted(folder.glob("optional/**/*.json")) if optional else sorted(folder.glob("*.json"))
        )
        for path in paths:
            yield draft, path


def _run_file(
    draft: str, path: pathlib.Path, *, check_formats: bool, text_data: bool = False
) -> list[tuple[tuple[str, str, str, str], str]]:
    """Run one suite file; return the failing cases with what went wrong.

    With ``text_data`` each instance comes from the file's text through ``parse_json`` (numbers
    as ``Decimal``), as the CLI and the server's ``data_json`` read it; otherwise from
    ``json.loads`` (numbers as ``float``), as library callers pass them.
    """
    failures: list[tuple[tuple[str, str, str, str], str]] = []
    registry = _registry(draft)
    stem = path.relative_to(SUITE / "tests" / draft).with_suffix("").as_posix()
    text = path.read_text(encoding="utf-8")
    exact_cases = parse_json(text) if text_data else None
    for number, case in enumerate(json.loads(text)):
        schema: Any = case["schema"]
        for index, test in enumerate(case["tests"]):
            key = (draft, stem, case["description"], test["description"])
            data = exact_cases[number]["tests"][index]["data"] if exact_cases else test["data"]
            try:
                got = validate_json(
                    data,
                    schema,
                    draft=None if _has_schema(schema) else draft,
                    check_formats=check_formats,
                    registry=registry,
                ).valid
            except (SchemaError, ValueError) as exc:
                failures.append((key, f"raised {type(exc).__name__}: {exc}"))
                continue
            if got != test["valid"]:
                failures.append((key, f"valid={got}, expected {test['valid']}"))
    return failures


def _has_schema(schema: Any) -> bool:
    return isinstance(schema, dict) and "$schema" in schema


REQUIRED = list(_files(optional=False))


@pytest.mark.parametrize("text_data", [False, True], ids=["floats", "text"])
@pytest.mark.parametrize(("draft", "path"), REQUIRED, ids=[f"{d}/{p.stem}" for d, p in REQUIRED])
def test_required(draft: str, path: pathlib.Path, text_data: bool) -> None:
    failures = _run_file(draft, path, check_formats=False, text_data=text_data)
    unexpected = [f"{key}: {why}" for key, why in failures if key not in SKIPPED]
    assert not unexpected, "\n".join(unexpected)
    stem = path.relative_to(SUITE / "tests" / draft).with_suffix("").as_posix()
    listed = {key for key in SKIPPED if key[0] == draft and key[1] == stem}
    now_passing = listed - {key for key, _ in failures}
    assert not now_passing, f"skip-listed cases now pass, remove them: {sorted(now_passing)}"


def test_required_suite_is_complete() -> None:
    assert len(REQUIRED) == 195
    assert {d for d, _ in REQUIRED} == set(DRAFT_FOLDERS)
    cases = sum(
        len(case["tests"]) for _, path in REQUIRED for case in json.loads(path.read_text("utf-8"))
    )
    print(f"\nJSON-Schema-Test-Suite required: {cases - len(SKIPPED)}/{cases} cases pass")
    assert cases == 4942


@pytest.mark.parametrize("text_data", [False, True], ids=["floats", "text"])
def test_optional_pass_rate(capsys: pytest.CaptureFixture[str], text_data: bool) -> None:
    lines = []
    for draft in DRAFT_FOLDERS:
        total = failed = 0
        for d, path in _files(optional=True):
            if d != draft:
                continue
            cases = sum(len(c["tests"]) for c in json.loads(path.read_text(encoding="utf-8")))
            failures = _run_file(draft, path, check_formats=True, text_data=text_data)
            total += cases
            failed += len(failures)
        rate = (total - failed) / total
        lines.append(f"{draft}: optional {total - failed}/{total} passed ({rate:.1%})")
        assert rate >= OPTIONAL_FLOOR, lines[-1]
    with capsys.disabled():
        kind = "instances parsed from text" if text_data else "instances as floats"
        print(f"\nJSON-Schema-Test-Suite optional tests ({kind}):\n  " + "\n  ".join(lines))
