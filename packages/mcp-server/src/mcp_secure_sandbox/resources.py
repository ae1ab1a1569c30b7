"""MCP resources: status, logs, schemas, and snapshot manifests and exports by id."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib import metadata
from typing import Any, TypeVar

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.shared.exceptions import MCPError

from datavalidate import UnknownSchemaError
from mcp_secure_sandbox import budget
from mcp_secure_sandbox.concurrency import Busy
from mcp_secure_sandbox.http_transport import http_warnings
from mcp_secure_sandbox.principals import principal_of
from mcp_secure_sandbox.sessions import request_context, session_view
from mcp_secure_sandbox.state import ServerState
from mcp_secure_sandbox.tools._tool import Admission
from mcp_secure_sandbox.tools.snapshots import (
    CHUNK_TEMPLATE,
    LIST_HINT,
    chunk_count,
    too_large_for_mcp,
)
from mcp_secure_sandbox.tools.workspace import read_range
from wsnapshot import InvalidSnapshotId, SnapshotError, SnapshotNotFound, WorkspaceError

__all__ = ["DISTRIBUTIONS", "WORKSPACE_TEMPLATE", "register", "status_document"]

DISTRIBUTIONS = (
    "astguard",
    "secure-pysandbox",
    "datavalidate",
    "wsnapshot",
    "mcp-secure-sandbox",
    "mcp",
)
"""Distributions whose versions ``sandbox://status`` reports, by distribution name."""
STATUS_WALK_ENTRIES = 100_000
WORKSPACE_TEMPLATE = "sandbox://workspace/{+path}{?offset,length}"
"""The workspace file resource: the path (slashes kept) and the byte range in the query."""
_SHORTER = "read a shorter range (length)"
_NARROW = "this server's state is unusually large: report it"


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True)


def _versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in DISTRIBUTIONS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def status_document(state: ServerState) -> dict[str, Any]:
    """Build the ``sandbox://status`` document (blocking: walks the workspace, bounded).

    Returns versions of every package, the settings in force (absolute directories, limits,
    concurrency, allowed modules; never a secret), the isolation layers pysandbox reports, the
    workspace's file count and bytes, the snapshot count, the snapshot store's backend
    (``local`` or ``s3``), bucket, ``served_elsewhere`` (why nothing more is saved, or
    ``None``) and ``error`` (why the store cannot be read now, e.g. unreachable), and
    ``warnings``: sentences about an unsafe exposure (HTTP without a token), empty when there
    is none.
    """
    try:
        files, total = state.workspace.usage(max_entries=STATUS_WALK_ENTRIES)
        usage: dict[str, Any] = {"file_count": files, "total_bytes": total}
    except WorkspaceError as exc:
        usage = {"error": str(exc)}
    store_error: str | None = None
    try:
        snapshot_count: int | None = len(state.store.list())
    except SnapshotError as exc:
        snapshot_count = None
        store_error = str(exc)  # e.g. an unreachable s3:// store: the workspace is not saved
    return {
        "versions": _versions(),
        "settings": state.settings.to_dict(),
        "allowed_modules": sorted(state.policy.allowed_modules),
        "isolation": state.sandbox.capabilities().to_dict(),
        "workspace": usage,
        "snapshot_count": snapshot_count,
        # where the snapshots live: the backend and its bucket, never a credential
        "snapshot_store": {
            "backend": state.store.backend,
            "bucket": state.store.bucket,
            "served_elsewhere": state.store.served_elsewhere,  # why nothing more is saved
            # why the snapshots cannot be read now, the workspace not saved (None: they can)
            "error": store_error if store_error is None else state.store_error or store_error,
        },
        "active_runs": state.gate.active_runs,
        "queued_calls": state.admission.queued,
        "warnings": http_warnings(state.settings),
    }


T = TypeVar("T")


INVALID_PARAMS = -32602
"""JSON-RPC 2.0 error code for invalid method parameters (a bad id or name in the URI)."""


async def _from_store(read: Callable[[], T], limiter: anyio.CapacityLimiter) -> T:
    """Run a snapshot-store read in a thread on ``limiter``; a bad id is invalid params."""
    try:
        return await anyio.to_thread.run_sync(read, limiter=limiter)
    except (InvalidSnapshotId, SnapshotNotFound) as exc:
        raise MCPError(code=INVALID_PARAMS, message=f"{exc}; {LIST_HINT}") from None
    except SnapshotError as exc:
        raise ResourceError(str(exc)) from None


def register(app: MCPServer[Any], state: ServerState) -> None:
    """Register the resources and resource templates on ``app``."""

    @app.resource(
        "sandbox://status",
        name="status",
        description="Versions, settings, isolation layers, workspace usage, snapshot count.",
        mime_type="application/json",
    )
    async def status() -> str:
        document = await anyio.to_thread.run_sync(
            lambda: status_document(state), limiter=state.admission.limiter("status")
        )
        return budget.resource_text(_dump(document), "sandbox://status", _NARROW)

    @app.resource(
        "sandbox://logs",
        name="logs",
        description="The last 100 traces: timestamp, level, tool, message, duration_ms, status.",
        mime_type="application/json",
    )
    def logs() -> str:
        return budget.resource_text(
            _dump({"traces": state.traces.entries()}), "sandbox://logs", _NARROW
        )

    @app.resource(
        "sandbox://sessions",
        name="sessions",
        description="Your live sessions: ids, descriptions, times, calls, CPU and memory.",
        mime_type="application/json",
    )
    async def sessions() -> str:
        principal = principal_of(request_context())
        infos = await anyio.to_thread.run_sync(
            state.sessions.list, principal, limiter=state.admission.limiter("light")
        )
        listing = {"sessions": [session_view(info) for info in infos]}
        return budget.resource_text(_dump(listing), "sandbox://sessions", _NARROW)

    @app.resource(
        "sandbox://schemas",
        name="schemas",
        description="The registered JSON schemas (config, user, dataset and any added).",
        mime_type="application/json",
    )
    def schemas() -> str:
        listing = {"schemas": [info.to_dict() for info in state.registry.list()]}
        return budget.resource_text(_dump(listing), "sandbox://schemas", _NARROW)

    @app.resource(
        "sandbox://schemas/{name}",
        name="schema",
        description="One registered JSON schema by name.",
        mime_type="application/schema+json",
    )
    def schema(name: str) -> str:
        try:
            text = _dump(state.registry.get(name))
        except UnknownSchemaError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None
        return budget.resource_text(text, f"sandbox://schemas/{name}", _NARROW)

    @app.resource(
        "sandbox://snapshots/{snapshot_id}",
        name="snapshot",
        description="The manifest of one snapshot: info and the file registry (no content).",
        mime_type="application/json",
    )
    async def snapshot(snapshot_id: str) -> str:
        snap = await _from_store(
            lambda: state.store.get(snapshot_id), state.admission.limiter("light")
        )
        uri = f"sandbox://snapshots/{snapshot_id}"
        hint = "compare snapshots with diff_state_snapshots instead"
        return budget.resource_text(_dump(snap.to_dict()), uri, hint)

    @app.resource(
        "sandbox://exports/{snapshot_id}",
        name="snapshot-export",
        description=(
            "The self-contained export record of one small snapshot, every file inline; a "
            "larger one is read in chunks (sandbox://exports/{snapshot_id}/{chunk})."
        ),
        mime_type="application/json",
    )
    async def export(snapshot_id: str) -> str:
        uri = f"sandbox://exports/{snapshot_id}"
        async with _admitted("export", uri):

            def encoded() -> str:  # up to the response budget of JSON: off the event loop
                record = state.store.export(snapshot_id, max_size=budget.RESPONSE_BUDGET_BYTES)
                return json.dumps(record, separators=(",", ":"))

            try:
                text = await _from_store(encoded, state.admission.limiter("export"))
            except ResourceError as exc:
                raise ResourceError(
                    f"{exc} (over MCP: read it in chunks, {CHUNK_TEMPLATE}, export_state_snapshot "
                    "gives their count)"
                ) from None
        return budget.resource_text(text, uri, f"read it in chunks ({CHUNK_TEMPLATE})")

    @app.resource(
        CHUNK_TEMPLATE,
        name="snapshot-export-chunk",
        description=(
            "One chunk of a snapshot's export record, by index from 0: bytes [chunk * "
            f"{budget.EXPORT_CHUNK_BYTES}, (chunk + 1) * {budget.EXPORT_CHUNK_BYTES}) of the "
            "compact JSON record (contents in Base64); export_state_snapshot gives the count."
        ),
        mime_type="application/octet-stream",
    )
    async def export_chunk(snapshot_id: str, chunk: str) -> bytes:
        uri = f"sandbox://exports/{snapshot_id}/{chunk}"
        store = state.store
        async with _admitted("export", uri):
            exporting = state.admission.limiter("export")
            size = await _from_store(lambda: store.export_size(snapshot_id), exporting)
            refusal = too_large_for_mcp(state, snapshot_id, size)
            if refusal is not None:
                raise ResourceError(refusal)
            count = chunk_count(size)
            index = _count("chunk", chunk, 0, max(count - 1, 0))
            step = budget.EXPORT_CHUNK_BYTES
            return await _from_store(
                lambda: store.export_range(snapshot_id, index * step, step), exporting
            )

    @asynccontextmanager
    async def _admitted(kind: str, uri: str) -> AsyncIterator[None]:
        try:
            async with Admission(kind).enter(state, None, f"reading {uri}", {}):
                yield
        except Busy as exc:
            raise ResourceError(str(exc)) from None

    @app.resource(
        WORKSPACE_TEMPLATE,
        name="workspace-file",
        description=(
            "A byte range of a workspace file: offset (default 0) and length (default and at "
            f"most {budget.READ_CHUNK_BYTES}) in the query, e.g. "
            "sandbox://workspace/results/out.csv?offset=0&length=4096. UTF-8 text, else bytes."
        ),
        mime_type="application/octet-stream",
    )
    async def workspace_file(path: str, offset: str = "0", length: str = "") -> str | bytes:
        start = _count("offset", offset, 0, None)
        size = _count("length", length or str(budget.READ_CHUNK_BYTES), 1, budget.READ_CHUNK_BYTES)
        uri = f"sandbox://workspace/{path}"
        try:
            chunk = await read_range(state, path, start, size)
        except ToolError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None
        if chunk.text is not None:
            return budget.resource_text(chunk.text, uri, _SHORTER)
        budget.resource_text(base64.b64encode(chunk.data).decode("ascii"), uri, _SHORTER)
        return chunk.data


def _count(name: str, text: str, low: int, high: int | None) -> int:
    """A whole number from a URI query; invalid params unless ``low <= n <= high``."""
    if not text.isdigit() or not (low <= int(text) <= (high if high is not None else int(text))):
        bound = f"from {low}" + (f" to {high}" if high is not None else "")
        raise MCPError(
            code=INVALID_PARAMS, message=f"{name} must be a whole number {bound}, got {text!r}"
        )
    return int(text)
