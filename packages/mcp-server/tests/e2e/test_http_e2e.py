"""The real server over streamable HTTP (the one file that starts it over HTTP outside the
regressions): bearer auth, Host checks and the token never shown; one body limit (new-user
trial: a 4.5 MB body got 413 and the SDK client showed only "Server returned an error
response", while write_workspace_file promises 8 MiB); a 5 MB print answered within the
response budget, the session going on (before the budget, any call whose stdout passed ~512 KB
failed in the SDK's HTTP client: "Server-sent event exceeded the 1048576 byte limit")."""

from __future__ import annotations

import base64
import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from _client import over_http
from _http_server import serving
from _paths import PACKAGE_DIR
from mcp_secure_sandbox import budget
from mcp_secure_sandbox.budget import MAX_WRITE_BYTES

TOKEN = "e2e-token-" + "7f3a9c2b4d5e6f708192a3b4c5d6e7f8"
AUTH = {"authorization": f"Bearer {TOKEN}"}


@contextmanager
def _serving(dirs: tuple[Path, Path], tmp_path: Path, *flags: str) -> Iterator[str]:
    """A real server over streamable HTTP on a free loopback port; yields its base URL."""
    env = {**os.environ, "SANDBOX_HTTP_TOKEN": TOKEN}
    with serving(*dirs, tmp_path / "server.log", env, *flags) as base:
        yield base


@pytest.fixture
def http_server(dirs: tuple[Path, Path], tmp_path: Path) -> Iterator[tuple[str, Path]]:
    log = tmp_path / "server.log"
    env = {**os.environ, "SANDBOX_HTTP_TOKEN": TOKEN, "SANDBOX_LOG_LEVEL": "DEBUG"}
    with serving(*dirs, log, env) as base:
        yield base, log


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
        async with over_http(f"{base}/mcp", TOKEN, mode="legacy") as s:
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
        async with over_http(f"http://127.0.0.1:{port}/mcp", token, mode="legacy") as s:
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


async def _session_calls(base: str, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    """Each call's structured content, or the MCPError it raised."""
    out: list[Any] = []
    async with over_http(f"{base}/mcp", TOKEN, timeout=120, mode="legacy") as s:
        for name, arguments in calls:
            try:
                result = await s.call_tool(name, arguments)
                assert not result.is_error, result.content
                out.append(result.structured_content)
            except MCPError as exc:
                out.append(exc)
    return out


def test_large_writes_over_http_fit_the_one_body_limit(
    dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    """4.5 MB of text, and the full 8 MiB as Base64 (11.2 MB of JSON), in one request each."""
    workspace, _ = dirs
    text = "x" * 4_500_000
    blob = bytes(range(256)) * (MAX_WRITE_BYTES // 256)
    with _serving(dirs, tmp_path) as base:
        answers = anyio.run(
            _session_calls,
            base,
            ("write_workspace_file", {"path": "big.txt", "content": text}),
            (
                "write_workspace_file",
                {
                    "path": "big.bin",
                    "content": base64.b64encode(blob).decode(),
                    "encoding": "base64",
                },
            ),
        )
    assert answers == [
        {"path": "big.txt", "bytes_written": 4_500_000},
        {"path": "big.bin", "bytes_written": MAX_WRITE_BYTES},
    ]
    assert (workspace / "big.txt").stat().st_size == 4_500_000
    assert (workspace / "big.bin").read_bytes() == blob


def _refusal(raw: bytes) -> tuple[int, dict[str, str], dict[str, Any]]:
    """Status, headers and JSON body of a raw HTTP/1.1 response."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, json.loads(body)


def _held_post(port: int, length: int) -> socket.socket:
    """A POST declaring ``length`` bytes of body, of which only the first few are sent."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        (
            f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nauthorization: Bearer {TOKEN}\r\n"
            "content-type: application/json\r\naccept: application/json, text/event-stream\r\n"
            f"content-length: {length}\r\n\r\n"
        ).encode()
        + b"{"
    )
    return sock


def _read_response(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_bodies_past_the_limits_get_413_and_503_the_client_can_show(
    dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    flags = ("--max-body", "64K", "--max-body-in-flight", "64K", "--admission-wait", "1")
    with _serving(dirs, tmp_path, *flags) as base:
        port = int(base.rsplit(":", 1)[1])
        # Over --max-body through the SDK client: the call fails with the server's message.
        (error,) = anyio.run(
            _session_calls, base, ("write_workspace_file", {"path": "a", "content": "y" * 70_000})
        )
        assert isinstance(error, MCPError)
        message = str(error)
        assert "larger than this server's HTTP limit of 65,536 bytes (--max-body)" in message
        assert "pass its path (csv_path, data_path)" in message
        raw = httpx2.post(
            f"{base}/mcp", content=b"{" + b" " * 70_000 + b"}", headers={**HEADERS, **AUTH}
        )
        assert raw.status_code == 413
        assert raw.json()["error"]["message"].startswith("request body of 70,002 bytes")
        # One byte over, declared: the body is read (and dropped), then refused.
        sock = _held_post(port, 65_537)
        try:
            sock.sendall(b" " * 65_536)
            status, _, body = _refusal(_read_response(sock))
        finally:
            sock.close()
        assert (status, body["jsonrpc"], body["error"]["code"]) == (413, "2.0", -32600)

        # Two bodies of 40 KB held open by the test share a budget of 64 KiB: whichever came
        # second waits its --admission-wait, then is told 503 with Retry-After: 1.
        held = [_held_post(port, 40_000), _held_post(port, 40_000)]
        try:
            ready, _, _ = select.select(held, [], [], 60)  # a guard, not a measurement
            assert len(ready) == 1
            status, headers, body = _refusal(_read_response(ready[0]))
            assert status == 503
            assert headers["retry-after"] == "1"
            assert "--max-body-in-flight" in body["error"]["message"]
            assert "retry in a second" in body["error"]["message"]
        finally:
            for sock in held:
                sock.close()
        # The closed requests gave their share back: a normal request is served.
        deadline = time.monotonic() + 30
        while (
            reply := httpx2.post(f"{base}/mcp", json=INIT, headers={**HEADERS, **AUTH})
        ).status_code == 503 and time.monotonic() < deadline:
            pass
        assert reply.status_code == 200


def _chunked(payload: bytes) -> bytes:
    return f"{len(payload):x}\r\n".encode() + payload + b"\r\n0\r\n\r\n"


_INIT_BODY = json.dumps(INIT).encode()
_FRAMINGS = [
    # Content-Length and Transfer-Encoding together: RFC 9112 6.3 lets a server reject it.
    (b"content-length: 0\r\ntransfer-encoding: chunked\r\n", _chunked(_INIT_BODY)),
    (b"content-length: 1\r\ntransfer-encoding: chunked\r\n", _chunked(_INIT_BODY)),
    (b"transfer-encoding: chunked\r\ncontent-length: 1\r\n", _chunked(_INIT_BODY)),
    (b"Transfer-Encoding: chunked\r\nContent-Length: 0\r\n", _chunked(_INIT_BODY)),
    # Content-Length that two parsers could read apart.
    (b"content-length: 2\r\ncontent-length: %d\r\n" % len(_INIT_BODY), _INIT_BODY),
    (b"content-length: %d, 2\r\n" % len(_INIT_BODY), _INIT_BODY),
    (b"content-length: +%d\r\n" % len(_INIT_BODY), _INIT_BODY),
    (b"content-length: %d 0\r\n" % len(_INIT_BODY), _INIT_BODY),
]


def test_ambiguous_framing_over_a_raw_socket_gets_400(
    dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    """Red team: CL 0/1 with TE chunked booked 0/1 byte of --max-body-in-flight for a whole body."""
    with _serving(dirs, tmp_path) as base:
        port = int(base.rsplit(":", 1)[1])
        for framing, body in _FRAMINGS:
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            try:
                sock.sendall(
                    (
                        f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
                        f"authorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\n"
                        "accept: application/json, text/event-stream\r\n"
                    ).encode()
                    + framing
                    + b"\r\n"
                    + body
                )
                raw = b""
                while chunk := sock.recv(65536):
                    raw += chunk
            finally:
                sock.close()
            assert raw.split(b" ", 2)[1] == b"400", (framing, raw[:200])
        # The server still serves.
        assert httpx2.post(f"{base}/mcp", json=INIT, headers={**HEADERS, **AUTH}).status_code == 200


def test_the_sdk_client_reads_the_413_of_a_multi_megabyte_body(
    dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    """New user: a 13 MB call got a ReadError (the server closed while the client still sent)."""
    with _serving(dirs, tmp_path) as base:
        (error,) = anyio.run(
            _session_calls,
            base,
            ("write_workspace_file", {"path": "a", "content": "y" * 13_000_000}),
        )
        assert isinstance(error, MCPError), error
        assert "larger than this server's HTTP limit of" in str(error)
        # The session's server is fine: the next client is served.
        (answer,) = anyio.run(
            _session_calls, base, ("write_workspace_file", {"path": "b", "content": "z"})
        )
    assert answer == {"path": "b", "bytes_written": 1}


def _readme_client() -> str:
    """The SDK client example of the README's "Streamable HTTP" section."""
    readme = (PACKAGE_DIR / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Streamable HTTP", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_client_runs_and_a_wrong_token_is_named(
    dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    """New user: a wrong or missing token showed only -32603 "Server returned an error response"."""
    with _serving(dirs, tmp_path) as base:
        script = tmp_path / "client.py"
        script.write_text(_readme_client().replace("http://127.0.0.1:8000", base))
        env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_")}
        outcomes = [
            subprocess.run(
                [sys.executable, str(script)],
                env={**env, "SANDBOX_HTTP_TOKEN": token},
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            for token in (TOKEN, TOKEN + "x", "not-the-token")
        ]
    good, *refused = outcomes
    assert (good.returncode, good.stdout) == (0, "42\n"), good.stderr
    for proc in refused:
        assert proc.returncode == 1
        assert "MCPError: missing or invalid bearer token: send the header" in proc.stderr
        assert "SANDBOX_HTTP_TOKEN or --token-file" in proc.stderr
        assert TOKEN not in proc.stderr


def test_five_megabytes_over_http_answer_and_the_session_goes_on(
    http_server: tuple[str, Path],
) -> None:
    base, _ = http_server

    async def scenario() -> tuple[dict[str, Any], int, str]:
        async with over_http(f"{base}/mcp", TOKEN, timeout=120, mode="legacy") as s:
            big = await s.call_tool(
                "run_sandbox_code", {"code": "print('h' + 'x' * 5_000_000 + 'TAIL')"}
            )
            size = len(big.model_dump_json(by_alias=True, exclude_none=True).encode())
            after = await s.call_tool("run_sandbox_code", {"code": "print('still here')"})
            assert after.structured_content is not None
            return dict(big.structured_content or {}), size, after.structured_content["stdout"]

    out, size, after = anyio.run(scenario)
    print(f"5 MB run over streamable HTTP: answer of {size:,} bytes")
    assert size + budget.ENVELOPE_BYTES <= budget.RESPONSE_BUDGET_BYTES
    assert out["status"] == "ok"
    assert out["stdout_truncated"] is True and out["stderr_truncated"] is False
    assert out["stdout"].startswith("hxxx") and out["stdout"].endswith("xTAIL\n")
    assert "bytes cut by the server" in out["stdout"]
    assert after == "still here\n"


@pytest.mark.slow  # a server start and three SDK clients over HTTP
def test_principals_see_and_reach_only_their_own_sessions(tmp_path: Path) -> None:
    """Two principals over streamable HTTP: B's session id is, to A, exactly an unknown one,
    for a run, a close and a close of an id that never existed; A's lists, metrics and
    ``sandbox://sessions`` never show B's; B's session is untouched and keeps its state."""
    from _http_server import start_server

    tokens = {"alice": "e2e-alice-" + "c3" * 16, "bob": "e2e-bob-" + "d4" * 16}
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("".join(f"{name}:{token}\n" for name, token in tokens.items()))
    tokens_file.chmod(0o600)
    proc, port, _log = start_server(tmp_path, {}, "--tokens-file", str(tokens_file))
    url = f"http://127.0.0.1:{port}/mcp"

    def text(result: Any) -> str:
        """The tool error's text after the SDK's "Error executing tool NAME: " prefix."""
        assert result.is_error, result.structured_content
        return " ".join(getattr(c, "text", "") for c in result.content).split(": ", 1)[1]

    async def as_bob_create() -> str:
        async with over_http(url, tokens["bob"]) as s:
            created = await s.call_tool("create_session", {"description": "bob's"})
            sid = str((created.structured_content or {})["session_id"])
            ran = await s.call_tool("run_sandbox_code", {"code": "secret = 7", "session_id": sid})
            assert (ran.structured_content or {})["status"] == "ok"
            return sid

    async def as_alice(bobs: str) -> dict[str, Any]:
        async with over_http(url, tokens["alice"]) as s:
            mine = await s.call_tool("create_session", {"description": "alice's"})
            own = str((mine.structured_content or {})["session_id"])
            run = await s.call_tool(
                "run_sandbox_code", {"code": "print(secret)", "session_id": bobs}
            )
            close = await s.call_tool("close_session", {"session_id": bobs})
            never = "sess_" + "0" * 32
            unknown = await s.call_tool("close_session", {"session_id": never})
            listed = await s.call_tool("list_sessions", {})
            metrics = await s.call_tool("get_sandbox_metrics", {})
            resource = await s.read_resource("sandbox://sessions")
            return {
                "own": own,
                "never": never,
                "run": text(run),
                "close": text(close),
                "unknown": text(unknown),
                "listed": (listed.structured_content or {})["sessions"],
                "metrics": (metrics.structured_content or {})["sessions"],
                "resource": json.loads(resource.contents[0].text),  # type: ignore[union-attr]
            }

    async def as_bob_again(sid: str) -> tuple[dict[str, Any], list[Any]]:
        async with over_http(url, tokens["bob"]) as s:
            ran = await s.call_tool("run_sandbox_code", {"code": "secret", "session_id": sid})
            listed = await s.call_tool("list_sessions", {})
            return dict(ran.structured_content or {}), (listed.structured_content or {})["sessions"]

    try:
        bobs = anyio.run(as_bob_create)
        seen = anyio.run(as_alice, bobs)
        ran, bob_listed = anyio.run(as_bob_again, bobs)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    for key in ("run", "close"):
        assert seen[key] == seen["unknown"].replace(seen["never"], bobs), key
        assert seen[key].endswith(
            "(it may have been closed or expired): create_session starts a new one"
        )
    for key in ("listed", "metrics"):
        assert [entry["session_id"] for entry in seen[key]] == [seen["own"]], key
    resource = seen["resource"]
    entries = resource["sessions"] if isinstance(resource, dict) else resource
    assert [entry["session_id"] for entry in entries] == [seen["own"]]
    assert ran["result"] == {"type": "builtins.int", "text": "7"}  # B's state is intact
    assert [entry["session_id"] for entry in bob_listed] == [bobs]
