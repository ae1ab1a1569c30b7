"""One confined worker of :class:`pysandbox.ConfinedPool` (``python -I -m pysandbox._pool_worker``).

Started with an empty environment, no descriptor but its pipes, in its own session. The protocol
is JSON lines, never pickle. The first line on stdin is the configuration: ``handler`` and
``setup`` (``"pkg.module:function"``, ``setup`` may be ``null``), ``import_paths`` (put first
on ``sys.path``), ``options`` (any JSON value, given to ``setup``), ``memory_bytes``,
``cpu_time_s`` (CPU seconds allowed beyond what start-up used), ``read_only``, ``list_only``,
``open_files``, ``installed_code`` and ``require_kernel_layers``
(:func:`pysandbox.confine_worker`'s arguments). The worker imports the
handler, calls ``setup(options)`` (imports, warm-up, state: everything that reads a file not
granted later), confines itself for good, answers ``{"ready": {"landlock_abi", "seccomp"}}``,
then reads one job per line and writes one answer per line:

- ``{"ok": result}``: ``handler(job)`` returned ``result`` (JSON-serialisable);
- ``{"error": {"kind", "message"}}``: the handler raised :class:`pysandbox.exceptions.JobError`
  (its kind and message), or ``kind`` is ``"memory"`` (``MemoryError``: the worker exits after
  answering, its heap may be fragmented for good) or ``"failed"`` (any other exception: its
  type only, the pool replaces the worker).
"""

from __future__ import annotations

import importlib
import json
import math
import resource
import sys
from collections.abc import Callable
from typing import Any, BinaryIO, cast

from pysandbox._worker_confinement import confine_worker
from pysandbox.exceptions import JobError

__all__ = ["MAX_MESSAGE_CHARS", "load", "main"]

MAX_MESSAGE_CHARS = 4000
"""Longest error message an answer carries (the pool refuses a longer one as malformed)."""


def load(reference: str) -> Callable[..., Any]:
    """The function a ``"pkg.module:function"`` reference names (importing its module).

    Raises:
        ValueError: Not of the form ``module:function``, or not a callable.
        ImportError: The module cannot be imported.
    """
    module_name, sep, name = reference.partition(":")
    if not sep or not module_name or not name.isidentifier():
        raise ValueError(f"{reference!r} is not 'pkg.module:function'")
    function: object = getattr(importlib.import_module(module_name), name, None)
    if not callable(function):
        raise ValueError(f"{reference!r} is not a callable")
    return cast("Callable[..., Any]", function)


def answer(handler: Callable[[Any], Any], job: Any) -> dict[str, Any]:
    """The answer object for one job (``ok`` or ``error``).

    Raises:
        MemoryError: The job ran out of memory (the caller answers ``memory`` and exits).
    """
    try:
        return {"ok": handler(job)}
    except JobError as exc:
        return {"error": {"kind": exc.kind, "message": str(exc)[:MAX_MESSAGE_CHARS]}}
    except MemoryError:
        raise
    except Exception as exc:
        return {"error": {"kind": "failed", "message": f"the handler raised {type(exc).__name__}"}}


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _write(out: BinaryIO, obj: object) -> None:
    out.write(json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("utf-8") + b"\n")
    out.flush()


_MEMORY = {"error": {"kind": "memory", "message": "out of memory"}}


def main() -> int:
    """Run the worker: configuration, setup, confinement, then jobs until stdin closes.

    Returns:
        0 when stdin closed, 1 after a job ran out of memory.
    """
    stdin, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # stray prints must never corrupt the protocol
    config = json.loads(stdin.readline())
    sys.path[:0] = [str(p) for p in config.get("import_paths") or ()]
    handler = load(str(config["handler"]))
    if config.get("setup"):
        load(str(config["setup"]))(config.get("options"))
    applied = confine_worker(
        memory_bytes=int(config["memory_bytes"]),
        # RLIMIT_CPU counts start-up too: the jobs get the configured seconds beyond it (the
        # pool retires a worker before its remaining CPU is less than one job's budget).
        cpu_time_s=math.ceil(_cpu_used()) + int(config["cpu_time_s"]),
        read_only=tuple(config.get("read_only") or ()),
        list_only=tuple(config.get("list_only") or ()),
        open_files=int(config["open_files"]),
        installed_code=bool(config.get("installed_code", False)),
        require_kernel_layers=bool(config.get("require_kernel_layers", True)),
    )
    _write(out, {"ready": {"landlock_abi": applied.landlock_abi, "seccomp": applied.seccomp}})
    while True:
        line = stdin.readline()
        if not line:
            return 0
        try:
            result = answer(handler, json.loads(line))
        except MemoryError:
            result = _MEMORY
        except (ValueError, RecursionError):
            result = {"error": {"kind": "failed", "message": "the job is not JSON"}}
        try:
            _write(out, result)
        except MemoryError:
            _write(out, _MEMORY)
            return 1
        except (TypeError, ValueError):  # not JSON-serialisable (a set, NaN)
            _write(out, {"error": {"kind": "failed", "message": "the result is not JSON"}})
        if result is _MEMORY:
            return 1


if __name__ == "__main__":
    sys.exit(main())
