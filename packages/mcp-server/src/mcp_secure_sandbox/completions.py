"""``completion/complete``: snapshot ids and schema names for resource templates and prompts.

The MCP specification defines completion for prompt arguments and resource-template variables
only (not tool arguments). Registering the handler declares the ``completions`` capability.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)

from mcp_secure_sandbox.resources import WORKSPACE_TEMPLATE
from mcp_secure_sandbox.state import ServerState
from wsnapshot import SnapshotError, WorkspaceError

__all__ = ["MAX_VALUES", "complete", "register"]

MAX_VALUES = 100
"""Most values one completion answer carries (the specification's limit)."""


def complete(candidates: Iterable[str], prefix: str) -> Completion:
    """The candidates starting with ``prefix`` (case-insensitive), sorted, at most 100.

    Returns:
        A :class:`Completion` with ``total`` matches and ``has_more`` when some were left out.
    """
    low = prefix.lower()
    matches = sorted(c for c in candidates if c.lower().startswith(low))
    return Completion(
        values=matches[:MAX_VALUES], total=len(matches), has_more=len(matches) > MAX_VALUES
    )


def register(app: MCPServer[Any], state: ServerState) -> None:
    """Register the completion handler on ``app``."""

    def snapshot_ids() -> list[str]:
        try:
            return [info.id for info in state.store.list()]
        except SnapshotError:
            return []

    def schema_names() -> list[str]:
        return list(state.registry.names())

    def file_paths() -> list[str]:
        try:
            entries = state.workspace.list_files(max_entries=10_000)
        except WorkspaceError:
            return []
        return [e.path for e in entries if e.kind == "file"]

    sources: dict[tuple[str, str], Callable[[], list[str]]] = {
        ("sandbox://snapshots/{snapshot_id}", "snapshot_id"): snapshot_ids,
        ("sandbox://exports/{snapshot_id}", "snapshot_id"): snapshot_ids,
        ("sandbox://exports/{snapshot_id}/{chunk}", "snapshot_id"): snapshot_ids,
        ("sandbox://schemas/{name}", "name"): schema_names,
        ("diagnose_validation_error", "schema"): schema_names,
        (WORKSPACE_TEMPLATE, "path"): file_paths,
    }

    # MCPServer.completion() carries no annotations in the SDK (2.x); the handler is typed.
    @app.completion()  # type: ignore[no-untyped-call, untyped-decorator]
    async def handle(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        key = ref.name if isinstance(ref, PromptReference) else ref.uri
        source = sources.get((key, argument.name))
        if source is None:
            return None
        found = await anyio.to_thread.run_sync(source, limiter=state.admission.limiter("light"))
        return complete(found, argument.value)
