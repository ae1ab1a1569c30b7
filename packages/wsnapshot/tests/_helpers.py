"""Test helpers: exact tree state, tree builders, a fault-injecting system-call layer."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wsnapshot import SnapshotStore, _fsio

State = dict[str, tuple[Any, ...]]


def tree_state(root: Path) -> State:
    """Everything restore promises to bring back: kinds, bytes, link targets, modes, mtimes."""
    out: State = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("symlink", str(p.readlink()), st.st_mtime_ns)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), st.st_mtime_ns)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", p.read_bytes(), stat.S_IMODE(st.st_mode), st.st_mtime_ns)
            else:
                out[rel] = ("other",)
    return out


def build_tree(root: Path, spec: dict[str, Any]) -> None:
    """``{"a/b.txt": b"data", "d/": None, "l": ("link", "a/b.txt")}``; parents made as needed."""
    for rel, value in spec.items():
        p = root / rel
        if rel.endswith("/"):
            p.mkdir(parents=True, exist_ok=True)
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, tuple) and value[0] == "link":
            p.symlink_to(value[1])
        else:
            p.write_bytes(value)


class Crash(BaseException):
    """A simulated power cut: nothing after it runs (not an Exception, so nothing catches it)."""


class FaultyOps(_fsio.Ops):
    """Counts system calls; at call number ``fail_at`` fails.

    ``crash=True``: that call and every later one raise :class:`Crash` (the process is gone;
    descriptors are still closed so the test process does not leak them).
    ``crash=False``: only that call fails, with ``OSError(EIO)``.
    """

    def __init__(self, fail_at: int, *, crash: bool = True) -> None:
        self.fail_at = fail_at
        self.crash = crash
        self.count = 0
        self.dead = False
        self.hook: Callable[[int, str], None] | None = None

    def step(self, name: str) -> None:
        if self.dead:
            raise Crash(name)
        self.count += 1
        if self.hook is not None:
            self.hook(self.count, name)
        if self.count == self.fail_at:
            if self.crash:
                self.dead = True
                raise Crash(name)
            raise OSError(errno.EIO, f"injected failure at step {self.count} ({name})")


def _wrap(name: str) -> Callable[..., Any]:
    base = getattr(_fsio.Ops, name)

    def method(self: FaultyOps, *args: Any, **kwargs: Any) -> Any:
        if name == "close":
            base(self, *args, **kwargs)
            self.step(name)
            return None
        self.step(name)
        return base(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in (
    "open",
    "openat2",
    "close",
    "read",
    "write",
    "fsync",
    "syncfs",
    "fstat",
    "lstat",
    "listdir",
    "scandir",
    "readlink",
    "rename",
    "unlink",
    "rmdir",
    "mkdir",
    "symlink",
    "futimens",
    "lutimens",
    "fchmod",
    "chmod_opath",
):
    setattr(FaultyOps, _name, _wrap(_name))


def use_ops(store: SnapshotStore, ops: _fsio.Ops) -> None:
    """Make one store (and its workspace accessor) use ``ops``."""
    store._ops = ops
    store.workspace._ops = ops


def make_deep(parent: Path, name: str, depth: int, *, leaf: bytes | None = b"leaf") -> None:
    """``parent/name/name/...`` ``depth`` directories deep (built by descriptor: no PATH_MAX)."""
    fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        if leaf is not None:
            wfd = os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
            os.write(wfd, leaf)
            os.close(wfd)
    finally:
        os.close(fd)


def as_unprivileged(body: Callable[[Path], None]) -> None:
    """Run ``body(base)`` in a forked child without root's permission bypass.

    As root the child drops to ``nobody`` (65534) and ``base`` (a fresh directory) is given to
    it; otherwise the child keeps the current (already unprivileged) user. The child's failure
    (its traceback) fails the caller.
    """
    import importlib
    import subprocess
    import tempfile
    import traceback
    import warnings

    importlib.import_module("_strptime")  # strptime imports it lazily: nobody cannot read pyenv's

    base = Path(tempfile.mkdtemp(prefix="wsnapshot-unpriv-"))
    drop = os.geteuid() == 0
    if drop:
        os.chown(base, 65534, 65534)
    r, w = os.pipe()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork of a threaded pytest
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through the pipe
            code = 1
            try:
                os.close(r)
                if drop:
                    os.setgroups([])
                    os.setresgid(65534, 65534, 65534)
                    os.setresuid(65534, 65534, 65534)
                body(base)
                code = 0
            except BaseException:
                os.write(w, traceback.format_exc()[-16000:].encode())
            finally:
                os._exit(code)
        os.close(w)
        w = -1
        chunks = []
        while chunk := os.read(r, 65536):
            chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        assert status == 0, b"".join(chunks).decode(errors="replace")
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
        # chmod(1) opens up what the body locked, rm(1) removes trees of any depth (both are
        # iterative; shutil.rmtree recurses and gives up 5000 directories deep)
        subprocess.run(["chmod", "-R", "u+rwx", "--", str(base)], check=False)  # noqa: S607
        subprocess.run(["rm", "-rf", "--", str(base)], check=False)  # noqa: S607
