"""Settings declared once: the page, ``--help`` and the tool descriptions come from the
declarations; bounds and cross-field rules hold however settings are built; "was it given"."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from mcp_secure_sandbox._declare import size
from mcp_secure_sandbox.http_transport import BearerAuth
from mcp_secure_sandbox.server import create_server
from mcp_secure_sandbox.settings import (
    ConfigError,
    Settings,
    build_parser,
    declarations,
    prepare_directories,
    settings_from_args,
    settings_page,
)

PAGE = Path(__file__).resolve().parents[1] / "docs" / "settings.md"
REGENERATE = "python -m mcp_secure_sandbox._settings_page > docs/settings.md"
#: Fields that are not settings: derived from a profile or from where the directories landed.
DERIVED = {"preload", "workspace_fallback", "snapshots_url", "principals", "given"}


def _help(parser_text: str) -> str:
    return " ".join(parser_text.split())


def test_the_committed_settings_page_is_the_generated_one() -> None:
    assert PAGE.read_text(encoding="utf-8") == settings_page(), f"regenerate: {REGENERATE}"


def test_the_page_module_writes_the_page() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_secure_sandbox._settings_page"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert proc.stdout == settings_page()
    assert proc.stderr == ""


def test_every_field_but_the_derived_ones_is_declared_with_flag_or_secret() -> None:
    declared = {item.name: setting for item, setting in declarations()}
    assert set(declared) == {f.name for f in dataclasses.fields(Settings)} - DERIVED
    envs = [s.env for s in declared.values()]
    flags = [s.flag for s in declared.values() if s.flag]
    assert len(set(envs)) == len(envs) and len(set(flags)) == len(flags)
    page = settings_page()
    help_text = build_parser({}).format_help()
    for setting in declared.values():
        assert f"`{setting.env}" in page, setting.env
        if setting.flag:
            assert f"| `{setting.flag}` |" in page and setting.flag in help_text
    # The one secret has no flag: neither the page, --help nor the parser offers one.
    assert declared["token"].flag is None and declared["token"].secret
    assert "| (none) | `SANDBOX_HTTP_TOKEN` |" in page
    assert "--token " not in help_text and "--http-token" not in help_text


@pytest.mark.parametrize(
    "argv",
    [
        ["--http-token", "s3cret-0123456789abcdef"],
        ["--http-token=s3cret-0123456789abcdef"],
        ["--token", "s3cret-0123456789abcdef"],  # was taken as --token-file and echoed
        ["--token=s3cret-0123456789abcdef"],
        ["--port", "8001", "--token", "s3cret-0123456789abcdef"],
    ],
)
def test_a_token_on_the_command_line_is_refused_without_echoing_it(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match="has no flag") as refused:
        settings_from_args(argv, environ={})
    assert "s3cret" not in str(refused.value)
    out = capsys.readouterr()
    assert "s3cret" not in out.out + out.err


#: Tokens ``check_token`` refuses, each holding ``s3cret`` (never echoed), and what is said.
BAD_TOKENS = [
    pytest.param("s3cret-short", "at least 16 characters", id="short"),
    pytest.param("", "at least 16 characters", id="empty"),
    pytest.param("s3cret-0123456789\nsecond", "more than one line", id="two-lines"),
    pytest.param("s3cret-0123456789\r", "more than one line", id="carriage-return"),
    pytest.param("s3cret 0123456789abcdef", "control or a non-ASCII", id="space"),
    pytest.param("s3cret-0123456789\x00abc", "control or a non-ASCII", id="nul"),
    pytest.param("s3cret-tök-0123456789", "control or a non-ASCII", id="non-ascii"),
    pytest.param(b"s3cret-0123456789abcdef", "must be a str, not bytes", id="bytes"),
]


@pytest.mark.parametrize(("token", "says"), BAD_TOKENS)
def test_a_token_set_in_code_meets_the_token_rule(tmp_path: Path, token: object, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as refused:
        Settings(workspace=tmp_path / "ws", snapshots=tmp_path / "snap", token=token)  # type: ignore[arg-type]
    message = str(refused.value)
    assert message.startswith("Settings.token: ")
    assert "s3cret" not in message and "0123456789" not in message


@pytest.mark.parametrize(("token", "says"), BAD_TOKENS)
def test_a_token_given_to_bearer_auth_meets_the_token_rule(token: object, says: str) -> None:
    async def app(scope: object, receive: object, send: object) -> None:
        raise AssertionError("never called")

    with pytest.raises(ConfigError, match=says) as refused:
        BearerAuth(app, token)  # type: ignore[arg-type]
    assert "s3cret" not in str(refused.value) and "0123456789" not in str(refused.value)


def test_a_good_token_set_in_code_or_read_from_the_environment_is_kept(tmp_path: Path) -> None:
    token = "s3cret-0123456789abcdef"
    built = Settings(workspace=tmp_path / "ws", snapshots=tmp_path / "snap", token=token)
    assert built.token == token
    parsed = settings_from_args(
        ["--workspace", str(tmp_path / "ws")], {"SANDBOX_HTTP_TOKEN": token}
    )
    assert parsed.token == token and "token" in parsed.given
    # dataclasses.replace re-runs the check: a good token cannot be swapped for a bad one.
    with pytest.raises(ConfigError, match=r"^Settings\.token: .*at least 16"):
        dataclasses.replace(parsed, token="short")


@pytest.mark.parametrize(
    ("host", "allowed", "says"),
    [
        pytest.param("0.0.0.0", False, "on 0.0.0.0 without a token", id="any-address"),  # noqa: S104
        pytest.param("0.0.0.0", True, "honoured on a loopback host only", id="any-address-opt-in"),  # noqa: S104
        pytest.param("192.168.1.5", True, "on 192.168.1.5 without a token", id="lan"),
        pytest.param("127.0.0.1", False, "pass --allow-unauthenticated-http", id="loopback"),
        pytest.param("::1", False, "pass --allow-unauthenticated-http", id="loopback-v6"),
    ],
)
def test_http_without_a_token_built_in_code_meets_the_command_lines_rule(
    tmp_path: Path, host: str, allowed: bool, says: str
) -> None:
    """Settings built in code (or replaced) are held to the rule the command line enforces."""
    base = {"workspace": tmp_path / "ws", "snapshots": tmp_path / "snap"}
    with pytest.raises(ConfigError, match=says):
        Settings(
            **base,  # type: ignore[arg-type]
            transport="streamable-http",
            host=host,
            allow_unauthenticated_http=allowed,
        )
    stdio = Settings(**base, host=host, allow_unauthenticated_http=allowed)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=says):
        dataclasses.replace(stdio, transport="streamable-http")
    with_token = dataclasses.replace(stdio, token="s3cret-0123456789abcdef")
    assert dataclasses.replace(with_token, transport="streamable-http").token is not None


def test_http_without_a_token_on_loopback_with_the_opt_in_is_built(tmp_path: Path) -> None:
    built = Settings(
        workspace=tmp_path / "ws",
        snapshots=tmp_path / "snap",
        transport="streamable-http",
        host="127.0.0.1",
        allow_unauthenticated_http=True,
    )
    assert built.token is None and built.transport == "streamable-http"


@pytest.mark.parametrize("flag", ["--token-f", "--memory-lim", "--ready-c"])
def test_abbreviated_flags_are_refused(flag: str) -> None:
    with pytest.raises(SystemExit) as exc:
        settings_from_args([flag, "1"], environ={})
    assert exc.value.code == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["--memory-limit", "700M"],
        ["--memory-limit=700M"],
        ["--memory-limit", "512M"],  # equal to the default: given all the same
    ],
)
def test_a_given_memory_limit_wins_over_the_profile_however_spelt(argv: list[str]) -> None:
    settings = settings_from_args(["--profile", "datascience", *argv], environ={})
    assert settings.memory_bytes == size(argv[-1].rsplit("=", 1)[-1])
    assert "memory_bytes" in settings.given


def test_the_profile_memory_applies_when_not_given() -> None:
    settings = settings_from_args(["--profile", "datascience"], environ={})
    assert settings.memory_bytes == 1024**3
    assert "memory_bytes" not in settings.given
    assert settings.given == frozenset({"profile"})
    from_env = settings_from_args([], environ={"SANDBOX_PROFILE": "datascience"})
    assert from_env.memory_bytes == 1024**3 and from_env.given == frozenset({"profile"})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"max_body_bytes": 2 * 1024**2, "max_body_in_flight_bytes": 1024**2}, "exceeds"),
        ({"max_body_bytes": 65 * 1024**2}, "--max-body 65M exceeds --max-body-in-flight 64M"),
        ({"default_timeout_s": 61.0}, "--default-timeout 61.0 s exceeds --max-timeout 60.0 s"),
        ({"default_timeout_s": 5.0, "max_timeout_s": 4.0}, "exceeds --max-timeout"),
        ({"profile": "datascience", "require_layers": ("seccomp",)}, "missing: landlock"),
    ],
)
def test_cross_field_rules_hold_for_settings_built_in_code(
    tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings(workspace=tmp_path / "w", snapshots=tmp_path / "s", **changes)  # type: ignore[arg-type]
    base = Settings(workspace=tmp_path / "w", snapshots=tmp_path / "s")
    with pytest.raises(ConfigError, match=message):
        dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"ready_children": 9}, "--ready-children must be between 0 and 8"),
        ({"ready_max_idle_s": float("nan")}, "at least 0.1"),
        ({"stream_excerpt_bytes": 10}, "--stream-excerpt must be between 1024 and 131072"),
        ({"max_timeout_s": float("inf")}, "--max-timeout must be a positive, finite"),
        ({"queue_length": 0}, "--queue-length must be a positive"),
        ({"memory_bytes": -1}, "--memory-limit must be a positive"),
        ({"transport": "carrier-pigeon"}, "--transport: unknown value carrier-pigeon"),
        ({"require_layers": ("landlock", "apparmor")}, "unknown value apparmor"),
        ({"max_concurrent_runs": 0}, "--max-concurrent-runs must be at least 1"),
    ],
)
def test_bounds_and_choices_hold_for_settings_built_in_code(
    tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings(workspace=tmp_path / "w", snapshots=tmp_path / "s", **changes)  # type: ignore[arg-type]


def test_the_memory_help_states_the_rlimits_pysandbox_sets() -> None:
    import resource

    from pysandbox import Limits
    from pysandbox._config import rlimits

    limits = Limits(memory_bytes=300 * 1024**2)
    set_by_pysandbox = {kind: soft for kind, soft, _hard in rlimits(limits)}
    assert set_by_pysandbox[resource.RLIMIT_DATA] == limits.memory_bytes
    assert set_by_pysandbox[resource.RLIMIT_AS] == 2 * limits.memory_bytes
    (memory,) = [s for f, s in declarations() if f.name == "memory_bytes"]
    assert "RLIMIT_DATA of this size and RLIMIT_AS of twice it" in memory.help
    assert "RLIMIT_DATA of this size and RLIMIT_AS of twice it" in settings_page()
    assert "Address-space limit of one run (``RLIMIT_AS``)" not in (Settings.__doc__ or "")


def _descriptions(settings: Settings) -> tuple[str, dict[str, str]]:
    async def main() -> tuple[str, dict[str, str]]:
        app, state = create_server(settings)
        try:
            async with Client(app) as client:
                tools = (await client.list_tools()).tools
                return client.instructions or "", {t.name: t.description or "" for t in tools}
        finally:
            state.close()

    return anyio.run(main)


def test_help_page_and_descriptions_agree_on_a_changed_setting(tmp_path: Path) -> None:
    """One changed declaration default reaches ``--help``, the page and the tool descriptions."""
    fields = {f.name: f for f in dataclasses.fields(Settings)}
    changed = Settings(
        workspace=tmp_path / "w",
        snapshots=tmp_path / "s",
        default_timeout_s=7.0,
        output_bytes=3 * 1024**2,
        memory_bytes=768 * 1024**2,
        diff_deadline_s=12.0,
        export_max_bytes=100 * 1024**2,
    )
    assert fields["default_timeout_s"].default == 10.0  # what "changed" means
    help_text = _help(build_parser({}, defaults=changed).format_help())
    assert "(env SANDBOX_DEFAULT_TIMEOUT) (default: 7)" in help_text
    assert "(env SANDBOX_OUTPUT_LIMIT) (default: 3M)" in help_text
    assert "(env SANDBOX_MEMORY_LIMIT) (default: 768M)" in help_text
    page = settings_page(changed)
    assert "| `--default-timeout` | `SANDBOX_DEFAULT_TIMEOUT` | `7` |" in page
    assert "| `--output-limit` | `SANDBOX_OUTPUT_LIMIT` | `3M` |" in page
    assert "| `--memory-limit` | `SANDBOX_MEMORY_LIMIT` | `768M` |" in page
    # The parser built from those defaults gives those settings, and the server says so.
    parsed = prepare_directories(_parse_with(changed, tmp_path), environ={})
    instructions, tools = _descriptions(parsed)
    for text in (instructions, tools["run_sandbox_code"]):
        assert "time-out 7 s by default, at most 60 s" in text
        assert "768 MiB of memory" in text and "a stream past 3 MiB stops the run" in text
    assert "within 12 s and 512 MiB (--diff-deadline" in tools["diff_state_snapshots"]
    assert "(100 MiB, --export-max)" in tools["export_state_snapshot"]
    assert "| `--diff-deadline` | `SANDBOX_DIFF_DEADLINE` | `12` |" in page
    assert '"diff stopped after 12 s / 512 MiB' in page
    # And the committed page shows the declared defaults, not the changed ones.
    assert "| `--default-timeout` | `SANDBOX_DEFAULT_TIMEOUT` | `10` |" in settings_page()


def _parse_with(defaults: Settings, tmp_path: Path) -> Settings:
    """Settings parsed by a parser whose defaults are ``defaults`` (no flag given)."""
    parser = build_parser({}, defaults=defaults)
    args = parser.parse_args(
        ["--workspace", str(tmp_path / "w"), "--snapshots", str(tmp_path / "s")]
    )
    values = {f.name: getattr(args, f.name) for f, s in declarations() if not s.secret}
    values["workspace"] = Path(values["workspace"])
    values["snapshots"] = Path(values["snapshots"])
    return Settings(**values)
