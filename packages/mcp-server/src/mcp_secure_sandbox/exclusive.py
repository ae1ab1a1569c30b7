"""One server per workspace and per snapshot store, none inside or above another's: ``flock(2)``.

The workspace gate (:mod:`mcp_secure_sandbox.concurrency`) orders the work of one process only;
two servers on one workspace (or one store) would snapshot each other's half-written files, and
a server whose workspace is a sub-directory of another's (or contains it) would too. At start-up
the server therefore takes, non-blocking and for its whole life:

* an exclusive ``flock`` on a descriptor of the workspace directory itself and one of the
  snapshot directory, and
* a shared ``flock`` on every ancestor of both but ``/`` (each opened ``O_RDONLY |
  O_DIRECTORY``), found from the resolved path (symbolic links and ``..`` resolved first).
  ``/`` is never a served directory (pysandbox refuses it as the workspace, wsnapshot a store
  containing the workspace), and a lock on it would have every server on the machine refuse
  ``--workspace /`` as "containing" their directories before pysandbox could say why.

A second server on a sub-directory of the first's workspace or store is refused (its shared
lock on the first's directory meets the exclusive one); a second server on a parent is refused
(its exclusive lock meets the first's shared one); servers on sibling directories share their
common ancestors and both start. The refusal names the directory, the holder's pid (from
/proc/locks) and the remedy.

Nothing is written anywhere: a lock belongs to the directory's inode, so every spelling of the
path (a symbolic link to it, ``..``, a trailing slash, a bind mount) finds the same lock, and the
kernel releases it when the process ends, however it ends (``SIGKILL`` included). An ancestor
the server cannot open (no read permission: another user's home directory, say) is skipped,
never a reason to refuse a start: the check is blind above such a directory only, which
:attr:`DirectoryClaim.unlocked` lists and the console script logs as a warning.

Any local user who can open a directory can ``flock`` it: ``flock -x /home`` by another user
would otherwise keep every server below ``/home`` from starting. An exclusive lock on an
ancestor is therefore taken for another server's only when its holder (the pid /proc/locks
names) runs as this server's user, or is not named at all (a process of another PID namespace:
another container sharing the directory); a lock held by another user's process is logged
as a warning and the ancestor left unlocked (:attr:`DirectoryClaim.contested`), so a server of
this user on that very ancestor would not be detected. Servers of two users nested in each other
are not detected either; one user's server writing inside another's workspace needs that
user's permission anyway.

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

__all__ = ["DirectoryClaim", "claim_directories", "refuse_inside_claimed"]

#: The kernel's table of file locks: ``<n>: FLOCK ADVISORY WRITE <pid> <maj>:<min>:<ino> ...``.
_PROC = Path("/proc")
_PROC_LOCKS = _PROC / "locks"


class DirectoryClaim:
    """The server's lifetime locks on its workspace, its snapshot directory and their ancestors.

    Released by :meth:`release` or, at the latest, when the process ends.

    Attributes:
        unlocked: Ancestors that could not be opened to be locked (skipped; see the module).
        contested: Ancestors left unlocked because a process of another user holds an
            exclusive ``flock`` on them, with its pid (skipped; see the module).
    """

    def __init__(self) -> None:
        self._fds: list[int] = []
        self._held: set[tuple[int, int]] = set()
        self.unlocked: list[Path] = []
        self.contested: list[tuple[Path, int]] = []

    def hold(self, path: Path, what: str) -> None:
        """Take the exclusive lock on the directory ``path`` (named ``what`` in messages).

        A directory this claim already holds (the same inode under another name) is left as
        it is: wsnapshot refuses a store that overlaps the workspace, with its own message.

        Raises:
            ConfigError: Another process holds the lock: exclusively (the same directory) or
                shared (a directory inside it is another server's); its pid named when
                /proc/locks shows it; or ``path`` cannot be opened as a directory.
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
            holder, shared = _holder(st)
            os.close(fd)
            pid = f" (pid {holder})" if holder else ""
            if shared:
                raise ConfigError(
                    f"{what} {path} contains the workspace or snapshot directory of another "
                    f"process{pid} (another mcp-secure-sandbox server, or anything that locked "
                    "a directory inside it with flock); stop it, or give this one a --workspace "
                    "and --snapshots that neither contain nor lie inside another server's"
                ) from None
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

    def hold_ancestors(self, path: Path, what: str) -> None:
        """Take a shared lock on every ancestor of the resolved ``path`` but ``/``.

        Ancestors this claim already holds (a common ancestor, or the workspace above its own
        store) are left as they are; one that cannot be opened is added to :attr:`unlocked`,
        one that another user's process holds exclusively to :attr:`contested`.

        Raises:
            ConfigError: A process of this user (or one the kernel does not name) holds an
                ancestor exclusively (``path`` lies inside another server's workspace or
                store), naming it, the pid and the remedy.
        """
        for ancestor in _ancestors(path):
            try:
                fd = os.open(ancestor, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                self.unlocked.append(ancestor)
                continue
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino)
            if key in self._held:
                os.close(fd)
                continue
            try:
                _share(fd, st)
            except BlockingIOError:
                os.close(fd)
                raise _inside(what, path, ancestor, st) from None
            except _ForeignLockError as exc:
                os.close(fd)
                self.contested.append((ancestor, exc.pid))
                continue
            except OSError:
                os.close(fd)
                self.unlocked.append(ancestor)
                continue
            self._fds.append(fd)
            self._held.add(key)

    def release(self) -> None:
        """Release every lock taken (idempotent)."""
        while self._fds:
            with contextlib.suppress(OSError):
                os.close(self._fds.pop())
        self._held.clear()


def refuse_inside_claimed(workspace: Path, snapshots: Path) -> None:
    """Refuse a missing directory that would be created inside another server's directory.

    Called before the directories are created: a workspace or store that does not exist yet
    and lies inside another running server's workspace or store is refused *before* it is
    made there (the claim after the creation would refuse it too, but only once the directory
    stood in the other server's workspace). Each existing ancestor is probed with a shared
    lock, released at once; nothing is held. An ancestor that cannot be opened is skipped.

    Raises:
        ConfigError: Another process holds an ancestor exclusively, as
            :meth:`DirectoryClaim.hold_ancestors` says it.
    """
    for path, what in ((workspace, "workspace"), (snapshots, "snapshot directory")):
        if os.path.lexists(path):
            continue  # nothing to create; the claim decides
        for ancestor in _ancestors(path):
            try:
                fd = os.open(ancestor, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                _share(fd, os.fstat(fd))
            except BlockingIOError:
                raise _inside(what, path, ancestor, os.fstat(fd)) from None
            except OSError:
                pass  # cannot be locked, or only another user's lock is in the way
            finally:
                os.close(fd)  # a probe: the lock, if taken, goes with the descriptor


def claim_directories(workspace: Path, snapshots: Path) -> DirectoryClaim:
    """Lock ``workspace`` and ``snapshots`` (and share their ancestors), or refuse to start.

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
        ConfigError: Another process (another server) holds either directory, or one inside
            it, or one of their ancestors; named with the holder's pid when the kernel shows
            it, and the remedy.
    """
    claim = DirectoryClaim()
    try:
        # The directories themselves first: their own ancestors' shared locks skip them.
        claim.hold(workspace, "workspace")
        claim.hold(snapshots, "snapshot directory")
        claim.hold_ancestors(workspace, "workspace")
        claim.hold_ancestors(snapshots, "snapshot directory")
    except BaseException:
        claim.release()
        raise
    return claim


class _ForeignLockError(OSError):
    """An exclusive ``flock`` of a process of another user is in the way (its ``pid``)."""

    def __init__(self, pid: int) -> None:
        super().__init__(f"locked by pid {pid} of another user")
        self.pid = pid


def _share(fd: int, st: os.stat_result) -> None:
    """Take a shared ``flock`` on ``fd`` (an ancestor, of inode ``st``), not blocking.

    Raises:
        BlockingIOError: A process of this user holds it exclusively (or the kernel does not
            say who): another server's workspace or store, as far as the lock can tell.
        _ForeignLockError: A process of another user holds it exclusively: any user who can
            open a directory can ``flock`` it, so such a lock is not taken for a server's.
        OSError: The lock cannot be taken for another reason.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        holder, _ = _holder(st)
        if holder is None or not _of_another_user(holder):
            raise
        try:  # it may have been released meanwhile
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _ForeignLockError(holder) from None


def _of_another_user(pid: int) -> bool:
    """Whether the process ``pid`` runs as another user than this one (``/proc/<pid>``'s owner).

    A process ``/proc`` hides (``hidepid``) is another user's; one that has just ended counts
    as another user's too (its lock is gone: the caller's retry takes it).
    """
    try:
        return (_PROC / str(pid)).stat().st_uid != os.geteuid()
    except OSError:
        return True


def _ancestors(path: Path) -> list[Path]:
    """The ancestors of the resolved ``path``, nearest first, ``/`` left out (see the module)."""
    return [p for p in path.resolve().parents if p != p.parent]


def _inside(what: str, path: Path, ancestor: Path, st: os.stat_result) -> ConfigError:
    """The refusal of ``path`` lying inside ``ancestor`` (``st``), which another process holds."""
    holder, _ = _holder(st)
    pid = f" (pid {holder})" if holder else ""
    return ConfigError(
        f"{what} {path} is inside {ancestor}, which another process{pid} holds (another "
        "mcp-secure-sandbox server's workspace or snapshot directory, or anything that locked "
        "it with flock); stop it, or give this one a --workspace and --snapshots outside it"
    )


def _holder(st: os.stat_result) -> tuple[int | None, bool]:
    """Who holds a ``flock`` on the inode of ``st``, from /proc/locks: ``(pid, shared)``.

    ``pid`` is ``None`` when unknown; ``shared`` is true when the lock found is a shared one
    (``READ``: the holder's workspace or store is inside this directory).
    """
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        table = _PROC_LOCKS.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None, False
    for line in table.splitlines():
        fields = line.split()
        # "<n>: FLOCK ADVISORY WRITE|READ <pid> <dev:ino> <start> <end>"; waiters have "->".
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == key:
            with contextlib.suppress(ValueError):
                pid = int(fields[4])
                return (pid if pid > 0 else None), fields[3] == "READ"
    return None, False
