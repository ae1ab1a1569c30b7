"""A token file or variable that is not one line of visible ASCII is refused (S1, red team
2026-12-03).

A token file in latin-1 ended the server with a ``UnicodeDecodeError`` traceback, and a file of
two lines (or one with a NUL, a tab, a space inside) became a token no client can send in an
``Authorization`` header. Every spelling is now a one-line start error that names the file (or
variable) and the remedy and never repeats the token or a part of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_secure_sandbox.settings import (
    TOKEN_FILE_MAX_BYTES,
    ConfigError,
    settings_from_args,
)

SECRET = "s3cretPart-0123456789abcdef"
REMEDY = "one line of visible ASCII characters"


def _token_file(tmp_path: Path, content: bytes) -> Path:
    path = tmp_path / "token file.txt"
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(
    ("content", "says"),
    [
        pytest.param(("tök" + SECRET).encode("latin-1"), "is not ASCII text", id="latin-1"),
        pytest.param(b"\xff\xfe" + SECRET.encode("utf-16-le"), "is not ASCII text", id="utf-16"),
        pytest.param(("tök" + SECRET).encode(), "is not ASCII text", id="utf-8-non-ascii"),
        pytest.param(SECRET.encode() + b"\x00tail", "control or a non-ASCII", id="nul"),
        pytest.param(SECRET.encode() + b"\x1b[0m", "control or a non-ASCII", id="escape"),
        pytest.param(SECRET.encode() + b"\tsecond", "control or a non-ASCII", id="tab"),
        pytest.param(SECRET.encode() + b" second", "control or a non-ASCII", id="space"),
        pytest.param(SECRET.encode() + b"\nsecond-line\n", "more than one line", id="two-lines"),
        pytest.param(SECRET.encode() + b"\r\nsecond\r\n", "more than one line", id="two-crlf"),
        pytest.param(SECRET.encode() + b"\rsecond", "more than one line", id="bare-cr"),
        pytest.param(SECRET.encode() + b"\n\n" + SECRET.encode(), "more than one line", id="gap"),
        pytest.param(b"", "is empty", id="empty"),
        pytest.param(b" \n\r\n\t", "is empty", id="blank"),
        pytest.param(b"a" * (TOKEN_FILE_MAX_BYTES + 1), "more than", id="oversized"),
        pytest.param(b"short-token\n", "at least 16 characters", id="short"),
    ],
)
def test_a_bad_token_file_is_a_clear_refusal(tmp_path: Path, content: bytes, says: str) -> None:
    path = _token_file(tmp_path, content)
    with pytest.raises(ConfigError) as refused:
        settings_from_args(["--token-file", str(path)], {})
    message = str(refused.value)
    assert message.startswith(f"--token-file {path}")
    assert says in message
    if says != "at least 16 characters":
        assert REMEDY in message
    assert SECRET[:8] not in message and "second" not in message and "short-token" not in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(SECRET.encode(), id="no-line-break"),
        pytest.param(SECRET.encode() + b"\n", id="lf"),
        pytest.param(SECRET.encode() + b"\r\n", id="crlf"),
        pytest.param(b"  " + SECRET.encode() + b" \n\n", id="surrounding-whitespace"),
    ],
)
def test_one_line_of_visible_ascii_is_the_token(tmp_path: Path, content: bytes) -> None:
    path = _token_file(tmp_path, content)
    settings = settings_from_args(["--token-file", str(path)], {})
    assert settings.token == SECRET


@pytest.mark.parametrize(
    ("value", "says"),
    [
        pytest.param(SECRET + "\nsecond", "more than one line", id="two-lines"),
        pytest.param(SECRET + "\r\n", "more than one line", id="crlf"),
        pytest.param("tök" + SECRET, "control or a non-ASCII", id="non-ascii"),
        pytest.param(SECRET + " second", "control or a non-ASCII", id="space"),
    ],
)
def test_the_variable_is_held_to_the_same_rule(value: str, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        settings_from_args([], {"SANDBOX_HTTP_TOKEN": value})
    message = str(refused.value)
    assert message.startswith("SANDBOX_HTTP_TOKEN: ") and says in message
    assert SECRET[:8] not in message and "second" not in message


def test_a_token_file_that_is_a_directory_is_a_clear_refusal(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--token-file .*: Is a directory$"):
        settings_from_args(["--token-file", str(tmp_path)], {})
