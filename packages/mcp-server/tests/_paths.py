"""Where things are, for tests in any folder under ``tests/`` (``e2e/``, ``regressions/``)."""

from __future__ import annotations

from pathlib import Path

#: This folder (``tests/``): the helpers' and fake worker's home.
TESTS_DIR = Path(__file__).resolve().parent
#: The package folder (``packages/mcp-server``): README, examples.
PACKAGE_DIR = TESTS_DIR.parent
#: The repository checkout (``noxfile.py``, ``redteam/``); absent from an unpacked sdist.
REPO_ROOT = PACKAGE_DIR.parents[1]
_SDIST_REDTEAM = TESTS_DIR / "data" / "redteam"
#: The red-team corpora and findings: the sdist's copy (``tests/data/redteam``), else the
#: repository's ``redteam/`` (their one home).
REDTEAM_DIR = _SDIST_REDTEAM if _SDIST_REDTEAM.is_dir() else REPO_ROOT / "redteam"
