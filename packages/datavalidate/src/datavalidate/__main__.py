"""``python -m datavalidate``: the command line (see :mod:`datavalidate._cli`)."""

from __future__ import annotations

from datavalidate._cli import console

__all__: list[str] = []

if __name__ == "__main__":
    console()
