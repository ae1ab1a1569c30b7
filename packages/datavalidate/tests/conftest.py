from __future__ import annotations

import pathlib
import sys

# --import-mode=importlib does not put this folder on sys.path; the helper module needs it.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
