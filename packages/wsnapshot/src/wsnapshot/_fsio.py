"""Every system call wsnapshot makes, behind one small object.

All file-system access of the package goes through an :class:`Ops` instance. The default one calls
:mod:`os` directly; the test-suite substitutes a subclass that fails at the k-th call to prove that
a crash at any step leaves the store and the workspace consistent.
"""

# File-descriptor and dir_fd= system calls have no pathlib equivalent:
# ruff: noqa: PTH208

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
import threading

__all__ = [
    "O_DIRFLAGS",
    "O_FILEFLAGS",
    "O_PATHFLAGS",
    "RESOLVE_BENEATH",
    "RESOLVE_NO_MAGICLINKS",
    "RESOLVE_NO_SYMLINKS",
    "Ops",
    "get_ops",
]

_SYS_OPENAT2 = 437  # the same number on every architecture (unified syscall table, Linux 5.6)
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)

#: Flags for opening a directory to walk or modify it: never through a symlink, never blocking.
O_DIRFLAGS = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK
#: Flags for opening a workspace file to read it.
O_FILEFLAGS = os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK
#: Flags for naming an entry without opening it (no read, list or search permission needed):
#: its ``fstat`` and, through ``/proc/self/fd/N``, its ``chmod`` act on exactly that inode.
O_PATHFLAGS = getattr(os, "O_PATH", 0) | _O_NOFOLLOW | _O_CLOEXEC


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


_libc_state: dict[str, object] = {}
_libc_lock = threading.Lock()


def _libc_lookup(name: str) -> object | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - no C library to talk to
        return None
    return getattr(libc, name, None)


class Ops:
    """The system calls of wsnapshot (a thin layer over :mod:`os`).

    Every method is one system call, so counting calls counts I/O steps.
    """

    def open(self, path: str, flags: int, mode: int = 0o600, *, dir_fd: int | None = None) -> int:
        """``openat(2)``."""
        return os.open(path, flags | _O_CLOEXEC, mode, dir_fd=dir_fd)

    def openat2(self, dir_fd: int, path: str, flags: int, resolve: int) -> int:
        """``openat2(2)`` with ``resolve`` flags; raises ``OSError(ENOSYS)`` where it is missing."""
        syscall = _openat2_syscall()
        if syscall is None:
            raise OSError(errno.ENOSYS, "openat2 is not available")
        how = _OpenHow(flags | _O_CLOEXEC, 0, resolve)
        raw = os.fsencode(path)
        fd = syscall(  # type: ignore[operator]
            ctypes.c_long(_SYS_OPENAT2),
            ctypes.c_int(dir_fd),
            ctypes.c_char_p(raw),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), path)
        return int(fd)

    def syncfs(self, fd: int) -> None:
        """``syncfs(2)``: flush every dirty page and inode of ``fd``'s file system.

        Falls back to ``sync(2)`` where the C library has no ``syncfs``.
        """
        fn = _libc_function("syncfs")
        if fn is None:
            os.sync()
            return
        if fn(ctypes.c_int(fd)) != 0:  # type: ignore[operator]
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    def close(self, fd: int) -> None:
        """``close(2)``."""
        os.close(fd)

    def read(self, fd: int, size: int) -> bytes:
        """``read(2)`` of at most ``size`` bytes."""
        return os.read(fd, size)

    def write(self, fd: int, data: bytes | memoryview) -> int:
        """``write(2)``; returns the number of bytes written."""
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        """``fsync(2)``."""
        os.fsync(fd)

    def fstat(self, fd: int) -> os.stat_result:
        """``fstat(2)``."""
        return os.fstat(fd)

    def lstat(self, path: str, *, dir_fd: int | None = None) -> os.stat_result:
        """``fstatat(2)`` without following a final symlink."""
        return os.stat(path, dir_fd=dir_fd, follow_symlinks=False)

    def listdir(self, fd: int | str) -> list[str]:
        """``getdents(2)`` of a directory (names only, ``surrogateescape``-decoded)."""
        return os.listdir(fd)

    def scandir(self, fd: int, limit: int) -> list[tuple[str, os.stat_result]]:
        """``getdents(2)`` plus ``fstatat(2)`` (no follow) of each entry of an open directory.

        Entries that vanish meanwhile are left out. At most ``limit`` entries are returned, so
        a directory with millions of entries cannot exhaust memory. Names are
        ``surrogateescape``-decoded.
        """
        out: list[tuple[str, os.stat_result]] = []
        with os.scandir(fd) as it:
            for entry in it:
                try:
                    out.append((entry.name, entry.stat(follow_symlinks=False)))
                except FileNotFoundError:
                    continue
                if len(out) >= limit:
                    break
        return out

    def readlink(self, path: str, *, dir_fd: int | None = None) -> str:
        """``readlinkat(2)``."""
        return os.readlink(path, dir_fd=dir_fd)

    def rename(
        self, src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None
    ) -> None:
        """``renameat(2)`` (atomically replaces ``dst``; never follows a symlink)."""
        os.rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    def unlink(self, path: str, *, dir_fd: int | None = None) -> None:
        """``unlinkat(2)`` (removes a symlink itself, never its target)."""
        os.unlink(path, dir_fd=dir_fd)

    def rmdir(self, path: str, *, dir_fd: int | None = None) -> None:
        """``unlinkat(2)`` with ``AT_REMOVEDIR``."""
        os.rmdir(path, dir_fd=dir_fd)

    def mkdir(self, path: str, mode: int = 0o700, *, dir_fd: int | None = None) -> None:
        """``mkdirat(2)``."""
        os.mkdir(path, mode, dir_fd=dir_fd)

    def symlink(self, target: str, path: str, *, dir_fd: int | None = None) -> None:
        """``symlinkat(2)``."""
        os.symlink(target, path, dir_fd=dir_fd)

    def futimens(self, fd: int, mtime_ns: int) -> None:
        """``futimens(2)``: set access and modification time (ns) of an open file."""
        os.utime(fd, ns=(mtime_ns, mtime_ns))

    def lutimens(self, path: str, mtime_ns: int, *, dir_fd: int) -> None:
        """``utimensat(2)`` with ``AT_SYMLINK_NOFOLLOW`` (the link itself, never its target)."""
        os.utime(path, ns=(mtime_ns, mtime_ns), dir_fd=dir_fd, follow_symlinks=False)

    def fchmod(self, fd: int, mode: int) -> None:
        """``fchmod(2)`` of an open file, permission bits only."""
        os.chmod(fd, stat.S_IMODE(mode) & 0o777)

    def chmod_opath(self, fd: int, mode: int) -> None:
        """``chmod(2)`` of the inode an ``O_PATH`` descriptor names, permission bits only.

        ``fchmod`` refuses ``O_PATH`` descriptors (``EBADF``); the descriptor's magic link
        ``/proc/self/fd/N`` names that very inode, whatever happened to its name since.
        """
        try:
            os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(mode) & 0o777)  # noqa: PTH101
        except FileNotFoundError:  # no /proc: never let this pass for "the entry is gone"
            raise OSError(errno.ENOSYS, "chmod of an O_PATH descriptor needs /proc") from None


def _openat2_syscall() -> object | None:
    return _libc_function("syscall")


def _libc_function(name: str) -> object | None:
    with _libc_lock:
        if name not in _libc_state:
            _libc_state[name] = _libc_lookup(name)
        return _libc_state[name]


_OPS = Ops()


def get_ops() -> Ops:
    """The operations object new stores and workspaces use (replaced by tests)."""
    return _OPS
