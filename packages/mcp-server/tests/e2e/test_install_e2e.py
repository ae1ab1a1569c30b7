"""The install route the client examples use: the command by its absolute path, without PATH."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from _paths import REPO_ROOT

ROOT = REPO_ROOT


def test_the_venv_command_by_absolute_path_serves_without_path(dirs: tuple[Path, Path]) -> None:
    """A desktop client starts the server with neither the venv activated nor the user's PATH."""
    command = Path(sys.executable).parent / "mcp-secure-sandbox"
    assert command.is_file(), "the console script is installed next to the interpreter"
    workspace, snapshots = dirs
    params = StdioServerParameters(
        command=str(command),
        args=["--workspace", str(workspace), "--snapshots", str(snapshots)],
        env={"PATH": "/nonexistent", "HOME": str(workspace.parent)},
    )

    async def main() -> tuple[str, int]:
        async with Client(params) as s:  # the SDK's default mode: server/discover over stdio
            return s.protocol_version, len((await s.list_tools()).tools)

    assert anyio.run(main) == ("2026-07-28", 16)


def test_the_documented_examples_use_absolute_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r'"command": "([^"]+)"', readme)
    local = [c for c in commands if c != "docker"]
    assert local and all(c.startswith("/") and c.endswith("/mcp-secure-sandbox") for c in local)
    server = (ROOT / "packages" / "mcp-server" / "README.md").read_text()
    assert "uv tool install ./packages/mcp-server" in server
    assert "pipx install ./packages/mcp-server" in server
    for package in ("astguard", "pysandbox", "datavalidate", "wsnapshot"):
        text = (ROOT / "packages" / package / "README.md").read_text()
        assert f"./packages/{package}" in text and "Not on PyPI yet" in text, package
