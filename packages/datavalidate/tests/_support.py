"""Helpers shared by the tests (imported after ``conftest.py`` puts this folder on sys.path)."""

from __future__ import annotations

import pathlib

__all__ = ["data_dir"]


def data_dir(name: str) -> pathlib.Path:
    """The vendored test data folder ``tests/data/<name>`` (the same place in the repository and
    in an unpacked sdist; see ``tests/data/README.md``).

    Raises:
        FileNotFoundError: The folder is missing, so that a suite fails instead of running nothing.
    """
    path = pathlib.Path(__file__).resolve().parent / "data" / name
    if not path.is_dir():
        raise FileNotFoundError(f"test data folder {path} is missing (see tests/data/README.md)")
    return path
