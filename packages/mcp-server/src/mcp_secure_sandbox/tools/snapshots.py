"""Snapshot tools: create, restore, list, delete, diff, export (wsnapshot)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from mcp_secure_sandbox import budget
from mcp_secure_sandbox._schemas import (
    DeleteOutput,
    ExportOutput,
    SnapshotId,
    SnapshotListOutput,
)
from mcp_secure_sandbox.state import ServerState
from mcp_secure_sandbox.tools._register import tool
from wsnapshot import (
    Diff,
    InvalidSnapshotId,
    RestoreReport,
    SnapshotError,
    SnapshotInfo,
    SnapshotNotFound,
)

__all__ = ["EXPORT_HINT", "EXPORT_INLINE_BYTES", "LIST_HINT", "register"]

EXPORT_INLINE_BYTES = 128 * 1024
"""An export larger than this many bytes of JSON is returned as a resource link."""
EXPORT_HINT = "run `wsnapshot export` on the host for an export this large"
"""What to do when an export does not fit the response budget."""

MAX_DESCRIPTION_CHARS = 1000
LIST_HINT = "list_state_snapshots gives the ids of the snapshots there are"
"""What to do about an unknown or malformed snapshot id."""

T = TypeVar("T")


async def _call(argument: str, fn: Callable[[], T]) -> T:
    """Run a store operation in a worker thread; map its errors to argument errors."""
    try:
        return await anyio.to_thread.run_sync(fn)
    except (InvalidSnapshotId, SnapshotNotFound) as exc:
        raise ToolError(f"{argument}: {exc}; {LIST_HINT}") from None
    except SnapshotError as exc:
        raise ToolError(str(exc)) from None


def register(app: MCPServer[Any], state: ServerState) -> None:
    """Register the snapshot tools on ``app``."""
    store = state.store

    @tool(
        app,
        annotations=ToolAnnotations(
            title="Snapshot the workspace",
            read_only_hint=False,
            destructive_hint=False,
            open_world_hint=False,
        ),
    )
    async def create_state_snapshot(
        description: Annotated[
            str,
            Field(
                max_length=MAX_DESCRIPTION_CHARS,
                description="What the snapshot is for, at most 1000 characters.",
            ),
        ] = "",
    ) -> SnapshotInfo:
        """Save the workspace as a snapshot: every file's bytes, mtime and mode, and empty folders.

        Identical content is stored once (content-addressed), so snapshots of a mostly unchanged
        workspace are cheap. Symlinks pointing outside the workspace and special files are left
        out and listed in `skipped`. Example: description="before the migration test".

        Returns the snapshot's id (a UUID), created_at (ISO 8601 UTC), description, file_count,
        dir_count, symlink_count, total_bytes, new_bytes (stored by this snapshot) and skipped.
        """
        async with state.instrument("create_state_snapshot") as outcome:
            if len(description) > MAX_DESCRIPTION_CHARS:
                raise ToolError(f"description is longer than {MAX_DESCRIPTION_CHARS} characters")
            async with state.gate.exclusive():
                info = await _call("description", lambda: store.create(description))
            outcome["message"] = f"created {info.id}"
            return info

    @tool(
        app,
        annotations=ToolAnnotations(
            title="Restore a snapshot",
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    async def restore_state_snapshot(snapshot_id: SnapshotId) -> RestoreReport:
        """Return the workspace to a snapshot exactly: bytes, mtimes, modes and folders.

        Files not in the snapshot are deleted, files whose content differs are rewritten,
        missing ones recreated, then every mtime and mode is reset. Files that already match are
        not touched. Restoring twice is the same as once. Example: snapshot_id from
        list_state_snapshots.

        Returns the lists of deleted, rewritten, recreated and metadata_restored paths, the
        unchanged count, dirs_created, dirs_removed and duration_ms.
        """
        async with state.instrument("restore_state_snapshot") as outcome:
            async with state.gate.exclusive():
                try:
                    report = await _call("snapshot_id", lambda: store.restore(snapshot_id))
                finally:
                    # The next run measures the workspace again (pysandbox's manifest).
                    state.sandbox.invalidate_workspace_manifest()
            outcome["message"] = f"restored {snapshot_id}"
            return report

    @tool(
        app,
        annotations=ToolAnnotations(
            title="List snapshots", read_only_hint=True, open_world_hint=False
        ),
    )
    async def list_state_snapshots() -> SnapshotListOutput:
        """List every snapshot, oldest first, with its id, time, description and sizes."""
        async with state.instrument("list_state_snapshots"):
            infos = await _call("", store.list)
            return {"snapshots": list(infos), "count": len(infos)}

    @tool(
        app,
        annotations=ToolAnnotations(
            title="Delete a snapshot",
            read_only_hint=False,
            destructive_hint=True,
            open_world_hint=False,
        ),
    )
    async def delete_state_snapshot(snapshot_id: SnapshotId) -> DeleteOutput:
        """Delete a snapshot permanently; content no other snapshot uses is freed.

        The workspace itself is not touched. Returns the deleted id, its description and
        creation time, and how many snapshots remain.
        """
        async with state.instrument("delete_state_snapshot") as outcome:

            def delete() -> DeleteOutput:
                info = store.get(snapshot_id).info
                store.delete(snapshot_id)
                return {
                    "deleted": info.id,
                    "description": info.description,
                    "created_at": info.created_at,
                    "remaining": len(store.list()),
                }

            async with state.gate.exclusive():
                result = await _call("snapshot_id", delete)
            outcome["message"] = f"deleted {snapshot_id}"
            return result

    @tool(
        app,
        annotations=ToolAnnotations(
            title="Compare snapshots",
            read_only_hint=True,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    async def diff_state_snapshots(
        snapshot_id: SnapshotId,
        other_id: Annotated[
            str,
            Field(description="The newer snapshot's id; omit it to compare with the workspace."),
        ] = "",
    ) -> Diff:
        """Compare a snapshot (the older side) with another one, or with the current workspace.

        Returns the paths added, removed, modified (content, link target or kind) and
        metadata_changed (same content, different mtime or mode).
        """
        async with state.instrument("diff_state_snapshots"):
            if not other_id:
                async with state.gate.exclusive():
                    diff = await _call("snapshot_id", lambda: store.diff(snapshot_id))
            else:
                diff = await _call(
                    "snapshot_id/other_id", lambda: store.diff(snapshot_id, other_id)
                )
            return diff

    @tool(
        app,
        annotations=ToolAnnotations(
            title="Export a snapshot",
            read_only_hint=True,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    async def export_state_snapshot(
        snapshot_id: SnapshotId,
    ) -> Annotated[CallToolResult, ExportOutput]:
        """Export a snapshot as one self-contained JSON record with every file's content inline.

        Text files are inline as UTF-8, binary files as Base64. A record larger than 128 KiB, or
        one whose answer would not fit the response budget (512 KiB), is not inlined:
        `resource_uri` names the sandbox://exports/{snapshot_id} resource to read. A record
        that does not fit one resource read either is refused: export it on the host.
        """
        async with state.instrument("export_state_snapshot"):
            record = await _call("snapshot_id", lambda: store.export(snapshot_id))
            text = json.dumps(record, separators=(",", ":"))
            size = len(text.encode())
            if size <= EXPORT_INLINE_BYTES:
                inline: ExportOutput = {
                    "snapshot_id": snapshot_id,
                    "size_bytes": size,
                    "record": record,
                    "resource_uri": None,
                }
                try:
                    return budget.tool_result(inline)
                except ToolError:
                    pass  # escaping made it larger than an answer: link it instead
            uri = f"sandbox://exports/{snapshot_id.lower()}"
            if budget.resource_bytes(text, uri) > budget.RESPONSE_BUDGET_BYTES:
                raise ToolError(
                    f"snapshot_id {snapshot_id}: the export is {size:,} bytes, more than "
                    f"the server's response budget of {budget.RESPONSE_BUDGET_BYTES:,} "
                    f"bytes; {EXPORT_HINT}"
                )
            linked: ExportOutput = {
                "snapshot_id": snapshot_id,
                "size_bytes": size,
                "record": None,
                "resource_uri": uri,
            }
            return budget.tool_result(linked)
