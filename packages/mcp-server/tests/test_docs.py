"""The documentation agrees with the code: the ``nox -l`` header and the README, the release tag
examples and the versions, help texts without internal issue numbers, the server's ``--help``."""

from __future__ import annotations

import argparse
import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import astguard.__main__
import datavalidate._cli
import wsnapshot.__main__
from mcp_secure_sandbox.settings import build_parser

ROOT = Path(__file__).resolve().parents[3]
in_checkout = pytest.mark.skipif(
    not (ROOT / "noxfile.py").is_file(),
    reason="not in the repository checkout (an unpacked sdist has one package)",
)
#: "issue 14", "Issue 15's", "issues 12": the project's internal numbering.
ISSUE_NUMBER = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)


def _noxfile() -> ast.Module:
    return ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))


def _default_sessions(module: ast.Module) -> list[str]:
    for node in module.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "nox.options.sessions":
            return list(ast.literal_eval(node.value))
    raise AssertionError("noxfile.py sets no nox.options.sessions")


def _header_entries(docstring: str) -> dict[str, str]:
    """The ``command  meaning`` block of the noxfile's docstring (continuations indented)."""
    entries: dict[str, str] = {}
    command = ""
    for line in docstring.splitlines():
        if line.startswith("    nox"):
            parts = re.split(r"\s{2,}", line.strip(), maxsplit=1)
            command = parts[0]
            entries[command] = parts[1] if len(parts) > 1 else ""
        elif command and line.startswith("        "):
            entries[command] = f"{entries[command]} {line.strip()}".strip()
        else:
            command = ""
    return entries


def _readme_rows() -> dict[str, str]:
    """The README's Development table: ``command`` (joined with " / ") -> meaning."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("## Development", 1)[1].split("\n\n", 2)[1]
    rows: dict[str, str] = {}
    for line in table.splitlines()[2:]:
        command, meaning = (cell.strip() for cell in line.strip("|").split(" | ", 1))
        rows[" / ".join(re.findall(r"`([^`]+)`", command))] = meaning.replace("`", "")
    return rows


@in_checkout
def test_the_nox_header_agrees_with_the_readme() -> None:
    module = _noxfile()
    header = _header_entries(ast.get_docstring(module) or "")
    rows = _readme_rows()
    assert len(rows) >= 10
    assert {c: m.replace("`", "") for c, m in header.items()} == rows
    # The default set ("nox", what CI runs) is the one the noxfile selects.
    listed = rows["nox"].removesuffix(" (what CI runs)")
    names = [
        name.strip().removeprefix("tests on 3.10-3.13").strip() or "tests"
        for name in listed.split(",")
    ]
    assert names == _default_sessions(module)
    # Every session the noxfile defines has its row.
    defined = set(re.findall(r'@nox\.session\(name="([^"]+)"', (ROOT / "noxfile.py").read_text()))
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and any(
            "nox.session" in ast.unparse(d) and "name=" not in ast.unparse(d)
            for d in node.decorator_list
        ):
            defined.add(node.name)
    mentioned = " ".join(rows)
    for name in defined - {"tests"}:
        assert f"-s {name}" in mentioned or name in rows["nox"], name


def _helps(parser: argparse.ArgumentParser) -> Iterator[str]:
    yield parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _helps(sub)


def test_help_texts_name_no_internal_issue_numbers() -> None:
    parsers = {
        "mcp-secure-sandbox": build_parser({}),
        "astguard": astguard.__main__._parser(),
        "datavalidate": datavalidate._cli._parser(),
        "wsnapshot": wsnapshot.__main__._parser(),
    }
    for name, parser in parsers.items():
        helps = list(_helps(parser))
        assert helps, name
        for text in helps:
            assert not ISSUE_NUMBER.search(text), (name, ISSUE_NUMBER.search(text))


@in_checkout
def test_readmes_and_nox_sessions_name_no_internal_issue_numbers() -> None:
    documents = [
        ROOT / "README.md",
        ROOT / "SECURITY.md",
        ROOT / "redteam" / "README.md",
        *sorted((ROOT / "packages").glob("*/README.md")),
    ]
    assert len(documents) >= 8
    for path in documents:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not ISSUE_NUMBER.search(line), f"{path.relative_to(ROOT)}:{number}: {line}"
    # What nox -l prints: the module docstring and each session's docstring.
    module = _noxfile()
    texts = [ast.get_docstring(module) or ""] + [
        ast.get_docstring(node) or "" for node in module.body if isinstance(node, ast.FunctionDef)
    ]
    for text in texts:
        assert not ISSUE_NUMBER.search(text), text


def _versions() -> dict[str, set[str]]:
    """Each distribution's versions: its ``__about__`` one and those its changelog released."""
    found: dict[str, set[str]] = {}
    for pyproject in (ROOT / "packages").glob("*/pyproject.toml"):
        text = pyproject.read_text(encoding="utf-8")
        name = re.search(r'^name = "([^"]+)"', text, re.M)
        about = re.search(r'^path = "(src/[^"]+/__about__\.py)"', text, re.M)
        assert name and about, pyproject
        version = re.search(
            r'__version__ = "([^"]+)"', (pyproject.parent / about.group(1)).read_text("utf-8")
        )
        assert version, about.group(1)
        changelog = (pyproject.parent / "CHANGELOG.md").read_text(encoding="utf-8")
        released = set(re.findall(r"^## \[?(\d+\.\d+\.\d+)\]?", changelog, re.M))
        found[name.group(1)] = {version.group(1), *released}
    return found


@in_checkout
def test_release_tag_examples_match_real_versions() -> None:
    versions = _versions()
    assert set(versions) == {
        "astguard",
        "secure-pysandbox",
        "datavalidate",
        "wsnapshot",
        "mcp-secure-sandbox",
    }
    tag = re.compile(rf"\b({'|'.join(map(re.escape, versions))})-v(\d+\.\d+\.\d+)\b")
    seen = 0
    for path in [ROOT / "README.md", *sorted((ROOT / "packages").glob("*/*.md"))]:
        for match in tag.finditer(path.read_text(encoding="utf-8")):
            seen += 1
            dist, version = match.groups()
            assert version in versions[dist], f"{path.relative_to(ROOT)}: {match.group(0)}"
    assert seen >= 2


def test_the_server_help_says_how_it_is_reached_and_where_settings_are_documented() -> None:
    text = build_parser({}).format_help()
    assert "Speaks MCP on stdio" not in text
    assert "Transports: stdio (the default" in text
    assert "--transport streamable-http" in text and "SANDBOX_HTTP_TOKEN" in text
    assert "SANDBOX_* environment variable" in text
    assert "https://github.com/secure-sandbox/secure-sandbox/tree/main/packages/mcp-server" in (
        text
    )
    assert "--stream-excerpt" in text and "SANDBOX_STREAM_EXCERPT" in text


def _option_helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each flag's help text as ``--help`` prints it, whitespace collapsed."""
    text = parser.format_help().split("\noptions:\n", 1)[1].split("\n\n", 1)[0]
    helps: dict[str, str] = {}
    flag = ""
    for line in text.splitlines():
        found = re.match(r"^  (--[a-z-]+)", line)
        if found:
            flag = found.group(1)
            helps[flag] = ""
        if flag:
            helps[flag] = f"{helps[flag]} {line.strip()}".strip()
    return helps


def test_the_server_help_lists_each_setting_s_choices_from_its_declaration() -> None:
    from mcp_secure_sandbox.settings import declarations

    helps = _option_helps(build_parser({}))
    with_choices = {
        str(setting.flag): setting.choices
        for _, setting in declarations()
        if setting.choices and not setting.switch
    }
    assert set(with_choices) >= {"--transport", "--execution", "--log-level", "--profile"}
    for flag, choices in with_choices.items():
        assert f"(choices: {', '.join(choices)}" in helps[flag], flag
    assert "(choices: stdio, streamable-http)" in helps["--transport"]
    assert "(choices: landlock, seccomp or none)" in helps["--require-layers"]
    # A flag without choices says none.
    assert "choices" not in helps["--port"] and "choices" not in helps["--extra-modules"]


def test_the_server_help_points_at_the_settings_page_file() -> None:
    text = build_parser({}).format_help()
    epilog = text.rsplit("\n\n", 1)[1]
    assert "docs/settings.md of the package" in epilog
    assert "(packages/mcp-server/docs/settings.md in the repository)" in epilog
    page = Path(__file__).resolve().parents[1] / "docs" / "settings.md"
    links = [line.strip() for line in epilog.splitlines() if line.startswith("  ")]
    # This package folder's copy (a checkout, an unpacked sdist) first, then the Source URL's.
    assert links[0] == str(page) and page.is_file()
    assert links[-1].startswith("https://") and links[-1].endswith("/docs/settings.md")


PACKAGE_README = Path(__file__).resolve().parents[1] / "README.md"


def _example_results() -> list[dict[str, Any]]:
    """The JSON results of the README's "Example calls and results" (``"...": "..."`` marks a
    result shown in part)."""
    text = PACKAGE_README.read_text(encoding="utf-8")
    section = text.split("### Example calls and results", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```json\n(.*?)```", section, re.S)
    return [json.loads(block) for block in blocks]


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    for key in ("anyOf", "oneOf"):  # an optional object: the non-null branch
        objects = [s for s in schema.get(key, []) if s.get("type") != "null"]
        if len(objects) == 1:
            return _resolve(objects[0], root)
    return schema


def _check_shape(
    value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any], where: str
) -> None:
    """``value``'s keys are the schema's properties (a part of them when it has ``...``), and
    so are those of the objects in its lists, recursively."""
    properties: dict[str, Any] = _resolve(schema, root).get("properties", {})
    shown = set(value) - {"..."}
    assert shown <= set(properties), (where, sorted(shown - set(properties)))
    if "..." not in value:
        assert shown == set(properties), (where, sorted(set(properties) - shown))
    for key in shown:
        field = _resolve(properties[key], root)
        items = value[key] if isinstance(value[key], list) else []
        for number, item in enumerate(items):
            if isinstance(item, dict) and "items" in field:
                _check_shape(item, field["items"], root, f"{where}.{key}[{number}]")


def test_the_readme_example_results_have_the_tools_output_shapes(
    dirs: tuple[Path, Path],
) -> None:
    from mcp import Client

    from mcp_secure_sandbox.server import create_server
    from mcp_secure_sandbox.settings import prepare_directories, settings_from_args

    workspace, snapshots = dirs
    settings = prepare_directories(
        settings_from_args(["--workspace", str(workspace), "--snapshots", str(snapshots)], {})
    )

    async def schemas() -> dict[str, dict[str, Any]]:
        app, _state = create_server(settings)
        async with Client(app) as client:
            tools = (await client.list_tools()).tools
        return {t.name: t.output_schema for t in tools if t.output_schema is not None}

    outputs = anyio.run(schemas)
    examples = _example_results()
    matched: list[str] = []
    for number, example in enumerate(examples):
        shown = set(example) - {"..."}
        tools = [name for name, s in outputs.items() if shown <= set(s.get("properties", {}))]
        assert len(tools) == 1, (number, sorted(shown), tools)
        matched.append(tools[0])
        _check_shape(example, outputs[tools[0]], outputs[tools[0]], f"{tools[0]} example")
        if tools[0] == "restore_state_snapshot":
            # counts has each path list's length, and only theirs.
            lists = {key for key, value in example.items() if isinstance(value, list)}
            assert example["counts"] == {key: len(example[key]) for key in lists}
    assert matched.count("run_sandbox_code") >= 3
    assert {"validate_json_data", "validate_csv_data", "create_state_snapshot"} <= set(matched)
    assert "restore_state_snapshot" in matched


#: What every documented ``docker run`` client configuration passes, as docker-compose.yml sets
#: it: (flag, value) pairs, ``""`` for a switch, ``None`` for any value.
DOCKER_HARDENING = (
    ("--cap-drop", "ALL"),
    ("--security-opt", "no-new-privileges"),
    ("--read-only", ""),
    ("--tmpfs", "/tmp:size=64m,mode=1777"),
    ("--memory", None),
    ("--pids-limit", None),
)


def _docker_configs(text: str) -> Iterator[list[str]]:
    """The ``args`` of each JSON client configuration whose command is ``docker``."""
    for block in re.findall(r"```json\n(.*?)```", text, re.S):
        config = json.loads(block)
        for server in config.get("mcpServers", config.get("servers", {})).values():
            if server.get("command") == "docker":
                yield server["args"]


@in_checkout
def test_every_docker_client_configuration_is_hardened_and_keeps_its_snapshots() -> None:
    readmes = {"README.md": ROOT / "README.md", "mcp-server": PACKAGE_README}
    images: list[str] = []
    for name, path in readmes.items():
        for args in _docker_configs(path.read_text(encoding="utf-8")):
            images.append(args[-1])
            for flag, value in DOCKER_HARDENING:
                assert flag in args, (name, args[-1], flag)
                after = args[args.index(flag) + 1]
                if value == "":  # a switch: the next argument is the next flag
                    assert after.startswith("-"), (name, args[-1], flag)
                elif value is not None:
                    assert after == value, (name, args[-1], flag)
            mounts = [args[i + 1].rsplit(":", 1)[1] for i, a in enumerate(args) if a == "-v"]
            assert sorted(mounts) == ["/sandbox/snapshots", "/sandbox/workspace"], (name, args)
    assert images.count("mcp-secure-sandbox") >= 2 and "mcp-secure-sandbox:datascience" in images
    # The same hardening as compose's.
    compose = (ROOT / "docker-compose.yml").read_text(encoding="utf-8")
    for needle in ("read_only: true", "/tmp:size=64m,mode=1777", "cap_drop: [ALL]"):
        assert needle in compose
    assert "no-new-privileges:true" in compose
