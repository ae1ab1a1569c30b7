"""One server per workspace and per snapshot store: a lifetime ``flock(2)`` on each directory.

The workspace gate (:mod:`mcp_secure_sandbox.concurrency`) orders the work of one process only;
two servers on one workspace (or one store) would snapshot each other's half-written files. At
start-up the server therefore takes an exclusive, non-blocking ``flock`` on a descriptor of the
workspace directory itself and one of the snapshot directory, and holds both for its whole
life. Nothing is written anywhere: the lock belongs to the directory's inode, so every spelling
of the path (a symbolic link to it, ``..``, a trailing slash, a bind mount) finds the same lock,
and the kernel releases it when the process ends, however it ends (``SIGKILL`` included).

The descriptors are close-on-exec (PEP 446); the runs, the zygote and the workers are started
with ``exec`` and closed descriptors, so no child holds the lock after the server is gone.
wsnapshot's own per-operation lock is a file *inside* the store (another inode), so the two
never wait for each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from mcp_secure_sandbox.settings import ConfigError

__all__ = ["DirectoryClaim", "claim_directories"]

#: The kernel's table of file locks: ``<n>: FLOCK ADVISORY WRITE <pid> <maj>:<min>:<ino> ...``.
_PROC_LOCKS = Path("/proc/locks")


class DirectoryClaim:
    """The server's lifetime locks on its workspace and snapshot directory.

    Released by :meth:`release` or, at the latest, when the process ends.
    """

    def __init__(self) -> None:
        self._fds: list[int] = []
        self._held: set[tuple[int, int]] = set()

    def hold(self, path: Path, what: str) -> None:
        """Take the exclusive lock on the directory ``path`` (named ``what`` in messages).

        A directory this claim already holds (the same inode under another name) is left as
        it is: wsnapshot refuses a store that overlaps the workspace, with its own message.

        Raises:
            ConfigError: Another process holds the lock (its pid named when /proc/locks shows
                it), or ``path`` cannot be opened as a directory.
        """
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise ConfigError(f"{what} {path} cannot be opened: {exc.strerror}") from None
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        if key in self._held:
            os.close(fd)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder_pid(st)
            os.close(fd)
            pid = f" (pid {holder})" if holder else ""
            raise ConfigError(
                f"another process{pid} holds {what} {path} (another mcp-secure-sandbox server "
                "using it, or anything that locked it with flock); stop it, or give this one its "
                "own --workspace and --snapshots"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise ConfigError(f"{what} {path} cannot be locked: {exc.strerror}") from None
        self._fds.append(fd)
        self._held.add(key)

    def release(self) -> None:
        """Release every lock taken (idempotent)."""
        while self._fds:
            with contextlib.suppress(OSError):
                os.close(self._fds.pop())
        self._held.clear()


def claim_directories(workspace: Path, snapshots: Path) -> DirectoryClaim:
    """Lock ``workspace`` and ``snapshots`` for this process, or refuse to start.

    Called by the console script before the libraries open the directories (wsnapshot completes
    an interrupted restore when the store is opened: that is another server's business while it
    lives). :func:`mcp_secure_sandbox.server.create_server` itself takes no lock: an embedding
    program owns its process and its directories.

    Args:
        workspace: The prepared (existing) workspace directory.
        snapshots: The prepared (existing) snapshot directory.

    Returns:
        The claim; keep it for the life of the server (:meth:`DirectoryClaim.release` at exit).

    Raises:
        ConfigError: Another process (another server) holds either directory, named with the
            holder's pid when the kernel shows it, and the remedy.
    """
    claim = DirectoryClaim()
    try:
        claim.hold(workspace, "workspace")
        claim.hold(snapshots, "snapshot directory")
    except BaseException:
        claim.release()
        raise
    return claim


def _holder_pid(st: os.stat_result) -> int | None:
    """The pid holding a ``flock`` on the inode of ``st``, from /proc/locks (``None``: unknown)."""
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        table = _PROC_LOCKS.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in table.splitlines():
        fields = line.split()
        # "<n>: FLOCK ADVISORY WRITE <pid> <dev:ino> <start> <end>"; waiters have a "->" field.
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == key:
            with contextlib.suppress(ValueError):
                pid = int(fields[4])
                return pid if pid > 0 else None
    return None
