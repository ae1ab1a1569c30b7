"""The real server over streamable HTTP: bearer auth, Host checks, and the token never shown."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

TOKEN = "e2e-token-" + "7f3a9c2b4d5e6f708192a3b4c5d6e7f8"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server(dirs: tuple[Path, Path], tmp_path: Path) -> Iterator[tuple[str, Path]]:
    workspace, snapshots = dirs
    port = _free_port()
    log = tmp_path / "server.log"
    env = {**os.environ, "SANDBOX_HTTP_TOKEN": TOKEN, "SANDBOX_LOG_LEVEL": "DEBUG"}
    cmd = [sys.executable, "-m", "mcp_secure_sandbox", "--workspace", str(workspace)]
    cmd += ["--snapshots", str(snapshots), "--transport", "streamable-http", "--port", str(port)]
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx2.get(f"{base}/healthz", timeout=1).status_code == 200:
                        break
                except httpx2.HTTPError:
                    pass
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "the HTTP server did not come up"
                time.sleep(0.2)
            yield base, log
        finally:
            proc.terminate()
            proc.wait(timeout=30)


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def test_http_auth_hosts_and_secrecy(http_server: tuple[str, Path]) -> None:
    base, log = http_server
    assert httpx2.post(f"{base}/mcp", json=INIT, headers=HEADERS).status_code == 401
    wrong = httpx2.post(
        f"{base}/mcp", json=INIT, headers={**HEADERS, "authorization": "Bearer x" * 3}
    )
    assert wrong.status_code == 401
    foreign = httpx2.post(
        f"{base}/mcp",
        json=INIT,
        headers={**HEADERS, "authorization": f"Bearer {TOKEN}", "host": "evil.example"},
    )
    assert foreign.status_code in (400, 403, 421)

    async def scenario() -> tuple[dict[str, Any], str, str]:
        client = httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}, timeout=60)
        async with (
            client,
            streamable_http_client(f"{base}/mcp", http_client=client) as (r, w),
            ClientSession(r, w) as s,
        ):
            await s.initialize()
            result = await s.call_tool("run_sandbox_code", {"code": "print(2 + 2)"})
            status = (await s.read_resource("sandbox://status")).contents[0].text  # type: ignore[union-attr]
            logs = (await s.read_resource("sandbox://logs")).contents[0].text  # type: ignore[union-attr]
            return dict(result.structured_content or {}), status, logs

    out, status, logs = anyio.run(scenario)
    assert out["stdout"] == "4\n"
    assert json.loads(status)["settings"]["http_auth"] is True
    for text in (status, logs, log.read_text()):
        assert TOKEN not in text
        assert TOKEN[-12:] not in text


def test_remote_bind_without_token_is_refused(dirs: tuple[Path, Path]) -> None:
    workspace, snapshots = dirs
    env = {k: v for k, v in os.environ.items() if k != "SANDBOX_HTTP_TOKEN"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcp_secure_sandbox",
            "--workspace",
            str(workspace),
            "--snapshots",
            str(snapshots),
            "--transport",
            "streamable-http",
            "--host",
            "0.0.0.0",  # noqa: S104 - the refusal is what is tested
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "without a token" in proc.stderr


@pytest.mark.slow  # 7.7 s on the shared 2-core machine: a server start and three SDK clients
def test_a_tokens_file_gives_each_client_its_principal(tmp_path: Path) -> None:
    """The server process with ``--tokens-file``: the SDK client of each token is its principal."""
    from _http_server import start_server

    tokens = {"alice": "e2e-alice-" + "a1" * 16, "ci-bot": "e2e-ci-bot-" + "b2" * 16}
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("".join(f"{name}:{token}\n" for name, token in tokens.items()))
    tokens_file.chmod(0o600)
    proc, port, log = start_server(
        tmp_path, {"SANDBOX_LOG_LEVEL": "INFO"}, "--tokens-file", str(tokens_file)
    )

    async def caller(token: str) -> dict[str, Any]:
        client = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=60)
        async with (
            client,
            streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=client) as (r, w),
            ClientSession(r, w) as s,
        ):
            await s.initialize()
            await s.call_tool("list_workspace_files", {})
            metrics = await s.call_tool("get_sandbox_metrics", {})
            return dict((metrics.structured_content or {})["caller"])

    try:
        seen = [anyio.run(caller, tokens[name]) for name in ("ci-bot", "alice", "ci-bot")]
        refused = httpx2.post(
            f"http://127.0.0.1:{port}/mcp",
            json=INIT,
            headers={**HEADERS, "authorization": f"Bearer {tokens['alice'][:-1]}"},
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert seen == [
        {"principal": "ci-bot", "calls": 1, "errors": 0},
        {"principal": "alice", "calls": 1, "errors": 0},
        {"principal": "ci-bot", "calls": 3, "errors": 0},
    ]
    assert refused.status_code == 401
    text = log.read_text()
    assert "list_workspace_files principal=alice status=ok" in text
    assert "list_workspace_files principal=ci-bot status=ok" in text
    for token in tokens.values():
        assert token not in text and token[-12:] not in text
