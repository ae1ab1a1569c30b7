"""Start-up behaviour of the console script: bad directories fail with one clear line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from _paths import PACKAGE_DIR


def _start(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_secure_sandbox", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env=env,
    )


def test_missing_parent_is_one_line_and_nonzero(tmp_path: Path) -> None:
    proc = _start(
        "--workspace", str(tmp_path / "no" / "such" / "ws"), "--snapshots", str(tmp_path / "s")
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "parent directory" in lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_workspace_is_refused(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    proc = _start("--workspace", str(ro), "--snapshots", str(tmp_path / "s"))
    assert proc.returncode == 2
    assert "not writable" in proc.stderr


def test_root_as_workspace_is_refused(tmp_path: Path) -> None:
    proc = _start("--workspace", "/", "--snapshots", str(tmp_path / "s"))
    assert proc.returncode == 2
    # pysandbox's check (as root, who may write to /; others are refused as they cannot write)
    expected = "must not be the root directory" if os.geteuid() == 0 else "not writable"
    assert expected in proc.stderr
    assert proc.stdout == ""
    assert not (tmp_path / "s").exists()


def test_workspace_overlapping_store_is_refused(tmp_path: Path) -> None:
    proc = _start(
        "--workspace", str(tmp_path / "ws"), "--snapshots", str(tmp_path / "ws" / "snaps")
    )
    assert proc.returncode == 2
    assert "overlap" in proc.stderr
    # The directories this start created are removed again.
    assert not (tmp_path / "ws").exists()


def test_workspace_inside_interpreter_is_refused(tmp_path: Path) -> None:
    workspace = Path(sys.prefix) / f"ws-{tmp_path.name}"
    proc = _start("--workspace", str(workspace), "--snapshots", str(tmp_path / "s"))
    assert proc.returncode == 2
    assert "overlaps" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not workspace.exists()


def test_workspace_inside_the_servers_package_is_refused(tmp_path: Path) -> None:
    """Refused by pysandbox (installed in the environment) or by the server (editable)."""
    import mcp_secure_sandbox

    package = Path(mcp_secure_sandbox.__file__).resolve().parent
    workspace = package / f"ws-{tmp_path.name}"
    proc = _start("--workspace", str(workspace), "--snapshots", str(tmp_path / "s"))
    assert proc.returncode == 2
    assert "overlaps" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not workspace.exists()


def test_help_documents_settings_with_defaults() -> None:
    proc = _start("--help")
    assert proc.returncode == 0
    for flag in ("--workspace", "--snapshots", "--default-timeout", "--max-timeout", "--log-level"):
        assert flag in proc.stdout
    assert "SANDBOX_WORKSPACE" in proc.stdout
    assert "./sandbox_workspace" in proc.stdout


def test_flag_defaults_are_the_settings_defaults() -> None:
    from mcp_secure_sandbox.settings import Settings, build_parser, settings_from_args

    parsed = settings_from_args([], environ={})
    assert parsed == Settings(workspace=parsed.workspace, snapshots=parsed.snapshots)
    text = " ".join(build_parser({}).format_help().split())
    for shown in (
        "(default: 512M)",
        "(default: 10)",
        "(default: landlock,seccomp)",
        # The admission queue and the one body limit: 8 MiB of content as Base64 + 1 MiB.
        "(env SANDBOX_ADMISSION_WAIT) (default: 30)",
        "(env SANDBOX_QUEUE_LENGTH) (default: 32)",
        "(env SANDBOX_MAX_BODY) (default: 12M)",
        "(env SANDBOX_MAX_BODY_IN_FLIGHT) (default: 64M)",
        "a run waits at most its timeout_sec + 5 s",
    ):
        assert shown in text


def test_the_settings_page_gives_the_queue_and_body_defaults_of_the_settings() -> None:
    from mcp_secure_sandbox.settings import declarations

    page = (PACKAGE_DIR / "docs" / "settings.md").read_text()
    shown = {"--admission-wait": "30", "--queue-length": "32", "--max-body": "12M"}
    shown["--max-body-in-flight"] = "64M"
    for flag, default in shown.items():
        (setting,) = [s for _f, s in declarations() if s.flag == flag]
        row = f"| `{flag}` | `{setting.env}` | `{default}` |"
        assert row in page, row


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["--max-body", "70M"], {}),
        (["--max-body-in-flight", "8M"], {}),
        ([], {"SANDBOX_MAX_BODY": "2M", "SANDBOX_MAX_BODY_IN_FLIGHT": "1M"}),
    ],
)
def test_a_body_limit_over_the_in_flight_budget_is_refused(
    argv: list[str], env: dict[str, str]
) -> None:
    from mcp_secure_sandbox.settings import ConfigError, settings_from_args

    with pytest.raises(ConfigError, match=r"exceeds --max-body-in-flight .*: one body could"):
        settings_from_args(argv, environ=env)


@pytest.mark.parametrize("value", ["0", "-3", "x"])
def test_the_queue_length_must_be_a_positive_whole_number(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from mcp_secure_sandbox.settings import settings_from_args

    with pytest.raises(SystemExit):
        settings_from_args(["--queue-length", value], environ={})
    assert "--queue-length" in capsys.readouterr().err


def test_defaults_are_created_in_the_current_directory(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_secure_sandbox"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    # stdin at EOF: the server starts, creates its directories and shuts down cleanly.
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert (tmp_path / "sandbox_workspace").is_dir()
    assert (tmp_path / "sandbox_snapshots").is_dir()


@pytest.mark.parametrize(
    ("variable", "value", "needles"),
    [
        ("SANDBOX_MEMORY_LIMIT", "lots", ("--memory-limit", "not a size")),
        ("SANDBOX_TRANSPORT", "carrier-pigeon", ("SANDBOX_TRANSPORT", "stdio, streamable-http")),
    ],
)
def test_bad_environment_values_are_one_clear_line(
    tmp_path: Path, variable: str, value: str, needles: tuple[str, ...]
) -> None:
    proc = _start("--workspace", str(tmp_path / "w"), env={**os.environ, variable: value})
    assert proc.returncode == 2
    for needle in needles:
        assert needle in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("variable", "value", "field", "expected"),
    [
        ("SANDBOX_DEFAULT_TIMEOUT", "2.5", "default_timeout_s", 2.5),
        ("SANDBOX_MAX_TIMEOUT", "30", "max_timeout_s", 30.0),
        ("SANDBOX_MEMORY_LIMIT", "300M", "memory_bytes", 300 * 1024**2),
        ("SANDBOX_OUTPUT_LIMIT", "2K", "output_bytes", 2048),
        ("SANDBOX_FILE_SIZE_LIMIT", "1M", "file_size_bytes", 1024**2),
        ("SANDBOX_WORKSPACE_QUOTA", "2G", "workspace_bytes", 2 * 1024**3),
        ("SANDBOX_WORKSPACE_MAX_FILES", "77", "workspace_files", 77),
        ("SANDBOX_MAX_CONCURRENT_RUNS", "3", "max_concurrent_runs", 3),
        ("SANDBOX_EXTRA_MODULES", "csv, decimal", "extra_modules", ("csv", "decimal")),
        ("SANDBOX_EXECUTION", "spawn", "execution", "spawn"),
        ("SANDBOX_REQUIRE_LAYERS", "none", "require_layers", ()),
        ("SANDBOX_REQUIRE_LAYERS", "seccomp", "require_layers", ("seccomp",)),
        ("SANDBOX_LOG_LEVEL", "debug", "log_level", "DEBUG"),
        ("SANDBOX_TRANSPORT", "streamable-http", "transport", "streamable-http"),
        ("SANDBOX_PORT", "8123", "port", 8123),
        ("SANDBOX_ALLOWED_HOSTS", "a:1,b:2", "allowed_hosts", ("a:1", "b:2")),
        ("SANDBOX_ALLOWED_ORIGINS", "http://x", "allowed_origins", ("http://x",)),
        ("SANDBOX_MAX_BODY", "1K", "max_body_bytes", 1024),
        ("SANDBOX_ALLOW_UNAUTHENTICATED_HTTP", "1", "allow_unauthenticated_http", True),
        ("SANDBOX_HTTP_REQUEST_TIMEOUT", "2.5", "http_request_timeout_s", 2.5),
        ("SANDBOX_HTTP_MAX_CONNECTIONS", "40", "http_max_connections", 40),
        ("SANDBOX_READY_CHILDREN", "0", "ready_children", 0),
        ("SANDBOX_READY_CHILDREN", "5", "ready_children", 5),
        ("SANDBOX_READY_MAX_IDLE", "2.5", "ready_max_idle_s", 2.5),
    ],
)
def test_each_variable_reaches_its_setting(
    variable: str, value: str, field: str, expected: object
) -> None:
    from mcp_secure_sandbox.settings import Settings, settings_from_args

    # a token, so that HTTP settings are accepted; it only changes http_auth
    environ = {variable: value, "SANDBOX_HTTP_TOKEN": "t" * 16}
    settings = settings_from_args([], environ=environ)
    assert getattr(settings, field) == expected
    defaults = Settings(workspace=settings.workspace, snapshots=settings.snapshots)
    # the parser's defaults are the dataclass's: nothing else moved
    changed = {k for k, v in defaults.to_dict().items() if settings.to_dict()[k] != v}
    assert changed <= {field, "http_auth"}


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SANDBOX_HTTP_REQUEST_TIMEOUT", "0"),
        ("SANDBOX_HTTP_REQUEST_TIMEOUT", "-1"),
        ("SANDBOX_HTTP_REQUEST_TIMEOUT", "inf"),
        ("SANDBOX_HTTP_REQUEST_TIMEOUT", "nan"),
        ("SANDBOX_HTTP_REQUEST_TIMEOUT", "soon"),
        ("SANDBOX_HTTP_MAX_CONNECTIONS", "0"),
        ("SANDBOX_HTTP_MAX_CONNECTIONS", "1.5"),
    ],
)
def test_http_limits_must_be_positive(variable: str, value: str) -> None:
    from mcp_secure_sandbox.settings import settings_from_args

    with pytest.raises(SystemExit) as exc:
        settings_from_args([], environ={variable: value})
    assert exc.value.code == 2


def test_sizes_accept_suffixes() -> None:
    from mcp_secure_sandbox.settings import settings_from_args

    settings = settings_from_args(["--memory-limit", "256M", "--output-limit", "64K"], environ={})
    assert settings.memory_bytes == 256 * 1024 * 1024
    assert settings.output_bytes == 64 * 1024
    assert settings.max_concurrent_runs >= 1
    from_env = settings_from_args(
        [], environ={"SANDBOX_WORKSPACE_QUOTA": "2G", "SANDBOX_LOG_LEVEL": "debug"}
    )
    assert from_env.workspace_bytes == 2 * 1024**3
    assert from_env.log_level == "DEBUG"
    assert "token" not in from_env.to_dict()


def test_a_bad_size_names_the_suffixes(capsys: pytest.CaptureFixture[str]) -> None:
    from mcp_secure_sandbox.settings import settings_from_args

    with pytest.raises(SystemExit) as exc:
        settings_from_args(["--memory-limit", "1X"], environ={})
    assert exc.value.code == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .endswith(
            "argument --memory-limit: not a size in bytes: '1X'; give a whole number with an "
            "optional K, M or G suffix (powers of 1024), such as 512M or 1048576"
        )
    )


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--extra-modules", "no such mod!"], "no such mod"),
        (["--max-timeout", "inf"], "finite"),
    ],
)
def test_values_the_libraries_refuse_are_one_line(
    tmp_path: Path, flags: list[str], needle: str
) -> None:
    proc = _start("--workspace", str(tmp_path / "w"), "--snapshots", str(tmp_path / "s"), *flags)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_ready_pool_defaults_are_pysandboxs() -> None:
    import pysandbox
    from mcp_secure_sandbox.settings import settings_from_args

    settings = settings_from_args([], environ={})
    assert settings.ready_children == pysandbox.READY_CHILDREN == 2
    assert settings.ready_max_idle_s == pysandbox.READY_MAX_IDLE_S == 60.0
    assert pysandbox.READY_MIN_IDLE_S == 0.1  # the refusals below name it


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--ready-children", "-1", "between 0 and 8"),
        ("--ready-children", "9", "between 0 and 8"),
        ("--ready-max-idle", "0.05", "at least 0.1"),
        ("--ready-max-idle", "inf", "at least 0.1"),
        ("--ready-max-idle", "nan", "at least 0.1"),
    ],
)
def test_ready_pool_settings_out_of_range_are_refused(flag: str, value: str, message: str) -> None:
    from mcp_secure_sandbox.settings import ConfigError, settings_from_args

    with pytest.raises(ConfigError, match=message):
        settings_from_args([flag, value], environ={})
