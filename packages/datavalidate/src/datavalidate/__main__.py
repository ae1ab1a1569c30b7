"""``python -m datavalidate``: the command line (see :mod:`datavalidate._cli`)."""

from __future__ import annotations

import sys

from datavalidate._cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
