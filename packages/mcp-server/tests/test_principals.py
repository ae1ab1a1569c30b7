"""Principals: the tokens file, the Principals mapping, principal_of, and the settings' rules."""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.authentication import SimpleUser

from mcp_secure_sandbox.__main__ import main
from mcp_secure_sandbox.principals import (
    DEFAULT_PRINCIPAL,
    PRINCIPAL_TOKEN_MIN_CHARS,
    TOKENS_FILE_MAX_BYTES,
    Principals,
    PrincipalUser,
    principal_of,
    read_tokens_file,
)
from mcp_secure_sandbox.settings import ConfigError, Settings, settings_from_args

#: Tokens of the tests: each holds a marker that no message or log may show.
ALICE = "alice-s3cret-" + "a" * 27  # 40 characters
BOB = "bob-s3cret-" + "b" * 29  # 40 characters
MARKERS = ("s3cret", "aaaaaaaa", "bbbbbbbb", "zzzzzzzz")


def _write(tmp_path: Path, content: bytes, mode: int = 0o600) -> Path:
    path = tmp_path / "tokens file.txt"
    path.write_bytes(content)
    path.chmod(mode)
    return path


def _assert_secret_free(text: str) -> None:
    for marker in MARKERS:
        assert marker not in text, f"{marker!r} in {text!r}"


GOOD = f"alice:{ALICE}\nbob:{BOB}\n".encode()


def test_a_tokens_file_names_each_principal(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    settings = settings_from_args(
        ["--tokens-file", str(path), "--transport", "streamable-http"], {}
    )
    assert settings.principals is not None
    assert list(settings.principals) == ["alice", "bob"]
    assert settings.principals["alice"] == ALICE and settings.principals["bob"] == BOB
    assert settings.http_principals is settings.principals
    assert settings.token is None and "tokens_file" in settings.given
    # nothing about the tokens or the names leaves through the settings
    assert settings.to_dict()["http_auth"] is True
    _assert_secret_free(repr(settings) + repr(settings.to_dict()) + repr(settings.principals))
    assert "alice" not in repr(settings.to_dict())
    assert repr(settings.principals) == "Principals(alice, bob)"


def test_the_variable_names_the_tokens_file(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    settings = settings_from_args([], {"SANDBOX_TOKENS_FILE": str(path)})
    assert settings.principals is not None and list(settings.principals) == ["alice", "bob"]


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(f"alice:{ALICE}\r\nbob:{BOB}\r\n", id="crlf"),
        pytest.param(
            f"# the team\n\nalice:{ALICE}\n   \n# bob:{'z' * 40}\nbob:{BOB}", id="comments"
        ),
        pytest.param(f"  alice:{ALICE}  \n\tbob:{BOB}\t\n", id="surrounding-whitespace"),
    ],
)
def test_comments_blank_lines_and_line_ends_are_ignored(tmp_path: Path, content: str) -> None:
    principals = read_tokens_file(str(_write(tmp_path, content.encode())))
    assert dict(principals) == {"alice": ALICE, "bob": BOB}


def test_a_line_is_split_at_its_first_colon(tmp_path: Path) -> None:
    token = "x:" + "y" * 38
    principals = read_tokens_file(str(_write(tmp_path, f"carol:{token}\n".encode())))
    assert principals["carol"] == token


def test_a_symbolic_link_to_a_private_file_is_read(tmp_path: Path) -> None:
    target = _write(tmp_path, GOOD)
    link = tmp_path / "link"
    link.symlink_to(target)
    assert list(read_tokens_file(str(link))) == ["alice", "bob"]


#: Files the tokens file rule refuses: content, the line named (0: the file), what is said.
BAD_FILES = [
    pytest.param(b"alice" + ALICE.encode(), 1, "has no ':'", id="no-colon"),
    pytest.param(ALICE.encode() + b"\n", 1, "has no ':'", id="token-alone"),
    pytest.param(f"# x\nAlice:{ALICE}".encode(), 2, "a principal's name is", id="upper-case"),
    pytest.param(f":{ALICE}".encode(), 1, "a principal's name is", id="empty-name"),
    pytest.param(f"{'a' * 65}:{ALICE}".encode(), 1, "a principal's name is", id="long-name"),
    pytest.param(f"-alice:{ALICE}".encode(), 1, "a principal's name is", id="leading-dash"),
    pytest.param(f"al ice:{ALICE}".encode(), 1, "a principal's name is", id="space-in-name"),
    pytest.param(f"al.ice:{ALICE}".encode(), 1, "a principal's name is", id="dot-in-name"),
    pytest.param(f"alice :{ALICE}".encode(), 1, "a principal's name is", id="space-before-colon"),
    pytest.param(f"ålice:{ALICE}".encode(), 1, "is not ASCII text", id="non-ascii-name"),
    pytest.param(f"alice:{ALICE}tök".encode(), 1, "is not ASCII text", id="non-ascii-token"),
    pytest.param(f"alice:{ALICE}".encode("utf-16"), 1, "is not ASCII text", id="utf-16-file"),
    pytest.param(b"alice:" + b"s3cret" * 5, 1, "at least 32 characters", id="short-token"),
    pytest.param(b"alice:\n", 1, "at least 32 characters", id="empty-token"),
    pytest.param(f"alice: {ALICE}".encode(), 1, "control or a non-ASCII", id="space-in-token"),
    pytest.param(f"alice:{ALICE}\x00zz".encode(), 1, "control or a non-ASCII", id="nul"),
    pytest.param(f"alice:{ALICE}\x1b[0m".encode(), 1, "control or a non-ASCII", id="escape"),
    pytest.param(f"bob:{BOB}\nalice:{ALICE}\rzz".encode(), 2, "more than one line", id="cr"),
    pytest.param(
        f"alice:{ALICE}\n# x\nalice:{BOB}\n".encode(),
        3,
        "the principal alice is already named on line 1",
        id="duplicate-name",
    ),
    pytest.param(
        f"alice:{ALICE}\n\nbob:{ALICE}\n".encode(), 3, "the same token as line 1", id="same-token"
    ),
    pytest.param(b"", 0, "holds no principal", id="empty"),
    pytest.param(b"# alice\n\n   \n", 0, "holds no principal", id="comments-only"),
    pytest.param(
        GOOD + b"#" * TOKENS_FILE_MAX_BYTES, 0, f"more than {TOKENS_FILE_MAX_BYTES}", id="big"
    ),
]


@pytest.mark.parametrize(("content", "line", "says"), BAD_FILES)
def test_a_bad_tokens_file_is_a_start_error_naming_its_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes, line: int, says: str
) -> None:
    path = _write(tmp_path, content)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ConfigError) as refused:
        settings_from_args(["--tokens-file", str(path), "--transport", "streamable-http"], {})
    message = str(refused.value)
    where = f"--tokens-file {path} line {line}" if line else f"--tokens-file {path} "
    assert message.startswith(where), message
    assert says in message and "\n" not in message
    _assert_secret_free(message)
    _assert_secret_free(caplog.text)
    if line:
        assert "NAME:TOKEN" in message or "give each principal" in message or says in message


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660, 0o602, 0o620, 0o610])
def test_a_tokens_file_open_to_other_users_is_refused(tmp_path: Path, mode: int) -> None:
    path = _write(tmp_path, GOOD, mode)
    with pytest.raises(ConfigError) as refused:
        settings_from_args(["--tokens-file", str(path)], {})
    message = str(refused.value)
    assert message.startswith(f"--tokens-file {path} is open to other users (mode {mode:04o})")
    assert message.endswith(f"chmod 600 {path}")
    _assert_secret_free(message)


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_a_private_tokens_file_is_read(tmp_path: Path, mode: int) -> None:
    assert list(read_tokens_file(str(_write(tmp_path, GOOD, mode)))) == ["alice", "bob"]


def test_what_is_no_regular_file_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    for path in (fifo, tmp_path, Path("/dev/zero")):
        with pytest.raises(ConfigError, match=r"is not a regular file"):
            read_tokens_file(str(path))


def test_a_missing_tokens_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--tokens-file .*/missing: No such file"):
        read_tokens_file(str(tmp_path / "missing"))


def test_the_start_error_and_the_log_never_show_a_token(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The server's own start (``main``) on a bad file: status 2, one line, no token."""
    for name in list(os.environ):
        if name.startswith("SANDBOX_"):
            monkeypatch.delenv(name)
    caplog.set_level(logging.DEBUG)
    path = _write(tmp_path, f"alice:{ALICE}\nbob:{ALICE}\n".encode())
    argv = ["--tokens-file", str(path), "--transport", "streamable-http"]
    status = main([*argv, "--workspace", str(tmp_path / "w"), "--snapshots", str(tmp_path / "s")])
    out = capsys.readouterr()
    assert status == 2 and out.out == ""
    assert out.err == (
        f"mcp-secure-sandbox: error: --tokens-file {path} line 2: the same token as line 1; "
        "give each principal its own token\n"
    )
    _assert_secret_free(out.err + caplog.text)
    assert not (tmp_path / "w").exists()


def _single_token_conflicts(tmp_path: Path) -> list[tuple[list[str], dict[str, str]]]:
    path = _write(tmp_path, GOOD)
    token_file = tmp_path / "token"
    token_file.write_text("zzzzzzzz-0123456789abcdef")
    return [
        (["--tokens-file", str(path)], {"SANDBOX_HTTP_TOKEN": "zzzzzzzz-0123456789abcdef"}),
        (["--tokens-file", str(path), "--token-file", str(token_file)], {}),
        ([], {"SANDBOX_TOKENS_FILE": str(path), "SANDBOX_TOKEN_FILE": str(token_file)}),
    ]


def test_the_single_token_is_refused_with_a_tokens_file(tmp_path: Path) -> None:
    for argv, environ in _single_token_conflicts(tmp_path):
        with pytest.raises(ConfigError) as refused:
            settings_from_args([*argv, "--transport", "streamable-http"], environ)
        message = str(refused.value)
        assert message.startswith(
            "--tokens-file names every principal and its token, so the single token "
            "(SANDBOX_HTTP_TOKEN or --token-file) cannot be given with it"
        )
        _assert_secret_free(message)


def test_the_single_token_is_refused_with_principals_built_in_code(tmp_path: Path) -> None:
    ws, snap = tmp_path / "w", tmp_path / "s"
    principals = Principals({"alice": ALICE})
    single = "zzzzzzzz-0123456789abcdef"
    with pytest.raises(ConfigError, match="cannot be given with it"):
        Settings(workspace=ws, snapshots=snap, principals=principals, token=single)
    path = _write(tmp_path, GOOD)
    with pytest.raises(ConfigError, match="cannot be given with it"):
        Settings(workspace=ws, snapshots=snap, tokens_file=str(path), token=single)
    built = Settings(workspace=ws, snapshots=snap, tokens_file=str(path))
    assert built.principals is not None and list(built.principals) == ["alice", "bob"]
    with pytest.raises(ConfigError, match="cannot be given with it"):
        dataclasses.replace(built, token=single)
    with pytest.raises(ConfigError, match=r"Settings\.principals must be a Principals"):
        Settings(workspace=ws, snapshots=snap, principals={"alice": ALICE})  # type: ignore[arg-type]


def test_replace_keeps_the_principals_read_and_rereads_a_changed_file(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    built = Settings(workspace=tmp_path / "w", snapshots=tmp_path / "s", tokens_file=str(path))
    path.unlink()  # read at start: a later change needs no file
    moved = dataclasses.replace(built, port=8123)
    assert moved.principals is built.principals
    other = tmp_path / "other"
    other.write_text(f"carol:{BOB}\n")
    other.chmod(0o600)
    assert list(dataclasses.replace(built, tokens_file=str(other)).principals or ()) == ["carol"]


def test_a_tokens_file_lets_http_be_served_on_any_address(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    settings = settings_from_args(
        ["--tokens-file", str(path), "--transport", "streamable-http", "--host", "0.0.0.0"],  # noqa: S104
        {},
    )
    assert settings.http_principals is settings.principals


def test_without_a_tokens_file_the_single_token_is_the_default_principal(tmp_path: Path) -> None:
    settings = settings_from_args(
        ["--transport", "streamable-http"], {"SANDBOX_HTTP_TOKEN": "zzzzzzzz-0123456789abcdef"}
    )
    assert settings.principals is None
    principals = settings.http_principals
    assert principals is not None and dict(principals) == {
        DEFAULT_PRINCIPAL: "zzzzzzzz-0123456789abcdef"
    }
    assert DEFAULT_PRINCIPAL == "default"
    loopback = settings_from_args(
        ["--transport", "streamable-http", "--allow-unauthenticated-http"], {}
    )
    assert loopback.http_principals is None


def test_principals_find_each_token_and_nothing_else() -> None:
    principals = Principals({"alice": ALICE, "bob": BOB})
    assert principals.authenticate(ALICE) == "alice"
    assert principals.authenticate(BOB.encode()) == "bob"
    for wrong in ("", ALICE[:-1], ALICE + "x", ALICE.upper(), BOB[1:], " " + ALICE, "default"):
        assert principals.authenticate(wrong) is None, wrong
    assert len(principals) == 2 and "alice" in principals and ALICE not in principals


@pytest.mark.parametrize(
    ("tokens", "says"),
    [
        pytest.param({}, "at least one principal", id="none"),
        pytest.param([("alice", ALICE)], "at least one principal", id="not-a-mapping"),
        pytest.param({"Alice": ALICE}, "a principal's name is", id="bad-name"),
        pytest.param({"alice": "s3cret" * 5}, "at least 32 characters", id="short"),
        pytest.param({"alice": ALICE + " zz"}, "control or a non-ASCII", id="space"),
        pytest.param({"alice": ALICE.encode()}, "must be a str", id="bytes"),
        pytest.param({"alice": ALICE, "bob": ALICE}, "alice and bob have the same", id="shared"),
    ],
)
def test_principals_built_in_code_meet_the_rules(tokens: Any, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as refused:
        Principals(tokens)
    _assert_secret_free(str(refused.value))


def test_the_tokens_file_rule_is_stricter_than_the_single_token() -> None:
    sixteen = "zzzzzzzz-0123456"
    assert dict(Principals.single(sixteen)) == {"default": sixteen}
    with pytest.raises(ConfigError, match=f"at least {PRINCIPAL_TOKEN_MIN_CHARS} characters"):
        Principals({"alice": sixteen})


def _ctx(request: object) -> Any:
    """A stand-in for a tool's Context: only ``request_context.request`` is read."""
    return SimpleNamespace(request_context=SimpleNamespace(request=request))


def _request(scope: dict[str, Any]) -> object:
    return SimpleNamespace(scope=scope, headers={"authorization": f"Bearer {ALICE}"})


def test_principal_of_stdio_is_default() -> None:
    assert principal_of(_ctx(None)) == "default"


def test_principal_of_http_is_the_authenticated_name() -> None:
    assert principal_of(_ctx(_request({"type": "http", "user": PrincipalUser("alice")}))) == "alice"
    assert principal_of(_ctx(_request({"type": "http", "user": PrincipalUser("bob")}))) == "bob"


@pytest.mark.parametrize(
    "scope",
    [
        pytest.param({"type": "http"}, id="no-user"),
        pytest.param({"type": "http", "user": SimpleUser("alice")}, id="another-user-type"),
        pytest.param({"type": "http", "user": "alice"}, id="a-string"),
        pytest.param({"type": "http", "user": {"principal": "alice"}}, id="a-dict"),
        pytest.param({"type": "http", "state": {"principal": "alice"}}, id="state"),
    ],
)
def test_principal_of_an_unauthenticated_http_request_is_refused(scope: dict[str, Any]) -> None:
    """Never ``default`` (nor a name from the request) for HTTP that BearerAuth did not let in."""
    with pytest.raises(RuntimeError, match="no authenticated principal"):
        principal_of(_ctx(_request(scope)))


def test_principal_user_keeps_no_token() -> None:
    user = PrincipalUser("alice")
    assert user.principal == "alice" and user.access_token.client_id == "alice"
    assert user.access_token.token == ""


def test_over_stdio_every_call_is_the_default_principals(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """In process (the SDK's in-memory transport, as stdio: no HTTP request): ``default``."""
    import anyio
    from mcp import Client

    from mcp_secure_sandbox.server import create_server
    from mcp_secure_sandbox.settings import prepare_directories

    settings = prepare_directories(
        Settings(workspace=tmp_path / "ws", snapshots=tmp_path / "snap", ready_children=0),
        environ={},
    )
    caplog.set_level(logging.INFO, logger="mcp_secure_sandbox")

    async def main() -> list[Any]:
        app, state = create_server(settings)
        try:
            async with Client(app) as client:
                callers = []
                for _ in range(2):
                    result = await client.call_tool("get_sandbox_metrics", {})
                    callers.append(result.structured_content["caller"])
                return callers
        finally:
            state.close()

    assert anyio.run(main) == [
        {"principal": "default", "calls": 0, "errors": 0},
        {"principal": "default", "calls": 1, "errors": 0},
    ]
    assert "get_sandbox_metrics principal=default status=ok" in caplog.text
