"""The run limits and the sandbox configuration have one home, pysandbox; the server takes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_secure_sandbox.settings import ConfigError, Settings, settings_from_args
from pysandbox import Limits

FIELDS = ("memory_bytes", "output_bytes", "file_size_bytes", "workspace_bytes", "workspace_files")


@pytest.mark.parametrize("name", FIELDS)
def test_the_server_default_is_pysandbox_s(name: str) -> None:
    settings = Settings(workspace=Path("ws"), snapshots=Path("snaps"))
    assert getattr(settings, name) == getattr(Limits(), name)
    assert getattr(settings_from_args([], {}), name) == getattr(Limits(), name)


def test_the_workspace_default_is_one_gib() -> None:
    assert Limits().workspace_bytes == 1024**3
    assert settings_from_args([], {}).workspace_bytes == 1024**3


def test_the_sandbox_config_is_built_from_the_settings_in_one_call() -> None:
    settings = settings_from_args(
        ["--max-concurrent-runs", "3", "--execution", "spawn", "--extra-modules", "json"], {}
    )
    config = settings.sandbox_config()
    assert config.max_concurrent_runs == 3
    assert config.execution == "spawn"
    assert config.extra_modules == ("json",)
    assert config.require == ("landlock", "seccomp")
    assert config.limits.timeout_s == settings.max_timeout_s
    assert config.limits.workspace_bytes == settings.workspace_bytes


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-concurrent-runs", "0"], "--max-concurrent-runs must be at least 1, got 0"),
        (["--max-concurrent-runs", "-2"], "--max-concurrent-runs must be at least 1"),
        # pysandbox's bounds the server had no copy of: refused at start, not at the first run.
        (["--memory-limit", "1M"], "--memory-limit must be at least 67108864, got 1048576"),
        (["--memory-limit", "63M"], "--memory-limit must be at least 67108864"),
        (["--ready-max-idle", "0.01"], "--ready-max-idle must be a finite number of seconds of"),
    ],
)
def test_pysandbox_s_bounds_refuse_a_setting_by_its_flag(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        settings_from_args(argv, {})
    assert str(refused.value).startswith(message)


def test_the_settings_bounds_are_pysandbox_s_declarations() -> None:
    from mcp_secure_sandbox.settings import declarations
    from pysandbox import SandboxConfig, bound_of

    bounds = {item.name: setting.bounds for item, setting in declarations()}
    assert bounds["memory_bytes"] == (bound_of(Limits, "memory_bytes").minimum, None)
    assert bounds["max_concurrent_runs"] == (
        bound_of(SandboxConfig, "max_concurrent_runs").minimum,
        None,
    )
    assert bounds["ready_max_idle_s"] == (bound_of(SandboxConfig, "ready_max_idle_s").minimum, None)
