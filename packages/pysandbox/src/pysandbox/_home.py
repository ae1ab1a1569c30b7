"""The ``HOME`` of every run: one empty directory per process that runs may only read.

A run's ``HOME`` used to be its workspace, so a file a run left there (``.config/...``,
``.matplotlib/matplotlibrc``) configured every later run's libraries. ``HOME`` is instead a
directory of the sandbox's own process, empty, mode 0555 and among the read-only roots: code
that writes under ``~`` gets the sandbox's refusal; ``TMPDIR`` stays the workspace.
"""

from __future__ import annotations

import atexit
import os
import pathlib
import tempfile
import threading

__all__ = ["home_dir"]

_lock = threading.Lock()
_made: list[str] = []


def _remove(path: str, owner: int) -> None:
    if os.getpid() != owner:  # a forked copy of the process: the directory is not its own
        return
    try:
        pathlib.Path(path).chmod(0o700)
        pathlib.Path(path).rmdir()
    except OSError:
        pass


def home_dir() -> str:
    """The process's run ``HOME``, created (empty, mode 0555) on the first call.

    Returns:
        The directory's real path (removed at exit).

    Raises:
        OSError: The temporary directory cannot be created.
    """
    with _lock:
        if not _made:
            path = os.path.realpath(tempfile.mkdtemp(prefix="pysandbox-home-"))
            pathlib.Path(path).chmod(0o555)
            atexit.register(_remove, path, os.getpid())
            _made.append(path)
        return _made[0]
