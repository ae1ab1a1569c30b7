"""Helpers shared by the tests (this folder is on pytest's ``pythonpath``: ``pyproject.toml``)."""

from __future__ import annotations

import pathlib

__all__ = ["BAD_ROWS_CONSTRAINTS", "bad_rows_csv", "data_dir"]


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


#: The column rules :func:`bad_rows_csv` breaks.
BAD_ROWS_CONSTRAINTS = {
    "id": {"type": "integer", "unique": True},
    "age": {"type": "integer", "minimum": 0},
}


def bad_rows_csv(rows: int = 4999) -> str:
    """A CSV of ``rows`` data rows under ``id,age``, each with exactly one error.

    Row ``r`` (from 0): ``r % 1000 == 500`` has a third cell (extra-cell, no one column); else
    ``r % 10 == 0`` has an id that is no integer (type-error, id); else ``r % 3 == 0`` an age
    that is no integer (type-error, age); else the age -1 (constraint-error, age). With 4,999
    rows: 5 extra-cell, 495 id type-error, 1,500 age type-error, 2,999 constraint-error.
    """
    lines = ["id,age"]
    for r in range(rows):
        if r % 1000 == 500:
            lines.append(f"{r},5,extra")
        elif r % 10 == 0:
            lines.append(f"x{r},5")
        elif r % 3 == 0:
            lines.append(f"{r},x")
        else:
            lines.append(f"{r},-1")
    return "\n".join(lines) + "\n"
