"""The server's confined worker: validation of caller-supplied input and snapshot diffs.

Run by :class:`mcp_secure_sandbox.workers.WorkerPool` in pysandbox's confined pool worker
(``python -I -m pysandbox._pool_worker mcp_secure_sandbox._worker:job``: an empty environment,
no inherited descriptors but its pipes, its own session; JSON lines, never pickle).
:func:`setup` runs before confinement with the options ``workspace`` and ``store`` (the
snapshot store, opened read-only): it imports and warms what the jobs use; then the worker
confines itself for good (:func:`pysandbox.confine_worker`: rlimits, no_new_privs, read-only
Landlock on the workspace, the store and the server's distributions, seccomp without exec or
sockets) and calls :func:`job` once per job. An error answer's ``kind`` is ``input`` (a bad
argument, the message names it), ``schema`` (datavalidate refused the schema), ``snapshot_id``
(a malformed or unknown snapshot id), ``snapshot`` (the store refused: a corrupt manifest, a
workspace past its caps), ``memory`` (the budget ran out: the worker exits after answering) or
``failed``.
"""

from __future__ import annotations

import json
from typing import Any

from datavalidate import DataValidateError, default_registry, validate_csv, validate_json
from mcp_secure_sandbox.jsontext import JsonTextError, loads_strict
from pysandbox.exceptions import JobError
from wsnapshot import (
    InvalidSnapshotId,
    NotARegularFile,
    SafeWorkspace,
    SnapshotError,
    SnapshotNotFound,
    SnapshotStore,
    WorkspaceError,
)
from wsnapshot.workspace import KIND_DIR

__all__ = ["MAX_CSV_FILE_BYTES", "handle", "job", "reason", "setup"]

MAX_CSV_FILE_BYTES = 1024 * 1024 * 1024
"""Largest workspace CSV file validated by path (streamed), in bytes."""


class _Input(Exception):
    """A bad argument; the message names it."""


def _validate_json(job: dict[str, Any], registry: Any) -> dict[str, Any]:
    if "instance_text" in job:
        try:
            instance = loads_strict(job["instance_text"])
        except JsonTextError as exc:
            raise _Input(f"{job.get('argument', 'data_json')} {exc}") from None
    else:
        instance = job.get("instance")
    return validate_json(instance, job["schema"], registry=registry).to_dict()


def reason(exc: BaseException) -> str:
    """Why reading a workspace file failed, in words (no ``[Errno N]`` or server path).

    Args:
        exc: A :class:`wsnapshot.WorkspaceError` (its message already names the rule) or an
            :class:`OSError`.

    Returns:
        The reason; a missing file or a directory adds where to look.
    """
    if isinstance(exc, FileNotFoundError):
        return "no such file in the workspace (list_workspace_files shows what is there)"
    if isinstance(exc, NotARegularFile) and exc.kind == KIND_DIR:
        return "is a directory, not a file (list_workspace_files shows the files in it)"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


def _validate_csv(job: dict[str, Any], workspace: SafeWorkspace | None) -> dict[str, Any]:
    kwargs = dict(job["kwargs"])
    kwargs["required_headers"] = tuple(kwargs.get("required_headers") or ())
    path = job.get("path")
    if path is None:
        return validate_csv(job["text"], **kwargs).to_dict()
    if workspace is None:
        raise _Input("csv_path: this worker has no workspace")
    try:
        stream = workspace.open_read(path, max_bytes=MAX_CSV_FILE_BYTES)
    except (WorkspaceError, OSError) as exc:
        raise _Input(f"csv_path {path}: {reason(exc)}") from None
    with stream:
        return validate_csv(stream, **kwargs).to_dict()


def _diff(job: dict[str, Any], store: SnapshotStore | None) -> dict[str, Any]:
    if store is None:
        raise _Input("this worker has no snapshot store")
    diff = store.diff(job["a"], job.get("b")).to_dict()
    size = len(json.dumps(diff, separators=(",", ":"), ensure_ascii=False))
    if size > int(job["max_answer_bytes"]):
        counts = ", ".join(
            f"{len(diff[key]):,} {key.replace('_', ' ')}"
            for key in ("added", "removed", "modified", "metadata_changed")
        )
        raise _Input(
            f"the diff lists {counts} paths ({size:,} bytes), more than one answer holds "
            f"({int(job['max_answer_bytes']):,} bytes); run `wsnapshot --workspace W --store S "
            "diff A [B]` on the host for a diff this large"
        )
    return diff


def handle(
    job: dict[str, Any],
    registry: Any,
    workspace: SafeWorkspace | None,
    store: SnapshotStore | None = None,
) -> dict[str, Any]:
    """Do one job; return the answer line's object (``ok`` or ``error``).

    Args:
        job: ``{"op": "validate_json", "schema", "instance" | "instance_text", "argument"}``,
            ``{"op": "validate_csv", "kwargs", "text" | "path"}`` or ``{"op": "diff", "a",
            "b" (``None``: the workspace), "max_answer_bytes"}`` (a diff whose compact JSON is
            longer is refused with its counts); ``"op": "ping"`` answers ``{"ok": "pong"}``.
        registry: The schema registry names resolve in.
        workspace: The workspace ``path`` jobs read, or ``None``.
        store: The snapshot store opened read-only, for ``diff`` jobs, or ``None``.
    """
    try:
        op = job.get("op")
        if op == "validate_json":
            return {"ok": _validate_json(job, registry)}
        if op == "validate_csv":
            return {"ok": _validate_csv(job, workspace)}
        if op == "diff":
            return {"ok": _diff(job, store)}
        if op == "ping":
            return {"ok": "pong"}
        return {"error": {"kind": "failed", "message": f"unknown job {op!r}"}}
    except _Input as exc:
        return {"error": {"kind": "input", "message": str(exc)}}
    except (InvalidSnapshotId, SnapshotNotFound) as exc:
        return {"error": {"kind": "snapshot_id", "message": str(exc)[:4000]}}
    except SnapshotError as exc:
        return {"error": {"kind": "snapshot", "message": str(exc)[:4000]}}
    except DataValidateError as exc:
        return {"error": {"kind": "schema", "message": str(exc)}}
    except ValueError as exc:
        return {"error": {"kind": "input", "message": str(exc)}}
    except MemoryError:
        return {"error": {"kind": "memory", "message": "out of memory"}}
    except RecursionError:
        return {"error": {"kind": "schema", "message": "nested too deeply"}}
    except OSError as exc:
        # Not a limit of the job: say what failed and let a fresh worker take the next job.
        reason = exc.strerror or type(exc).__name__
        return {"error": {"kind": "failed", "message": f"{op} failed: {reason}"}}


def _warm(registry: Any) -> None:
    """Import lazily loaded modules now, before confinement.

    After it only granted files are readable: the import system must need nothing else.
    """
    validate_json({"a": [1, 2.5, "x"]}, {"type": "object", "format": "email"}, registry=registry)
    validate_json({"name": "x"}, "config", registry=registry)
    validate_csv("a,b\n1,x\n", constraints={"a": "integer", "b": {"type": "date"}})


_state: dict[str, Any] = {}


def setup(options: dict[str, Any]) -> None:
    """Prepare the worker before confinement: the registry, warm imports, workspace and store.

    Args:
        options: ``{"workspace": path or None, "store": path or None}`` (the store is opened
            read-only, and only with a workspace).
    """
    registry = default_registry()
    _warm(registry)
    root = options.get("workspace")
    store_dir = options.get("store")
    _state["registry"] = registry
    _state["workspace"] = SafeWorkspace(root) if root else None
    _state["store"] = SnapshotStore.open_read_only(root, store_dir) if root and store_dir else None


def job(work: dict[str, Any]) -> Any:
    """Do one job (:func:`handle`) in a worker prepared by :func:`setup`; return its result.

    Raises:
        pysandbox.exceptions.JobError: The job's own error (its kind and message).
        MemoryError: The memory budget ran out (the worker answers ``memory`` and exits).
    """
    answer = handle(work, _state["registry"], _state["workspace"], _state["store"])
    if "error" in answer:
        kind, message = answer["error"]["kind"], answer["error"]["message"]
        if kind == "memory":
            raise MemoryError
        raise JobError(kind, message)
    return answer["ok"]
