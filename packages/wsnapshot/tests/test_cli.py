from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from wsnapshot.__main__ import main


def run(
    capsys: pytest.CaptureFixture[str], ws: Path, store: Path, *args: str
) -> tuple[int, object]:
    code = main(["--workspace", str(ws), "--store", str(store), *args])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else json.loads(err)


def test_cli_end_to_end(
    capsys: pytest.CaptureFixture[str],
    ws: Path,
    store_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (ws / "a.txt").write_text("one")
    code, info = run(capsys, ws, store_dir, "create", "-d", "first")
    assert code == 0
    assert isinstance(info, dict)
    assert info["description"] == "first"
    assert info["file_count"] == 1
    sid = info["id"]
    code, listing = run(capsys, ws, store_dir, "list")
    assert listing == [info]
    code, shown = run(capsys, ws, store_dir, "show", sid)
    assert isinstance(shown, dict)
    assert shown["entries"][0]["path"] == "a.txt"
    (ws / "a.txt").write_text("two")
    code, diff = run(capsys, ws, store_dir, "diff", sid)
    assert isinstance(diff, dict)
    assert diff["modified"] == ["a.txt"]
    code, report = run(capsys, ws, store_dir, "restore", sid)
    assert isinstance(report, dict)
    assert report["rewritten"] == ["a.txt"]
    assert (ws / "a.txt").read_text() == "one"
    out_file = tmp_path / "export.json"
    code, exported = run(capsys, ws, store_dir, "export", sid, "-o", str(out_file))
    size = out_file.stat().st_size
    assert exported == {"exported": sid, "file": str(out_file), "bytes": size}
    code, record = run(capsys, ws, store_dir, "export", sid)
    assert record == json.loads(out_file.read_text())
    assert isinstance(record, dict) and record["files"]["a.txt"]["encoding"] == "base64"
    code, sized = run(capsys, ws, store_dir, "export-size", sid)
    assert sized == {"id": sid, "bytes": size}
    code, state = run(capsys, ws, store_dir, "state")
    assert state == {"inconsistent": None, "cleared": False}
    marker = {
        "format": 1,
        "kind": "wsnapshot-inconsistent",
        "snapshot_id": sid,
        "error": "EIO: Input/output error",
        "at": "2026-12-01T00:00:00.000000Z",
        "journal": "restore.journal",
    }
    (store_dir / "inconsistent.json").write_text(json.dumps(marker))
    code, err = run(capsys, ws, store_dir, "create")
    assert code == 1 and isinstance(err, dict)
    assert err["error"]["type"] == "WorkspaceInconsistent"
    assert sid in err["error"]["message"] and "wsnapshot restore" in err["error"]["message"]
    code, state = run(capsys, ws, store_dir, "state")
    assert isinstance(state, dict) and sid in state["inconsistent"]
    code, state = run(capsys, ws, store_dir, "state", "--clear")
    assert state == {"inconsistent": None, "cleared": True}
    code, gone = run(capsys, ws, store_dir, "delete", sid)
    assert gone == {"deleted": sid}
    code, imported = run(capsys, ws, store_dir, "import", str(out_file))
    assert isinstance(imported, dict)
    assert imported["id"] == sid
    run(capsys, ws, store_dir, "delete", sid)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(out_file.read_bytes())))
    code, imported = run(capsys, ws, store_dir, "import", "-")
    assert code == 0


def test_cli_errors(
    capsys: pytest.CaptureFixture[str], ws: Path, store_dir: Path, tmp_path: Path
) -> None:
    code, err = run(capsys, ws, store_dir, "restore", "../etc")
    assert code == 1
    assert err == {
        "error": {
            "type": "InvalidSnapshotId",
            "message": "invalid snapshot id '../etc': expected a UUID such as "
            "123e4567-e89b-12d3-a456-426614174000; "
            "`wsnapshot --workspace W --store S list` lists the snapshot ids",
        }
    }
    code, err = run(capsys, ws, store_dir, "restore", "123e4567-e89b-12d3-a456-426614174000")
    assert code == 1
    assert err == {
        "error": {
            "type": "SnapshotNotFound",
            "message": "snapshot 123e4567-e89b-12d3-a456-426614174000 not found; "
            "`wsnapshot --workspace W --store S list` lists the snapshot ids",
        }
    }
    code, err = run(capsys, ws, store_dir, "delete", "123e4567-e89b-12d3-a456-426614174000")
    assert code == 1
    assert isinstance(err, dict)
    assert err["error"]["type"] == "SnapshotNotFound"
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    code, err = run(capsys, ws, store_dir, "import", str(bad))
    assert isinstance(err, dict)
    assert err["error"]["type"] == "InvalidRecord"
    (ws / "big").write_bytes(b"x" * 10)
    code = main(["--workspace", str(ws), "--store", str(store_dir), "--max-bytes", "5", "create"])
    assert code == 1
    assert "SnapshotTooLarge" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["--workspace", str(ws), "--store", str(store_dir), "frobnicate"])
    assert exit_info.value.code == 2


@pytest.mark.e2e
def test_console_entry_point_runs_as_module(ws: Path, store_dir: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "wsnapshot",
            "--workspace",
            str(ws),
            "--store",
            str(store_dir),
            "list",
        ],
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == []


def test_cli_snapshots_is_an_alias_of_store(
    capsys: pytest.CaptureFixture[str], ws: Path, store_dir: Path
) -> None:
    (ws / "a.txt").write_text("one")
    assert main(["--workspace", str(ws), "--snapshots", str(store_dir), "create"]) == 0
    created = json.loads(capsys.readouterr().out)
    code, listing = run(capsys, ws, store_dir, "list")
    assert code == 0
    assert listing == [created]


def test_cli_gc_deletes_only_blobs_no_snapshot_names(
    capsys: pytest.CaptureFixture[str], ws: Path, store_dir: Path
) -> None:
    (ws / "kept.txt").write_text("kept")
    code, info = run(capsys, ws, store_dir, "create")
    assert code == 0
    blobs = store_dir / "blobs"
    orphans = []
    for data in (b"left by a writer killed before its manifest", b"and another"):
        sha = hashlib.sha256(data).hexdigest()
        (blobs / sha[:2]).mkdir(exist_ok=True)
        (blobs / sha[:2] / sha[2:]).write_bytes(data)
        orphans.append(blobs / sha[:2] / sha[2:])
    code, report = run(capsys, ws, store_dir, "gc")
    assert code == 0
    assert isinstance(report, dict)
    assert (report["manifests"], report["kept_blobs"], report["deleted_blobs"]) == (1, 1, 2)
    assert report["deleted_bytes"] == len(b"left by a writer killed before its manifest") + len(
        b"and another"
    )
    assert not any(p.exists() for p in orphans)
    code, again = run(capsys, ws, store_dir, "gc")
    assert isinstance(again, dict) and again["deleted_blobs"] == 0
    assert isinstance(info, dict)
    code, _restored = run(capsys, ws, store_dir, "restore", info["id"])
    assert code == 0 and (ws / "kept.txt").read_text() == "kept"


def test_cli_gc_of_an_s3_store_leaves_its_writer_serving(
    capsys: pytest.CaptureFixture[str], s3_url: str, tmp_path: Path
) -> None:
    from wsnapshot import SnapshotStore

    ws = tmp_path / "ws"
    ws.mkdir()
    writer = SnapshotStore(ws, s3_url, workers=1, state_dir=tmp_path / "state")
    (ws / "a").write_text("alpha")
    first = writer.create("first").id
    (ws / "a").write_text("alpha 2")
    writer.create("second")
    writer.delete(first)
    code, report = _run_s3(capsys, ws, s3_url)
    assert code == 0, report
    assert isinstance(report, dict) and report["manifests"] == 1
    # a reader collected: the writer was not taken over and keeps saving
    assert writer.served_elsewhere is None
    (ws / "b").write_text("beta")
    writer.create("third")
    assert [i.description for i in writer.list()] == ["second", "third"]


def _run_s3(capsys: pytest.CaptureFixture[str], ws: Path, url: str) -> tuple[int, object]:
    code = main(["--workspace", str(ws), "--store", url, "gc"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else json.loads(err)


@pytest.mark.parametrize(
    "spelling",
    ["as given", "trailing slash", "through a symbolic link", "with a dot-dot"],
)
def test_cli_restore_refuses_a_workspace_another_process_holds(
    capsys: pytest.CaptureFixture[str], ws: Path, store_dir: Path, tmp_path: Path, spelling: str
) -> None:
    """A server holds an exclusive flock on its workspace directory: a restore from the command
    line under it is refused, by any spelling of the path, and changes nothing."""
    import fcntl
    import os

    (ws / "a.txt").write_text("one")
    code, info = run(capsys, ws, store_dir, "create")
    assert code == 0 and isinstance(info, dict)
    (ws / "a.txt").write_text("two")
    link = tmp_path / "link"
    link.symlink_to(ws)
    given = {
        "as given": str(ws),
        "trailing slash": f"{ws}/",
        "through a symbolic link": str(link),
        "with a dot-dot": str(ws / ".." / ws.name),
    }[spelling]
    holder = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        code = main(["--workspace", given, "--store", str(store_dir), "restore", info["id"]])
        _out, err = capsys.readouterr()
        assert code == 1
        error = json.loads(err)["error"]
        assert error["type"] == "WorkspaceInUse"
        assert "is in use" in error["message"] and "stop that process" in error["message"]
        assert (ws / "a.txt").read_text() == "two"  # nothing restored
    finally:
        os.close(holder)
    # Released (the holder's descriptor closed): the same restore goes through.
    code, report = run(capsys, ws, store_dir, "restore", info["id"])
    assert code == 0 and isinstance(report, dict)
    assert (ws / "a.txt").read_text() == "one"


def test_hold_workspace_is_exclusive_and_names_an_unusable_path(tmp_path: Path) -> None:
    from wsnapshot import StoreConfigError, WorkspaceInUse, hold_workspace

    with hold_workspace(tmp_path):
        with pytest.raises(WorkspaceInUse) as held, hold_workspace(tmp_path):
            pytest.fail("held twice")
        assert held.value.workspace == str(tmp_path)
    with hold_workspace(tmp_path):  # released at the end of the block
        pass
    (tmp_path / "file").write_text("x")
    for bad in (tmp_path / "missing", tmp_path / "file"):
        with (
            pytest.raises(StoreConfigError, match="cannot open the workspace"),
            hold_workspace(bad),
        ):
            pytest.fail("held a path that is no directory")
