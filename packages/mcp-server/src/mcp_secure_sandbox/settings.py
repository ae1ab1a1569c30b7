"""Server settings: command-line flags over ``SANDBOX_*`` environment variables over defaults.

Every setting has a flag and an environment variable, except secrets, which come only from the
environment or a file (command lines are readable by every local user). ``--help`` lists them all
with their defaults.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_SNAPSHOTS",
    "DEFAULT_WORKSPACE",
    "ConfigError",
    "Settings",
    "build_parser",
    "prepare_directories",
    "settings_from_args",
]

DEFAULT_WORKSPACE = "./sandbox_workspace"
DEFAULT_SNAPSHOTS = "./sandbox_snapshots"


class ConfigError(Exception):
    """A setting is invalid or the directories it names cannot be used.

    The message is one line meant for a person reading a terminal; the server prints it on stderr
    and exits with status 2 instead of showing a traceback.
    """


@dataclass(frozen=True)
class Settings:
    """The settings in force for one server process.

    Attributes:
        workspace: Directory the sandboxed code runs in (absolute once prepared).
        snapshots: Directory of the snapshot store (absolute once prepared).
        default_timeout_s: Wall-clock time-out of a run when the call gives none, in seconds.
        max_timeout_s: Largest time-out a call may ask for, in seconds.
        log_level: Level of the ``logging`` output on stderr.
        transport: ``"stdio"`` (the only transport of this release).
        workspace_fallback: True when the default workspace could not be used in the current
            directory and the user's data directory was used instead.
    """

    workspace: Path
    snapshots: Path
    default_timeout_s: float = 10.0
    max_timeout_s: float = 60.0
    log_level: str = "INFO"
    transport: str = "stdio"
    workspace_fallback: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return the settings as JSON-compatible data (paths as absolute strings)."""
        return {
            "workspace": str(self.workspace),
            "snapshots": str(self.snapshots),
            "default_timeout_s": self.default_timeout_s,
            "max_timeout_s": self.max_timeout_s,
            "log_level": self.log_level,
            "transport": self.transport,
            "workspace_fallback": self.workspace_fallback,
        }


def _env(environ: Mapping[str, str], name: str, default: str) -> str:
    return environ.get(f"SANDBOX_{name}", default)


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """Build the command-line parser; defaults come from ``SANDBOX_*`` variables in ``environ``.

    Args:
        environ: The environment to read defaults from (``os.environ`` when ``None``).

    Returns:
        An :class:`argparse.ArgumentParser` whose ``--help`` documents every setting.
    """
    env = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(
        prog="mcp-secure-sandbox",
        description=(
            "MCP server that runs untrusted Python in a layered sandbox, validates JSON and CSV "
            "data, and snapshots and restores its workspace. Speaks MCP on stdio."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--workspace",
        default=_env(env, "WORKSPACE", DEFAULT_WORKSPACE),
        help="directory the sandboxed code runs in (env SANDBOX_WORKSPACE); created if missing",
    )
    parser.add_argument(
        "--snapshots",
        default=_env(env, "SNAPSHOTS", DEFAULT_SNAPSHOTS),
        help="directory of the snapshot store (env SANDBOX_SNAPSHOTS); created if missing",
    )
    parser.add_argument(
        "--default-timeout",
        type=float,
        default=float(_env(env, "DEFAULT_TIMEOUT", "10")),
        help="time-out of a run in seconds when the call gives none (env SANDBOX_DEFAULT_TIMEOUT)",
    )
    parser.add_argument(
        "--max-timeout",
        type=float,
        default=float(_env(env, "MAX_TIMEOUT", "60")),
        help="largest time-out in seconds a call may ask for (env SANDBOX_MAX_TIMEOUT)",
    )
    parser.add_argument(
        "--log-level",
        default=_env(env, "LOG_LEVEL", "INFO").upper(),
        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
        help="level of the log written to stderr (env SANDBOX_LOG_LEVEL)",
    )
    parser.add_argument(
        "--transport",
        default=_env(env, "TRANSPORT", "stdio"),
        choices=["stdio"],
        help="MCP transport (env SANDBOX_TRANSPORT)",
    )
    return parser


def settings_from_args(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Parse flags and environment into :class:`Settings` (directories not yet prepared).

    Args:
        argv: Command-line arguments without the program name (``sys.argv[1:]`` when ``None``).
        environ: Environment for ``SANDBOX_*`` defaults (``os.environ`` when ``None``).

    Returns:
        The parsed settings, paths made absolute but not created.

    Raises:
        ConfigError: A time-out is not positive or the default exceeds the maximum.
        SystemExit: From argparse, for unknown flags or ``--help``.
    """
    args = build_parser(environ).parse_args(argv)
    if not args.default_timeout > 0 or not args.max_timeout > 0:
        raise ConfigError("time-outs must be positive numbers of seconds")
    if args.default_timeout > args.max_timeout:
        raise ConfigError(
            f"--default-timeout {args.default_timeout} s exceeds --max-timeout {args.max_timeout} s"
        )
    return Settings(
        workspace=Path(os.path.abspath(args.workspace)),  # noqa: PTH100 - no symlink resolution
        snapshots=Path(os.path.abspath(args.snapshots)),  # noqa: PTH100
        default_timeout_s=args.default_timeout,
        max_timeout_s=args.max_timeout,
        log_level=args.log_level,
        transport=args.transport,
    )


def _forbidden_roots() -> list[tuple[Path, str]]:
    """Directories a workspace must neither equal nor overlap, with the reason for each."""
    roots: list[tuple[Path, str]] = []
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        roots.append((Path(prefix).resolve(), "the Python installation or virtual environment"))
    for entry in sys.path:
        if entry and Path(entry).is_dir() and "site-packages" in entry:
            roots.append((Path(entry).resolve(), "installed packages"))
    package_dir = Path(__file__).resolve().parent
    roots.append((package_dir, "the server's own package"))
    return roots


def _overlaps(a: Path, b: Path) -> bool:
    return a == b or a.is_relative_to(b) or b.is_relative_to(a)


def _check_location(workspace: Path, snapshots: Path) -> None:
    ws = workspace.resolve()
    store = snapshots.resolve()
    if ws == Path(ws.anchor):
        raise ConfigError(
            f"workspace {workspace} is the filesystem root; choose a dedicated folder"
        )
    try:
        home: Path | None = Path.home().resolve()
    except (RuntimeError, KeyError):  # an arbitrary --user uid without a passwd entry or HOME
        home = None
    if ws == home:
        raise ConfigError(f"workspace {workspace} is a home directory; choose a dedicated folder")
    if _overlaps(ws, store):
        raise ConfigError(
            f"workspace {workspace} and snapshot store {snapshots} overlap; "
            "sandboxed code could then reach the snapshots"
        )
    for root, what in _forbidden_roots():
        if _overlaps(ws, root):
            raise ConfigError(f"workspace {workspace} overlaps {what} ({root})")


def _make_dir(path: Path, what: str) -> None:
    if path.is_symlink():
        raise ConfigError(f"{what} {path} is a symbolic link; give the real directory")
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"{what} {path} exists and is not a directory")
    else:
        if not path.parent.is_dir():
            raise ConfigError(f"{what} {path}: parent directory {path.parent} does not exist")
        try:
            path.mkdir(mode=0o700)
        except OSError as exc:
            raise ConfigError(f"{what} {path} cannot be created: {exc.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {path} is not writable by this user")


def _fallback_base(environ: Mapping[str, str]) -> Path:
    data_home = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "mcp-secure-sandbox"


def prepare_directories(settings: Settings, environ: Mapping[str, str] | None = None) -> Settings:
    """Validate the workspace and snapshot locations and create them if missing.

    When both directories are the defaults and the current directory is ``/`` or not writable
    (as when a desktop client starts the server), they move to the user's data directory
    (``$XDG_DATA_HOME/mcp-secure-sandbox``) and ``workspace_fallback`` is set.

    Args:
        settings: Parsed settings.
        environ: Environment for the data-directory lookup (``os.environ`` when ``None``).

    Returns:
        Settings with absolute, existing, writable directories.

    Raises:
        ConfigError: A directory cannot be used: its parent is missing, it is not writable, it is
            ``/`` or a home directory, it overlaps the snapshot store, the interpreter, the virtual
            environment or an installed package.
    """
    env = os.environ if environ is None else environ
    cwd = Path.cwd()
    is_default = settings.workspace == cwd / "sandbox_workspace" and (
        settings.snapshots == cwd / "sandbox_snapshots"
    )
    if is_default and (cwd == Path(cwd.anchor) or not os.access(cwd, os.W_OK)):
        base = _fallback_base(env)
        base.mkdir(parents=True, exist_ok=True, mode=0o700)
        settings = Settings(
            workspace=base / "sandbox_workspace",
            snapshots=base / "sandbox_snapshots",
            default_timeout_s=settings.default_timeout_s,
            max_timeout_s=settings.max_timeout_s,
            log_level=settings.log_level,
            transport=settings.transport,
            workspace_fallback=True,
        )
    _check_location(settings.workspace, settings.snapshots)
    _make_dir(settings.workspace, "workspace")
    _make_dir(settings.snapshots, "snapshot directory")
    return settings
