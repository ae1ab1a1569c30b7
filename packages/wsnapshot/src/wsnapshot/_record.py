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
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from wsnapshot import _storedir
from wsnapshot._blobs import BlobStore
from wsnapshot._jsonstream import JsonStream
from wsnapshot._manifest import (
    ENTRY_KEYS,
    EXPORT_KIND,
    FORMAT,
    IMPORT_MAX_DEPTH,
    Manifest,
    check_entry_path,
    parse_entries,
    parse_header,
)
from wsnapshot._storedir import O_NOFOLLOW, StoreDir
from wsnapshot.exceptions import (
    ExportTooLarge,
    InvalidRecord,
    SnapshotError,
    SnapshotExists,
    SnapshotTooLarge,
)
from wsnapshot.snapshot import FileRecord, SnapshotInfo

__all__ = ["EXPORT_PIECE", "MAX_RANGE", "ParsedRecord", "Records"]

#: The streamed export yields pieces of about this many bytes (small entries are coalesced).
EXPORT_PIECE = 256 * 1024
#: The largest range :meth:`Records.range` reads at once, in bytes.
MAX_RANGE = 16 * 1024 * 1024
#: The keys of a record and of one of its entries (a streamed import refuses others at once).
_RECORD_KEYS = frozenset({"format", "kind", "id", "created_at", "description", "files"})
_RECORD_ENTRY_KEYS = ENTRY_KEYS | {"encoding", "content"}
#: The longest path a record may name, in characters (``split_relpath`` bounds its bytes).
_MAX_PATH_CHARS = 4096
#: The longest key a streamed import reads before refusing it, in characters.
_MAX_KEY_CHARS = 64


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
        staged: SHA-256 -> (staging file in the store's ``tmp/``, size) of content already
            written there by a streaming import (owned by the record until stored).
    """

    sid: str
    created_at: str
    description: str
    entries: dict[str, FileRecord]
    contents: dict[str, bytes]
    staged: dict[str, tuple[str, int]] = field(default_factory=dict)


class _Spool:
    """A content string of a streamed record, written as UTF-8 to a staging file as it is read.

    Args:
        blobs: Where the staging file is made.
        spools: Every staging file made is appended (the caller removes those not kept).
        budget: Bytes all spooled content may still take.
        max_bytes: The limit named when the budget is passed.
        declared: The entry's ``size`` when it came before its content: the text may then be
            no longer than that content's Base64 form; ``None``: not known yet.
        where: The content's place in the record, for the messages.
    """

    def __init__(
        self,
        blobs: BlobStore,
        spools: list[str],
        budget: int,
        max_bytes: int,
        *,
        declared: int | None = None,
        where: str = "",
    ) -> None:
        self._blobs = blobs
        self._declared = declared
        self._most = None if declared is None else _b64_len(declared)
        self._where = where
        self.path, self._fd = blobs.new_tmp()
        spools.append(self.path)
        self._budget = budget
        self._max_bytes = max_bytes
        self._h = hashlib.sha256()
        self._buf = bytearray()
        self.size = 0

    def write(self, text: str) -> None:
        """Add decoded text (raises :class:`InvalidRecord` on lone surrogates)."""
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidRecord("", "a content is not valid Unicode text") from None
        self.size += len(data)
        if self._most is not None and self.size > self._most:
            raise InvalidRecord(
                self._where, f"content is longer than its declared size ({self._declared} bytes)"
            )
        if self.size > self._budget:
            raise SnapshotTooLarge("max_bytes", self._max_bytes, self.size * 3 // 4)
        self._h.update(data)
        self._buf += data
        if len(self._buf) >= EXPORT_PIECE:
            self._flush()

    def _flush(self) -> None:
        self._blobs.write_all(self._fd, bytes(self._buf))
        self._buf.clear()

    def close(self) -> None:
        """Write what is buffered and close the staging file (once)."""
        if self._fd < 0:
            return
        try:
            if self._buf:
                self._flush()
        finally:
            self._blobs.close_fd(self._fd)
            self._fd = -1

    @property
    def sha(self) -> str:
        """SHA-256 of the UTF-8 text."""
        return self._h.hexdigest()


class Records:
    """Export of snapshots as JSON records, and import of such records.

    Args:
        files: The store directory (manifests, limits).
        blobs: Where content is read (export) and stored (import).
    """

    def __init__(self, files: StoreDir, blobs: BlobStore) -> None:
        self._files = files
        self._blobs = blobs

    # -- the streamed export -----------------------------------------------------------------------

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

    def range(self, sid: str, offset: int, length: int) -> bytes:
        """Bytes ``[offset, offset + length)`` of :meth:`chunks`'s record.

        Only the blobs (and the parts of them) that overlap the range are read.

        A blob read whole is verified against its SHA-256; a part of a blob is checked by the
        blob's size only (the record names every file's SHA-256: a reader checks the file).

        Raises:
            SnapshotNotFound, CorruptSnapshot: As :meth:`chunks`.
            ValueError: ``offset`` or ``length`` negative, or ``length`` over ``MAX_RANGE``.
        """
        if offset < 0 or length < 0 or length > MAX_RANGE:
            raise ValueError(f"offset and length must be >= 0, length <= {MAX_RANGE}")
        m = self._files.load(sid)
        end = offset + length
        out = bytearray()
        at = 0
        for piece in self._pieces(m):
            size = len(piece) if isinstance(piece, bytes) else _b64_len(piece[1])
            lo, hi = max(offset, at), min(end, at + size)
            if lo < hi:
                if isinstance(piece, bytes):
                    out += piece[lo - at : hi - at]
                else:
                    out += self._b64_slice(m.id, piece[0], piece[1], lo - at, hi - at)
            at += size
            if at >= end:
                break
        return bytes(out)

    def _b64_slice(self, sid: str, sha: str, size: int, lo: int, hi: int) -> bytes:
        """Characters ``[lo, hi)`` of the Base64 text of blob ``sha`` (``size`` bytes)."""
        raw_lo, raw_hi = lo // 4 * 3, min(size, -(-hi // 4) * 3)
        data = self._blobs.read_part(sha, size, sid, raw_lo, raw_hi)
        text = base64.b64encode(data)
        start = raw_lo // 3 * 4
        return text[lo - start : hi - start]

    def write_to(self, sid: str, out: BinaryIO) -> int:
        """Write :meth:`chunks`'s record to the binary file object ``out``; returns its size."""
        total = 0
        for piece in self.chunks(sid):
            out.write(piece)
            total += len(piece)
        return total

    # -- the record as a dict ----------------------------------------------------------------------

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

    def parse(self, record: object, spools: list[str] | None = None) -> ParsedRecord:
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
            max_depth=IMPORT_MAX_DEPTH,
        )
        max_bytes = limits.max_bytes
        contents: dict[str, bytes] = {}
        staged: dict[str, tuple[str, int]] = {}
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
            if isinstance(content, _Spool) and spools is not None:
                total += self._check_spooled(
                    e,
                    where=where,
                    enc=enc,
                    spool=content,
                    spools=spools,
                    staged=staged,
                    total=total,
                )
                continue
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
        return ParsedRecord(sid, created, desc, entries, contents, staged)

    def _check_spooled(
        self,
        e: FileRecord,
        *,
        where: str,
        enc: object,
        spool: _Spool,
        spools: list[str],
        staged: dict[str, tuple[str, int]],
        total: int,
    ) -> int:
        """Check a content a streaming import spooled; stage it. Returns its decoded size."""
        max_bytes = self._files.limits.max_bytes
        if enc == "utf-8":
            tmp, sha, size = spool.path, spool.sha, spool.size
        elif enc == "base64":
            tmp, sha, size = self._decode_b64(spool.path, spools, where)
        else:
            raise InvalidRecord(where + "/encoding", "expected 'utf-8' or 'base64'")
        if total + size > max_bytes:
            raise SnapshotTooLarge("max_bytes", max_bytes, total + size)
        if size != e.size:
            raise InvalidRecord(where + "/size", f"content is {size} bytes, size says {e.size}")
        if sha != e.sha256:
            raise InvalidRecord(where + "/sha256", "content does not match its SHA-256")
        staged.setdefault(sha, (tmp, size))
        return size

    def _decode_b64(self, path: str, spools: list[str], where: str) -> tuple[str, str, int]:
        """Decode the Base64 text spooled in ``path`` into a new staging file, streaming."""
        ops = self._files.ops
        tmp, out = self._blobs.new_tmp()
        spools.append(tmp)
        h = hashlib.sha256()
        size = 0
        try:
            fd = ops.open(path, os.O_RDONLY | O_NOFOLLOW)
            try:
                buf = b""
                while True:
                    more = ops.read(fd, _storedir.CHUNK)
                    buf += more
                    cut = len(buf) if not more else max(0, len(buf) - 4) // 4 * 4
                    piece, buf = buf[:cut], buf[cut:]
                    try:
                        if more and b"=" in piece:
                            raise ValueError("padding before the end")
                        data = base64.b64decode(piece, validate=True)
                    except (binascii.Error, ValueError):
                        raise InvalidRecord(
                            where + "/content", "not valid Base64 (RFC 4648)"
                        ) from None
                    h.update(data)
                    size += len(data)
                    self._blobs.write_all(out, data)
                    if not more:
                        break
            finally:
                ops.close(fd)
        finally:
            ops.close(out)
        return tmp, h.hexdigest(), size

    # -- streaming import --------------------------------------------------------------------------

    def parse_stream(self, fh: BinaryIO) -> ParsedRecord:
        """Read and validate a record from binary file ``fh``, content staged in ``tmp/``.

        The caller holds the store's lock (staging files must not be collected meanwhile).
        Memory holds the entries but never a content: each content string is decoded to a
        staging file as it is read (Base64 in a second pass over the staged text), hashed and
        checked against its entry. On any error every staging file is removed.

        Raises:
            InvalidRecord: Malformed JSON or record (``where`` names the field).
            SnapshotTooLarge: Past ``max_files`` or ``max_bytes`` (found while reading).
        """
        js = JsonStream(fh)
        spools: list[str] = []
        staged: dict[str, tuple[str, int]] = {}
        try:
            doc: dict[str, Any] = {}
            js.expect(b"{")
            first = True
            while first or js.peek() == b",":
                if not first:
                    js.expect(b",")
                first = False
                if js.peek() == b"}":
                    break
                key = js.string(_MAX_KEY_CHARS)
                js.expect(b":")
                if key not in _RECORD_KEYS:
                    raise InvalidRecord("", f"unknown key {key!r}")
                if key in doc:
                    raise js.fail(f"duplicate key {key!r}")
                doc[key] = self._stream_files(js, spools) if key == "files" else js.value()
            js.expect(b"}")
            if not js.at_end():
                raise js.fail("data after the record")
            rec = self.parse(doc, spools)
            staged.update(rec.staged)
            return rec
        except BaseException:
            for tmp in spools:
                with contextlib.suppress(OSError):
                    self._files.unlink(tmp)
            raise
        finally:
            keep = {tmp for tmp, _size in staged.values()}
            for tmp in spools:
                if tmp not in keep:
                    with contextlib.suppress(OSError):
                        self._files.unlink(tmp)

    def _stream_files(self, js: JsonStream, spools: list[str]) -> dict[str, Any]:
        """Read the ``files`` object, bounding it as it is read (not only once it is whole).

        Each path is checked at once (:func:`check_entry_path`: length, names, depth at most
        :data:`IMPORT_MAX_DEPTH`), an entry may hold only the record's keys, the entries are
        at most ``max_files``, the sizes the file entries declare may add up to ``max_bytes``,
        and a content read after its entry's ``size`` may not be longer than that size says.
        """
        limits = self._files.limits
        budget = 4 * limits.max_bytes // 3 + 4
        declared_total = 0
        files: dict[str, Any] = {}
        js.expect(b"{")
        if js.peek() == b"}":
            js.expect(b"}")
            return files
        while True:
            if len(files) >= limits.max_files:
                raise SnapshotTooLarge("max_files", limits.max_files, len(files) + 1)
            path = js.string(_MAX_PATH_CHARS)
            check_entry_path(path, InvalidRecord, max_depth=IMPORT_MAX_DEPTH)
            where = f"/files/{path}"
            js.expect(b":")
            if path in files:
                raise js.fail(f"duplicate path {path!r}")
            entry: dict[str, Any] = {}
            js.expect(b"{")
            while js.peek() != b"}":
                if entry:
                    js.expect(b",")
                key = js.string(_MAX_KEY_CHARS)
                js.expect(b":")
                if key not in _RECORD_ENTRY_KEYS:
                    raise InvalidRecord(where, f"unknown key {key!r}")
                if key in entry:
                    raise js.fail(f"duplicate key {key!r}")
                if key == "content" and js.peek() == b'"':
                    size = entry.get("size")
                    spool = _Spool(
                        self._blobs,
                        spools,
                        budget,
                        limits.max_bytes,
                        declared=size if type(size) is int and size >= 0 else None,
                        where=where + "/content",
                    )
                    try:
                        js.string_pieces(spool.write)
                    finally:
                        spool.close()
                    budget -= spool.size
                    entry[key] = spool
                else:
                    entry[key] = js.value()
            js.expect(b"}")
            size = entry.get("size")
            if entry.get("type") == "file" and type(size) is int and size > 0:
                declared_total += size
                if declared_total > limits.max_bytes:
                    raise SnapshotTooLarge("max_bytes", limits.max_bytes, declared_total)
            files[path] = entry
            if js.peek() == b",":
                js.expect(b",")
                continue
            js.expect(b"}")
            return files

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
        if files.has_manifest(sid):
            raise SnapshotExists(sid)
        new = {sha: data for sha, data in rec.contents.items() if not blobs.known(sha)}
        staged: dict[str, tuple[str, int]] = dict(rec.staged)
        rec.staged = {}
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
