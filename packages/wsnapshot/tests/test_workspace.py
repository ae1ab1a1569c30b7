from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from _helpers import tree_state
from wsnapshot import (
    NotARegularFile,
    SafeWorkspace,
    StoreConfigError,
    UnsafePathError,
    WorkspaceError,
    WorkspaceLimitError,
    split_relpath,
)


@pytest.fixture(params=["openat2", "component-walk"])
def sw(request: pytest.FixtureRequest, ws: Path) -> SafeWorkspace:
    w = SafeWorkspace(ws)
    if request.param == "component-walk":
        w._openat2 = False
    return w


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret").write_bytes(b"top secret")
    return d


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/etc/passwd", "absolute"),
        ("../x", "'..'"),
        ("a/../../x", "'..'"),
        ("a\x00b", "NUL"),
        ("", "workspace itself"),
        (".", "workspace itself"),
        ("bad\udcff", "UTF-8"),
        ("a" * 300, "255 bytes"),
        ("a/" * 2100, "4096 bytes"),
    ],
)
def test_split_relpath_refuses(path: str, reason: str) -> None:
    with pytest.raises(UnsafePathError) as exc:
        split_relpath(path)
    assert reason in exc.value.reason
    assert "unsafe workspace path" in str(exc.value)
    assert isinstance(exc.value, WorkspaceError)


def test_split_relpath_normalises() -> None:
    assert split_relpath("a//b/./c/") == ("a", "b", "c")
    assert split_relpath(Path("x/y")) == ("x", "y")
    assert split_relpath("", allow_root=True) == ()
    with pytest.raises(UnsafePathError, match="string"):
        split_relpath(b"x")  # type: ignore[arg-type]


def test_read_and_write(sw: SafeWorkspace, ws: Path) -> None:
    assert sw.write_bytes("d/e/f.txt", b"data") == 4
    assert (ws / "d/e/f.txt").read_bytes() == b"data"
    assert oct((ws / "d/e").stat().st_mode & 0o777) == oct(0o755)
    assert oct((ws / "d/e/f.txt").stat().st_mode & 0o777) == oct(0o644)
    assert sw.read_bytes("d/e/f.txt") == b"data"
    sw.write_bytes("d/e/f.txt", b"new", mode=0o600)
    assert sw.read_bytes("d/./e//f.txt") == b"new"
    assert oct((ws / "d/e/f.txt").stat().st_mode & 0o777) == oct(0o600)
    with sw.open_read("d/e/f.txt", max_bytes=3) as fh:
        assert fh.read() == b"new"
    assert [p.name for p in (ws / "d/e").iterdir()] == ["f.txt"]  # no temporary file left
    with pytest.raises(FileNotFoundError):
        sw.write_bytes("missing/f", b"x", create_dirs=False)
    with pytest.raises(FileNotFoundError):
        sw.read_bytes("nope")


def test_symlinks_never_followed(sw: SafeWorkspace, ws: Path, outside: Path) -> None:
    (ws / "out").symlink_to(outside)
    (ws / "secret_link").symlink_to(outside / "secret")
    (ws / "inner").mkdir()
    (ws / "inner/f").write_bytes(b"inside")
    (ws / "in_link").symlink_to("inner")
    (ws / "file_link").symlink_to("inner/f")
    before = tree_state(outside)
    for path in ("out/secret", "secret_link", "in_link/f", "file_link"):
        with pytest.raises(UnsafePathError, match="symlink") as exc:
            sw.read_bytes(path)
        assert exc.value.path.endswith(path.split("/")[-1]) or exc.value.path == path
    with pytest.raises(UnsafePathError, match="symlink"):
        sw.write_bytes("out/secret", b"pwned")
    with pytest.raises(UnsafePathError, match="symlink"):
        sw.write_bytes("out/new", b"pwned")
    with pytest.raises(UnsafePathError, match="symlink"):
        sw.write_bytes("secret_link", b"pwned")
    assert tree_state(outside) == before
    assert (ws / "secret_link").is_symlink()


def test_non_regular_files_refused_without_blocking(sw: SafeWorkspace, ws: Path) -> None:
    os.mkfifo(ws / "fifo")
    (ws / "dir").mkdir()
    done = threading.Event()

    def read_fifo() -> None:
        with pytest.raises(UnsafePathError, match="not a regular file"):
            sw.read_bytes("fifo")
        done.set()

    t = threading.Thread(target=read_fifo)
    t.start()
    t.join(timeout=30)
    assert done.is_set()  # O_NONBLOCK: opening a FIFO with no writer does not hang
    with pytest.raises(NotARegularFile) as info:
        sw.read_bytes("dir")
    assert str(info.value) == "unsafe workspace path 'dir': is a directory, not a regular file"
    assert info.value.kind == "dir"
    with pytest.raises(UnsafePathError, match="dir"):
        sw.write_bytes("dir", b"x")
    with pytest.raises(UnsafePathError, match="fifo"):
        sw.write_bytes("fifo", b"x")


def test_size_caps(sw: SafeWorkspace, ws: Path) -> None:
    (ws / "big").write_bytes(b"x" * 100)
    with pytest.raises(UnsafePathError, match="larger than max_bytes=99"):
        sw.read_bytes("big", max_bytes=99)
    assert len(sw.read_bytes("big", max_bytes=100)) == 100
    fh = sw.open_read("big", max_bytes=100)
    try:
        with (ws / "big").open("ab") as grow:
            grow.write(b"y" * 50)
        with pytest.raises(UnsafePathError, match="grew past"):
            fh.read()
    finally:
        fh.close()


def test_list_files_and_usage(sw: SafeWorkspace, ws: Path) -> None:
    (ws / "a").write_bytes(b"12345")
    (ws / "d").mkdir()
    (ws / "d/b").write_bytes(b"12")
    (ws / "l").symlink_to("a")
    os.mkfifo(ws / "p")
    with open(os.fsencode(ws) + b"/bad\xff", "wb"):  # noqa: PTH123 - bytes path
        pass
    entries = sw.list_files()
    got = {e.path: (e.kind, e.size) for e in entries}
    assert got == {
        "a": ("file", 5),
        "d": ("dir", (ws / "d").lstat().st_size),
        "d/b": ("file", 2),
        "l": ("symlink", 1),
        "p": ("other", 0),
    }
    first = entries[0].to_dict()
    assert first["path"] == "a"
    assert first["mtime_ns"] == (ws / "a").stat().st_mtime_ns
    assert first["mode"] == (ws / "a").stat().st_mode & 0o777
    assert sw.usage() == (3, 7)  # a, d/b and the 0-byte bad name
    with pytest.raises(WorkspaceLimitError):
        sw.list_files(max_entries=3)


def test_workspace_root_checked(tmp_path: Path) -> None:
    with pytest.raises(StoreConfigError, match="not an existing directory"):
        SafeWorkspace(tmp_path / "missing")
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(StoreConfigError):
        SafeWorkspace(tmp_path / "f")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert SafeWorkspace(tmp_path / "link").root == str(tmp_path / "real")


def test_directory_swapped_for_symlink_during_write(
    ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sw = SafeWorkspace(ws)
    (ws / "d").mkdir()
    before = tree_state(outside)
    real_open_dir = sw.open_dir

    def swap_then_open(root_fd: int, parts: tuple[str, ...], **kw: object) -> int:
        if (ws / "d").is_dir() and not (ws / "d").is_symlink():
            (ws / "d").rename(ws / "d_moved")
            (ws / "d").symlink_to(outside)
        return real_open_dir(root_fd, parts, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(sw, "open_dir", swap_then_open)
    with pytest.raises(UnsafePathError, match="symlink"):
        sw.write_bytes("d/secret", b"pwned")
    assert tree_state(outside) == before
