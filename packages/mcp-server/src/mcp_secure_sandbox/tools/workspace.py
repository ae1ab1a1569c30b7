"""Workspace file tools: list, read, write (through wsnapshot's SafeWorkspace, never a symlink)."""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from mcp_secure_sandbox import budget, surface
from mcp_secure_sandbox._schemas import (
    WorkspaceEntryOutput,
    WorkspaceListOutput,
    WorkspacePath,
    WorkspaceReadOutput,
    WorkspaceWriteOutput,
)
from mcp_secure_sandbox._worker import reason
from mcp_secure_sandbox.budget import MAX_WRITE_BYTES
from mcp_secure_sandbox.settings import Settings
from mcp_secure_sandbox.state import ServerState
from mcp_secure_sandbox.tools._tool import Admission, admitted, state_of, tool
from wsnapshot import FileEntry, WorkspaceError

__all__ = [
    "MAX_LIST_ENTRIES",
    "MAX_RANGE_FILE_BYTES",
    "MAX_WRITE_BYTES",
    "TOOLS",
    "Chunk",
    "list_workspace_files",
    "read_range",
    "read_workspace_file",
    "write_workspace_file",
]

MAX_RANGE_FILE_BYTES = 1 << 40
"""Largest file read in ranges (a sanity bound: the workspace quota is far smaller)."""
MAX_LIST_ENTRIES = 10_000


def _explain(path: str, exc: BaseException) -> ToolError:
    return ToolError(f"path {path}: {reason(exc)}")


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


def _entry(entry: FileEntry) -> WorkspaceEntryOutput:
    """A listing entry with its mode in octal and its time in ISO 8601 (UTC, microseconds)."""
    seconds, nanos = divmod(entry.mtime_ns, 1_000_000_000)
    when = datetime.fromtimestamp(seconds, tz=timezone.utc).replace(microsecond=nanos // 1000)
    return {
        "path": entry.path,
        "kind": entry.kind,
        "size": entry.size,
        "mode": f"{entry.mode:04o}",
        "mtime": when.isoformat().replace("+00:00", "Z"),
    }


@dataclass(frozen=True)
class Chunk:
    """A byte range read from a workspace file.

    Attributes:
        path: The path asked for.
        size: The whole file's size, in bytes.
        offset: Where the range starts.
        data: The bytes of the range (for text, without a character split at its end).
        text: The range decoded as UTF-8, or ``None`` when it is not UTF-8.
    """

    path: str
    size: int
    offset: int
    data: bytes
    text: str | None

    def output(self) -> WorkspaceReadOutput:
        """The tool's structured result for this range."""
        end = self.offset + len(self.data)
        return {
            "path": self.path,
            "size": self.size,
            "offset": self.offset,
            "length": len(self.data),
            "next_offset": end if end < self.size else None,
            "encoding": "utf-8" if self.text is not None else "base64",
            "content": self.text
            if self.text is not None
            else base64.b64encode(self.data).decode("ascii"),
        }


def _decode(data: bytes, at_end: bool) -> tuple[bytes, str | None]:
    """Decode ``data`` as UTF-8, leaving out a character the range end split (up to 3 bytes)."""
    for trim in range(4 if not at_end else 1):
        if trim > len(data):
            break
        try:
            kept = data[: len(data) - trim]
            return kept, kept.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return data, None


async def read_range(state: ServerState, path: str, offset: int, length: int) -> Chunk:
    """Read ``length`` bytes of a workspace file from ``offset``, through SafeWorkspace.

    The file is opened with wsnapshot's ``SafeWorkspace.open_read`` (beneath the workspace, no
    symlink, a regular file) and the range read with ``pread`` on that descriptor.

    Args:
        state: The server's state (its workspace).
        path: Relative path.
        offset: First byte, at most the file's size.
        length: Most bytes to read (at least 1).

    Raises:
        ToolError: The path is unsafe, missing or not a regular file, or ``offset`` is past
            the end of the file.
    """

    def read() -> Chunk:
        try:
            with state.workspace.open_read(path, max_bytes=MAX_RANGE_FILE_BYTES) as stream:
                size = os.fstat(stream.fileno()).st_size
                if offset > size:
                    raise ToolError(
                        f"offset {offset} is past the end of {path} ({size} bytes); "
                        "read from 0 to the size"
                    )
                data = os.pread(stream.fileno(), length, offset)
        except (WorkspaceError, OSError) as exc:
            raise _explain(path, exc) from None
        kept, text = _decode(data, offset + len(data) >= size)
        if text is not None and not kept and data:
            kept, text = data, None  # a lone fragment: Base64 rather than an empty range
        return Chunk(path=path, size=size, offset=offset, data=kept, text=text)

    return await anyio.to_thread.run_sync(read, limiter=state.admission.limiter("light"))


@tool(
    fill=lambda _: {"entries": f"{MAX_LIST_ENTRIES:,}"},
    annotations=ToolAnnotations(
        title="List workspace files", read_only_hint=True, open_world_hint=False
    ),
)
async def list_workspace_files(
    ctx: Context,
    offset: Annotated[
        int, Field(ge=0, description="Skip this many entries (from next_offset).")
    ] = 0,
) -> Annotated[CallToolResult, WorkspaceListOutput]:
    """List the workspace recursively: path, kind (file, dir, symlink, other), size, mode, time.

    `mode` is the permission bits in octal ("0644"), `mtime` an ISO 8601 UTC time. Symlinks
    are listed, never followed. At most {entries} entries; when they do not fit one
    answer, `next_offset` is the `offset` for the next page (null on the last page).
    """
    state = state_of(ctx)
    try:
        entries = await anyio.to_thread.run_sync(
            lambda: state.workspace.list_files(max_entries=MAX_LIST_ENTRIES),
            limiter=state.admission.limiter("light"),
        )
    except WorkspaceError as exc:
        raise ToolError(str(exc)) from None
    files = [e for e in entries if e.kind == "file"]
    page = [_entry(e) for e in entries[offset:]]
    while True:
        end = offset + len(page)
        listing: WorkspaceListOutput = {
            "files": page,
            "file_count": len(files),
            "total_bytes": sum(e.size for e in files),
            "entry_count": len(entries),
            "offset": offset,
            "next_offset": end if end < len(entries) else None,
        }
        try:
            return budget.tool_result(listing)
        except ToolError:
            if len(page) <= 1:
                raise
            page = page[: len(page) // 2]


@tool(
    fill=lambda _: {"chunk": surface.size_words(budget.READ_CHUNK_BYTES)},
    annotations=ToolAnnotations(
        title="Read a workspace file", read_only_hint=True, open_world_hint=False
    ),
)
async def read_workspace_file(
    path: WorkspacePath,
    ctx: Context,
    offset: Annotated[int, Field(ge=0, description="First byte to read; default 0.")] = 0,
    length: Annotated[
        int | None,
        Field(
            ge=1,
            le=budget.READ_CHUNK_BYTES,
            description=f"Bytes to read; default and at most {budget.READ_CHUNK_BYTES}.",
        ),
    ] = None,
) -> Annotated[CallToolResult, WorkspaceReadOutput]:
    """Read a byte range of one regular file of the workspace ({chunk} per call at most).

    Symlinks are refused. Returns the file's size, the range read (offset, length),
    next_offset (null at the end of the file) and the content: UTF-8 text when it decodes
    (encoding "utf-8"; a character split by the range end is left for the next range),
    else Base64 (encoding "base64"). Any file size can be read in ranges, also as the
    resource sandbox://workspace/{+path}{?offset,length}.
    """
    state = state_of(ctx)
    want = length or budget.READ_CHUNK_BYTES
    while True:
        chunk = await read_range(state, path, offset, want)
        try:
            return budget.tool_result(chunk.output())
        except ToolError:
            if want <= 1024:
                raise
            want //= 2  # escaped text did not fit the budget: a shorter range


_WRITE_MAX = surface.size_words(MAX_WRITE_BYTES)


def _content_param(settings: Settings) -> dict[str, Any]:
    """``content``'s annotation: what the live body limit allows."""
    return {
        "content": Annotated[
            str,
            Field(
                description=f"The text, or Base64; at most {_WRITE_MAX} decoded. "
                + surface.body_limit(settings, "write it from run_sandbox_code")
            ),
        ]
    }


@tool(
    admit=Admission(None, workspace="exclusive", consistent=True),
    admit_around=False,  # the content is decoded and measured before the call waits
    params=_content_param,
    fill=lambda _: {"write_max": _WRITE_MAX},
    annotations=ToolAnnotations(
        title="Write a workspace file",
        read_only_hint=False,
        destructive_hint=False,
        open_world_hint=False,
    ),
)
async def write_workspace_file(
    path: WorkspacePath,
    content: str,
    ctx: Context,
    encoding: Annotated[
        Literal["utf-8", "base64"], Field(description="How content is encoded.")
    ] = "utf-8",
) -> WorkspaceWriteOutput:
    """Write one file of the workspace atomically (at most {write_max}), creating folders.

    `content` is text, or Base64 when `encoding` is "base64". An existing file is replaced;
    a symlink, folder or special file at that path is refused.
    """
    state = state_of(ctx)
    if encoding == "base64":
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise ToolError("content is not valid Base64") from None
    else:
        data = content.encode("utf-8", "surrogatepass")
    if len(data) > MAX_WRITE_BYTES:
        raise ToolError(f"content is {len(data)} bytes, more than the {MAX_WRITE_BYTES} allowed")
    async with admitted():
        try:
            written = await anyio.to_thread.run_sync(
                lambda: _write_within_quota(state, path, data),
                limiter=state.admission.limiter("light"),
            )
        except (WorkspaceError, OSError) as exc:
            raise _explain(path, exc) from None
        finally:
            # The next run measures the workspace again (pysandbox's manifest).
            state.sandbox.invalidate_workspace_manifest()
    return {"path": path, "bytes_written": written}


TOOLS = (list_workspace_files, read_workspace_file, write_workspace_file)
"""The tools of this module, in the order they are listed."""
