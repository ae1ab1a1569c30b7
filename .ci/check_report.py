"""Fail CI unless every nox session that was selected passed and tests ran on every Python.

Reads the JSON report written by ``nox --report``. A skipped session (for example an interpreter
missing on the CI machine) is a failure here, and so is a run in which no ``tests`` session ran.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REQUIRED_PYTHONS = {"3.10", "3.11", "3.12", "3.13"}


def main(path: str) -> int:
    """Check the nox report at ``path``; return the exit status (0 when everything passed)."""
    report = json.loads(Path(path).read_text(encoding="utf-8"))
    sessions = report.get("sessions", [])
    problems: list[str] = []
    tests_pythons: set[str] = set()
    for entry in sessions:
        name = entry.get("signatures", [entry.get("name")])[0]
        result = entry.get("result")
        if result != "success":
            problems.append(f"{name}: {result}")
        if str(entry.get("name")) == "tests" and result == "success":
            python = entry.get("args", {}).get("python") or name.split("-", 1)[-1].split("(")[0]
            tests_pythons.add(str(python))
    if not any(str(e.get("name")) == "tests" for e in sessions):
        problems.append("no tests session ran")
    missing = REQUIRED_PYTHONS - tests_pythons
    if missing:
        problems.append(f"no successful tests session on Python {', '.join(sorted(missing))}")
    print(f"nox report: {len(sessions)} sessions, tests passed on {sorted(tests_pythons)}")
    for problem in problems:
        print(f"FAIL {problem}")
    passed = sum(1 for e in sessions if e.get("result") == "success")
    print(f"sessions: {passed} passed, {len(sessions) - passed} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
