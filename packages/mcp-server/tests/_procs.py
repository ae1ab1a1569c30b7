"""Find sandbox processes that outlived their run (by environment marker and working directory)."""

from __future__ import annotations

import os
from pathlib import Path

import psutil

MARKER = "PYSANDBOX_RUN"


def sandbox_processes(workspace: Path) -> list[psutil.Process]:
    """Processes carrying pysandbox's run marker whose working directory is ``workspace``.

    Found by environment and cwd, not parentage, so a daemonised child (new parent, new session)
    is found too.
    """
    real = os.path.realpath(workspace)
    found: list[psutil.Process] = []
    for proc in psutil.process_iter():
        try:
            if MARKER in proc.environ() and os.path.realpath(proc.cwd()) == real:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found
