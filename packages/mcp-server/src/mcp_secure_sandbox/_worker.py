"""A confined worker: validation of caller-supplied input and snapshot diffs, outside the server.

Started by :class:`mcp_secure_sandbox.workers.WorkerPool` as ``python -I -m
mcp_secure_sandbox._worker`` with an empty environment, no inherited descriptors but its
pipes, in its own session. The protocol is JSON lines, never pickle: the first line on stdin is
the configuration (``memory_bytes``, ``cpu_time_s`` (CPU seconds allowed beyond what start-up
used), ``workspace``, ``store`` (the snapshot store, opened read-only), ``require_kernel_layers``);
the worker imports and warms what its jobs use, confines itself for good
(:func:`pysandbox.confine_worker`: rlimits, no_new_privs, read-only Landlock, seccomp without
exec or sockets), answers ``{"ready": {...}}``, then reads one job per line and writes one
answer per line: ``{"ok": result}`` or ``{"error": {"kind", "message"}}`` where ``kind`` is
``input`` (a bad argument, the message names it), ``schema`` (datavalidate refused the schema),
``snapshot_id`` (a malformed or unknown snapshot id), ``snapshot`` (the store refused: a
corrupt manifest, a workspace past its caps), ``memory`` (the budget ran out: the worker exits
after answering) or ``failed``.
"""

from __future__ import annotations

import json
import math
import resource
import sys
from typing import Any, BinaryIO

from datavalidate import DataValidateError, default_registry, validate_csv, validate_json
from mcp_secure_sandbox.jsontext import JsonTextError, loads_strict
from pysandbox import confine_worker
from wsnapshot import (
    InvalidSnapshotId,
    NotARegularFile,
    SafeWorkspace,
    SnapshotError,
    SnapshotNotFound,
    SnapshotStore,
    WorkspaceError,
)
from wsnapshot.workspace import KIND_DIR, MAX_DEPTH

__all__ = ["MAX_CSV_FILE_BYTES", "handle", "main", "reason"]

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


def _cpu_used() -> float:
    """CPU time (user + system) this process has used so far, in seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _write(out: BinaryIO, obj: object) -> None:
    out.write(json.dumps(obj, separators=(",", ":"), default=str).encode("utf-8") + b"\n")
    out.flush()


def _warm(registry: Any) -> None:
    """Import lazily loaded modules now, before confinement.

    After it only installed files are readable: the import system must need nothing else.
    """
    validate_json({"a": [1, 2.5, "x"]}, {"type": "object", "format": "email"}, registry=registry)
    validate_json({"name": "x"}, "config", registry=registry)
    validate_csv("a,b\n1,x\n", constraints={"a": "integer", "b": {"type": "date"}})


def main() -> int:
    """Run the worker: configuration, warm-up, confinement, then jobs until stdin closes."""
    stdin, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # stray prints must never corrupt the protocol
    config = json.loads(stdin.readline())
    registry = default_registry()
    _warm(registry)
    root = config.get("workspace")
    workspace = SafeWorkspace(root) if root else None
    store_dir = config.get("store")
    store = SnapshotStore.open_read_only(root, store_dir) if root and store_dir else None
    applied = confine_worker(
        memory_bytes=int(config["memory_bytes"]),
        # RLIMIT_CPU counts start-up too: the jobs get the configured seconds beyond it (the
        # pool retires a worker before its remaining CPU is less than one job's budget).
        cpu_time_s=math.ceil(_cpu_used()) + int(config["cpu_time_s"]),
        read_only=tuple(p for p in (root, store_dir) if p),
        # A walk of the workspace holds a descriptor per level, up to wsnapshot's MAX_DEPTH
        # (a run can leave a tree that deep): 64 made a 60-level tree kill every diff.
        open_files=MAX_DEPTH + 64,
        require_kernel_layers=bool(config.get("require_kernel_layers", True)),
    )
    _write(out, {"ready": {"landlock_abi": applied.landlock_abi, "seccomp": applied.seccomp}})
    while True:
        line = stdin.readline()
        if not line:
            return 0
        try:
            answer = handle(json.loads(line), registry, workspace, store)
        except MemoryError:
            answer = {"error": {"kind": "memory", "message": "out of memory"}}
        try:
            _write(out, answer)
        except MemoryError:
            _write(out, {"error": {"kind": "memory", "message": "out of memory"}})
            return 1
        if "error" in answer and answer["error"]["kind"] == "memory":
            return 1  # a fresh worker takes over: this heap may be fragmented for good


if __name__ == "__main__":
    sys.exit(main())
