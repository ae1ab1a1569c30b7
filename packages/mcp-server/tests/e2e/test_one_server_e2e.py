"""One server per workspace and per snapshot store: a second one refuses to start (exit 2)."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from mcp_secure_sandbox.exclusive import claim_directories, refuse_inside_claimed
from mcp_secure_sandbox.settings import ConfigError

_FLOCK = shutil.which("flock")

pytestmark = pytest.mark.slow  # every case > 5 s under -n 2 (measured)
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
    from test_shutdown_e2e import _raw_server, _start_sleeper

    ws, snaps = dirs
    with _raw_server(ws, snaps) as first:
        _start_sleeper(first, ws)
        first.send_signal(signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL
        proc = _second(ws, snaps)
    assert proc.returncode == 0, proc.stderr
    assert "serving on stdio" in proc.stderr


# A workspace or store inside or above another running server's workspace or store.


def _inside(
    proc: subprocess.CompletedProcess[str], pid: int, what: str, path: Path, outer: Path
) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"mcp-secure-sandbox: error: {what} {path} is inside {outer}, which another process "
        f"(pid {pid}) holds (another mcp-secure-sandbox server's workspace or snapshot "
        "directory, or anything that locked it with flock); stop it, or give this one a "
        "--workspace and --snapshots outside it"
    ]


def _contains(proc: subprocess.CompletedProcess[str], pid: int, what: str, path: Path) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"mcp-secure-sandbox: error: {what} {path} contains the workspace or snapshot directory "
        f"of another process (pid {pid}) (another mcp-secure-sandbox server, or anything that "
        "locked a directory inside it with flock); stop it, or give this one a --workspace and "
        "--snapshots that neither contain nor lie inside another server's"
    ]


def test_inside_or_above_a_served_workspace_or_store_is_refused(tmp_path: Path) -> None:
    """One first server (workspace ``outer/ws``, store ``snapshots``); each second one refused."""
    outer = tmp_path / "outer"
    ws, snaps = outer / "ws", tmp_path / "snapshots"
    other = tmp_path / "other-snapshots"
    (ws / "existing").mkdir(parents=True)
    with _first_server(ws, snaps) as first:
        pid = first.pid
        # A sub-directory of the workspace: new, existing, and with a missing parent (refused
        # before any directory is made: not "parent directory ... does not exist").
        for sub in (ws / "sub", ws / "existing", ws / "no" / "sub"):
            _inside(_second(sub, other), pid, "workspace", sub, ws)
        # Through a symbolic link (to outer) and "..": the ancestors are found resolved.
        (tmp_path / "alias").symlink_to(outer, target_is_directory=True)
        proc = _second(f"{tmp_path}/alias/ws/sub/../existing", other)
        assert proc.returncode == 2, proc.stderr
        assert f" is inside {ws}, which another process (pid {pid}) holds " in proc.stderr
        # A store inside the workspace; a workspace inside the store.
        _inside(
            _second(tmp_path / "ws2", ws / "snaps"), pid, "snapshot directory", ws / "snaps", ws
        )
        _inside(_second(snaps / "ws", other), pid, "workspace", snaps / "ws", snaps)
        # Parents: of the workspace, and of both.
        _contains(_second(outer, other), pid, "workspace", outer)
        _contains(_second(tmp_path / "ws2", tmp_path), pid, "snapshot directory", tmp_path)
    assert sorted(p.name for p in ws.iterdir()) == ["existing"]
    assert "ws" not in {p.name for p in snaps.iterdir()}
    assert not other.exists() and not (tmp_path / "ws2").exists()


def test_siblings_both_start_and_a_sub_directory_once_the_first_was_killed(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "a" / "ws"
    ws.mkdir(parents=True)
    with _first_server(ws, tmp_path / "a" / "snaps") as first:
        # Every ancestor from tmp_path up is shared by both.
        sibling = _second(tmp_path / "b", tmp_path / "b-snaps")
        first.send_signal(signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL
        inside = _second(ws / "sub", tmp_path / "sub-snaps")
    for proc in (sibling, inside):
        assert proc.returncode == 0, proc.stderr
        assert "serving on stdio" in proc.stderr and "error" not in proc.stderr


def test_a_workspace_inside_its_own_store_gets_wsnapshots_refusal(tmp_path: Path) -> None:
    """Not the lock's business: the claim skips its own directories and wsnapshot refuses (the
    store inside its own workspace: test_cli.py::test_workspace_overlapping_store_is_refused)."""
    (tmp_path / "s").mkdir()
    proc = _second(tmp_path / "s" / "ws", tmp_path / "s")
    assert proc.returncode == 2, proc.stderr
    assert "overlap (code in the workspace could edit it)" in proc.stderr
    assert "another process" not in proc.stderr


def _locks_of(pid: int) -> dict[str, str]:
    """The flocks of ``pid`` in /proc/locks: ``{"<maj>:<min>:<ino>": "READ" | "WRITE"}``."""
    found = {}
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[4] == str(pid):
            found[fields[5]] = fields[3]
    return found


def _key(path: Path) -> str:
    st = path.stat()
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"


def test_the_claim_shares_every_ancestor_but_the_root(tmp_path: Path) -> None:
    ws, snaps = tmp_path / "deep" / "ws", tmp_path / "snaps"
    ws.mkdir(parents=True)
    snaps.mkdir()
    claim = claim_directories(ws, snaps)
    try:
        locks = _locks_of(os.getpid())
        assert locks[_key(ws)] == "WRITE" and locks[_key(snaps)] == "WRITE"
        for ancestor in (tmp_path / "deep", tmp_path, *tmp_path.parents[:-1]):
            assert locks[_key(ancestor)] == "READ", ancestor
        # Not "/" (never a served directory; pysandbox says why --workspace / is refused).
        assert _key(Path("/")) not in locks
        assert claim.unlocked == []
        # An ancestor with a name that is a link: resolved first.
        (tmp_path / "alias").symlink_to(tmp_path / "deep", target_is_directory=True)
        (ws / "inner").mkdir()
        (tmp_path / "s2").mkdir()
        with pytest.raises(ConfigError, match=r"is inside .*/deep/ws, which another process"):
            claim_directories(tmp_path / "alias" / "ws" / "inner", tmp_path / "s2")
    finally:
        claim.release()
    assert _locks_of(os.getpid()) == {}


def test_a_missing_directory_inside_a_claimed_one_is_refused_before_it_is_made(
    dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    ws, snaps = dirs
    snaps.mkdir()
    claim = claim_directories(ws, snaps)
    try:
        for target, what in ((ws / "a" / "b", "workspace"), (snaps / "c", "snapshot directory")):
            args = (target, tmp_path / "free") if what == "workspace" else (tmp_path / "f", target)
            with pytest.raises(ConfigError, match=rf"^{what} {target} is inside "):
                refuse_inside_claimed(*args)
        refuse_inside_claimed(tmp_path / "free-ws", tmp_path / "free-snaps")  # siblings: fine
        refuse_inside_claimed(ws, snaps)  # existing directories: the claim decides
    finally:
        claim.release()
    refuse_inside_claimed(ws / "a" / "b", snaps / "c")  # released: nothing refused
    assert list(ws.iterdir()) == [] and not (snaps / "c").exists()


def test_an_ancestor_that_cannot_be_opened_is_skipped_not_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run as root the permission cannot be taken away: opening the ancestor is made to fail."""
    blind = tmp_path / "blind"
    ws, snaps = blind / "ws", blind / "snaps"
    ws.mkdir(parents=True)
    snaps.mkdir()
    real_open = os.open

    def open_(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(path) == blind:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)  # the module calls os.open
    claim = claim_directories(ws, snaps)
    try:
        assert claim.unlocked == [blind, blind]  # once per directory; logged once
        assert _locks_of(os.getpid())[_key(tmp_path)] == "READ"  # above it: locked again
        assert _key(blind) not in _locks_of(os.getpid())
    finally:
        claim.release()


def test_an_ancestor_locked_by_another_user_does_not_stop_the_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team: any user who can open /home or /tmp could ``flock -x`` it and stop every server.

    The holder here is this very process (another open file description of the directory); it
    is made to look like another user's, then like this user's (another server's: refused).
    """
    from mcp_secure_sandbox import exclusive

    parent = tmp_path / "shared"
    ws, snaps = parent / "ws", parent / "snaps"
    ws.mkdir(parents=True)
    snaps.mkdir()
    for locked in (parent, tmp_path):  # the nearest ancestor, and one further up
        fd = os.open(locked, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            monkeypatch.setattr(exclusive, "_of_another_user", lambda pid: True)
            refuse_inside_claimed(ws / "new", snaps / "new")  # the probe lets it pass too
            claim = claim_directories(ws, snaps)
            try:
                assert claim.contested == [(locked, os.getpid())] * 2  # once per directory
                locks = _locks_of(os.getpid())
                assert locks[_key(ws)] == locks[_key(snaps)] == "WRITE"
                above = [p for p in (parent, tmp_path, tmp_path.parent) if p != locked]
                assert all(locks.get(_key(p)) == "READ" for p in above)
            finally:
                claim.release()
            monkeypatch.setattr(exclusive, "_of_another_user", lambda pid: False)
            with pytest.raises(ConfigError, match=rf"is inside {locked}, which another process"):
                claim_directories(ws, snaps)
        finally:
            os.close(fd)


@pytest.mark.skipif(
    os.geteuid() != 0 or _FLOCK is None, reason="needs root (to lock as another user) and flock(1)"
)
def test_a_foreign_users_flock_on_an_ancestor_does_not_stop_start_up() -> None:
    """``flock -x`` by user nobody on the workspace's parent: the server starts and warns."""
    base = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        base.chmod(0o755)
        shared = base / "shared"
        shared.mkdir(mode=0o755)
        shared.chmod(0o755)
        holder = subprocess.Popen(  # flock(1) holds the lock itself, in its pid
            [_FLOCK or "flock", "-x", str(shared), "sh", "-c", "echo locked; exec sleep 600"],
            user=65534,
            group=65534,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline() == "locked\n"
            proc = _second(shared / "ws", shared / "snaps")
        finally:
            holder.kill()
            holder.wait(timeout=30)
            if holder.stdout is not None:
                holder.stdout.close()
        assert proc.returncode == 0, proc.stderr
        assert "serving on stdio" in proc.stderr
        assert f"{shared} is locked (flock) by pid {holder.pid} of another user" in proc.stderr
    finally:
        shutil.rmtree(base)
