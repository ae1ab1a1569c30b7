from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

INSPECTOR_DIR = Path(__file__).resolve().parent / "inspector"
INSPECTOR = INSPECTOR_DIR / "node_modules" / ".bin" / "mcp-inspector"


@pytest.fixture(scope="session")
def inspector_bin() -> Path:
    if not INSPECTOR.exists():
        pytest.fail(f"{INSPECTOR} is missing: run `npm ci` in {INSPECTOR_DIR} (nox -s e2e does)")
    if shutil.which("node") is None:
        pytest.fail("node is not on PATH")
    return INSPECTOR


Inspect = Callable[..., Any]


@pytest.fixture
def inspect(inspector_bin: Path, tmp_path: Path) -> Inspect:
    """Call the MCP Inspector CLI against a fresh server; return the parsed JSON it prints."""
    workspace = tmp_path / "workspace"
    snapshots = tmp_path / "snapshots"

    def call(method: str, *args: str, expect_failure: bool = False) -> Any:
        cmd = [
            str(inspector_bin),
            "--cli",
            "-e",
            f"SANDBOX_WORKSPACE={workspace}",
            "-e",
            f"SANDBOX_SNAPSHOTS={snapshots}",
            sys.executable,
            "-m",
            "mcp_secure_sandbox",
            "--method",
            method,
            *args,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if expect_failure:
            assert proc.returncode != 0, proc.stdout
            return proc.stdout + proc.stderr
        assert proc.returncode == 0, f"{cmd}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
        return json.loads(proc.stdout)

    call.workspace = workspace  # type: ignore[attr-defined]
    return call
