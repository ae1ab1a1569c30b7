"""Principals over streamable HTTP cannot be forged, and their tokens are never shown (issue 28,
item 4).

With ``--tokens-file`` each bearer token is one principal, and state (sessions) is bound to the
principal :func:`~mcp_secure_sandbox.principals.principal_of` names. Two classes of failure are
held here, each in several spellings: a request that names a principal it did not authenticate
as (a header, a forged ASGI ``user``, a second ``Authorization`` header, another principal's
transport session), and a token that leaks (start errors, the log, ``--help``, the settings'
``repr`` and ``to_dict``, ``sandbox://status``, a tokens file whose mode is checked on the wrong
file).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from starlette.testclient import TestClient

from mcp_secure_sandbox.__main__ import main
from mcp_secure_sandbox.http_transport import build_http_app
from mcp_secure_sandbox.principals import Principals, principal_of
from mcp_secure_sandbox.server import create_server
from mcp_secure_sandbox.settings import (
    ConfigError,
    Settings,
    build_parser,
    prepare_directories,
    settings_from_args,
)

CAROL = "carol-T0KEN-" + "c" * 28
DAVE = "dave-T0KEN-" + "d" * 29
MARKERS = ("T0KEN", "cccccccc", "dddddddd")
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
WHOAMI = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "whoami"}}


def _secret_free(text: str) -> bool:
    return not any(marker in text for marker in MARKERS)


def _tokens_file(tmp_path: Path, mode: int = 0o600) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"carol:{CAROL}\ndave:{DAVE}\n")
    path.chmod(mode)
    return path


def _client(tmp_path: Path) -> TestClient:
    app: MCPServer[Any] = MCPServer("t")

    @app.tool()
    def whoami(ctx: Context) -> str:
        return principal_of(ctx)

    settings = Settings(
        workspace=tmp_path / "ws",
        snapshots=tmp_path / "snap",
        transport="streamable-http",
        principals=Principals({"carol": CAROL, "dave": DAVE}),
    )
    return TestClient(build_http_app(app, settings), base_url="http://127.0.0.1:8000")


def _post(client: TestClient, body: dict[str, Any], headers: list[tuple[str, str]]) -> Any:
    """POST with ``headers`` as given (repeated names kept, in order)."""
    return client.post("/mcp", json=body, headers=[*HEADERS.items(), *headers])


def _whoami(client: TestClient, auth: list[tuple[str, str]], extra: list[tuple[str, str]]) -> str:
    opened = _post(client, INIT, auth)
    assert opened.status_code == 200
    session = [("mcp-session-id", opened.headers["mcp-session-id"])]
    version = [("mcp-protocol-version", "2025-06-18")]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert _post(client, initialized, [*auth, *session, *version]).status_code == 202
    answer = _post(client, WHOAMI, [*auth, *session, *version, *extra])
    assert answer.status_code == 200, answer.text
    (event,) = [json.loads(x[5:]) for x in answer.text.splitlines() if x.startswith("data:")]
    return str(event["result"]["structuredContent"]["result"])


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param([("x-principal", "dave")], id="x-principal-header"),
        pytest.param([("x-forwarded-user", "dave")], id="x-forwarded-user"),
        pytest.param([("user", "dave")], id="user-header"),
        pytest.param([("authorization", f"Bearer {DAVE}")], id="second-authorization"),
        pytest.param([("mcp-principal", "dave")], id="mcp-principal"),
    ],
)
def test_a_request_cannot_name_another_principal(
    tmp_path: Path, extra: list[tuple[str, str]]
) -> None:
    """Whatever else the request says, it is the principal of its first bearer token."""
    with _client(tmp_path) as client:
        assert _whoami(client, [("authorization", f"Bearer {CAROL}")], extra) == "carol"


@pytest.mark.parametrize(
    "auth",
    [
        pytest.param(
            [("authorization", "Bearer nope"), ("authorization", f"Bearer {DAVE}")],
            id="first-wrong",
        ),
        pytest.param([("authorization", f"Bearer {DAVE[:20]}")], id="prefix"),
        pytest.param([("authorization", f"Bearer {DAVE}{DAVE}")], id="doubled"),
        pytest.param([("authorization", "Bearer dave")], id="the-name"),
    ],
)
def test_a_token_that_is_not_exactly_one_principals_is_refused(
    tmp_path: Path, auth: list[tuple[str, str]]
) -> None:
    with _client(tmp_path) as client:
        answer = _post(client, INIT, auth)
    assert answer.status_code == 401 and _secret_free(answer.text) and "dave" not in answer.text


def test_another_principals_transport_session_reads_as_unknown(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        opened = _post(client, INIT, [("authorization", f"Bearer {CAROL}")])
        session = ("mcp-session-id", opened.headers["mcp-session-id"])
        for method in ("post", "get", "delete"):
            headers = [*HEADERS.items(), ("authorization", f"Bearer {DAVE}"), session]
            if method == "post":
                answer = client.post("/mcp", json=WHOAMI, headers=headers)
            else:
                answer = client.request(method.upper(), "/mcp", headers=headers)
            assert answer.status_code == 404, (method, answer.status_code)
        # carol's session is still hers
        assert (
            _post(client, WHOAMI, [("authorization", f"Bearer {CAROL}"), session]).status_code
            == 200
        )


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_the_mode_checked_is_the_files_not_a_links(tmp_path: Path, mode: int) -> None:
    """A private-looking link (a symlink's own mode is 0777, never read) to an open file."""
    target = _tokens_file(tmp_path, mode)
    link = tmp_path / "private" / "tokens"
    link.parent.mkdir(mode=0o700)
    link.symlink_to(target)
    with pytest.raises(ConfigError, match=f"mode {mode:04o}") as refused:
        settings_from_args(["--tokens-file", str(link)], {})
    assert _secret_free(str(refused.value))


def test_no_output_of_the_server_shows_a_token(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Start errors, --help, repr, to_dict and sandbox://status, with the tokens file in use."""
    for name in list(os.environ):
        if name.startswith("SANDBOX_"):
            monkeypatch.delenv(name)
    caplog.set_level(logging.DEBUG)
    path = _tokens_file(tmp_path)
    flags = ["--workspace", str(tmp_path / "ws"), "--snapshots", str(tmp_path / "snap")]
    # a start refused for the single token beside the file
    monkeypatch.setenv("SANDBOX_HTTP_TOKEN", CAROL)
    assert main(["--tokens-file", str(path), "--transport", "streamable-http", *flags]) == 2
    monkeypatch.delenv("SANDBOX_HTTP_TOKEN")
    # a start refused for a line repeating a token
    path.write_text(f"carol:{CAROL}\ndave:{CAROL}\n")
    assert main(["--tokens-file", str(path), "--transport", "streamable-http", *flags]) == 2
    path.write_text(f"carol:{CAROL}\ndave:{DAVE}\n")
    out = capsys.readouterr()
    assert out.err.count("mcp-secure-sandbox: error: ") == 2 and _secret_free(out.out + out.err)
    settings = prepare_directories(
        settings_from_args(
            ["--tokens-file", str(path), "--transport", "streamable-http", *flags], {}
        ),
        environ={},
    )
    shown = [build_parser({}, defaults=settings).format_help(), repr(settings)]
    shown.append(json.dumps(settings.to_dict()))

    async def status() -> str:
        app, state = create_server(settings)
        try:
            async with Client(app) as client:
                result = await client.read_resource("sandbox://status")
                return json.dumps(result.model_dump(mode="json"))
        finally:
            state.close()

    shown.append(anyio.run(status))
    for text in [*shown, caplog.text]:
        assert _secret_free(text)
        assert "carol" not in text and "dave" not in text  # nor who the other principals are
