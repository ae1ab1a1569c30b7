"""``--snapshots s3://BUCKET/PREFIX``: the snapshot tools on S3-compatible storage, in process
(``mcp.Client(server)``) against a moto server on loopback that this module starts once."""

from __future__ import annotations

import base64
import json
import os
import stat
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from starlette.testclient import TestClient

from mcp_secure_sandbox import state as state_module
from mcp_secure_sandbox.http_transport import BearerAuth
from mcp_secure_sandbox.server import create_server
from mcp_secure_sandbox.settings import (
    ConfigError,
    Settings,
    prepare_directories,
    settings_from_args,
)
from wsnapshot.testing import CutProxy, moto_server

pytest.importorskip("obstore", reason="the [s3] extra is missing")

BUCKET = "mcp-s3-tests"
SECRET = "wJalrXUtnFEMI-K7MDENG-SECRETKEY"


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A moto S3 server on loopback with ``BUCKET``; the ``AWS_*`` environment pointing at it.

    The server is ``wsnapshot.testing.moto_server`` (the one home wsnapshot's tests share);
    the secret key is :data:`SECRET`, which no answer may show.
    """
    logs = tmp_path_factory.mktemp("moto") / "moto.log"
    with moto_server(BUCKET, log=logs) as server, pytest.MonkeyPatch.context() as mp:
        server.patch_environment(mp, access_key_id="testing-key-id", secret_access_key=SECRET)
        yield server.url


def _tree(root: Path) -> dict[str, tuple[Any, ...]]:
    out: dict[str, tuple[Any, ...]] = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        body = p.read_bytes() if stat.S_ISREG(st.st_mode) else None
        out[str(p.relative_to(root))] = (st.st_mode, st.st_mtime_ns, body)
    return out


async def _tool(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, f"{name}: {result.content}"
    assert result.structured_content is not None
    return dict(result.structured_content)


async def _tool_error(client: Client, name: str, **arguments: Any) -> str:
    result = await client.call_tool(name, arguments)
    assert result.is_error, f"{name} succeeded: {result.structured_content}"
    return " ".join(getattr(c, "text", "") for c in result.content)


def _settings(base: Path, name: str, url: str) -> Settings:
    ws = base / name / "workspace"
    ws.mkdir(parents=True)
    parsed = settings_from_args(["--workspace", str(ws), "--snapshots", url], environ={})
    # the local state directory beside the workspace (./sandbox_snapshots by default)
    return prepare_directories(
        replace(parsed, snapshots=base / name / "state", require_layers=(), execution="spawn")
    )


def test_a_second_server_lists_and_restores_the_first_ones_snapshots(
    s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state_module, "FENCE_CHECK_S", 0.0)  # every call checks the fence
    url = f"s3://{BUCKET}/fleet/{uuid.uuid4().hex}"
    first, second = _settings(tmp_path, "one", url), _settings(tmp_path, "two", url)
    assert first.snapshots_url == url
    (first.workspace / "data").mkdir()
    (first.workspace / "data" / "in.csv").write_bytes(b"a,b\n1,2\n")
    (first.workspace / "blob.bin").write_bytes(os.urandom(200_000))
    (first.workspace / "blob.bin").chmod(0o600)
    os.utime(first.workspace / "data" / "in.csv", ns=(1, 1_700_000_000_123_456_789))

    async def scenario() -> None:
        app1, state1 = create_server(first)
        async with Client(app1) as one:
            made = await _tool(one, "create_state_snapshot", description="from one")
            expected = _tree(first.workspace)
            app2, _state2 = create_server(second)  # takes the workspace over
            async with Client(app2) as two:
                listing = await _tool(two, "list_state_snapshots")
                assert [s["id"] for s in listing["snapshots"]] == [made["id"]]
                assert _tree(second.workspace) == {}
                await _tool(two, "restore_state_snapshot", snapshot_id=made["id"])
                assert _tree(second.workspace) == expected  # bytes, modes, mtimes
                # a diff runs in the confined worker, from the mirrored manifest
                diff = await _tool(two, "diff_state_snapshots", snapshot_id=made["id"])
                assert diff["added"] == diff["removed"] == diff["modified"] == []
                status = await two.read_resource("sandbox://status")
                text = status.contents[0].text  # type: ignore[union-attr]
                document = json.loads(text)
                assert document["snapshot_store"] == {
                    "backend": "s3",
                    "bucket": BUCKET,
                    "served_elsewhere": None,
                    "error": None,
                }
                assert document["snapshot_count"] == 1
                assert SECRET not in text
                assert "testing-key-id" not in text
                # the first server lost the fence: a call that changes only its workspace
                # is refused too (the fence is checked first), and its health fails
                assert state1.health() is None
                error = await _tool_error(one, "write_workspace_file", path="late.txt", content="x")
                assert "this workspace is now served elsewhere; snapshots since" in error
                assert not (first.workspace / "late.txt").exists()
                reason = state1.health()
                assert reason is not None
                assert reason in error
                # and so on every snapshot call
                for name, args in (
                    ("create_state_snapshot", {}),
                    ("list_state_snapshots", {}),
                    ("restore_state_snapshot", {"snapshot_id": made["id"]}),
                ):
                    error = await _tool_error(one, name, **args)
                    assert "this workspace is now served elsewhere; snapshots since" in error
                    assert SECRET not in error
                gone = json.loads(
                    (await one.read_resource("sandbox://status")).contents[0].text  # type: ignore[union-attr]
                )
                assert gone["snapshot_store"]["served_elsewhere"] == state1.health()
                assert gone["snapshot_store"]["error"] == state1.health()
                assert gone["snapshot_count"] is None
                # the second one keeps saving, exports in chunks (ranged reads) and deletes
                await _tool(two, "create_state_snapshot", description="from two")
                assert (await _tool(two, "list_state_snapshots"))["count"] == 2
                export = await _tool(two, "export_state_snapshot", snapshot_id=made["id"])
                assert export["record"] is None and export["chunk_count"] >= 2
                parts = []
                for k in range(export["chunk_count"]):
                    read = await two.read_resource(f"sandbox://exports/{made['id']}/{k}")
                    parts.append(base64.b64decode(read.contents[0].blob))  # type: ignore[union-attr]
                record = json.loads(b"".join(parts))
                for path, entry in record["files"].items():
                    if entry["type"] == "file":
                        content = base64.b64decode(entry["content"])
                        assert content == expected[path][2], path
                await _tool(two, "delete_state_snapshot", snapshot_id=made["id"])
                listing = await _tool(two, "list_state_snapshots")
                assert [s["description"] for s in listing["snapshots"]] == ["from two"]

    anyio.run(scenario)


@pytest.mark.parametrize(
    ("value", "wanted"),
    [
        ("s3://KEYID:SECRETVALUE@bucket/ws", "credentials never go in the URL"),
        ("s3://SECRETVALUE@bucket/ws", "credentials never go in the URL"),
        ("s3://bucket", "the prefix is missing"),
        ("s3://bucket/../x", "not allowed"),
        ("s3://Bad_Bucket/x", "not a valid bucket name"),
    ],
)
def test_bad_s3_urls_are_configuration_errors(value: str, wanted: str) -> None:
    with pytest.raises(ConfigError) as err:
        settings_from_args(["--snapshots", value], environ={})
    assert str(err.value).startswith("--snapshots: ")
    assert wanted in str(err.value)
    assert "SECRETVALUE" not in str(err.value)
    assert "give s3://BUCKET/PREFIX" in str(err.value)


def test_a_directory_stays_a_directory() -> None:
    parsed = settings_from_args(["--snapshots", "some/dir"], environ={})
    assert parsed.snapshots_url is None
    assert parsed.snapshots == Path.cwd() / "some" / "dir"
    from_env = settings_from_args([], environ={"SANDBOX_SNAPSHOTS": "s3://bucket-a/w"})
    assert from_env.snapshots_url == "s3://bucket-a/w"
    assert from_env.snapshots == Path.cwd() / "sandbox_snapshots"


def test_healthz_fails_with_the_reason() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the health check never reaches the app")

    reason: list[str | None] = [None]
    client = TestClient(BearerAuth(app, "token-0123456789abcdef", lambda: reason[0]))
    assert client.get("/healthz").json() == {"status": "ok"}
    reason[0] = "this workspace is now served elsewhere; snapshots since T were not saved"
    answer = client.get("/healthz")
    assert answer.status_code == 503
    assert answer.json() == {"status": "unavailable", "reason": reason[0]}


def test_an_outage_keeps_the_workspace_serving_and_refuses_snapshot_calls(
    s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wsnapshot import _s3

    monkeypatch.setattr(_s3, "_RETRIES", 0)
    monkeypatch.setattr(state_module, "FENCE_CHECK_S", 0.0)
    proxy = CutProxy(s3_endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    url = f"s3://{BUCKET}/outage/{uuid.uuid4().hex}"
    settings = _settings(tmp_path, "one", url)
    (settings.workspace / "f.txt").write_text("saved")

    async def scenario() -> None:
        app, _state = create_server(settings)
        async with Client(app) as client:
            saved = await _tool(client, "create_state_snapshot", description="before")
            proxy.cut()
            # the workspace keeps working (the fence check does not stop a call)
            wrote = await _tool(client, "write_workspace_file", path="f.txt", content="edited")
            assert wrote["bytes_written"] == 6
            ran = await _tool(client, "run_sandbox_code", code="print(open('f.txt').read())")
            assert (ran["status"], ran["stdout"]) == ("ok", "edited\n")
            for name, args in (
                ("create_state_snapshot", {}),
                ("restore_state_snapshot", {"snapshot_id": saved["id"]}),
                ("list_state_snapshots", {}),
            ):
                error = await _tool_error(client, name, **args)
                assert f"the snapshot store {url} is unavailable" in error, error
                assert SECRET not in error
            assert (settings.workspace / "f.txt").read_text() == "edited"  # restore refused
            status = await client.read_resource("sandbox://status")
            document = json.loads(status.contents[0].text)  # type: ignore[union-attr]
            assert "is unavailable" in document["snapshot_store"]["error"]
            proxy.restore()
            await _tool(client, "create_state_snapshot", description="after")
            assert (await _tool(client, "list_state_snapshots"))["count"] == 2

    anyio.run(scenario)


def test_an_unreachable_store_at_start_serves_runs_and_recovers(
    s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_secure_sandbox import store_handle
    from wsnapshot import _s3

    monkeypatch.setattr(_s3, "_RETRIES", 0)
    monkeypatch.setattr(state_module, "FENCE_CHECK_S", 0.0)
    monkeypatch.setattr(store_handle, "REOPEN_S", 0.0)
    proxy = CutProxy(s3_endpoint)
    proxy.cut()  # the bucket is unreachable before the server starts
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    url = f"s3://{BUCKET}/late/{uuid.uuid4().hex}"
    settings = _settings(tmp_path, "one", url)
    (settings.workspace / "f.txt").write_text("kept")

    async def metrics(client: Client) -> dict[str, Any]:
        return dict((await _tool(client, "get_sandbox_metrics"))["snapshot_store"])

    async def status(client: Client) -> dict[str, Any]:
        got = await client.read_resource("sandbox://status")
        return dict(json.loads(got.contents[0].text)["snapshot_store"])  # type: ignore[union-attr]

    async def scenario() -> None:
        app, _state = create_server(settings)  # starts: no configuration error
        async with Client(app) as client:
            ran = await _tool(client, "run_sandbox_code", code="print(open('f.txt').read())")
            assert (ran["status"], ran["stdout"]) == ("ok", "kept\n")
            await _tool(client, "write_workspace_file", path="g.txt", content="new")
            for name, args in (
                ("create_state_snapshot", {}),
                ("restore_state_snapshot", {"snapshot_id": str(uuid.uuid4())}),
                ("list_state_snapshots", {}),
                ("delete_state_snapshot", {"snapshot_id": str(uuid.uuid4())}),
            ):
                error = await _tool_error(client, name, **args)
                assert "the workspace is not being saved: the snapshot store" in error, error
                assert f"the snapshot store {url} is unavailable" in error, error
                assert SECRET not in error
            assert (settings.workspace / "g.txt").read_text() == "new"
            shown = await status(client)
            assert (shown["backend"], shown["bucket"]) == ("s3", BUCKET)
            assert shown["error"].startswith("the workspace is not being saved")
            assert SECRET not in json.dumps(shown)
            figures = await metrics(client)
            assert figures["saving"] is False
            assert figures["error"].startswith("the workspace is not being saved")
            proxy.restore()  # the bucket is back: the next call opens the store
            saved = await _tool(client, "create_state_snapshot", description="late")
            assert (await _tool(client, "list_state_snapshots"))["count"] == 1
            assert await metrics(client) == {"backend": "s3", "saving": True, "error": None}
            assert (await status(client))["error"] is None
            (settings.workspace / "f.txt").write_text("changed")
            await _tool(client, "restore_state_snapshot", snapshot_id=saved["id"])
            assert (settings.workspace / "f.txt").read_text() == "kept"

    anyio.run(scenario)


def test_an_interrupted_restore_with_an_unreachable_store_refuses_runs(
    s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wsnapshot import _s3

    monkeypatch.setattr(_s3, "_RETRIES", 0)
    proxy = CutProxy(s3_endpoint)
    proxy.cut()
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    settings = _settings(tmp_path, "one", f"s3://{BUCKET}/journal/{uuid.uuid4().hex}")
    (settings.snapshots / "restore.journal").write_text("{}")  # a restore killed half-way

    async def scenario() -> None:
        app, _state = create_server(settings)
        async with Client(app) as client:
            error = await _tool_error(client, "run_sandbox_code", code="print(1)")
            assert "a restore was interrupted (restore.journal" in error, error
            assert "not being saved" in error

    anyio.run(scenario)


@pytest.fixture(params=["local", "s3"])
def either(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """Settings of a server whose snapshots are in a local directory or in the moto bucket."""
    if request.param == "s3":
        request.getfixturevalue("s3_endpoint")
        return _settings(tmp_path, "one", f"s3://{BUCKET}/suite/{uuid.uuid4().hex}")
    ws = tmp_path / "one" / "workspace"
    ws.mkdir(parents=True)
    parsed = settings_from_args(
        ["--workspace", str(ws), "--snapshots", str(tmp_path / "one" / "store")], environ={}
    )
    return prepare_directories(replace(parsed, require_layers=(), execution="spawn"))


def test_the_snapshot_tools_suite_on_both_backends(either: Settings) -> None:
    """Every snapshot tool and resource, good and bad arguments, the same on both backends."""
    workspace = either.workspace

    async def run(client: Client, code: str) -> dict[str, Any]:
        return await _tool(client, "run_sandbox_code", code=code)

    async def scenario() -> None:
        app, state = create_server(either)
        assert state.store.backend == ("local" if either.snapshots_url is None else "s3")
        async with Client(app) as client:
            await run(client, "open('a.txt', 'w').write('first')")
            info = await _tool(client, "create_state_snapshot", description="after first")
            assert (info["file_count"], info["description"]) == (1, "after first")
            await run(client, "open('a.txt', 'w').write('second')\nopen('b.txt', 'w').write('n')")
            diff = await _tool(client, "diff_state_snapshots", snapshot_id=info["id"])
            assert (diff["added"], diff["modified"]) == (["b.txt"], ["a.txt"])
            listing = await _tool(client, "list_state_snapshots")
            assert [s["id"] for s in listing["snapshots"]] == [info["id"]]
            report = await _tool(client, "restore_state_snapshot", snapshot_id=info["id"])
            assert (report["deleted"], report["rewritten"]) == (["b.txt"], ["a.txt"])
            assert (await run(client, "print(open('a.txt').read())"))["stdout"] == "first\n"
            exported = await _tool(client, "export_state_snapshot", snapshot_id=info["id"])
            assert exported["resource_uri"] is None
            assert "first" in json.dumps(exported["record"])
            manifest = await client.read_resource(f"sandbox://snapshots/{info['id']}")
            assert "a.txt" in manifest.contents[0].text  # type: ignore[union-attr]
            (workspace / "big.bin").write_bytes(os.urandom(300_000))
            big = await _tool(client, "create_state_snapshot", description="big")
            chunked = await _tool(client, "export_state_snapshot", snapshot_id=big["id"])
            assert chunked["record"] is None and chunked["chunk_count"] >= 2
            parts = []
            for k in range(chunked["chunk_count"]):
                read = await client.read_resource(f"sandbox://exports/{big['id']}/{k}")
                parts.append(base64.b64decode(read.contents[0].blob))  # type: ignore[union-attr]
            record = json.loads(b"".join(parts))
            got = base64.b64decode(record["files"]["big.bin"]["content"])
            assert got == (workspace / "big.bin").read_bytes()
            diff2 = await _tool(
                client, "diff_state_snapshots", snapshot_id=info["id"], other_id=big["id"]
            )
            assert (diff2["added"], diff2["modified"]) == (["big.bin"], [])
            deleted = await _tool(client, "delete_state_snapshot", snapshot_id=info["id"])
            assert deleted == {
                "deleted": info["id"],
                "description": "after first",
                "created_at": info["created_at"],
                "remaining": 1,
            }
            for name, args in (
                ("restore_state_snapshot", {"snapshot_id": info["id"]}),
                ("restore_state_snapshot", {"snapshot_id": "../../etc"}),
                ("delete_state_snapshot", {"snapshot_id": ""}),
                ("diff_state_snapshots", {"snapshot_id": "not-a-uuid"}),
                ("export_state_snapshot", {"snapshot_id": str(uuid.uuid4())}),
            ):
                assert "snapshot_id" in await _tool_error(client, name, **args), name
            status = await client.read_resource("sandbox://status")
            document = json.loads(status.contents[0].text)  # type: ignore[union-attr]
            assert document["snapshot_count"] == 1
            assert document["snapshot_store"]["error"] is None
            figures = await _tool(client, "get_sandbox_metrics")
            assert figures["snapshot_store"]["saving"] is True

    anyio.run(scenario)
    assert (workspace / "a.txt").read_text() == "first"
