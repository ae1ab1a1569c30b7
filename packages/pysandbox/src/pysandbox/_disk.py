"""Disk held by a run: one descriptor-based workspace walker, and files held after unlinking.

:func:`workspace_usage` is the only walk of a workspace in pysandbox (the start of a run, the
supervisor's polls, the end of a run). It never builds a path: every directory is opened
relative to its parent's descriptor (``openat`` with ``O_NOFOLLOW``) and every entry is
measured with ``fstatat`` on that descriptor, so no path length (``PATH_MAX``) and no symlink
can hide data from it. An entry counts the larger of its apparent size and its allocated
blocks; a file with several hard links counts once. It fails closed: an entry it cannot read
makes the whole workspace :data:`UNMEASURABLE_BYTES`, over every limit.

:func:`unlinked_bytes` finds what the walk cannot see: files the run's process holds open (or
mapped) after unlinking them, or created without a name (``O_TMPFILE``), on the workspace's
file system.

Renames while a poll walks are a known race (SECURITY.md, *Disk*): a subtree moved from a
directory not yet walked into one already listed is missed by that poll (the reverse move counts
it twice); a moved ancestor is caught by the ``..`` check. The walk after the run, when its
processes are gone, is exact.
"""

from __future__ import annotations

import os
import stat

__all__ = [
    "UNMEASURABLE_BYTES",
    "FileState",
    "Listing",
    "allocated",
    "changed_files",
    "unlinked_bytes",
    "workspace_usage",
]

#: What a walk records of a regular file: ``(inode, size, mtime_ns, ctime_ns)``.
FileState = tuple[int, int, int, int]
#: A walk's record of the workspace's regular files: relative path (``/``-separated, names as
#: :func:`os.scandir` gives them) to :data:`FileState`.
Listing = dict[str, FileState]

#: The size reported for a workspace that cannot be fully read: over any limit.
UNMEASURABLE_BYTES = 1 << 62

#: Directory descriptors the walk keeps open at most; deeper ancestors are reopened through
#: ``..`` (and checked to be the same directory) on the way back up.
_MAX_OPEN_DIRS = 32
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Errors meaning "the entry went away or was replaced while the walk ran": skipped.
_GONE = (FileNotFoundError, NotADirectoryError)


def allocated(st: os.stat_result) -> int:
    """Bytes an entry holds: the larger of ``st_size`` and ``st_blocks`` x 512.

    Allocated blocks count too: ``fallocate(FALLOC_FL_KEEP_SIZE)`` reserves disk without
    changing ``st_size``.
    """
    return max(st.st_size, st.st_blocks * 512)


class _Frame:
    """One directory on the walk's current path."""

    __slots__ = ("fd", "ident", "pending", "prefix")

    def __init__(self, fd: int, ident: tuple[int, int], prefix: str = "") -> None:
        self.fd = fd
        self.ident = ident
        self.prefix = prefix  # the directory's relative path and "/", "" for the root
        self.pending: list[str] | None = None  # subdirectories still to visit, once listed


def workspace_usage(root: str, max_entries: int, listing: Listing | None = None) -> tuple[int, int]:
    """Measure a workspace through descriptors, without following symlinks.

    A directory the caller may not list or search (code running as the server's own user can
    ``mkdir(mode=0o300)``), or any other entry that cannot be measured, could hide any amount
    of data, so it makes the whole workspace count as :data:`UNMEASURABLE_BYTES`: over every
    limit, which stops the run (``disk_limit``) and makes later runs shrink-only until it is
    removed. Entries removed or replaced while the walk runs are skipped.

    Args:
        root: Directory to measure (its own size is not counted).
        max_entries: Stop counting once more entries than this were seen.
        listing: When given, filled with every regular file the walk saw (relative path to
            :data:`FileState`); the walk of the end of a run records it, and
            :func:`changed_files` compares two of them. Nothing is added to the walk's
            system calls: the states come from the ``fstatat`` it does anyway.

    Returns:
        ``(total_bytes, entries)``; ``entries`` may exceed ``max_entries`` by one when cut
        short. Every name counts as an entry; bytes are :func:`allocated`, each inode once.
    """
    try:
        top = os.open(root, _DIR_FLAGS)
    except OSError:
        return UNMEASURABLE_BYTES, 0
    st = os.fstat(top)
    frames = [_Frame(top, (st.st_dev, st.st_ino))]
    seen: set[tuple[int, int]] = set()
    total = 0
    entries = 0
    try:
        while frames:
            frame = frames[-1]
            if frame.pending is None:
                frame.pending = []
                try:
                    with os.scandir(frame.fd) as it:
                        for entry in it:
                            entries += 1
                            if entries > max_entries:
                                return total, entries
                            try:
                                est = entry.stat(follow_symlinks=False)
                            except _GONE:
                                continue
                            if stat.S_ISDIR(est.st_mode):
                                frame.pending.append(entry.name)
                            elif listing is not None and stat.S_ISREG(est.st_mode):
                                listing[frame.prefix + entry.name] = (
                                    est.st_ino,
                                    est.st_size,
                                    est.st_mtime_ns,
                                    est.st_ctime_ns,
                                )
                            elif est.st_nlink > 1:
                                key = (est.st_dev, est.st_ino)
                                if key in seen:
                                    continue
                                seen.add(key)
                            total += allocated(est)
                except _GONE:
                    pass
            if frame.pending:
                name = frame.pending.pop()
                try:
                    fd = os.open(name, _DIR_FLAGS, dir_fd=frame.fd)
                except _GONE:
                    continue
                except OSError as exc:
                    if exc.errno == 40:  # ELOOP: replaced by a symlink meanwhile
                        continue
                    raise
                cst = os.fstat(fd)
                frames.append(_Frame(fd, (cst.st_dev, cst.st_ino), frame.prefix + name + "/"))
                _limit_open(frames)
                continue
            frames.pop()
            if frames and frames[-1].fd < 0:
                parent = frames[-1]
                up = os.open("..", _DIR_FLAGS, dir_fd=frame.fd)
                ust = os.fstat(up)
                parent.fd = up
                if (ust.st_dev, ust.st_ino) != parent.ident:
                    return UNMEASURABLE_BYTES, entries  # moved while the walk was below it
            os.close(frame.fd)
            frame.fd = -1
    except OSError:
        return UNMEASURABLE_BYTES, entries
    finally:
        for frame in frames:
            if frame.fd >= 0:
                os.close(frame.fd)
    return total, entries


def changed_files(before: Listing | None, after: Listing) -> tuple[tuple[str, int], ...]:
    """The regular files of ``after`` that ``before`` lacks or recorded in another state.

    A file counts as changed when its inode, size, modification or status-change time
    differs (a rewrite that keeps all four within one timestamp tick goes unseen).

    Args:
        before: The listing at the start of a run (``None``: unknown, every file counts).
        after: The listing at its end.

    Returns:
        ``(relative path, size in bytes)`` pairs, sorted by path.
    """
    if before is None:
        before = {}
    return tuple(
        (path, state[1]) for path, state in sorted(after.items()) if before.get(path) != state
    )


def _limit_open(frames: list[_Frame]) -> None:
    """Close the outermost open ancestors' descriptors beyond :data:`_MAX_OPEN_DIRS`."""
    open_frames = [f for f in frames if f.fd >= 0]
    for frame in open_frames[: max(len(open_frames) - _MAX_OPEN_DIRS, 0)]:
        os.close(frame.fd)
        frame.fd = -1


_PF_EXITING = 0x4


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs: not gone, not a zombie, not exiting (``PF_EXITING``).

    An exiting process has released (or is releasing) its memory and descriptors; while it
    does, its ``/proc`` entries belong to root and cannot be read.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:  # noqa: PTH123 - one small read
            data = fh.read()
    except OSError:
        return False
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        state, flags = fields[0], int(fields[6])
    except (IndexError, ValueError):
        return True  # unreadable as expected: assume it runs (fail closed)
    return state not in (b"Z", b"X", b"x") and not flags & _PF_EXITING


def unlinked_bytes(pid: int, root: str, device: int, per_file_bound: int) -> int:
    """Bytes of workspace files that process ``pid`` holds open or mapped with no name.

    Such a file (unlinked after opening, or created with ``O_TMPFILE``) keeps its blocks
    until the last descriptor or mapping goes, and no walk of the workspace sees it. Found
    through ``/proc/<pid>/fd`` (each descriptor measured through its link) and the
    ``(deleted)`` entries of ``/proc/<pid>/maps``; a mapping whose file cannot be measured
    (``/proc/<pid>/map_files`` needs privileges) counts as ``per_file_bound`` (the largest
    file the run may make, ``RLIMIT_FSIZE``). Threads share the process's descriptors.

    Args:
        pid: The run's process.
        root: The workspace's real path (a mapping's former path below it counts).
        device: ``st_dev`` of the workspace's file system (a descriptor or mapping of a file
            on it counts).
        per_file_bound: Bytes to count for a mapped unlinked file that cannot be measured.

    Returns:
        Bytes held, each inode once; 0 when the process has ended or is exiting;
        :data:`UNMEASURABLE_BYTES` when a live process's descriptors cannot be read (the
        caller decides how often that may happen in a row: ``/proc`` entries of a process
        are briefly unreadable while its credentials or memory change).
    """
    seen: set[tuple[int, int]] = set()
    total = 0
    base = f"/proc/{pid}"
    prefix = os.fsencode(root.rstrip("/") + "/")
    try:
        names = os.listdir(f"{base}/fd")  # noqa: PTH208 - /proc, per poll
    except OSError:
        return UNMEASURABLE_BYTES if _alive(pid) else 0
    for name in names:
        try:
            st = os.stat(f"{base}/fd/{name}")  # noqa: PTH116 - follows the descriptor
        except OSError:
            continue  # closed meanwhile
        if st.st_nlink == 0 and st.st_dev == device and stat.S_ISREG(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if key not in seen:
                seen.add(key)
                total += allocated(st)
    try:
        with open(f"{base}/maps", "rb") as fh:  # noqa: PTH123
            maps = fh.read()
    except OSError:
        return total if not _alive(pid) else UNMEASURABLE_BYTES
    for line in maps.splitlines():
        if not line.endswith(b" (deleted)"):
            continue
        fields = line.split(None, 5)
        if len(fields) < 6:
            continue
        major, _, minor = fields[3].partition(b":")
        try:
            dev = os.makedev(int(major, 16), int(minor, 16))
            key = (dev, int(fields[4]))
        except ValueError:
            continue
        below = fields[5].startswith(prefix)
        if not (dev == device or below) or key in seen or (device, key[1]) in seen:
            continue
        seen.add(key)
        try:
            st = os.stat(f"{base}/map_files/{fields[0].decode('ascii')}")  # noqa: PTH116
            total += allocated(st)
        except OSError:
            total += per_file_bound
    return total
