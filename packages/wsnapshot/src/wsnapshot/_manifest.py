"""Manifest and export-record (de)serialisation with strict validation of hostile input."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from wsnapshot.exceptions import InvalidSnapshotId, SnapshotError, UnsafePathError
from wsnapshot.snapshot import FileRecord, SkippedEntry, SnapshotInfo
from wsnapshot.workspace import MAX_DEPTH, split_relpath

__all__ = [
    "ENTRY_KEYS",
    "FORMAT",
    "IMPORT_MAX_DEPTH",
    "Manifest",
    "check_entry_path",
    "check_id",
    "now_iso",
    "parse_entries",
    "parse_manifest",
    "symlink_problem",
]

FORMAT = 1
IMPORT_MAX_DEPTH = MAX_DEPTH
"""Most parent directories a path of an import record may have (a snapshot's walk's bound)."""
ENTRY_KEYS = frozenset({"type", "mtime_ns", "size", "sha256", "mode", "target"})
"""Every key an entry of any kind may have (a kind allows a subset)."""
MANIFEST_KIND = "wsnapshot-manifest"
EXPORT_KIND = "wsnapshot-export"
MAX_DESCRIPTION = 4096
_SHA_RE = re.compile(r"[0-9a-f]{64}")
_UUID_RE = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
_TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
_INT64 = 2**63
_MAX_REASON = 300

Fail = Callable[[str, str], SnapshotError]


def check_id(snapshot_id: object) -> str:
    """Return the canonical (lowercase) form of a snapshot id.

    Raises:
        InvalidSnapshotId: Not a string in UUID ``8-4-4-4-12`` form.
    """
    if not isinstance(snapshot_id, str) or not _UUID_RE.fullmatch(snapshot_id):
        raise InvalidSnapshotId(snapshot_id)
    return str(uuid.UUID(snapshot_id))


def now_iso() -> str:
    """The current UTC time as ISO 8601 with microseconds and a ``Z`` suffix."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str) -> datetime:
    """Parse a ``created_at`` value written by :func:`now_iso`."""
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def symlink_problem(link_path: str, target: str) -> str | None:
    """Why a symlink may not be recorded, or ``None`` when it provably stays inside the workspace.

    A target is accepted when it is relative, non-empty, valid UTF-8, and all its ``..``
    components come first and climb no higher than the workspace root. Later components may only
    descend, so (by induction over the other recorded links) the link resolves inside the
    workspace whatever those components are.

    Args:
        link_path: The link's own relative path.
        target: Its target as read by ``readlink``.

    Returns:
        A reason string, or ``None``.
    """
    if not target:
        return "symlink with an empty target"
    if "\x00" in target:
        return "symlink target contains a NUL byte"
    try:
        target.encode("utf-8")
    except UnicodeEncodeError:
        return "symlink target is not valid UTF-8"
    if len(target.encode("utf-8")) > 4096:
        return "symlink target is too long"
    if target.startswith("/"):
        return "symlink points outside the workspace (absolute target)"
    depth = link_path.count("/")
    climbing = True
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not climbing:
                return "symlink target has '..' after a name (could leave the workspace)"
            depth -= 1
            if depth < 0:
                return "symlink points outside the workspace"
        else:
            climbing = False
    return None


def _int(value: object, lo: int, hi: int) -> bool:
    return type(value) is int and lo <= value <= hi


@dataclass
class Manifest:
    """In-memory manifest: header plus registry, plus stat keys for incremental hashing."""

    id: str
    created_at: str
    description: str
    entries: dict[str, FileRecord]
    new_bytes: int = 0
    skipped: list[SkippedEntry] = field(default_factory=list)
    keys: dict[str, tuple[int, int, int, int, int]] = field(default_factory=dict)

    def info(self) -> SnapshotInfo:
        """The summary of this manifest."""
        files = [e for e in self.entries.values() if e.kind == "file"]
        return SnapshotInfo(
            id=self.id,
            created_at=self.created_at,
            description=self.description,
            file_count=len(files),
            dir_count=sum(1 for e in self.entries.values() if e.kind == "dir"),
            symlink_count=sum(1 for e in self.entries.values() if e.kind == "symlink"),
            total_bytes=sum(e.size for e in files),
            new_bytes=self.new_bytes,
            skipped=tuple(self.skipped),
        )

    def to_json(self) -> dict[str, Any]:
        """The on-disk JSON document."""
        files: dict[str, Any] = {}
        keys = self.keys
        for path in sorted(self.entries):
            e = self.entries[path]
            if e.kind == "file":
                d: dict[str, Any] = {
                    "type": "file",
                    "mtime_ns": e.mtime_ns,
                    "size": e.size,
                    "sha256": e.sha256,
                    "mode": e.mode,
                }
                key = keys.get(path)
                if key is not None:
                    d["key"] = list(key)
            elif e.kind == "dir":
                d = {"type": "dir", "mtime_ns": e.mtime_ns, "mode": e.mode}
            else:
                d = {"type": "symlink", "mtime_ns": e.mtime_ns, "target": e.target}
            files[path] = d
        return {
            "format": FORMAT,
            "kind": MANIFEST_KIND,
            "id": self.id,
            "created_at": self.created_at,
            "description": self.description,
            "new_bytes": self.new_bytes,
            "skipped": [s.to_dict() for s in self.skipped],
            "files": files,
        }


def parse_header(doc: object, fail: Fail, kind: str) -> tuple[str, str, str]:
    """Validate the common header of a manifest or export record."""
    if not isinstance(doc, dict):
        raise fail("", "not a JSON object")
    if doc.get("format") != FORMAT:
        raise fail("/format", f"unsupported format {doc.get('format')!r}, expected {FORMAT}")
    if doc.get("kind") != kind:
        raise fail("/kind", f"expected {kind!r}")
    try:
        sid = check_id(doc.get("id"))
    except InvalidSnapshotId as exc:
        raise fail("/id", str(exc)) from None
    created = doc.get("created_at")
    if not isinstance(created, str) or not _TIME_RE.fullmatch(created):
        raise fail("/created_at", "expected ISO 8601 UTC time like 2026-01-31T12:00:00.000000Z")
    try:
        parse_time(created)
    except ValueError:
        raise fail("/created_at", "not a valid date and time") from None
    desc = doc.get("description")
    if not isinstance(desc, str) or len(desc) > MAX_DESCRIPTION:
        raise fail("/description", f"expected a string of at most {MAX_DESCRIPTION} characters")
    return sid, created, desc


def check_entry_path(path: object, fail: Fail, *, max_depth: int | None = None) -> str:
    """Validate one registry path from untrusted JSON; return it.

    Args:
        path: The path as found.
        fail: Makes the error to raise from ``(where, reason)``.
        max_depth: Most parent directories a path may have (``None``: no bound beyond the
            4096-byte path length); import records use :data:`wsnapshot.workspace.MAX_DEPTH`,
            the deepest a snapshot's walk descends.

    Raises:
        SnapshotError: From ``fail``: not a string; unsafe (absolute, ``..``, NUL, not UTF-8,
            longer than 4096 bytes or a name longer than 255); not canonical; a reserved name;
            nested deeper than ``max_depth``.
    """
    where = f"/files/{path}"
    if not isinstance(path, str):
        raise fail(where, "path must be a string")
    try:
        parts = split_relpath(path)
    except UnsafePathError as exc:
        raise fail(where, exc.reason) from None
    if "/".join(parts) != path:
        raise fail(where, "path is not in canonical form (no '.', '//', or trailing '/')")
    if any(p.startswith(".wsnapshot-") for p in parts):
        raise fail(where, "names starting with '.wsnapshot-' are reserved")
    if max_depth is not None and len(parts) - 1 > max_depth:
        raise fail(where, f"nested deeper than {max_depth} directories")
    return path


def parse_entries(
    files: object,
    fail: Fail,
    *,
    max_entries: int,
    extra_keys: frozenset[str] = frozenset(),
    fill_parents: bool = False,
    max_depth: int | None = None,
) -> tuple[dict[str, FileRecord], dict[str, dict[str, Any]]]:
    """Validate a registry (``{path: {type, ...}}``) from untrusted JSON.

    Args:
        files: The registry object.
        fail: Makes the error to raise from ``(where, reason)``.
        max_entries: Bound on the number of entries.
        extra_keys: Entry keys allowed besides the standard ones (returned raw).
        fill_parents: Add missing parent directories (mode 0o755) instead of refusing.
        max_depth: Most parent directories a path may have (:func:`check_entry_path`).

    Returns:
        The records by path, and the extra keys' raw values by path.
    """
    if not isinstance(files, dict):
        raise fail("/files", "expected an object mapping paths to entries")
    if len(files) > max_entries:
        raise fail("/files", f"{len(files)} entries, more than max_files={max_entries}")
    out: dict[str, FileRecord] = {}
    extras: dict[str, dict[str, Any]] = {}
    for path, raw in files.items():
        where = f"/files/{path}"
        check_entry_path(path, fail, max_depth=max_depth)
        if not isinstance(raw, dict):
            raise fail(where, "entry must be an object")
        kind = raw.get("type")
        mtime = raw.get("mtime_ns")
        if not _int(mtime, -_INT64, _INT64 - 1):
            raise fail(where + "/mtime_ns", "expected an integer (nanoseconds, 64-bit)")
        assert isinstance(mtime, int)  # noqa: S101 - narrowing for mypy
        allowed = {"type", "mtime_ns"} | extra_keys
        if kind == "file":
            allowed |= {"size", "sha256", "mode"}
            size, sha, mode = raw.get("size"), raw.get("sha256"), raw.get("mode")
            if not _int(size, 0, _INT64 - 1):
                raise fail(where + "/size", "expected a non-negative integer (bytes)")
            if not isinstance(sha, str) or not _SHA_RE.fullmatch(sha):
                raise fail(where + "/sha256", "expected 64 lowercase hex digits")
            if not _int(mode, 0, 0o777):
                raise fail(where + "/mode", "expected permission bits 0..0o777 (511)")
            assert isinstance(size, int) and isinstance(mode, int)  # noqa: S101
            rec = FileRecord(path, "file", mtime, mode=mode, size=size, sha256=sha)
        elif kind == "dir":
            allowed |= {"mode"}
            mode = raw.get("mode")
            if not _int(mode, 0, 0o777):
                raise fail(where + "/mode", "expected permission bits 0..0o777 (511)")
            assert isinstance(mode, int)  # noqa: S101
            rec = FileRecord(path, "dir", mtime, mode=mode)
        elif kind == "symlink":
            allowed |= {"target"}
            target = raw.get("target")
            if not isinstance(target, str):
                raise fail(where + "/target", "expected a string")
            problem = symlink_problem(path, target)
            if problem is not None:
                raise fail(where + "/target", problem)
            rec = FileRecord(path, "symlink", mtime, target=target)
        else:
            raise fail(where + "/type", "expected 'file', 'dir' or 'symlink'")
        unknown = set(raw) - allowed
        if unknown:
            raise fail(where, f"unknown keys {sorted(unknown)}")
        out[path] = rec
        extras[path] = {k: raw[k] for k in extra_keys if k in raw}
    for path in list(out):
        parent = path.rpartition("/")[0]
        while parent:
            have = out.get(parent)
            if have is None:
                if not fill_parents:
                    raise fail(f"/files/{path}", f"parent directory {parent!r} is not listed")
                out[parent] = FileRecord(parent, "dir", out[path].mtime_ns, mode=0o755)
            elif have.kind != "dir":
                raise fail(f"/files/{path}", f"parent {parent!r} is a {have.kind}, not a directory")
            parent = parent.rpartition("/")[0]
    if len(out) > max_entries:
        raise fail("/files", f"more than max_files={max_entries} entries")
    return out, extras


def parse_manifest(doc: object, fail: Fail, *, max_entries: int) -> Manifest:
    """Validate a manifest read from disk.

    Args:
        doc: Parsed JSON.
        fail: Makes the error to raise from ``(where, reason)``.
        max_entries: Bound on the number of entries.

    Returns:
        The manifest.
    """
    sid, created, desc = parse_header(doc, fail, MANIFEST_KIND)
    assert isinstance(doc, Mapping)  # noqa: S101 - checked by parse_header
    new_bytes = doc.get("new_bytes")
    if not _int(new_bytes, 0, _INT64 - 1):
        raise fail("/new_bytes", "expected a non-negative integer")
    assert isinstance(new_bytes, int)  # noqa: S101
    skipped_raw = doc.get("skipped")
    if not isinstance(skipped_raw, list) or len(skipped_raw) > max_entries:
        raise fail("/skipped", "expected a list")
    skipped: list[SkippedEntry] = []
    for i, s in enumerate(skipped_raw):
        if (
            not isinstance(s, dict)
            or set(s) != {"path", "reason"}
            or not isinstance(s["path"], str)
            or not isinstance(s["reason"], str)
        ):
            raise fail(f"/skipped/{i}", "expected {path, reason} strings")
        skipped.append(SkippedEntry(s["path"], s["reason"][:_MAX_REASON]))
    unknown = set(doc) - {
        "format",
        "kind",
        "id",
        "created_at",
        "description",
        "new_bytes",
        "skipped",
        "files",
    }
    if unknown:
        raise fail("", f"unknown keys {sorted(unknown)}")
    entries, extras = parse_entries(
        doc.get("files"), fail, max_entries=max_entries, extra_keys=frozenset({"key"})
    )
    keys: dict[str, tuple[int, int, int, int, int]] = {}
    for path, extra in extras.items():
        key = extra.get("key")
        if key is None:
            continue
        if (
            not isinstance(key, list)
            or len(key) != 5
            or not all(_int(k, -_INT64, 2**64) for k in key)
            or entries[path].kind != "file"
        ):
            raise fail(f"/files/{path}/key", "expected five integers on a file entry")
        keys[path] = (key[0], key[1], key[2], key[3], key[4])
    return Manifest(sid, created, desc, entries, new_bytes, skipped, keys)
