"""Safe server-side access to a workspace that hostile code controls.

Everything wsnapshot (and the MCP server) reads or writes in a workspace goes through
:class:`SafeWorkspace`:

* paths are relative POSIX paths, checked before any system call (no absolute path, no ``..``,
  no NUL byte, valid UTF-8);
* they are resolved beneath the workspace with no symlink followed: ``openat2(2)`` with
  ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`` where the kernel has it (Linux
  5.6+), otherwise one ``openat(2)`` per component with ``O_NOFOLLOW`` relative to the directory
  file descriptor of the previous one;
* files are opened ``O_NONBLOCK`` (a FIFO swapped in cannot hang the caller) and ``fstat(2)`` must
  say "regular file" before a byte is read; reads are capped in bytes;
* writes go to a temporary file created ``O_EXCL | O_NOFOLLOW`` in the target's directory, are
  fsynced and renamed over the target (a rename replaces a symlink, it never writes through it),
  then the directory is fsynced;
* directory walks are bounded in entries and depth.
"""

# File-descriptor and dir_fd= system calls have no pathlib equivalent:
# ruff: noqa: PTH112

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple

from wsnapshot._fsio import (
    O_DIRFLAGS,
    O_FILEFLAGS,
    RESOLVE_BENEATH,
    RESOLVE_NO_MAGICLINKS,
    RESOLVE_NO_SYMLINKS,
    Ops,
    get_ops,
)
from wsnapshot.exceptions import (
    NotARegularFile,
    StoreConfigError,
    UnsafePathError,
    WorkspaceLimitError,
)

__all__ = [
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_MAX_READ_BYTES",
    "KIND_DIR",
    "MAX_DEPTH",
    "FileEntry",
    "SafeWorkspace",
    "UnsafePathError",
    "split_relpath",
]

#: Default cap of :meth:`SafeWorkspace.open_read` and :meth:`SafeWorkspace.read_bytes` (64 MiB).
DEFAULT_MAX_READ_BYTES = 64 * 1024 * 1024
#: Default bound of a directory walk, in entries (files, directories, links, others).
DEFAULT_MAX_ENTRIES = 100_000
#: Deepest directory nesting a walk descends into; deeper directories are reported, not walked.
MAX_DEPTH = 128
_MAX_PATH_BYTES = 4096
_MAX_NAME_BYTES = 255
_TMP_PREFIX = ".wsnapshot-"
_CHUNK = 1024 * 1024
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: Errors that mean "this entry cannot be walked" (permissions, or it was swapped meanwhile);
#: anything else (EIO, EMFILE...) is a real failure and propagates.
_SKIPPABLE = frozenset(
    {errno.EACCES, errno.EPERM, errno.ELOOP, errno.ENOTDIR, errno.ENOENT, errno.EINVAL}
)

KIND_FILE = "file"
KIND_DIR = "dir"
KIND_SYMLINK = "symlink"
KIND_OTHER = "other"


def split_relpath(relpath: str | os.PathLike[str], *, allow_root: bool = False) -> tuple[str, ...]:
    """Check a workspace-relative POSIX path and split it into components.

    ``.`` and empty components (``a//b``) are dropped; everything suspicious is refused before any
    system call is made.

    Args:
        relpath: A relative POSIX path such as ``"data/input.csv"``.
        allow_root: Accept a path naming the workspace itself (``""`` or ``"."``).

    Returns:
        The path components.

    Raises:
        UnsafePathError: The path is not a string, is absolute, contains ``..`` or a NUL byte, is
            not valid UTF-8, or is longer than 4096 bytes (255 per component).
    """
    raw = os.fspath(relpath)
    if not isinstance(raw, str):
        raise UnsafePathError(repr(raw), "path must be a string")
    if "\x00" in raw:
        raise UnsafePathError(raw, "path contains a NUL byte")
    try:
        encoded = raw.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsafePathError(raw, "path is not valid UTF-8") from None
    if len(encoded) > _MAX_PATH_BYTES:
        raise UnsafePathError(raw[:64] + "...", f"path is longer than {_MAX_PATH_BYTES} bytes")
    if raw.startswith("/"):
        raise UnsafePathError(
            raw, "absolute paths are not allowed; give a path relative to the workspace"
        )
    parts = tuple(p for p in raw.split("/") if p not in ("", "."))
    for part in parts:
        if part == "..":
            raise UnsafePathError(raw, "'..' components are not allowed")
        if len(part.encode("utf-8")) > _MAX_NAME_BYTES:
            raise UnsafePathError(raw, f"a path component is longer than {_MAX_NAME_BYTES} bytes")
    if not parts and not allow_root:
        raise UnsafePathError(raw, "path names the workspace itself, not a file in it")
    return parts


@dataclass(frozen=True)
class FileEntry:
    """One entry of a workspace listing.

    Attributes:
        path: Relative POSIX path from the workspace root.
        kind: ``"file"``, ``"dir"``, ``"symlink"`` or ``"other"`` (FIFO, socket, device).
        size: Size in bytes (``st_size``; for a symlink, the length of its target).
        mtime_ns: Modification time in nanoseconds since the Unix epoch.
        mode: Permission bits (``st_mode & 0o777``).
    """

    path: str
    kind: str
    size: int
    mtime_ns: int
    mode: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible form of the entry."""
        return {
            "path": self.path,
            "kind": self.kind,
            "size": self.size,
            "mtime_ns": self.mtime_ns,
            "mode": self.mode,
        }


class WalkEntry(NamedTuple):
    """One entry met by :meth:`SafeWorkspace.walk` (internal to wsnapshot)."""

    path: str
    kind: str
    st: os.stat_result
    target: str | None


def kind_of(mode: int) -> str:
    """Map ``st_mode`` to a :class:`FileEntry` kind."""
    if stat.S_ISREG(mode):
        return KIND_FILE
    if stat.S_ISDIR(mode):
        return KIND_DIR
    if stat.S_ISLNK(mode):
        return KIND_SYMLINK
    return KIND_OTHER


class _CappedReader(io.RawIOBase):
    """A raw reader over a file descriptor that refuses to return more than ``limit`` bytes."""

    def __init__(self, fd: int, limit: int, path: str) -> None:
        super().__init__()
        self._file = io.FileIO(fd, "rb", closefd=True)
        self._left = limit
        self._limit = limit
        self._path = path

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        want = min(len(view), self._left + 1)
        got = self._file.readinto(view[:want]) or 0
        if got > self._left:
            raise UnsafePathError(
                self._path, f"file grew past max_bytes={self._limit} while being read"
            )
        self._left -= got
        return got

    def fileno(self) -> int:
        return self._file.fileno()

    def close(self) -> None:
        if not self.closed:
            self._file.close()
        super().close()


class SafeWorkspace:
    """Read, write and list files beneath a workspace directory without ever following a symlink.

    The workspace root itself is trusted configuration: it is resolved once (``realpath``) when
    the object is made. Everything below it is treated as hostile and may change at any moment.

    Args:
        root: The workspace directory; it must exist.

    Raises:
        StoreConfigError: ``root`` is not an existing directory.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        real = os.path.realpath(os.fspath(root))
        if not os.path.isdir(real):
            raise StoreConfigError(os.fspath(root), "workspace is not an existing directory")
        self._root = real
        self._ops: Ops = get_ops()
        self._openat2: bool | None = None

    @property
    def root(self) -> str:
        """The absolute, symlink-free path of the workspace."""
        return self._root

    # -- primitives (used by the snapshot engine) -------------------------------------------------

    def open_root(self) -> int:
        """Open the workspace directory; the caller closes the returned descriptor.

        Returns:
            A directory file descriptor.

        Raises:
            StoreConfigError: The workspace is gone or was replaced by something else.
        """
        try:
            fd = self._ops.open(self._root, O_DIRFLAGS)
        except OSError as exc:
            raise StoreConfigError(self._root, f"cannot open workspace: {exc.strerror}") from exc
        return fd

    def open_beneath(self, root_fd: int, parts: tuple[str, ...], flags: int) -> int:
        """Open ``parts`` beneath ``root_fd`` with no symlink followed anywhere on the way.

        Args:
            root_fd: Descriptor of the workspace directory (from :meth:`open_root`).
            parts: Components from :func:`split_relpath` (at least one).
            flags: ``os.open`` flags; ``O_NOFOLLOW`` and ``O_CLOEXEC`` are always added.

        Returns:
            The new descriptor.

        Raises:
            UnsafePathError: A symlink is on the way or the path escapes the workspace.
            OSError: Other failures (``FileNotFoundError``, ``NotADirectoryError``...).
        """
        path = "/".join(parts)
        ops = self._ops
        if self._openat2 is not False:
            try:
                fd = ops.openat2(
                    root_fd,
                    path,
                    flags | _O_NOFOLLOW,
                    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
                )
            except OSError as exc:
                if exc.errno in (errno.ENOSYS, errno.EPERM) and self._openat2 is None:
                    self._openat2 = False  # kernel or seccomp filter without openat2
                elif exc.errno == errno.ELOOP:
                    raise UnsafePathError(
                        path, "a symlink is on the way (symlinks are never followed)"
                    ) from None
                elif exc.errno == errno.EXDEV:
                    raise UnsafePathError(path, "resolves outside the workspace") from None
                else:
                    raise
            else:
                self._openat2 = True
                return fd
        fd = ops.open(".", O_DIRFLAGS, dir_fd=root_fd)
        try:
            for part in parts[:-1]:
                try:
                    nfd = ops.open(part, O_DIRFLAGS, dir_fd=fd)
                except OSError as exc:
                    self._refuse_symlink(exc, fd, part, path, "a symlink is on the way")
                    raise
                ops.close(fd)
                fd = nfd
            try:
                return ops.open(parts[-1], flags | _O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                self._refuse_symlink(exc, fd, parts[-1], path, "is a symlink")
                raise
        finally:
            ops.close(fd)

    def _refuse_symlink(self, exc: OSError, dir_fd: int, name: str, path: str, what: str) -> None:
        """Turn the error of an ``O_NOFOLLOW`` open into :class:`UnsafePathError` for a symlink.

        Linux says ``ELOOP`` for a symlink opened ``O_NOFOLLOW``, but ``ENOTDIR`` when
        ``O_DIRECTORY`` is given too; an ``lstat`` tells a symlink from a plain file.
        """
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(path, f"{what} (symlinks are never followed)") from None
        if exc.errno == errno.ENOTDIR:
            try:
                st = self._ops.lstat(name, dir_fd=dir_fd)
            except OSError:
                return
            if stat.S_ISLNK(st.st_mode):
                raise UnsafePathError(path, f"{what} (symlinks are never followed)") from None

    def open_dir(
        self,
        root_fd: int,
        parts: tuple[str, ...],
        *,
        create: bool = False,
        created: list[str] | None = None,
    ) -> int:
        """Open the directory ``parts`` beneath ``root_fd`` (``()`` is the root itself).

        Args:
            root_fd: Descriptor of the workspace directory.
            parts: Directory components.
            create: Create missing directories (mode 0o700) on the way.
            created: If given, relative paths of directories created are appended to it.

        Returns:
            A directory descriptor the caller closes.

        Raises:
            UnsafePathError: A component is a symlink.
            OSError: A component is missing (without ``create``) or is not a directory.
        """
        ops = self._ops
        if parts and not create:
            return self.open_beneath(root_fd, parts, O_DIRFLAGS)
        fd = ops.open(".", O_DIRFLAGS, dir_fd=root_fd)
        try:
            for i, part in enumerate(parts):
                try:
                    nfd = ops.open(part, O_DIRFLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        ops.mkdir(part, 0o700, dir_fd=fd)
                    except FileExistsError:
                        pass
                    else:
                        if created is not None:
                            created.append("/".join(parts[: i + 1]))
                    nfd = ops.open(part, O_DIRFLAGS, dir_fd=fd)
                except OSError as exc:
                    self._refuse_symlink(exc, fd, part, "/".join(parts[: i + 1]), "is a symlink")
                    raise
                ops.close(fd)
                fd = nfd
        except BaseException:
            ops.close(fd)
            raise
        return fd

    def open_regular(self, root_fd: int, parts: tuple[str, ...]) -> tuple[int, os.stat_result]:
        """Open an existing regular file for reading (``O_NONBLOCK``, ``fstat`` checked).

        Args:
            root_fd: Descriptor of the workspace directory.
            parts: File components.

        Returns:
            The descriptor and its ``fstat`` result.

        Raises:
            UnsafePathError: A symlink is on the way, or the entry is not a regular file
                (:class:`NotARegularFile`).
            OSError: Other failures.
        """
        fd = self.open_beneath(root_fd, parts, O_FILEFLAGS)
        try:
            st = self._ops.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise NotARegularFile("/".join(parts), kind_of(st.st_mode))
        except BaseException:
            self._ops.close(fd)
            raise
        return fd, st

    def walk(
        self,
        root_fd: int,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        on_problem: Callable[[str, str], None] | None = None,
        on_denied: Callable[[str], None] | None = None,
    ) -> list[WalkEntry]:
        """List every entry beneath ``root_fd``, parents before children, names sorted.

        Directories are entered with ``openat(O_DIRECTORY | O_NOFOLLOW)`` relative to their parent
        descriptor and checked to be the directory that was listed. Names that are not valid UTF-8
        are returned as ``surrogateescape`` strings; the caller decides what to do with them.

        Args:
            root_fd: Descriptor of the workspace directory.
            max_entries: Bound on the number of entries met.
            on_problem: Called with ``(path, reason)`` for directories that could not be walked.
            on_denied: Also called with the path of each of those directories that could not be
                opened or listed for lack of permission (``EACCES``/``EPERM``): its permissions
                may be repaired and the walk made again. Directories that were not walked are
                not among the returned entries.

        Returns:
            The entries.

        Raises:
            WorkspaceLimitError: More than ``max_entries`` entries.
        """
        ops = self._ops
        out: list[WalkEntry] = []

        def problem(path: str, reason: str) -> None:
            if on_problem is not None:
                on_problem(path, reason)

        new = tuple.__new__
        s_isreg, s_isdir = stat.S_ISREG, stat.S_ISDIR

        def denied(path: str, exc: OSError) -> bool:
            if exc.errno in (errno.EACCES, errno.EPERM) and on_denied is not None:
                on_denied(path)
                return True
            return False

        def visit(dir_fd: int, prefix: str, depth: int) -> None:
            try:
                listed = ops.scandir(dir_fd, max_entries - len(out) + 1)
            except PermissionError as exc:  # readable but not searchable: no entry can be stat'ed
                if not prefix:
                    raise
                out.pop()  # the directory itself, appended just before: it was not walked
                problem(prefix[:-1], f"cannot list directory: {exc.strerror}")
                denied(prefix[:-1], exc)
                return
            if len(out) + len(listed) > max_entries:
                raise WorkspaceLimitError(prefix, f"more than max_entries={max_entries} entries")
            listed.sort()
            for name, st in listed:
                path = prefix + name
                mode = st.st_mode
                if s_isreg(mode):
                    out.append(new(WalkEntry, (path, KIND_FILE, st, None)))
                elif s_isdir(mode):
                    if depth >= MAX_DEPTH:
                        problem(path, f"nested deeper than {MAX_DEPTH} directories")
                        continue
                    try:
                        sub = ops.open(name, O_DIRFLAGS, dir_fd=dir_fd)
                    except OSError as exc:
                        if exc.errno not in _SKIPPABLE:
                            raise
                        problem(path, f"cannot open directory: {exc.strerror}")
                        denied(path, exc)
                        continue
                    try:
                        st2 = ops.fstat(sub)
                        if (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino):
                            problem(path, "replaced while being scanned")
                            continue
                        out.append(new(WalkEntry, (path, KIND_DIR, st2, None)))
                        visit(sub, path + "/", depth + 1)
                    finally:
                        ops.close(sub)
                elif stat.S_ISLNK(mode):
                    try:
                        target = ops.readlink(name, dir_fd=dir_fd)
                    except OSError as exc:
                        if exc.errno not in _SKIPPABLE:
                            raise
                        problem(path, f"cannot read symlink: {exc.strerror}")
                        continue
                    out.append(new(WalkEntry, (path, KIND_SYMLINK, st, target)))
                else:
                    out.append(new(WalkEntry, (path, KIND_OTHER, st, None)))

        visit(root_fd, "", 0)
        return out

    def write_at(
        self,
        dir_fd: int,
        name: str,
        chunks: Callable[[Callable[[bytes | memoryview], None]], None],
        *,
        mode: int,
        mtime_ns: int | None,
        sync: bool = True,
    ) -> int:
        """Atomically (re)place ``name`` in the open directory ``dir_fd`` with new content.

        The content goes to a fresh temporary file (``O_CREAT | O_EXCL | O_NOFOLLOW``), gets its
        mode (masked to 0o777) and mtime through the new descriptor, is fsynced (unless ``sync``
        is false: the caller flushes later) and renamed over ``name``. An existing inode is never
        written to, so a hard link or symlink planted under that name cannot redirect the write.
        The directory is *not* fsynced here.

        Args:
            dir_fd: Directory descriptor.
            name: Entry name in that directory.
            chunks: Called with a ``write(data)`` function; it writes the content in pieces.
            mode: Permission bits.
            mtime_ns: Modification time (ns) to set, or ``None`` to keep "now".
            sync: fsync the file before the rename.

        Returns:
            Bytes written.
        """
        ops = self._ops
        tmp = f"{_TMP_PREFIX}{uuid.uuid4().hex}.tmp"
        fd = ops.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW, 0o600, dir_fd=dir_fd)
        written = 0
        try:
            try:

                def write(data: bytes | memoryview) -> None:
                    nonlocal written
                    view = memoryview(data)
                    while view:
                        n = ops.write(fd, view)
                        view = view[n:]
                        written += n

                chunks(write)
                ops.fchmod(fd, mode & 0o777)
                if mtime_ns is not None:
                    ops.futimens(fd, mtime_ns)
                if sync:
                    ops.fsync(fd)
            finally:
                ops.close(fd)
            ops.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                ops.unlink(tmp, dir_fd=dir_fd)
            raise
        return written

    # -- public helpers ---------------------------------------------------------------------------

    def open_read(
        self, relpath: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_READ_BYTES
    ) -> BinaryIO:
        """Open a regular file of the workspace for reading.

        Args:
            relpath: Relative POSIX path.
            max_bytes: Refuse files larger than this (bytes); reading past it (a file growing
                while read) raises too.

        Returns:
            A buffered binary reader; close it (or use ``with``).

        Raises:
            UnsafePathError: Bad path, symlink on the way, not a regular file, or too large.
            OSError: Other failures such as ``FileNotFoundError``.
        """
        parts = split_relpath(relpath)
        root_fd = self.open_root()
        try:
            fd, st = self.open_regular(root_fd, parts)
        finally:
            self._ops.close(root_fd)
        path = "/".join(parts)
        if st.st_size > max_bytes:
            self._ops.close(fd)
            raise UnsafePathError(
                path, f"file is {st.st_size} bytes, larger than max_bytes={max_bytes}"
            )
        try:
            raw = _CappedReader(fd, max_bytes, path)
        except BaseException:
            self._ops.close(fd)
            raise
        return io.BufferedReader(raw)

    def read_bytes(
        self, relpath: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_READ_BYTES
    ) -> bytes:
        """Read a whole regular file of the workspace.

        Args:
            relpath: Relative POSIX path.
            max_bytes: Refuse files larger than this (bytes).

        Returns:
            The content.

        Raises:
            UnsafePathError: Bad path, symlink on the way, not a regular file, or too large.
            OSError: Other failures such as ``FileNotFoundError``.
        """
        with self.open_read(relpath, max_bytes=max_bytes) as fh:
            return fh.read()

    def write_bytes(
        self,
        relpath: str | os.PathLike[str],
        data: bytes,
        *,
        create_dirs: bool = True,
        mode: int = 0o644,
    ) -> int:
        """Atomically write a file of the workspace (temporary file, fsync, rename, dir fsync).

        Args:
            relpath: Relative POSIX path.
            data: The new content.
            create_dirs: Create missing parent directories (mode 0o755).
            mode: Permission bits of the file (masked to 0o777).

        Returns:
            Bytes written.

        Raises:
            UnsafePathError: Bad path, a symlink on the way or at the target, or the target is a
                directory or special file.
            OSError: Other failures such as ``FileNotFoundError`` for a missing parent.
        """
        parts = split_relpath(relpath)
        path = "/".join(parts)
        ops = self._ops
        root_fd = self.open_root()
        try:
            created: list[str] = []
            dir_fd = self.open_dir(root_fd, parts[:-1], create=create_dirs, created=created)
            try:
                for rel in created:
                    sub = self.open_dir(root_fd, split_relpath(rel))
                    try:
                        ops.fchmod(sub, 0o755)
                    finally:
                        ops.close(sub)
                try:
                    st = ops.lstat(parts[-1], dir_fd=dir_fd)
                except FileNotFoundError:
                    pass
                else:
                    kind = kind_of(st.st_mode)
                    if kind != KIND_FILE:
                        raise UnsafePathError(path, f"target exists and is a {kind}, not a file")
                n = self.write_at(dir_fd, parts[-1], lambda w: w(data), mode=mode, mtime_ns=None)
                ops.fsync(dir_fd)
            finally:
                ops.close(dir_fd)
        finally:
            ops.close(root_fd)
        return n

    def list_files(self, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> list[FileEntry]:
        """List the workspace recursively (bounded), never following a symlink.

        Names that are not valid UTF-8 are left out.

        Args:
            max_entries: Bound on entries met.

        Returns:
            Entries sorted by path, parents before children.

        Raises:
            WorkspaceLimitError: More than ``max_entries`` entries.
        """
        root_fd = self.open_root()
        try:
            entries = self.walk(root_fd, max_entries=max_entries)
        finally:
            self._ops.close(root_fd)
        out: list[FileEntry] = []
        for e in entries:
            try:
                e.path.encode("utf-8")
            except UnicodeEncodeError:
                continue
            out.append(
                FileEntry(
                    e.path,
                    e.kind,
                    e.st.st_size,
                    e.st.st_mtime_ns,
                    stat.S_IMODE(e.st.st_mode) & 0o777,
                )
            )
        return out

    def usage(self, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> tuple[int, int]:
        """Count regular files and their bytes (bounded walk).

        Args:
            max_entries: Bound on entries met.

        Returns:
            ``(file_count, total_bytes)``.

        Raises:
            WorkspaceLimitError: More than ``max_entries`` entries.
        """
        root_fd = self.open_root()
        try:
            entries = self.walk(root_fd, max_entries=max_entries)
        finally:
            self._ops.close(root_fd)
        files = [e for e in entries if e.kind == KIND_FILE]
        return len(files), sum(e.st.st_size for e in files)
