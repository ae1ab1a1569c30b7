"""Ranged reads and readable listings in process (tool and resource, one implementation)."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import BlobResourceContents, ResourceTemplateReference, TextResourceContents

from _client import call, call_error, in_process
from mcp_secure_sandbox import budget

CHUNK = budget.READ_CHUNK_BYTES


def test_ranged_reads_and_listing(dirs: tuple[Path, Path]) -> None:
    workspace, _ = dirs
    # 3 MiB of text with a multi-byte character across the first range end, and a binary file.
    text = "a" * (CHUNK - 1) + "é" + "0123456789" * 300_000
    (workspace / "big.txt").write_text(text, encoding="utf-8")
    (workspace / "bin.dat").write_bytes(bytes(range(255, -1, -1)) * 10)
    (workspace / "bin.dat").chmod(0o640)

    async def scenario(s: Client) -> None:
        templates = {t.uri_template for t in (await s.list_resource_templates()).resource_templates}
        assert "sandbox://workspace/{+path}{?offset,length}" in templates
        first = await call(s, "read_workspace_file", path="big.txt")
        size = len(text.encode())
        assert first["size"] == size
        assert first["offset"] == 0 and first["encoding"] == "utf-8"
        # The range end splits "é": it is left for the next range.
        assert first["length"] == CHUNK - 1 and first["content"] == "a" * (CHUNK - 1)
        assert first["next_offset"] == CHUNK - 1
        second = await call(
            s, "read_workspace_file", path="big.txt", offset=first["next_offset"], length=12
        )
        assert second["content"] == "é0123456789"
        # Any part of a file over 1 MiB can be read; the last range ends the file.
        last = await call(s, "read_workspace_file", path="big.txt", offset=size - 5)
        assert last["content"] == "56789" and last["next_offset"] is None
        binary = await call(s, "read_workspace_file", path="bin.dat", offset=0, length=4)
        assert binary["encoding"] == "base64"
        assert base64.b64decode(binary["content"]) == bytes([255, 254, 253, 252])
        text_error = await call_error(s, "read_workspace_file", path="big.txt", offset=size + 1)
        assert "past the end" in text_error
        text_error = await call_error(s, "read_workspace_file", path="big.txt", length=CHUNK + 1)
        assert f"at most {CHUNK}" in text_error
        # The resource template reads the same ranges.
        read = await s.read_resource("sandbox://workspace/big.txt?offset=131071&length=12")
        content = read.contents[0]
        assert isinstance(content, TextResourceContents) and content.text == "é0123456789"
        read = await s.read_resource("sandbox://workspace/bin.dat?length=4")
        blob = read.contents[0]
        assert isinstance(blob, BlobResourceContents)
        assert base64.b64decode(blob.blob) == bytes([255, 254, 253, 252])
        with pytest.raises(MCPError, match="length must be a whole number from 1"):
            await s.read_resource("sandbox://workspace/big.txt?length=x")
        with pytest.raises(MCPError):
            await s.read_resource("sandbox://workspace/../etc/passwd")
        # Paths complete for the template.
        done = await s.complete(
            ResourceTemplateReference(uri="sandbox://workspace/{+path}{?offset,length}"),
            {"name": "path", "value": "b"},
        )
        assert done.completion.values == ["big.txt", "bin.dat"]
        # The listing: octal mode strings and ISO 8601 times.
        listing = await call(s, "list_workspace_files")
        entries = {e["path"]: e for e in listing["files"]}
        assert entries["bin.dat"]["mode"] == "0640"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", entries["bin.dat"]["mtime"])
        assert set(entries["bin.dat"]) == {"path", "kind", "size", "mode", "mtime"}
        assert listing["next_offset"] is None and listing["entry_count"] == 2

    in_process(*dirs, scenario)


def test_a_long_listing_pages_within_the_budget(dirs: tuple[Path, Path]) -> None:
    workspace, _ = dirs
    for i in range(3000):
        (workspace / f"{'n' * 150}{i:05}.txt").write_text("x")

    async def scenario(s: Client) -> None:
        seen: list[str] = []
        offset: int | None = 0
        pages = 0
        while offset is not None:
            page = await call(s, "list_workspace_files", offset=offset)
            seen += [e["path"] for e in page["files"]]
            offset = page["next_offset"]
            pages += 1
        assert pages > 1
        assert len(seen) == len(set(seen)) == 3000

    in_process(*dirs, scenario, "--workspace-max-files", "5000")
