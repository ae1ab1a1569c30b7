"""Helpers shared by the tests (imported after ``conftest.py`` puts this folder on sys.path)."""

from __future__ import annotations

import os
import pathlib

__all__ = ["repo_root", "shared_dir"]


def repo_root() -> pathlib.Path:
    """The monorepo root: the nearest parent folder holding ``noxfile.py``."""
    here = pathlib.Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "noxfile.py").is_file():
            return parent
    raise RuntimeError("cannot find the repository root (the folder holding noxfile.py)")


def shared_dir() -> pathlib.Path:
    """The shared read-only data: ``$SECURE_SANDBOX_SHARED`` or ``<root>/../shared``."""
    override = os.environ.get("SECURE_SANDBOX_SHARED")
    return pathlib.Path(override) if override else repo_root().parent / "shared"
