"""Record: a snapshot as one self-contained JSON record (export) and back (import).

The record format is the seed's: ``{"format": 1, "kind": "wsnapshot-export", "id",
"created_at", "description", "files": {path: {...}}}`` with each file's content inline
(``encoding`` ``"utf-8"`` or ``"base64"``). :meth:`Records.export` builds it from the manifest,
verifying every blob while it reads it. Import is two steps so that nothing is written before
the whole record is known to be good: :meth:`Records.parse` validates it completely (no lock, no
store access) and :meth:`Records.store_locked` writes its new blobs and its manifest (the caller
holds the store's lock).

The streamed export (:meth:`Records.chunks`) is the same record, compact, with every content in
Base64: its exact size is then known from the manifest alone (:meth:`Records.size`), before a
single blob is read, and it is produced a bounded piece at a time (memory does not grow with
the snapshot).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from wsnapshot._blobs import BlobStore
from wsnapshot._manifest import EXPORT_KIND, FORMAT, Manifest, parse_entries, parse_header
from wsnapshot._storedir import StoreDir
from wsnapshot.exceptions import (
    ExportTooLarge,
    InvalidRecord,
    SnapshotError,
    SnapshotExists,
    SnapshotTooLarge,
)
from wsnapshot.snapshot import FileRecord, SnapshotInfo

__all__ = ["EXPORT_PIECE", "ParsedRecord", "Records"]

#: The streamed export yields pieces of about this many bytes (small entries are coalesced).
EXPORT_PIECE = 256 * 1024


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def _b64_len(size: int) -> int:
    return 4 * ((size + 2) // 3)


#: A piece of the streamed record: literal bytes, or a blob to insert Base64-encoded.
_Piece = bytes | tuple[str, int]


@dataclass
class ParsedRecord:
    """An import record that passed validation, ready to be stored.

    Attributes:
        sid: The snapshot id the record carries (kept on import).
        created_at: Its creation time (ISO 8601, as in the record).
        description: Its description.
        entries: Path -> entry, missing parent directories added.
        contents: SHA-256 -> the decoded content of each distinct file.
    """

    sid: str
    created_at: str
    description: str
    entries: dict[str, FileRecord]
    contents: dict[str, bytes]


class Records:
    """Export of snapshots as JSON records, and import of such records.

    Args:
        files: The store directory (manifests, limits).
        blobs: Where content is read (export) and stored (import).
    """

    def __init__(self, files: StoreDir, blobs: BlobStore) -> None:
        self._files = files
        self._blobs = blobs

    # -- the streamed export ----------------------------------------------------------------------

    @staticmethod
    def _pieces(m: Manifest) -> Iterator[_Piece]:
        head = {
            "format": FORMAT,
            "kind": EXPORT_KIND,
            "id": m.id,
            "created_at": m.created_at,
            "description": m.description,
        }
        yield _dumps(head)[:-1] + b',"files":{'
        for i, path in enumerate(sorted(m.entries)):
            e = m.entries[path]
            d = e.to_dict()
            del d["path"]
            sep = b"," if i else b""
            if e.kind != "file":
                yield sep + _dumps(path) + b":" + _dumps(d)
                continue
            assert e.sha256 is not None  # noqa: S101 - validated manifest
            d["encoding"] = "base64"
            yield sep + _dumps(path) + b":" + _dumps(d)[:-1] + b',"content":"'
            yield (e.sha256, e.size)
            yield b'"}'
        yield b"}}"

    def size(self, sid: str) -> int:
        """Exact byte size of :meth:`chunks`'s record for ``sid``, from the manifest only.

        Raises:
            SnapshotNotFound: No such snapshot.
            CorruptSnapshot: The manifest fails validation.
        """
        return self._size(self._files.load(sid))

    @classmethod
    def _size(cls, m: Manifest) -> int:
        return sum(len(p) if isinstance(p, bytes) else _b64_len(p[1]) for p in cls._pieces(m))

    def chunks(self, sid: str) -> Iterator[bytes]:
        """The record of ``sid`` as compact UTF-8 JSON, in pieces of about ``EXPORT_PIECE`` bytes.

        Every content is Base64; every blob is verified as it is read.

        Raises:
            SnapshotNotFound: No such snapshot (before anything is yielded).
            CorruptSnapshot: The manifest fails (before anything is yielded) or a blob does
                (midway: what was yielded is then not a valid record).
        """
        m = self._files.load(sid)
        return self._stream(m)

    def _stream(self, m: Manifest) -> Iterator[bytes]:
        buf = bytearray()
        for piece in self._pieces(m):
            if isinstance(piece, bytes):
                buf += piece
            else:
                carry = b""
                for got in self._blobs.chunks(piece[0], piece[1], m.id):
                    data = carry + got
                    cut = len(data) - len(data) % 3
                    buf += base64.b64encode(data[:cut])
                    carry = data[cut:]
                    if len(buf) >= EXPORT_PIECE:
                        yield bytes(buf)
                        buf.clear()
                buf += base64.b64encode(carry)
            if len(buf) >= EXPORT_PIECE:
                yield bytes(buf)
                buf.clear()
        if buf:
            yield bytes(buf)

    def write_to(self, sid: str, out: BinaryIO) -> int:
        """Write :meth:`chunks`'s record to the binary file object ``out``; returns its size."""
        total = 0
        for piece in self.chunks(sid):
            out.write(piece)
            total += len(piece)
        return total

    # -- the record as a dict ---------------------------------------------------------------------

    def export(self, sid: str, max_size: int | None = None) -> dict[str, Any]:
        """The record of snapshot ``sid`` (a validated id), every blob verified while read.

        Args:
            sid: The snapshot.
            max_size: Refuse, before any blob is read, when the streamed record
                (:meth:`size`) is larger than this many bytes; ``None``: no check.

        Raises:
            SnapshotNotFound: No such snapshot.
            CorruptSnapshot: The manifest or a blob fails validation.
            ExportTooLarge: Past ``max_size``.
        """
        m = self._files.load(sid)
        if max_size is not None:
            size = self._size(m)
            if size > max_size:
                raise ExportTooLarge(sid, size, max_size)
        files: dict[str, Any] = {}
        for path in sorted(m.entries):
            e = m.entries[path]
            d = e.to_dict()
            del d["path"]
            if e.kind == "file":
                assert e.sha256 is not None  # noqa: S101 - validated manifest
                data = self._blobs.read(e.sha256, e.size, m.id)
                try:
                    d["content"] = data.decode("utf-8")
                    d["encoding"] = "utf-8"
                except UnicodeDecodeError:
                    d["content"] = base64.b64encode(data).decode("ascii")
                    d["encoding"] = "base64"
            files[path] = d
        return {
            "format": FORMAT,
            "kind": EXPORT_KIND,
            "id": m.id,
            "created_at": m.created_at,
            "description": m.description,
            "files": files,
        }

    def parse(self, record: object) -> ParsedRecord:
        """Validate an import record completely; nothing is read from or written to the store.

        Raises:
            InvalidRecord: The record is malformed.
            SnapshotTooLarge: It passes ``max_files`` or ``max_bytes``.
        """
        limits = self._files.limits

        def fail(where: str, reason: str) -> SnapshotError:
            return InvalidRecord(where, reason)

        sid, created, desc = parse_header(record, fail, EXPORT_KIND)
        assert isinstance(record, dict)  # noqa: S101 - checked by parse_header
        unknown = set(record) - {"format", "kind", "id", "created_at", "description", "files"}
        if unknown:
            raise InvalidRecord("", f"unknown keys {sorted(unknown)}")
        files = record.get("files")
        if isinstance(files, dict) and len(files) > limits.max_files:
            raise SnapshotTooLarge("max_files", limits.max_files, len(files))
        entries, extras = parse_entries(
            files,
            fail,
            max_entries=limits.max_files,
            extra_keys=frozenset({"encoding", "content"}),
            fill_parents=True,
        )
        max_bytes = limits.max_bytes
        contents: dict[str, bytes] = {}
        total = 0
        for path in sorted(entries):
            e = entries[path]
            extra = extras.get(path, {})
            where = f"/files/{path}"
            if e.kind != "file":
                if extra:
                    raise InvalidRecord(where, f"a {e.kind} entry has no content")
                continue
            enc, content = extra.get("encoding"), extra.get("content")
            if not isinstance(content, str):
                raise InvalidRecord(where + "/content", "expected a string")
            if len(content) > 4 * (max_bytes - total) // 3 + 4:
                raise SnapshotTooLarge("max_bytes", max_bytes, total + len(content) * 3 // 4)
            if enc == "utf-8":
                try:
                    data = content.encode("utf-8")
                except UnicodeEncodeError:
                    raise InvalidRecord(where + "/content", "not valid Unicode text") from None
            elif enc == "base64":
                try:
                    data = base64.b64decode(content, validate=True)
                except (binascii.Error, ValueError):
                    raise InvalidRecord(where + "/content", "not valid Base64 (RFC 4648)") from None
            else:
                raise InvalidRecord(where + "/encoding", "expected 'utf-8' or 'base64'")
            total += len(data)
            if total > max_bytes:
                raise SnapshotTooLarge("max_bytes", max_bytes, total)
            if len(data) != e.size:
                raise InvalidRecord(
                    where + "/size", f"content is {len(data)} bytes, size says {e.size}"
                )
            if hashlib.sha256(data).hexdigest() != e.sha256:
                raise InvalidRecord(where + "/sha256", "content does not match its SHA-256")
            contents[e.sha256] = data
        return ParsedRecord(sid, created, desc, entries, contents)

    def store_locked(self, rec: ParsedRecord) -> SnapshotInfo:
        """Store a parsed record as a snapshot (the caller holds the lock, store recovered).

        Its new blobs are staged, committed, then its manifest is saved; on any failure what
        was written is undone.

        Raises:
            SnapshotExists: A snapshot with its id is already stored.
            QuotaExceeded: Its new blobs would pass ``store_max_bytes``.
        """
        files, blobs = self._files, self._blobs
        sid = rec.sid
        if os.path.lexists(files.manifest_path(sid)):
            raise SnapshotExists(sid)
        new = {sha: data for sha, data in rec.contents.items() if not blobs.exists(sha)}
        staged: dict[str, tuple[str, int]] = {}
        committed: dict[str, int] = {}
        try:
            for sha, data in sorted(new.items()):
                staged[sha] = (blobs.stage_bytes(data), len(data))
            blobs.commit(staged, committed)
            m = Manifest(
                sid,
                rec.created_at,
                rec.description,
                rec.entries,
                new_bytes=sum(committed.values()),
            )
            files.save_manifest(m)
        except BaseException:
            for tmp, _size in staged.values():
                with contextlib.suppress(OSError):
                    files.unlink(tmp)
            blobs.rollback(sid, committed)
            raise
        if committed:
            blobs.clear_gc_mark()
        blobs.forget_usage()
        return m.info()
