"""Workspace file tools: list, read, write (through wsnapshot's SafeWorkspace, never a symlink)."""

from __future__ import annotations

import base64
import binascii
from typing import Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from mcp_secure_sandbox._schemas import (
    WorkspaceListOutput,
    WorkspaceReadOutput,
    WorkspaceWriteOutput,
)
from mcp_secure_sandbox.state import ServerState
from mcp_secure_sandbox.tools._register import tool
from wsnapshot import WorkspaceError

__all__ = ["MAX_LIST_ENTRIES", "MAX_READ_BYTES", "MAX_WRITE_BYTES", "register"]

MAX_READ_BYTES = 1024 * 1024
MAX_WRITE_BYTES = 8 * 1024 * 1024
MAX_LIST_ENTRIES = 10_000


def _explain(path: str, exc: BaseException) -> ToolError:
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"path {path}: no such file in the workspace")
    if isinstance(exc, OSError) and exc.strerror:
        return ToolError(f"path {path}: {exc.strerror}")
    return ToolError(f"path {path}: {exc}")


def _write_within_quota(state: ServerState, path: str, data: bytes) -> int:
    """Write ``data`` unless the workspace would pass its byte or file quota afterwards.

    Raises:
        ToolError: The write would pass ``--workspace-quota`` or ``--workspace-max-files``.
    """
    settings = state.settings
    ws = state.workspace
    entries = ws.list_files(max_entries=settings.workspace_files * 2 + 100)
    files = [e for e in entries if e.kind == "file"]
    old = next((e for e in files if e.path == path), None)
    total = sum(e.size for e in files)
    new_total = total - (old.size if old else 0) + len(data)
    new_files = len(files) + (0 if old else 1)
    if new_total > settings.workspace_bytes:
        raise ToolError(
            f"content: the workspace would hold {new_total} bytes, more than its quota of "
            f"{settings.workspace_bytes}"
        )
    if new_files > settings.workspace_files:
        raise ToolError(
            f"path {path}: the workspace would hold {new_files} files, more than its limit of "
            f"{settings.workspace_files}"
        )
    return ws.write_bytes(path, data)


def register(app: MCPServer[Any], state: ServerState) -> None:
    """Register the workspace file tools on ``app``."""
    ws = state.workspace

    @tool(
        app,
        annotations=ToolAnnotations(
            title="List workspace files", read_only_hint=True, open_world_hint=False
        ),
    )
    async def list_workspace_files() -> WorkspaceListOutput:
        """List the workspace recursively: path, kind (file, dir, symlink, other), size, mtime.

        Symlinks are listed, never followed. At most 10,000 entries.
        """
        async with state.instrument("list_workspace_files"):
            try:
                entries = await anyio.to_thread.run_sync(
                    lambda: ws.list_files(max_entries=MAX_LIST_ENTRIES)
                )
            except WorkspaceError as exc:
                raise ToolError(str(exc)) from None
            files = [e for e in entries if e.kind == "file"]
            return {
                "files": list(entries),
                "file_count": len(files),
                "total_bytes": sum(e.size for e in files),
            }

    @tool(
        app,
        annotations=ToolAnnotations(
            title="Read a workspace file", read_only_hint=True, open_world_hint=False
        ),
    )
    async def read_workspace_file(path: str) -> WorkspaceReadOutput:
        """Read one regular file of the workspace (at most 1 MiB).

        `path` is relative to the workspace, e.g. "results/summary.txt". Symlinks are refused.
        Returns the content as UTF-8 text when it decodes (encoding "utf-8"), otherwise Base64
        (encoding "base64").
        """
        async with state.instrument("read_workspace_file"):
            try:
                data = await anyio.to_thread.run_sync(
                    lambda: ws.read_bytes(path, max_bytes=MAX_READ_BYTES)
                )
            except (WorkspaceError, OSError) as exc:
                raise _explain(path, exc) from None
            try:
                return {
                    "path": path,
                    "size": len(data),
                    "encoding": "utf-8",
                    "content": data.decode("utf-8"),
                }
            except UnicodeDecodeError:
                content = base64.b64encode(data).decode("ascii")
                return {"path": path, "size": len(data), "encoding": "base64", "content": content}

    @tool(
        app,
        annotations=ToolAnnotations(
            title="Write a workspace file",
            read_only_hint=False,
            destructive_hint=False,
            open_world_hint=False,
        ),
    )
    async def write_workspace_file(
        path: str, content: str, encoding: Literal["utf-8", "base64"] = "utf-8"
    ) -> WorkspaceWriteOutput:
        """Write one file of the workspace atomically (at most 8 MiB), creating parent folders.

        `path` is relative to the workspace, e.g. "data/input.csv"; `content` is text, or
        Base64 when `encoding` is "base64". An existing file is replaced; a symlink, folder or
        special file at that path is refused.
        """
        async with state.instrument("write_workspace_file"):
            if encoding == "base64":
                try:
                    data = base64.b64decode(content, validate=True)
                except (binascii.Error, ValueError):
                    raise ToolError("content is not valid Base64") from None
            else:
                data = content.encode("utf-8", "surrogatepass")
            if len(data) > MAX_WRITE_BYTES:
                raise ToolError(
                    f"content is {len(data)} bytes, more than the {MAX_WRITE_BYTES} allowed"
                )
            async with state.gate.exclusive():
                try:
                    written = await anyio.to_thread.run_sync(
                        lambda: _write_within_quota(state, path, data)
                    )
                except (WorkspaceError, OSError) as exc:
                    raise _explain(path, exc) from None
                finally:
                    # The next run measures the workspace again (pysandbox's manifest).
                    state.sandbox.invalidate_workspace_manifest()
            return {"path": path, "bytes_written": written}
