from __future__ import annotations

import os
import pathlib

import pytest

from pysandbox._capabilities import probe_kernel


def repo_root() -> pathlib.Path:
    here = pathlib.Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "noxfile.py").is_file():
            return parent
    raise RuntimeError("repository root (noxfile.py) not found")


def shared_dir() -> pathlib.Path:
    override = os.environ.get("SECURE_SANDBOX_SHARED")
    return pathlib.Path(override) if override else repo_root().parent / "shared"


KERNEL = probe_kernel()
needs_landlock = pytest.mark.skipif(KERNEL.landlock_abi < 1, reason="Landlock unavailable")
needs_seccomp = pytest.mark.skipif(not KERNEL.seccomp, reason="seccomp unavailable")
needs_kernel = pytest.mark.skipif(
    KERNEL.landlock_abi < 1 or not KERNEL.seccomp, reason="kernel layers unavailable"
)
