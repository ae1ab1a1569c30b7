"""Command line: ``wsnapshot --workspace W --store S COMMAND``, JSON on stdout.

``--snapshots`` is an alias of ``--store`` (the name mcp-secure-sandbox uses).

Commands: ``create [-d TEXT]``, ``list``, ``show ID``, ``restore ID`` (refused while another
process, such as a server serving the workspace, holds it: :func:`wsnapshot.hold_workspace`),
``delete ID``,
``diff A [B]``, ``export ID [-o FILE]`` (streamed: the compact record itself, not wrapped),
``export-size ID``, ``import FILE`` (``-`` reads standard input; streamed), ``state [--clear]`` (the
inconsistent state a failed restore leaves; ``--clear`` after a repair by hand), ``gc`` (delete the
blobs no snapshot names; on an ``s3://`` store as a reader, under the collection lease, so the
workspace's writer keeps serving).
Errors are printed to standard error as ``{"error": {"type", "message"}}``; the exit status is
0 on success, 1 on an error, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wsnapshot.__about__ import __version__
from wsnapshot._hold import hold_workspace
from wsnapshot._store import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_FILES,
    DEFAULT_STORE_MAX_BYTES,
    SnapshotStore,
)
from wsnapshot._storedir import S3_SCHEME
from wsnapshot.exceptions import InvalidSnapshotId, SnapshotError, SnapshotNotFound

__all__ = ["main"]

_LIST_COMMAND = "wsnapshot --workspace W --store S list"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="wsnapshot",
        description="Crash-safe, content-addressed snapshots of a workspace directory.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--workspace", required=True, help="the workspace directory")
    p.add_argument(
        "--store",
        "--snapshots",
        dest="store",
        required=True,
        help="the snapshot store directory (--snapshots, as mcp-secure-sandbox calls it)",
    )
    p.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES, help="bytes per snapshot")
    p.add_argument("--max-files", type=int, default=DEFAULT_MAX_FILES, help="entries per snapshot")
    p.add_argument(
        "--store-max-bytes", type=int, default=DEFAULT_STORE_MAX_BYTES, help="store-wide quota"
    )
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("create", help="snapshot the workspace")
    c.add_argument("-d", "--description", default="")
    sub.add_parser("list", help="list snapshots, oldest first")
    for name, text in (
        ("show", "print a snapshot's registry"),
        ("restore", "restore the workspace to a snapshot"),
        ("delete", "delete a snapshot"),
    ):
        sub.add_parser(name, help=text).add_argument("id")
    d = sub.add_parser("diff", help="compare two snapshots, or one with the workspace")
    d.add_argument("a")
    d.add_argument("b", nargs="?")
    e = sub.add_parser("export", help="stream a self-contained JSON record (contents in Base64)")
    e.add_argument("id")
    e.add_argument("-o", "--output", help="write to this file instead of standard output")
    sub.add_parser("export-size", help="bytes of the export record (manifest only)").add_argument(
        "id"
    )
    st = sub.add_parser("state", help="whether a failed restore left the workspace inconsistent")
    st.add_argument("--clear", action="store_true", help="forget it (after a repair by hand)")
    sub.add_parser(
        "gc",
        help="delete the blobs no snapshot names (s3://: under the lease, as a reader)",
    )
    i = sub.add_parser("import", help="store a record made by export (streamed)")
    i.add_argument("file", help="the record (- for standard input)")
    return p


class _Streamed:
    """A result already written to standard output."""


def _run(args: argparse.Namespace) -> Any:
    if args.command == "gc" and str(args.store).startswith(S3_SCHEME):
        # A reader: opening the prefix as a writer would take the workspace over from its server.
        with tempfile.TemporaryDirectory(prefix="wsnapshot-gc-") as state:
            reader = SnapshotStore.open_read_only(args.workspace, args.store, state_dir=state)
            return reader.collect_garbage().to_dict()
    store = SnapshotStore(
        args.workspace,
        args.store,
        max_bytes=args.max_bytes,
        max_files=args.max_files,
        store_max_bytes=args.store_max_bytes,
    )
    cmd = args.command
    if cmd == "create":
        return store.create(args.description).to_dict()
    if cmd == "list":
        return [info.to_dict() for info in store.list()]
    if cmd == "show":
        return store.get(args.id).to_dict()
    if cmd == "restore":
        # Not under a live server: its runs and sessions use the workspace's files.
        with hold_workspace(args.workspace):
            return store.restore(args.id).to_dict()
    if cmd == "delete":
        store.delete(args.id)
        return {"deleted": args.id}
    if cmd == "diff":
        return store.diff(args.a, args.b).to_dict()
    if cmd == "export":
        if args.output:
            with Path(args.output).open("wb") as fh:
                size = store.export_to(args.id, fh)
            return {"exported": args.id, "file": args.output, "bytes": size}
        store.export_to(args.id, sys.stdout.buffer)
        sys.stdout.buffer.write(b"\n")
        sys.stdout.flush()
        return _Streamed()
    if cmd == "export-size":
        return {"id": args.id, "bytes": store.export_size(args.id)}
    if cmd == "gc":
        return store.collect_garbage().to_dict()
    if cmd == "state":
        cleared = store.clear_inconsistent() if args.clear else False
        return {"inconsistent": store.inconsistent, "cleared": cleared}
    if args.file == "-":
        return store.import_from(sys.stdin.buffer).to_dict()
    with Path(args.file).open("rb") as fh:
        return store.import_from(fh).to_dict()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI.

    Args:
        argv: Arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status: 0 success, 1 error, 2 usage error.
    """
    args = _parser().parse_args(argv)
    try:
        result = _run(args)
    except (SnapshotError, ValueError, OSError) as exc:
        message = str(exc)
        if isinstance(exc, (InvalidSnapshotId, SnapshotNotFound)):
            message += f"; `{_LIST_COMMAND}` lists the snapshot ids"
        err = {"error": {"type": type(exc).__name__, "message": message}}
        sys.stderr.write(json.dumps(err) + "\n")
        return 1
    if not isinstance(result, _Streamed):
        sys.stdout.write(json.dumps(result, ensure_ascii=False, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
