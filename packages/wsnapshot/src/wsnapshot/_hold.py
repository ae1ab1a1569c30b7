"""Holding a workspace against other processes: an exclusive ``flock(2)`` on its directory.

A process that changes a workspace as a whole (a restore from the command line) holds it for the
duration; a server holds it for as long as it serves the workspace (mcp-secure-sandbox takes the
same lock at start). The lock is on the directory's inode, so every spelling of the path (a
symbolic link to it, ``..`` components, a trailing slash) meets the same lock, and the kernel
releases it when the holder's descriptor closes, a crashed holder's included.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator

from wsnapshot.exceptions import StoreConfigError, WorkspaceInUse

__all__ = ["hold_workspace"]


@contextlib.contextmanager
def hold_workspace(workspace: str | os.PathLike[str]) -> Iterator[None]:
    """Hold ``workspace`` for the block: an exclusive, non-blocking ``flock`` on its directory.

    Args:
        workspace: The workspace directory.

    Yields:
        Nothing; the lock is held until the block ends.

    Raises:
        WorkspaceInUse: Another open description of the directory holds a ``flock`` on it (a
            server serving it, another ``hold_workspace``, ``flock -x`` by hand).
        StoreConfigError: ``workspace`` cannot be opened as a directory (missing, not a
            directory); the reason names the system error.
    """
    path = os.fspath(workspace)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise StoreConfigError(path, f"cannot open the workspace: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise WorkspaceInUse(path) from None
            raise
        yield
    finally:
        os.close(fd)
