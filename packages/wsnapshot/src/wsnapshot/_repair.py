"""Repairs of what a run can leave in a workspace, and tree walks of any depth.

A run may leave entries the server owns but cannot use: a directory made with
``mkdir(mode=0o300)`` or ``0o000`` cannot be listed or searched, a file created ``0o000``
cannot be read, and a tree thousands of directories deep cannot be removed by recursion. This
module is the one home of both answers:

* :func:`loosen` gives the owner's permission bits back to one entry without opening it:
  ``openat(parent, name, O_PATH | O_NOFOLLOW [| O_DIRECTORY])`` needs no permission on the entry
  itself, ``fstat`` checks its type and that the server owns it, and ``chmod`` goes through
  ``/proc/self/fd/N`` (``fchmod`` refuses ``O_PATH`` descriptors), so it changes exactly the
  inode that was checked. It is only called when an ordinary open failed with ``EACCES``, so a
  root server never changes anything.
* :func:`walk_tree` visits a directory tree iteratively, children before their directory is
  left, repairing directories on the way and keeping at most :data:`MAX_OPEN_DIRS` descriptors
  open whatever the depth (an ancestor whose descriptor was closed is reopened through ``..``
  and checked to be the same directory).

Precondition of every caller: no process of a run is alive (nothing renames entries while they
are repaired or walked). The checks above still make a violation fail safely.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass

from wsnapshot._fsio import O_DIRFLAGS, O_PATHFLAGS, Ops
from wsnapshot.exceptions import UnsafePathError

__all__ = ["MAX_OPEN_DIRS", "Repaired", "loosen", "open_dir", "set_mode", "walk_tree"]

#: Most directory descriptors one tree walk keeps open at once.
MAX_OPEN_DIRS = 32
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_OWNER_RWX = 0o700
_OWNER_R = 0o400

#: Called with ``(path, original mode, (st_dev, st_ino))`` for each entry whose mode was changed.
Repaired = Callable[[str, int, tuple[int, int]], None]


def loosen(
    ops: Ops, parent_fd: int, name: str, path: str, *, directory: bool
) -> tuple[int, tuple[int, int]] | None:
    """Add the owner's ``rwx`` (a directory) or ``r`` (a file) to entry ``name`` of ``parent_fd``.

    Args:
        ops: The system calls to use.
        parent_fd: An open (listable and searchable) directory.
        name: The entry's name in it.
        path: Its workspace-relative path (for errors).
        directory: Whether a directory (else a regular file) is expected.

    Returns:
        ``(original mode, (st_dev, st_ino))`` when the mode was changed, ``None`` when the owner
        already had those bits (the ``EACCES`` came from elsewhere).

    Raises:
        PermissionError: The entry is not owned by the server's effective uid, or (a file) has
            other hard links: it is not ours to change.
        UnsafePathError: The entry is not of the expected type (a symlink, a special file).
        OSError: It vanished (``FileNotFoundError``) or another failure.
    """
    flags = O_PATHFLAGS | (_O_DIRECTORY if directory else 0)
    try:
        fd = ops.open(name, flags, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePathError(path, "is not a directory (symlinks are never followed)") from exc
        raise
    try:
        st = ops.fstat(fd)
        is_ok = stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)
        if not is_ok:
            raise UnsafePathError(path, "changed type while its permissions were repaired")
        if st.st_uid != os.geteuid():
            raise PermissionError(
                errno.EACCES, "permission denied and not owned by the server (not repaired)", path
            )
        if not directory and st.st_nlink != 1:
            raise PermissionError(
                errno.EACCES, "permission denied and has other hard links (not repaired)", path
            )
        mode = stat.S_IMODE(st.st_mode) & 0o777
        bits = _OWNER_RWX if directory else _OWNER_R
        if mode & bits == bits:
            return None
        ops.chmod_opath(fd, mode | bits)
        return mode, (st.st_dev, st.st_ino)
    finally:
        ops.close(fd)


def set_mode(
    ops: Ops, parent_fd: int, name: str, mode: int, ident: tuple[int, int], *, directory: bool
) -> bool:
    """Put back ``mode`` on entry ``name`` of ``parent_fd`` if it is still inode ``ident``.

    Returns:
        Whether the mode was set (``False``: the entry is gone or is another inode).
    """
    flags = O_PATHFLAGS | (_O_DIRECTORY if directory else 0)
    try:
        fd = ops.open(name, flags, dir_fd=parent_fd)
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        st = ops.fstat(fd)
        if (st.st_dev, st.st_ino) != ident:
            return False
        ops.chmod_opath(fd, mode)
        return True
    finally:
        ops.close(fd)


def open_dir(
    ops: Ops, parent_fd: int, name: str, path: str, repaired: Repaired | None
) -> tuple[int, os.stat_result]:
    """Open directory ``name`` of ``parent_fd`` so that it can be listed, searched and changed.

    A directory that cannot be opened for lack of permission is loosened (:func:`loosen`) and
    opened again; one that opens but lacks the owner's ``w`` or ``x`` gets them by ``fchmod``.

    Args:
        ops: The system calls to use.
        parent_fd: The parent directory (already usable).
        name: The directory's name.
        path: Its workspace-relative path.
        repaired: Told of every mode changed, or ``None``.

    Returns:
        The descriptor (the caller closes it) and its ``fstat`` before any ``fchmod``.

    Raises:
        NotADirectoryError: The entry is not a directory (or is a symlink: ``ELOOP``).
        PermissionError: It cannot be repaired (not ours).
        OSError: Other failures.
    """
    try:
        fd = ops.open(name, O_DIRFLAGS, dir_fd=parent_fd)
    except PermissionError:
        got = loosen(ops, parent_fd, name, path, directory=True)
        if got is None:
            raise
        if repaired is not None:
            repaired(path, got[0], got[1])
        fd = ops.open(name, O_DIRFLAGS, dir_fd=parent_fd)
    try:
        st = ops.fstat(fd)
        mode = stat.S_IMODE(st.st_mode) & 0o777
        if mode & _OWNER_RWX != _OWNER_RWX:
            ops.fchmod(fd, mode | _OWNER_RWX)
            if repaired is not None:
                repaired(path, mode, (st.st_dev, st.st_ino))
    except BaseException:
        ops.close(fd)
        raise
    return fd, st


@dataclass
class _Frame:
    fd: int  # -1 while closed to bound the open descriptors
    name: str
    path: str
    ident: tuple[int, int]
    todo: list[str] | None = None
    depth: int = 0


def walk_tree(
    ops: Ops,
    parent_fd: int,
    name: str,
    path: str,
    *,
    on_entry: Callable[[int, str, str, os.stat_result], None] | None,
    on_leave: Callable[[int, str, str], None] | None,
    repaired: Repaired | None = None,
    max_depth: int | None = None,
) -> None:
    """Visit the tree below directory ``name`` of ``parent_fd`` iteratively, any depth.

    Every directory is opened with :func:`open_dir` (repaired when needed). For each entry that
    is not a directory, ``on_entry(dir_fd, name, path, lstat)`` is called; once everything
    below a directory was visited, ``on_leave(parent_fd, name, path)`` is called (the
    directory's own descriptor is closed by then, so ``on_leave`` may remove it). At most
    :data:`MAX_OPEN_DIRS` directory descriptors are open at once.

    Args:
        ops: The system calls to use.
        parent_fd: The directory holding the tree's top (kept open by the caller).
        name: The top directory's name.
        path: Its workspace-relative path.
        on_entry: Called for files, symlinks and special files, or ``None``.
        on_leave: Called for each directory after its content, deepest first, or ``None``.
        repaired: Told of every mode changed, or ``None``.
        max_depth: Directories nested deeper than this below the top are not entered (and
            not left either), or ``None`` for no bound.

    Raises:
        FileNotFoundError: The top directory is missing.
        NotADirectoryError: The top is not a directory.
        UnsafePathError: A directory was replaced while the walk had let go of it.
        OSError: A failure that is not repairable.
    """
    fd, st = open_dir(ops, parent_fd, name, path, repaired)
    stack = [_Frame(fd, name, path, (st.st_dev, st.st_ino))]
    open_fds = 1
    try:
        while stack:
            top = stack[-1]
            if top.todo is None:
                top.todo = sorted(ops.listdir(top.fd), reverse=True)
            entered = False
            while top.todo:
                child = top.todo.pop()
                cpath = f"{top.path}/{child}"
                try:
                    cst = ops.lstat(child, dir_fd=top.fd)
                except FileNotFoundError:
                    continue
                if not stat.S_ISDIR(cst.st_mode):
                    if on_entry is not None:
                        on_entry(top.fd, child, cpath, cst)
                    continue
                if max_depth is not None and top.depth >= max_depth:
                    continue
                try:
                    sub, sst = open_dir(ops, top.fd, child, cpath, repaired)
                except FileNotFoundError:
                    continue
                if open_fds >= MAX_OPEN_DIRS:
                    # let go of the oldest open ancestor (never the top frame's parent chain end)
                    for frame in stack:
                        if frame.fd >= 0:
                            ops.close(frame.fd)
                            frame.fd = -1
                            open_fds -= 1
                            break
                ident = (sst.st_dev, sst.st_ino)
                stack.append(_Frame(sub, child, cpath, ident, None, top.depth + 1))
                open_fds += 1
                entered = True
                break
            if entered:
                continue
            stack.pop()
            if stack and stack[-1].fd < 0:
                stack[-1].fd = _reopen_parent(ops, top.fd, stack[-1])
                open_fds += 1
            ops.close(top.fd)
            open_fds -= 1
            top.fd = -1
            if on_leave is not None:
                on_leave(stack[-1].fd if stack else parent_fd, top.name, top.path)
    finally:
        for frame in stack:
            if frame.fd >= 0:
                ops.close(frame.fd)


def _reopen_parent(ops: Ops, child_fd: int, parent: _Frame) -> int:
    """Open ``..`` of ``child_fd`` and check it is still ``parent``'s directory."""
    fd = ops.open("..", O_DIRFLAGS, dir_fd=child_fd)
    try:
        st = ops.fstat(fd)
        if (st.st_dev, st.st_ino) != parent.ident:
            raise UnsafePathError(parent.path, "directory was moved while it was being walked")
    except BaseException:
        ops.close(fd)
        raise
    return fd
