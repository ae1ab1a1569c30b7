"""Snapshot tools: create, restore, list, delete, diff, export (wsnapshot)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypeVar

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from mcp_secure_sandbox import _answers, budget, surface
from mcp_secure_sandbox._schemas import (
    DeleteOutput,
    ExportOutput,
    RestoreOutput,
    SnapshotId,
    SnapshotListOutput,
)
from mcp_secure_sandbox.state import ServerState
from mcp_secure_sandbox.store_handle import NOT_SAVED
from mcp_secure_sandbox.tools._tool import Admission, note, state_of, tool
from mcp_secure_sandbox.workers import WorkerError, WorkerLimit, WorkerProtocolError
from wsnapshot import (
    Diff,
    InvalidSnapshotId,
    RestoreReport,
    SnapshotError,
    SnapshotInfo,
    SnapshotNotFound,
    StoreUnavailable,
)

__all__ = [
    "CHUNK_TEMPLATE",
    "EXPORT_HINT",
    "EXPORT_INLINE_BYTES",
    "LIST_HINT",
    "TOOLS",
    "chunk_count",
    "create_state_snapshot",
    "delete_state_snapshot",
    "diff_state_snapshots",
    "export_state_snapshot",
    "fit_report",
    "list_state_snapshots",
    "restore_state_snapshot",
    "too_large_for_mcp",
]

EXPORT_INLINE_BYTES = 128 * 1024
"""An export larger than this many bytes of JSON is returned as a resource link."""
EXPORT_HINT = (
    "run `wsnapshot --workspace W --store S export ID -o FILE` on the host for an export this large"
)
"""What to do when an export does not fit the response budget."""

CHUNK_TEMPLATE = "sandbox://exports/{snapshot_id}/{chunk}"
"""The resource of one chunk of an export record: bytes ``[chunk * chunk_bytes, ...)``."""

MAX_DESCRIPTION_CHARS = 1000
LIST_HINT = "list_state_snapshots gives the ids of the snapshots there are"
"""What to do about an unknown or malformed snapshot id."""

T = TypeVar("T")


async def _call(
    argument: str, fn: Callable[[], T], limiter: anyio.CapacityLimiter | None = None
) -> T:
    """Run a store operation in a thread on ``limiter``; map its errors to argument errors.

    Never on anyio's default limiter, which light work uses.
    """
    try:
        return await anyio.to_thread.run_sync(fn, limiter=limiter)
    except (InvalidSnapshotId, SnapshotNotFound) as exc:
        raise ToolError(f"{argument}: {exc}; {LIST_HINT}") from None
    except StoreUnavailable as exc:
        raise ToolError(f"{NOT_SAVED}: {exc}") from None
    except SnapshotError as exc:
        raise ToolError(str(exc)) from None


async def _in_diff_worker(state: ServerState, job: dict[str, Any], argument: str) -> Diff:
    """Run a diff job in the confined diff worker; map its failures to tool errors.

    The worker reads the store's local directory (it has no network): for an S3 store the
    manifests of the job are mirrored there while it runs.

    Raises:
        ToolError: Stopped past the diff deadline or memory budget ("diff stopped after 30 s /
            512 MiB: ..."), a malformed answer (the worker was replaced), an unknown or
            malformed id (with :data:`LIST_HINT`), a store error, a diff too large to answer.
    """
    if state.store.backend != "local":
        ids = [job["a"], *([job["b"]] if job["b"] else [])]
        heavy = state.admission.limiter("snapshot")
        mirror = await _call(argument, lambda: state.store.mirror_for_reader(ids), heavy)
        await _call(argument, mirror.__enter__, heavy)
        try:
            return await _diff_job(state, job, argument)
        finally:
            await anyio.to_thread.run_sync(mirror.__exit__, None, None, None, limiter=heavy)
    return await _diff_job(state, job, argument)


async def _diff_job(state: ServerState, job: dict[str, Any], argument: str) -> Diff:
    try:
        found: Diff = await state.diff_workers.call(job, what="diff", check=_answers.diff)
        return found
    except (WorkerLimit, WorkerProtocolError) as exc:
        raise ToolError(str(exc)) from None
    except WorkerError as exc:
        if exc.kind == "snapshot_id":
            raise ToolError(f"{argument}: {exc}; {LIST_HINT}") from None
        raise ToolError(str(exc)) from None
    except RuntimeError as exc:
        raise ToolError(f"diff is unavailable: {exc}") from None


_PATH_LISTS = (
    "deleted",
    "rewritten",
    "recreated",
    "metadata_restored",
    "dirs_created",
    "dirs_removed",
)


def fit_report(report: RestoreReport) -> CallToolResult:
    """The restore's answer within the response budget: path lists halved until it fits.

    A restore over a hostile tree (F08b: thousands of nested directories) lists megabytes of
    paths; the restore itself succeeded and its answer must say so.
    """
    data = report.to_dict()
    counts = {key: len(data[key]) for key in _PATH_LISTS}
    cap = max(counts.values())
    out: dict[str, Any] = {**data, "counts": counts, "paths_truncated": False}
    while True:
        try:
            return budget.tool_result(out)
        except ToolError:
            if cap == 0:
                raise
            cap //= 2
            out = {**out, **{k: data[k][:cap] for k in _PATH_LISTS}, "paths_truncated": True}


def chunk_count(size: int) -> int:
    """How many chunk reads an export record of ``size`` bytes takes."""
    return -(-size // budget.EXPORT_CHUNK_BYTES)


def too_large_for_mcp(state: ServerState, snapshot_id: str, size: int) -> str | None:
    """The refusal for an export over the server's MCP export limit, or ``None``."""
    limit = state.settings.export_max_bytes
    if size <= limit:
        return None
    return (
        f"snapshot_id {snapshot_id}: the export is {size:,} bytes, more than this server "
        f"serves over MCP ({limit:,} bytes, --export-max); {EXPORT_HINT}"
    )


def _heavy(state: ServerState) -> anyio.CapacityLimiter:
    """The threads of the snapshot slot (never anyio's default limiter)."""
    return state.admission.limiter("snapshot")


#: Snapshot operations that change the workspace or the store hold it alone, one at a time.
_SNAPSHOT_ALONE = Admission("snapshot", workspace="exclusive")


@tool(
    admit=Admission("snapshot", workspace="exclusive", consistent=True),
    annotations=ToolAnnotations(
        title="Snapshot the workspace",
        read_only_hint=False,
        destructive_hint=False,
        open_world_hint=False,
    ),
)
async def create_state_snapshot(
    ctx: Context,
    description: Annotated[
        str,
        Field(
            max_length=MAX_DESCRIPTION_CHARS,
            description=f"What the snapshot is for, at most {MAX_DESCRIPTION_CHARS} characters.",
        ),
    ] = "",
) -> SnapshotInfo:
    """Save the workspace as a snapshot: every file's bytes, mtime and mode, and empty folders.

    Identical content is stored once, so snapshots of a mostly unchanged workspace are
    cheap. Symlinks pointing outside the workspace and special files are left out (listed in
    `skipped`). Example: description="before the migration test".

    Returns the id (a UUID), created_at (ISO 8601 UTC), description, the file, dir and
    symlink counts, total_bytes, new_bytes (stored by this snapshot) and skipped.
    """
    state = state_of(ctx)
    if len(description) > MAX_DESCRIPTION_CHARS:  # the schema's bound, for a direct call
        raise ToolError(f"description is longer than {MAX_DESCRIPTION_CHARS} characters")
    info = await _call("description", lambda: state.store.create(description), _heavy(state))
    note(message=f"created {info.id}")
    return info


async def _fit_restore(
    state: ServerState, report: RestoreReport, _arguments: Mapping[str, Any]
) -> CallToolResult:
    # A hostile tree's report is megabytes of paths, encoded once per halving: off the
    # event loop, which metrics and every other call share.
    return await anyio.to_thread.run_sync(
        fit_report, report, limiter=state.admission.limiter("light")
    )


@tool(
    admit=_SNAPSHOT_ALONE,
    after=_fit_restore,
    output=RestoreOutput,
    annotations=ToolAnnotations(
        title="Restore a snapshot",
        read_only_hint=False,
        destructive_hint=True,
        idempotent_hint=True,
        open_world_hint=False,
    ),
)
async def restore_state_snapshot(snapshot_id: SnapshotId, ctx: Context) -> RestoreReport:
    """Return the workspace to a snapshot exactly: bytes, mtimes, modes and folders.

    Files not in the snapshot are deleted, differing ones rewritten, missing ones recreated,
    then every mtime and mode is reset; matching files are not touched. Restoring twice is
    the same as once.

    Returns the deleted, rewritten, recreated and metadata_restored paths, the unchanged
    count, dirs_created, dirs_removed and duration_ms; `counts` has each list's length, and
    lists too long for one answer are cut (`paths_truncated` true).
    """
    state = state_of(ctx)
    # Repairs must not race a run's process: pysandbox holds the workspace (no run
    # alive, parked processes stopped) and invalidates its manifest afterwards.
    report = await _call(
        "snapshot_id",
        lambda: state.exclusively(lambda: state.store.restore(snapshot_id)),
        _heavy(state),
    )
    note(message=f"restored {snapshot_id}")
    return report


@tool(
    annotations=ToolAnnotations(title="List snapshots", read_only_hint=True, open_world_hint=False),
)
async def list_state_snapshots(ctx: Context) -> SnapshotListOutput:
    """List every snapshot, oldest first, with its id, time, description and sizes."""
    state = state_of(ctx)
    infos = await _call("", state.store.list, state.admission.limiter("light"))
    return {"snapshots": list(infos), "count": len(infos)}


@tool(
    admit=_SNAPSHOT_ALONE,
    annotations=ToolAnnotations(
        title="Delete a snapshot",
        read_only_hint=False,
        destructive_hint=True,
        open_world_hint=False,
    ),
)
async def delete_state_snapshot(snapshot_id: SnapshotId, ctx: Context) -> DeleteOutput:
    """Delete a snapshot permanently; content no other snapshot uses is freed.

    The workspace itself is not touched. Returns the deleted id, its description and
    creation time, and how many snapshots remain.
    """
    state = state_of(ctx)
    store = state.store

    def delete() -> DeleteOutput:
        info = store.get(snapshot_id).info
        store.delete(snapshot_id)
        return {
            "deleted": info.id,
            "description": info.description,
            "created_at": info.created_at,
            "remaining": len(store.list()),
        }

    result = await _call("snapshot_id", delete, _heavy(state))
    note(message=f"deleted {snapshot_id}")
    return result


@tool(
    # the workspace is read: no run may change it meanwhile (two snapshots: no workspace)
    admit=Admission("snapshot", workspace=lambda a: None if a["other_id"] else "exclusive"),
    fill=lambda s: {
        "deadline": surface.setting_words(s, "diff_deadline_s"),
        "memory": surface.setting_words(s, "diff_memory_bytes"),
    },
    annotations=ToolAnnotations(
        title="Compare snapshots",
        read_only_hint=True,
        idempotent_hint=True,
        open_world_hint=False,
    ),
)
async def diff_state_snapshots(
    snapshot_id: SnapshotId,
    ctx: Context,
    other_id: Annotated[
        str,
        Field(description="The newer snapshot's id; omit it to compare with the workspace."),
    ] = "",
) -> Diff:
    """Compare a snapshot (the older side) with another one, or with the current workspace.

    Returns the paths added, removed, modified (content, link target or kind) and
    metadata_changed (same content, different mtime or mode). The comparison runs in a
    confined worker within {deadline} and {memory} (--diff-deadline, --diff-memory); a
    diff too large for one answer is refused with its counts and the host command.
    """
    argument = "snapshot_id" if not other_id else "snapshot_id/other_id"
    job = {
        "op": "diff",
        "a": snapshot_id,
        "b": other_id or None,
        "max_answer_bytes": budget.RESPONSE_BUDGET_BYTES,
    }
    return await _in_diff_worker(state_of(ctx), job, argument)


@tool(
    admit=Admission("export"),
    fill=lambda s: {"export_max": surface.setting_words(s, "export_max_bytes")},
    annotations=ToolAnnotations(
        title="Export a snapshot",
        read_only_hint=True,
        idempotent_hint=True,
        open_world_hint=False,
    ),
)
async def export_state_snapshot(
    snapshot_id: SnapshotId,
    ctx: Context,
) -> Annotated[CallToolResult, ExportOutput]:
    """Export a snapshot as one self-contained JSON record with every file's content inline.

    A small record comes inline in `record` (text files as UTF-8, binary ones as Base64).
    A larger one is read in chunks: `chunk_uri_template` names `chunk_count` resources,
    chunk k being bytes [k * chunk_bytes, (k + 1) * chunk_bytes) of the record (compact
    UTF-8 JSON, contents in Base64, each file with its sha256); concatenated they are the
    record, `size_bytes` long. An export larger than the server serves over MCP
    ({export_max}, --export-max) is refused: export it on the host with `wsnapshot export`.
    """
    state = state_of(ctx)
    store = state.store
    exporting = state.admission.limiter("export")
    size = await _call("snapshot_id", lambda: store.export_size(snapshot_id), exporting)
    refusal = too_large_for_mcp(state, snapshot_id, size)
    if refusal is not None:
        raise ToolError(refusal)
    sid = snapshot_id.lower()
    if size <= EXPORT_INLINE_BYTES:
        record = await _call(
            "snapshot_id",
            lambda: store.export(snapshot_id, max_size=EXPORT_INLINE_BYTES),
            exporting,
        )
        inline: ExportOutput = {
            "snapshot_id": snapshot_id,
            "size_bytes": size,
            "record": record,
            "resource_uri": None,
            "chunk_count": 0,
            "chunk_bytes": budget.EXPORT_CHUNK_BYTES,
            "chunk_uri_template": None,
        }
        try:
            return budget.tool_result(inline)
        except ToolError:
            pass  # escaping made it larger than an answer: chunks instead
    chunked: ExportOutput = {
        "snapshot_id": snapshot_id,
        "size_bytes": size,
        "record": None,
        "resource_uri": CHUNK_TEMPLATE.replace("{snapshot_id}", sid),
        "chunk_count": chunk_count(size),
        "chunk_bytes": budget.EXPORT_CHUNK_BYTES,
        "chunk_uri_template": CHUNK_TEMPLATE.replace("{snapshot_id}", sid),
    }
    return budget.tool_result(chunked)


TOOLS = (
    create_state_snapshot,
    restore_state_snapshot,
    list_state_snapshots,
    delete_state_snapshot,
    diff_state_snapshots,
    export_state_snapshot,
)
"""The tools of this module, in the order they are listed."""
