"""A streamed import is bounded while it reads (issue 15): entries, path depth, name and path
length, keys, the elements of a value, and the sizes the entries declare against the content
that follows. Each refusal comes before the rest of the record is read, names what was wrong,
and leaves nothing in the store."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from wsnapshot import InvalidRecord, SnapshotStore, SnapshotTooLarge
from wsnapshot.workspace import MAX_DEPTH

SID = "0b7c1a4e-2f57-4a39-9a51-36f1b1c2d3e4"
HEAD = (
    b'{"format":1,"kind":"wsnapshot-export","id":"' + SID.encode() + b'",'
    b'"created_at":"2026-01-31T12:00:00.000000Z","description":"",'
)
BIG = 2 * 1024 * 1024


def _file(data: bytes, **overrides: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": "file",
        "mtime_ns": 0,
        "mode": 0o644,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "encoding": "base64",
        "content": base64.b64encode(data).decode(),
    }
    entry.update(overrides)
    return entry


def _entry(path: str, entry: dict[str, Any]) -> bytes:
    return json.dumps(path).encode() + b":" + json.dumps(entry).encode()


def _record(*entries: bytes) -> bytes:
    return HEAD + b'"files":{' + b",".join(entries) + b"}}"


# A large entry after the offending one: the refusal must come before it is read.
TAIL = _entry("zz-tail.bin", _file(b"t" * BIG))


class Tripwire(io.BytesIO):
    """A binary file that fails the test if it is read past ``stop``."""

    def __init__(self, data: bytes, stop: int) -> None:
        super().__init__(data)
        self._stop = stop

    def read(self, n: int | None = -1) -> bytes:
        if self.tell() >= self._stop:
            raise AssertionError(f"read past byte {self._stop}: the refusal came too late")
        return super().read(n)


def _store(tmp_path: Path, **limits: Any) -> tuple[SnapshotStore, Path]:
    ws = tmp_path / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    store_dir = tmp_path / "store"
    return SnapshotStore(ws, store_dir, workers=1, **limits), store_dir


def _refused(tmp_path: Path, head: bytes, **limits: Any) -> Exception:
    """Import ``head`` + TAIL; return the error, after checking nothing was read past ``head``
    by more than a read buffer, and nothing was left in the store."""
    store, store_dir = _store(tmp_path, **limits)
    data = head + b"," + TAIL + b"}}"
    with pytest.raises((InvalidRecord, SnapshotTooLarge)) as caught:
        store.import_from(Tripwire(data, len(head) + 512 * 1024))
    assert store.list() == []
    assert list((store_dir / "tmp").iterdir()) == []
    assert list((store_dir / "blobs").iterdir()) == []
    return caught.value


def _files(*entries: bytes) -> bytes:
    return HEAD + b'"files":{' + b",".join(entries)


def test_the_tail_alone_imports(tmp_path: Path) -> None:
    store, _store_dir = _store(tmp_path)
    info = store.import_from(io.BytesIO(_record(TAIL)))
    assert (info.file_count, info.total_bytes) == (1, BIG)


def test_too_many_entries_stop_the_read(tmp_path: Path) -> None:
    head = _files(*(_entry(f"f{i}", _file(b"x")) for i in range(4)))
    err = _refused(tmp_path, head, max_files=4)
    assert isinstance(err, SnapshotTooLarge)
    assert (err.limit_name, err.limit, err.actual) == ("max_files", 4, 5)


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("d/" * (MAX_DEPTH + 1) + "f", f"nested deeper than {MAX_DEPTH} directories"),
        ("/".join(["a"] * 2000), f"nested deeper than {MAX_DEPTH} directories"),
        ("n" * 256, "a path component is longer than 255 bytes"),
        ("d/" + "\u00e9" * 128, "a path component is longer than 255 bytes"),
        ("a/../b", "'..' components are not allowed"),
        ("a//b", "path is not in canonical form (no '.', '//', or trailing '/')"),
        (".wsnapshot-x", "names starting with '.wsnapshot-' are reserved"),
    ],
)
def test_a_bad_path_is_refused_as_soon_as_it_is_read(
    tmp_path: Path, path: str, reason: str
) -> None:
    err = _refused(tmp_path, _files(_entry(path, _file(b"x"))))
    assert isinstance(err, InvalidRecord)
    assert err.where == f"/files/{path}"
    assert err.reason == reason


def test_a_path_longer_than_a_path_can_be_is_not_even_read_whole(tmp_path: Path) -> None:
    err = _refused(tmp_path, _files(_entry("p" * 5000, _file(b"x"))))
    assert isinstance(err, InvalidRecord)
    assert "string longer than 4096 characters" in err.reason


def test_the_deepest_path_a_snapshot_walk_records_is_accepted(tmp_path: Path) -> None:
    path = "d/" * MAX_DEPTH + "f"
    store, _store_dir = _store(tmp_path)
    info = store.import_from(io.BytesIO(_record(_entry(path, _file(b"deep")))))
    assert (info.file_count, info.dir_count) == (1, MAX_DEPTH)


def test_dict_import_bounds_depth_too(tmp_path: Path) -> None:
    store, _store_dir = _store(tmp_path)
    path = "d/" * (MAX_DEPTH + 1) + "f"
    record = json.loads(_record(_entry(path, _file(b"x"))))
    with pytest.raises(InvalidRecord, match=f"nested deeper than {MAX_DEPTH} directories"):
        store.import_(record)


def test_declared_sizes_past_max_bytes_stop_the_read(tmp_path: Path) -> None:
    # Entries that declare sizes (their content comes later or never): the sum is the bound.
    meta = {k: v for k, v in _file(b"x" * 400).items() if k not in ("content", "encoding")}
    head = _files(*(_entry(f"f{i}", meta) for i in range(3)))
    err = _refused(tmp_path, head, max_bytes=1000)
    assert isinstance(err, SnapshotTooLarge)
    assert (err.limit_name, err.limit, err.actual) == ("max_bytes", 1000, 1200)


@pytest.mark.parametrize("encoding", ["base64", "utf-8"])
def test_content_longer_than_its_declared_size_stops_the_read(
    tmp_path: Path, encoding: str
) -> None:
    body = "A" * (BIG // 2) if encoding == "utf-8" else base64.b64encode(b"y" * BIG).decode()
    entry = _file(b"abc", encoding=encoding, content=body)
    err = _refused(tmp_path, _files(_entry("a", entry)))
    assert isinstance(err, InvalidRecord)
    assert err.where == "/files/a/content"
    assert err.reason == "content is longer than its declared size (3 bytes)"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (list(range(2000)), "a value with more than 1024 elements"),
        ([[0] * 600, [0] * 600], "a value with more than 1024 elements"),
        ({f"k{i}": 0 for i in range(1100)}, "a value with more than 1024 elements"),
    ],
)
def test_a_value_with_too_many_elements_stops_the_read(
    tmp_path: Path, value: Any, reason: str
) -> None:
    err = _refused(tmp_path, _files(_entry("a", _file(b"x", mode=value))))
    assert isinstance(err, InvalidRecord)
    assert reason in err.reason


def test_unknown_keys_stop_the_read(tmp_path: Path) -> None:
    err = _refused(tmp_path, _files(_entry("a", _file(b"x", extra=1))))
    assert isinstance(err, InvalidRecord)
    assert (err.where, err.reason) == ("/files/a", "unknown key 'extra'")
    store, _store_dir = _store(tmp_path / "2")
    data = HEAD[:-1] + b',"padding":"' + b"p" * 100 + b'",' + b'"files":{' + TAIL + b"}}"
    with pytest.raises(InvalidRecord, match="unknown key 'padding'"):
        store.import_from(Tripwire(data, len(HEAD) + 512 * 1024))
