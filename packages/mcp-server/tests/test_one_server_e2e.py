"""One server per workspace and per snapshot store: a second one refuses to start (exit 2)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mcp_secure_sandbox.exclusive import claim_directories
from mcp_secure_sandbox.settings import ConfigError

COMMAND = [sys.executable, "-m", "mcp_secure_sandbox", "--require-layers", "none"]


def _args(workspace: Path | str, snapshots: Path | str) -> list[str]:
    return [*COMMAND, "--workspace", str(workspace), "--snapshots", str(snapshots)]


@contextmanager
def _first_server(workspace: Path, snapshots: Path) -> Iterator[subprocess.Popen[str]]:
    """A server on stdio (its stdin kept open), returned once it logged that it is serving."""
    proc = subprocess.Popen(
        _args(workspace, snapshots),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        seen: list[str] = []
        for line in proc.stderr:  # ends when the server exits
            seen.append(line)
            if "serving on stdio" in line:
                break
        else:
            pytest.fail(f"the first server did not start: {''.join(seen)}")
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()
        if proc.stdin is not None:
            proc.stdin.close()


def _second(workspace: Path | str, snapshots: Path | str) -> subprocess.CompletedProcess[str]:
    """A second server with stdin at end of file: exit 0 once it started, 2 when refused."""
    return subprocess.run(
        _args(workspace, snapshots),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _refused(proc: subprocess.CompletedProcess[str], first_pid: int, what: str, path: Path) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        f"mcp-secure-sandbox: error: another process (pid {first_pid}) holds {what} {path} "
        "(another mcp-secure-sandbox server using it, or anything that locked it with flock); "
        "stop it, or give this one its own --workspace and --snapshots"
    ]


def test_same_workspace_and_store_is_refused(dirs: tuple[Path, Path]) -> None:
    ws, snaps = dirs
    with _first_server(ws, snaps) as first:
        _refused(_second(ws, snaps), first.pid, "workspace", ws)
    assert not (ws / ".lock").exists()
    assert list(ws.iterdir()) == []  # nothing written into the workspace


def test_same_workspace_other_store_is_refused_and_its_new_store_removed(
    dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    ws, snaps = dirs
    other = tmp_path / "other-snapshots"
    with _first_server(ws, snaps) as first:
        _refused(_second(ws, other), first.pid, "workspace", ws)
    assert not other.exists()


def test_other_workspace_same_store_is_refused(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    ws, snaps = dirs
    other = tmp_path / "other-workspace"
    with _first_server(ws, snaps) as first:
        _refused(_second(other, snaps), first.pid, "snapshot directory", snaps)
    assert not other.exists()


@pytest.mark.parametrize("spelling", ["symlink", "trailing slash", "dot-dot", "dot"])
def test_another_spelling_of_the_workspace_is_refused(
    dirs: tuple[Path, Path], tmp_path: Path, spelling: str
) -> None:
    ws, snaps = dirs
    other_snaps = tmp_path / "other-snapshots"
    if spelling == "symlink":
        # A link to the directory's parent (a link as the workspace itself is refused).
        (tmp_path / "link").symlink_to(tmp_path, target_is_directory=True)
        alias: Path | str = tmp_path / "link" / ws.name
    elif spelling == "trailing slash":
        alias = f"{ws}/"
    elif spelling == "dot-dot":
        (tmp_path / "sub").mkdir()
        alias = f"{tmp_path}/sub/../{ws.name}"
    else:
        alias = f"{ws}/."
    with _first_server(ws, snaps) as first:
        proc = _second(alias, other_snaps)
    assert proc.returncode == 2, proc.stderr
    assert f"another process (pid {first.pid}) holds workspace" in proc.stderr
    assert not other_snaps.exists()


def test_a_second_server_starts_at_once_after_the_first_was_killed(
    dirs: tuple[Path, Path],
) -> None:
    ws, snaps = dirs
    with _first_server(ws, snaps) as first:
        first.send_signal(signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL
        proc = _second(ws, snaps)
    assert proc.returncode == 0, proc.stderr
    assert "serving on stdio" in proc.stderr
    assert "error" not in proc.stderr


def test_the_lock_is_per_directory_not_per_path(tmp_path: Path) -> None:
    ws, snaps, other = tmp_path / "ws", tmp_path / "s", tmp_path / "s2"
    for d in (ws, snaps, other):
        d.mkdir()
    claim = claim_directories(ws, snaps)
    try:
        with pytest.raises(ConfigError, match=rf"\(pid {os.getpid()}\) holds workspace"):
            claim_directories(tmp_path / "." / "ws", other)
        # A refused claim holds nothing: the other store is free.
        (tmp_path / "ws2").mkdir()
        claim_directories(tmp_path / "ws2", other).release()
    finally:
        claim.release()
    # Released: a new claim on the same directories succeeds.
    claim_directories(ws, snaps).release()
    # One directory for both is claimed once (wsnapshot refuses the overlap itself).
    claim_directories(ws, tmp_path / "." / "ws").release()


def test_a_killed_servers_runs_hold_no_lock(dirs: tuple[Path, Path]) -> None:
    """A run in progress (its zygote, its child) when the server is SIGKILLed holds no lock."""
    from test_behaviour import _raw_server, _start_sleeper

    ws, snaps = dirs
    with _raw_server(ws, snaps) as first:
        _start_sleeper(first, ws)
        first.send_signal(signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL
        proc = _second(ws, snaps)
    assert proc.returncode == 0, proc.stderr
    assert "serving on stdio" in proc.stderr
