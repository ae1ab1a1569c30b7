"""Server settings: command-line flags over ``SANDBOX_*`` environment variables over defaults.

Every setting has a flag and an environment variable, except secrets, which come only from the
environment or a file (command lines are readable by every local user). ``--help`` lists them all
with their defaults.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import astguard
from mcp_secure_sandbox import _sizes
from mcp_secure_sandbox._sizes import MAX_WRITE_BYTES
from mcp_secure_sandbox.concurrency import RUN_WAIT_GRACE_S
from pysandbox import (
    KERNEL_LAYERS,
    PROFILES,
    READY_CHILDREN,
    READY_MAX_IDLE_S,
    READY_MIN_IDLE_S,
    ExecutionMode,
    Layer,
    Limits,
    SandboxConfig,
)
from wsnapshot import S3_SCHEME, StoreConfigError, parse_s3_url

__all__ = [
    "DEFAULT_SNAPSHOTS",
    "DEFAULT_WORKSPACE",
    "LOOPBACK_HOSTS",
    "MAX_READY_CHILDREN",
    "ConfigError",
    "Settings",
    "build_parser",
    "check_importable_overlap",
    "prepare_directories",
    "settings_from_args",
]

DEFAULT_WORKSPACE = "./sandbox_workspace"
DEFAULT_SNAPSHOTS = "./sandbox_snapshots"
#: Most ready children a server keeps (``--ready-children``): 8 pids of compose's 128, ~20 MiB.
MAX_READY_CHILDREN = 8
_MIB = 1024 * 1024
#: Default ``--max-body``: the largest content a tool takes (8 MiB) as Base64 (x 4/3, rounded up
#: to a MiB), plus 1 MiB for the JSON-RPC envelope and the other arguments: 12 MiB.
DEFAULT_MAX_BODY = -(-MAX_WRITE_BYTES * 4 // 3 // _MIB) * _MIB + _MIB
#: pysandbox's default limits: the defaults of the run limits below.
_LIMITS = Limits()


class ConfigError(Exception):
    """A setting is invalid or the directories it names cannot be used.

    The message is one line meant for a person reading a terminal; the server prints it on stderr
    and exits with status 2 instead of showing a traceback.
    """


@dataclass(frozen=True)
class Settings:
    """The settings in force for one server process.

    Every field but ``workspace_fallback`` and ``token`` has a flag and a ``SANDBOX_*`` variable
    (``mcp-secure-sandbox --help`` lists them with their defaults).

    Attributes:
        workspace: Directory the sandboxed code runs in (absolute once prepared).
        snapshots: Directory of the snapshot store (absolute once prepared); with
            ``snapshots_url``, the local state directory of that store (its lock, staging files
            and restore journal), ``./sandbox_snapshots`` by default.
        snapshots_url: ``s3://BUCKET/PREFIX`` when ``--snapshots`` names S3-compatible
            storage (endpoint and credentials only from the ``AWS_*`` environment), else
            ``None``.
        default_timeout_s: Wall-clock time-out of a run when the call gives none, in seconds.
        max_timeout_s: Largest time-out a call may ask for, in seconds; also the CPU-time limit
            (rounded up) of every run.
        memory_bytes: Address-space limit of one run (``RLIMIT_AS``), in bytes.
        output_bytes: Kill cap on each of stdout and stderr of one run, in bytes (pysandbox's
            ``Limits.output_bytes``); what an answer carries is :mod:`mcp_secure_sandbox.budget`'s.
        file_size_bytes: Largest file a run may write (``RLIMIT_FSIZE``), in bytes.
        workspace_bytes: Largest total size of the workspace, in bytes.
        workspace_files: Largest number of files in the workspace.
        max_concurrent_runs: Runs admitted at once; further calls wait their turn.
        ready_children: Children the warm zygote keeps forked and confined (every layer
            applied) for the next runs, at most :data:`MAX_READY_CHILDREN`; 0 switches the pool
            off. The default is pysandbox's (``pysandbox.READY_CHILDREN``, 2). Budget: an idle
            ready child is one process of one thread with about 2.3 MiB of private memory (its
            ~11 MiB RSS is the zygote's pages, shared copy-on-write); a claimed child is a run
            under ``memory_bytes`` and the pool is refilled after the run ends, so at most
            ``max_concurrent_runs + ready_children`` children exist. Under compose's 1 GiB /
            128 pids, 2 ready children take 2 pids and about 5 MiB, 8 take 8 pids and ~20 MiB.
        ready_max_idle_s: Seconds a ready child waits before it is replaced (pysandbox's
            ``READY_MAX_IDLE_S`` by default, 60), at least ``pysandbox.READY_MIN_IDLE_S``.
        extra_modules: Modules allowed on top of astguard's default allow-list (a profile's
            included).
        profile: ``"none"`` or a name of :data:`mcp_secure_sandbox.profiles.PROFILES`.
        preload: Modules the warm zygote imports once (the profile's).
        require_layers: Kernel layers (``"landlock"``, ``"seccomp"``) a run refuses to go
            without; empty accepts Python-level isolation only, which is unsafe.
        execution: ``"warm"`` (fork each run from a prepared zygote) or ``"spawn"``.
        log_level: Level of the ``logging`` output on stderr.
        transport: ``"stdio"`` or ``"streamable-http"``.
        host: Address the HTTP transport binds.
        port: Port of the HTTP transport.
        allowed_hosts: ``Host`` header values HTTP accepts (empty: the bound host and port).
        allowed_origins: ``Origin`` header values HTTP accepts.
        allow_unauthenticated_http: Serve HTTP without a token (loopback binds only).
        max_body_bytes: Largest HTTP request body, in bytes (:data:`DEFAULT_MAX_BODY`: 8 MiB of
            content as Base64 plus 1 MiB); a larger one gets 413 with a JSON-RPC error.
        max_body_in_flight_bytes: Request bodies the HTTP transport holds at once, in bytes (each
            counted by its ``Content-Length``, else ``max_body_bytes``); past it a request waits
            up to ``admission_wait_s``, then gets 503 with ``Retry-After: 1``.
        http_request_timeout_s: Time a client has to send a whole request (request line,
            headers and body) from its connection or first byte, in seconds.
        http_max_connections: Largest number of open HTTP connections (further bounded by the
            soft ``RLIMIT_NOFILE``, see :func:`~mcp_secure_sandbox.http_transport.connection_cap`).
        worker_pool_size: Confined worker processes validating caller-supplied input at most
            (:mod:`mcp_secure_sandbox.workers`); also how many validations run at once.
        worker_deadline_s: Wall-clock time one validation may take in a worker, in seconds;
            past it the worker is killed and replaced.
        worker_memory_bytes: Address-space budget (``RLIMIT_AS``) of each worker, in bytes.
        diff_deadline_s: Wall-clock time one snapshot diff may take in its confined worker (a
            pool of one), in seconds.
        diff_memory_bytes: Address-space budget (``RLIMIT_AS``) of the diff worker, in bytes.
        admission_wait_s: Longest time a call other than a run waits in the admission queue
            for its turn (a worker, a snapshot or export slot, the workspace) before it is
            answered "busy, retry", in seconds; a run waits at most its own time-out plus
            :data:`~mcp_secure_sandbox.concurrency.RUN_WAIT_GRACE_S`.
        queue_length: Calls that may wait for their turn at once, all kinds together; a call
            finding the queue full is answered "busy, retry" at once.
        export_max_bytes: Largest export served over MCP (in chunks), in bytes; a larger one is
            refused with the host command that exports it.
        max_concurrent_exports: Export calls and export chunk reads served at once.
        max_images: Most images one run result carries as image content (see
            :mod:`mcp_secure_sandbox.rich`).
        stream_excerpt_bytes: What a run's answer keeps of each of stdout and stderr (head,
            tail and the cut marker), in UTF-8 bytes before JSON escaping; between
            :data:`~mcp_secure_sandbox.budget.STREAM_EXCERPT_MIN_BYTES` and
            :data:`~mcp_secure_sandbox.budget.STREAM_EXCERPT_MAX_BYTES`. The answer carries the
            excerpt twice (structured content and text), so the default keeps a 5 MB print's
            answer within 40 KiB.
        workspace_fallback: True when the default workspace could not be used in the current
            directory and the user's data directory was used instead.
        token: The HTTP bearer token, or ``None``; never printed, logged or returned.
    """

    workspace: Path
    snapshots: Path
    default_timeout_s: float = 10.0
    max_timeout_s: float = 60.0
    # A run's limits: pysandbox's defaults (``pysandbox.Limits``, their one home).
    memory_bytes: int = _LIMITS.memory_bytes
    output_bytes: int = _LIMITS.output_bytes
    file_size_bytes: int = _LIMITS.file_size_bytes
    workspace_bytes: int = _LIMITS.workspace_bytes
    workspace_files: int = _LIMITS.workspace_files
    max_concurrent_runs: int = field(default_factory=lambda: os.cpu_count() or 1)
    ready_children: int = READY_CHILDREN
    ready_max_idle_s: float = READY_MAX_IDLE_S
    extra_modules: tuple[str, ...] = ()
    profile: str = "none"
    preload: tuple[str, ...] = ()
    require_layers: tuple[str, ...] = tuple(str(layer) for layer in KERNEL_LAYERS)
    execution: str = str(ExecutionMode.WARM)
    log_level: str = "INFO"
    transport: str = "stdio"
    host: str = "127.0.0.1"
    port: int = 8000
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    allow_unauthenticated_http: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY
    max_body_in_flight_bytes: int = 64 * _MIB
    http_request_timeout_s: float = 30.0
    http_max_connections: int = 512
    worker_pool_size: int = 2
    worker_deadline_s: float = 10.0
    worker_memory_bytes: int = 256 * 1024 * 1024
    diff_deadline_s: float = 30.0
    diff_memory_bytes: int = 512 * 1024 * 1024
    admission_wait_s: float = 30.0
    queue_length: int = 32
    export_max_bytes: int = 256 * 1024 * 1024
    max_concurrent_exports: int = 2
    max_images: int = 4
    stream_excerpt_bytes: int = 16 * 1024
    workspace_fallback: bool = False
    snapshots_url: str | None = None
    token: str | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Return the settings as JSON-compatible data, paths absolute, without any secret.

        The HTTP token never appears, not even as a length or a mask: only whether auth is on.
        """
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "token"}
        data["workspace"] = str(self.workspace)
        data["snapshots"] = str(self.snapshots)
        for key, value in data.items():
            if isinstance(value, tuple):
                data[key] = list(value)
        data["http_auth"] = self.token is not None
        return data

    def sandbox_config(self, policy: astguard.Policy | None = None) -> SandboxConfig:
        """The sandbox's configuration from these settings, validated by pysandbox.

        The run's ceiling is the maximum time-out (each call passes its own, shorter one), and
        the CPU-time limit matches it so a long CPU-bound run ends by its time-out.

        Args:
            policy: The astguard policy (``None``: astguard's default with
                :attr:`extra_modules`, as the server builds it).

        Returns:
            The configuration ``pysandbox.Sandbox.from_config`` takes.

        Raises:
            ValueError: A value is out of pysandbox's bounds (its message names the field).
            TypeError: A value has the wrong type.
        """
        limits = Limits(
            timeout_s=self.max_timeout_s,
            cpu_time_s=math.ceil(self.max_timeout_s),
            memory_bytes=self.memory_bytes,
            output_bytes=self.output_bytes,
            file_size_bytes=self.file_size_bytes,
            workspace_bytes=self.workspace_bytes,
            workspace_files=self.workspace_files,
        )
        return SandboxConfig(
            limits=limits,
            policy=policy
            if policy is not None
            else astguard.Policy().with_modules(*self.extra_modules),
            require=tuple(Layer(name) for name in self.require_layers),
            extra_modules=self.extra_modules,
            execution=ExecutionMode(self.execution),
            max_concurrent_runs=self.max_concurrent_runs,
            preload=self.preload,
            ready_children=self.ready_children,
            ready_max_idle_s=self.ready_max_idle_s,
        )


_SUFFIXES = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def _size(text: str) -> int:
    """Parse a positive byte count such as ``512M`` or ``1048576`` (K, M, G are powers of 1024)."""
    raw = text.strip().upper().removesuffix("B")
    unit = raw[-1:] if raw[-1:] in ("K", "M", "G") else ""
    try:
        value = int(raw[: len(raw) - len(unit)]) * _SUFFIXES[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a size in bytes: {text!r}; give a whole number with an optional K, M or G "
            "suffix (powers of 1024), such as 512M or 1048576"
        ) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a size must be positive: {text!r}")
    return value


def _size_text(value: int) -> str:
    """``value`` bytes as :func:`_size` reads it: ``512M`` rather than ``536870912``."""
    for unit in ("G", "M", "K"):
        if value % _SUFFIXES[unit] == 0:
            return f"{value // _SUFFIXES[unit]}{unit}"
    return str(value)


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type: ``kind`` of the text, refused unless positive and finite."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not 0 < value < math.inf:
            raise argparse.ArgumentTypeError(f"must be positive and finite: {text!r}")
        return value

    return parse


def _csv_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


#: The :class:`Settings` fields' defaults, which the options' defaults are (the directories are
#: the options' own).
_FIELD_DEFAULTS = Settings(workspace=Path(DEFAULT_WORKSPACE), snapshots=Path(DEFAULT_SNAPSHOTS))


@dataclass(frozen=True)
class _Option:
    """One setting: its flag, its ``SANDBOX_*`` variable, its default (as text) and its help.

    ``default`` ``None`` takes the :class:`Settings` field's default (one home for each default);
    text is for options without one (the directories, ``--token-file``).
    """

    flag: str
    env: str
    default: str | None
    help: str
    type: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None
    #: The :class:`Settings` field the option fills: the flag's name unless given here; ``None``
    #: when the option is read some other way (``--token-file``).
    field: str | None = ""

    @property
    def dest(self) -> str:
        """The attribute argparse stores the value under."""
        return self.flag[2:].replace("-", "_")

    @property
    def settings_field(self) -> str | None:
        """The :class:`Settings` field this option fills, or ``None``."""
        return self.dest if self.field == "" else self.field

    def default_text(self) -> str:
        """The default as the flag would spell it: ``default``, else the field's, formatted."""
        if self.default is not None:
            return self.default
        value = getattr(_FIELD_DEFAULTS, str(self.settings_field))
        if isinstance(value, tuple):
            return ",".join(value)
        if self.type is _size:
            return _size_text(int(value))
        if isinstance(value, float):
            short = f"{value:g}"  # 10 rather than 10.0, unless that loses digits
            return short if float(short) == value else repr(value)
        return str(value)


_OPTIONS: tuple[_Option, ...] = (
    _Option(
        "--workspace",
        "WORKSPACE",
        DEFAULT_WORKSPACE,
        "directory the sandboxed code runs in; created if missing",
    ),
    _Option(
        "--snapshots",
        "SNAPSHOTS",
        DEFAULT_SNAPSHOTS,
        "directory of the snapshot store, created if missing; or s3://BUCKET/PREFIX for "
        "S3-compatible storage (the [s3] extra; endpoint and credentials from the AWS_* "
        "environment, never a flag)",
    ),
    _Option(
        "--default-timeout",
        "DEFAULT_TIMEOUT",
        None,
        "time-out of a run in seconds when the call gives none",
        float,
        field="default_timeout_s",
    ),
    _Option(
        "--max-timeout",
        "MAX_TIMEOUT",
        None,
        "largest time-out in seconds a call may ask for",
        float,
        field="max_timeout_s",
    ),
    _Option(
        "--memory-limit",
        "MEMORY_LIMIT",
        None,
        "memory limit of one run in bytes; K, M, G suffixes",
        _size,
        field="memory_bytes",
    ),
    _Option(
        "--output-limit",
        "OUTPUT_LIMIT",
        None,
        "cap on each of stdout and stderr of a run in bytes; passing it stops the run (status "
        "output_limit); what an answer keeps of each stream is --stream-excerpt",
        _size,
        field="output_bytes",
    ),
    _Option(
        "--file-size-limit",
        "FILE_SIZE_LIMIT",
        None,
        "largest file a run may write, in bytes (RLIMIT_FSIZE; a larger write fails with EFBIG)",
        _size,
        field="file_size_bytes",
    ),
    _Option(
        "--workspace-quota",
        "WORKSPACE_QUOTA",
        None,
        "largest total size of the workspace in bytes",
        _size,
        field="workspace_bytes",
    ),
    _Option(
        "--workspace-max-files",
        "WORKSPACE_MAX_FILES",
        None,
        "largest number of files in the workspace",
        int,
        field="workspace_files",
    ),
    _Option(
        "--max-concurrent-runs",
        "MAX_CONCURRENT_RUNS",
        None,
        "runs executing at once; further runs queue",
        int,
    ),
    _Option(
        "--ready-children",
        "READY_CHILDREN",
        None,
        "children the warm zygote keeps forked and confined for the next runs (0: off; at "
        f"most {MAX_READY_CHILDREN}); each idle one is 1 pid and about 2.3 MiB",
        int,
    ),
    _Option(
        "--ready-max-idle",
        "READY_MAX_IDLE",
        None,
        f"seconds a ready child waits before it is replaced (at least {READY_MIN_IDLE_S})",
        float,
        field="ready_max_idle_s",
    ),
    _Option(
        "--extra-modules",
        "EXTRA_MODULES",
        None,
        "comma-separated extra modules the policy allows",
        _csv_list,
    ),
    _Option(
        "--profile",
        "PROFILE",
        None,
        "; ".join(
            f"'{p.name}' allows and preloads {', '.join(p.extra_modules)} (install "
            f"mcp-secure-sandbox[{p.extra or p.name}]) and raises the default memory limit to "
            f"{_size_text(p.memory_bytes)}; it needs both kernel layers required"
            for p in PROFILES.values()
        ),
        str,
        ("none", *PROFILES),
    ),
    _Option(
        "--execution",
        "EXECUTION",
        None,
        "how runs start: 'warm' forks each run from a prepared zygote process (every layer "
        "applied per run, a few ms), 'spawn' starts a fresh interpreter per run",
        str,
        tuple(str(mode) for mode in ExecutionMode),
    ),
    _Option(
        "--require-layers",
        "REQUIRE_LAYERS",
        None,
        "comma-separated kernel layers a run requires, refusing to run without them; 'none' "
        "accepts Python-level isolation only, which is unsafe",
        _csv_list,
    ),
    _Option(
        "--log-level",
        "LOG_LEVEL",
        None,
        "level of the log written to stderr",
        str.upper,
        ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
    ),
    _Option("--transport", "TRANSPORT", None, "MCP transport", str, ("stdio", "streamable-http")),
    _Option("--host", "HOST", None, "address the HTTP transport binds"),
    _Option("--port", "PORT", None, "port of the HTTP transport", int),
    _Option(
        "--allowed-hosts",
        "ALLOWED_HOSTS",
        None,
        "comma-separated Host header values HTTP accepts (DNS-rebinding protection); empty "
        "means the bound host and port",
        _csv_list,
    ),
    _Option(
        "--allowed-origins",
        "ALLOWED_ORIGINS",
        None,
        "comma-separated Origin values HTTP accepts",
        _csv_list,
    ),
    _Option(
        "--token-file",
        "TOKEN_FILE",
        "",
        "file holding the HTTP bearer token, or set SANDBOX_HTTP_TOKEN; there is deliberately no "
        "flag for the token itself: command lines are visible to every local user",
        field=None,
    ),
    _Option(
        "--max-body",
        "MAX_BODY",
        None,
        f"largest HTTP request body in bytes (the default holds {MAX_WRITE_BYTES // _MIB} MiB of "
        "content as Base64); a larger one gets 413 naming the limit",
        _size,
        field="max_body_bytes",
    ),
    _Option(
        "--max-body-in-flight",
        "MAX_BODY_IN_FLIGHT",
        None,
        "HTTP request bodies held at once in bytes (each counted by its Content-Length); past "
        "it a request waits up to --admission-wait, then gets 503 with Retry-After: 1",
        _size,
        field="max_body_in_flight_bytes",
    ),
    _Option(
        "--http-request-timeout",
        "HTTP_REQUEST_TIMEOUT",
        None,
        "seconds a client has to send a whole HTTP request (request line, headers and body) "
        "from its connection or first byte; slower connections are closed. Responses, "
        "including long event streams, are never cut",
        _positive(float),
        field="http_request_timeout_s",
    ),
    _Option(
        "--http-max-connections",
        "HTTP_MAX_CONNECTIONS",
        None,
        "open HTTP connections at most (also kept below the soft RLIMIT_NOFILE); over it, the "
        "oldest connection not being served is closed, or the new one refused",
        _positive(int),
    ),
    _Option(
        "--worker-pool-size",
        "WORKER_POOL_SIZE",
        None,
        "confined worker processes that validate JSON and CSV input (each a fresh interpreter "
        "with rlimits, read-only Landlock and seccomp); also the validations running at once. "
        "With compose's 1 GiB / 128 pids, 2 workers of 256 MiB leave room for runs",
        _positive(int),
    ),
    _Option(
        "--worker-deadline",
        "WORKER_DEADLINE",
        None,
        "seconds one validation may take in a worker; past it the worker is killed and "
        "replaced and the call gets a tool error",
        _positive(float),
        field="worker_deadline_s",
    ),
    _Option(
        "--worker-memory",
        "WORKER_MEMORY",
        None,
        "address-space budget of each validation worker in bytes (RLIMIT_AS); K, M, G suffixes",
        _size,
        field="worker_memory_bytes",
    ),
    _Option(
        "--diff-deadline",
        "DIFF_DEADLINE",
        None,
        "seconds one snapshot diff may take in its confined worker (read-only on the store and "
        "workspace); past it the worker is killed and replaced",
        _positive(float),
        field="diff_deadline_s",
    ),
    _Option(
        "--diff-memory",
        "DIFF_MEMORY",
        None,
        "address-space budget of the diff worker in bytes (RLIMIT_AS); K, M, G suffixes",
        _size,
        field="diff_memory_bytes",
    ),
    _Option(
        "--admission-wait",
        "ADMISSION_WAIT",
        None,
        "seconds a call other than a run waits in the queue for its turn (a worker, a "
        "snapshot or export slot, the workspace) before it is answered 'busy, retry'; a run "
        f"waits at most its timeout_sec + {RUN_WAIT_GRACE_S:g} s",
        _positive(float),
        field="admission_wait_s",
    ),
    _Option(
        "--queue-length",
        "QUEUE_LENGTH",
        None,
        "calls that may wait for their turn at once (runs, validations, snapshot operations, "
        "exports, workspace writes together); a call finding it full is answered 'busy, retry' "
        "at once",
        _positive(int),
    ),
    _Option(
        "--export-max",
        "EXPORT_MAX",
        None,
        "largest snapshot export served over MCP (in chunks) in bytes; larger ones are refused "
        "with the host command (wsnapshot export)",
        _size,
        field="export_max_bytes",
    ),
    _Option(
        "--max-concurrent-exports",
        "MAX_CONCURRENT_EXPORTS",
        None,
        "export calls and export chunk reads served at once",
        _positive(int),
    ),
    _Option(
        "--max-images",
        "MAX_IMAGES",
        None,
        "most images (files the run wrote, figures it showed) one run result carries as "
        "image content, within the response budget; the rest are named",
        _positive(int),
    ),
    _Option(
        "--stream-excerpt",
        "STREAM_EXCERPT",
        None,
        "what a run's answer keeps of each of stdout and stderr (head and tail, bytes of UTF-8 "
        f"before JSON escaping; {_sizes.STREAM_EXCERPT_MIN_BYTES} to "
        f"{_size_text(_sizes.STREAM_EXCERPT_MAX_BYTES)}); K, M suffixes",
        _size,
        field="stream_excerpt_bytes",
    ),
)


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults in each option's help; the description and epilog as written (a URL whole)."""


def _readme_url() -> str:
    """Where the server's README is read: the distribution's ``Source`` URL (``pyproject.toml``)."""
    try:
        urls: list[str] = list(
            importlib.metadata.metadata("mcp-secure-sandbox").get_all("Project-URL") or []
        )
    except importlib.metadata.PackageNotFoundError:
        urls = []
    for entry in urls:
        label, _, url = str(entry).partition(",")
        if label.strip() == "Source":
            return url.strip()
    return "the README.md of the mcp-secure-sandbox package"


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """Build the command-line parser; defaults come from ``SANDBOX_*`` variables in ``environ``.

    A malformed variable is reported like a malformed flag (argparse converts string defaults
    with the option's type): one usage line and exit status 2.

    Args:
        environ: The environment to read defaults from (``os.environ`` when ``None``).

    Returns:
        An :class:`argparse.ArgumentParser` whose ``--help`` documents every setting.
    """
    env = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(
        prog="mcp-secure-sandbox",
        description=(
            "MCP server that runs untrusted Python in a layered sandbox, validates JSON and\n"
            "CSV data, and snapshots and restores its workspace.\n\n"
            "Transports: stdio (the default, for a client that starts the server as its\n"
            "subprocess) or streamable HTTP (--transport streamable-http, --host, --port; a\n"
            "bearer token in SANDBOX_HTTP_TOKEN or --token-file). Every flag also reads the\n"
            "SANDBOX_* environment variable it names; the flag wins."
        ),
        epilog=(
            "Every setting, the profiles and the limits they set are documented in the\n"
            f"README's Settings section:\n  {_readme_url()}"
        ),
        formatter_class=_HelpFormatter,
    )
    for option in _OPTIONS:
        parser.add_argument(
            option.flag,
            type=option.type,
            choices=option.choices,
            default=env.get(f"SANDBOX_{option.env}", option.default_text()),
            help=f"{option.help} (env SANDBOX_{option.env})",
        )
    parser.add_argument(
        "--allow-unauthenticated-http",
        action="store_true",
        default=env.get("SANDBOX_ALLOW_UNAUTHENTICATED_HTTP", "") == "1",
        help="serve HTTP without a token on a loopback address; unsafe: every local user can "
        "then run code as this server's user (env SANDBOX_ALLOW_UNAUTHENTICATED_HTTP=1)",
    )
    return parser


def _read_token(token_file: str, environ: Mapping[str, str]) -> str | None:
    token = environ.get("SANDBOX_HTTP_TOKEN") or None
    if token_file:
        try:
            token = Path(token_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"--token-file {token_file}: {exc.strerror}") from None
        if not token:
            raise ConfigError(f"--token-file {token_file} is empty")
    if token is not None and len(token) < 16:
        raise ConfigError("the HTTP token must be at least 16 characters long")
    return token


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
"""Bind addresses that only local processes can reach."""


def _check_unauthenticated_http(host: str, allowed: bool, environ: Mapping[str, str]) -> None:
    """Refuse HTTP without a token unless opted in, and anywhere but on loopback."""
    remedy = "set SANDBOX_HTTP_TOKEN or --token-file"
    if environ.get("SANDBOX_ALLOW_REMOTE_WITHOUT_TOKEN"):
        raise ConfigError(
            "SANDBOX_ALLOW_REMOTE_WITHOUT_TOKEN is no longer supported: HTTP without a token is "
            f"served on loopback only; {remedy}"
        )
    if host not in LOOPBACK_HOSTS:
        raise ConfigError(
            f"refusing to serve HTTP on {host} without a token: {remedy} (--allow-unauthenticated-"
            f"http is honoured on a loopback host only: {', '.join(LOOPBACK_HOSTS)})"
        )
    if not allowed:
        raise ConfigError(
            f"refusing to serve HTTP without a token: {remedy}, or pass "
            "--allow-unauthenticated-http (SANDBOX_ALLOW_UNAUTHENTICATED_HTTP=1) to let every "
            "local user run code as this server's user"
        )


def _snapshots_url(value: str) -> str | None:
    """``--snapshots`` as an ``s3://`` URL (checked by wsnapshot), or ``None`` for a directory."""
    if not value.startswith(S3_SCHEME):
        return None
    try:
        bucket, prefix = parse_s3_url(value)
    except StoreConfigError as exc:
        raise ConfigError(f"--snapshots: {exc}") from None
    return f"{S3_SCHEME}{bucket}/{prefix}"


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
        ConfigError: A profile is chosen without both kernel layers required; a time-out is
            not positive or the default exceeds the maximum; HTTP would
            be served without a token without ``--allow-unauthenticated-http`` or on a
            non-loopback host.
        SystemExit: From argparse, for unknown flags or ``--help``.
    """
    env = os.environ if environ is None else environ
    args = build_parser(env).parse_args(argv)
    for option in _OPTIONS:  # argparse checks choices on flags, not on defaults from variables
        value = getattr(args, option.dest)
        if option.choices and value not in option.choices:
            raise ConfigError(
                f"SANDBOX_{option.env}={value!r}: choose one of {', '.join(option.choices)}"
            )
    if not (0 < args.default_timeout < math.inf and 0 < args.max_timeout < math.inf):
        raise ConfigError("time-outs must be positive, finite numbers of seconds")
    if args.default_timeout > args.max_timeout:
        raise ConfigError(
            f"--default-timeout {args.default_timeout} s exceeds --max-timeout {args.max_timeout} s"
        )
    if not 0 <= args.ready_children <= MAX_READY_CHILDREN:
        raise ConfigError(
            f"--ready-children must be between 0 and {MAX_READY_CHILDREN}, "
            f"got {args.ready_children}"
        )
    if args.max_body > args.max_body_in_flight:
        raise ConfigError(
            f"--max-body {_size_text(args.max_body)} exceeds --max-body-in-flight "
            f"{_size_text(args.max_body_in_flight)}: one body could never be received; raise "
            "--max-body-in-flight or lower --max-body"
        )
    low, high = _sizes.STREAM_EXCERPT_MIN_BYTES, _sizes.STREAM_EXCERPT_MAX_BYTES
    if not low <= args.stream_excerpt <= high:
        raise ConfigError(
            f"--stream-excerpt must be between {low} and {high} bytes, got {args.stream_excerpt}"
        )
    require = tuple(x for x in args.require_layers if x.lower() != "none")
    unknown = sorted(set(require) - set(KERNEL_LAYERS))
    if unknown:
        raise ConfigError(
            f"--require-layers: unknown layer {', '.join(unknown)}; use "
            f"{', '.join(KERNEL_LAYERS)} or none"
        )
    profile = PROFILES.get(args.profile)
    if profile is not None:
        missing = [layer for layer in profile.required_layers if layer not in require]
        if missing:
            raise ConfigError(
                f"--profile {profile.name} allows native extension modules, which the "
                f"Python-level layers cannot confine: it needs --require-layers "
                f"{','.join(profile.required_layers)} (missing: {', '.join(missing)})"
            )
    token = _read_token(args.token_file, env)
    if args.transport == "streamable-http" and token is None:
        _check_unauthenticated_http(args.host, args.allow_unauthenticated_http, env)
    url = _snapshots_url(args.snapshots)
    values: dict[str, Any] = {
        option.settings_field: getattr(args, option.dest)
        for option in _OPTIONS
        if option.settings_field is not None
    }
    values.update(
        # absolute, without symlink resolution: the workspace checks resolve it themselves
        workspace=Path(os.path.abspath(args.workspace)),  # noqa: PTH100
        snapshots=Path(os.path.abspath(DEFAULT_SNAPSHOTS if url else args.snapshots)),  # noqa: PTH100
        snapshots_url=url,
        require_layers=require,
        allow_unauthenticated_http=args.allow_unauthenticated_http,
        token=token,
    )
    if profile is not None:
        given = sys.argv[1:] if argv is None else argv
        explicit = "SANDBOX_MEMORY_LIMIT" in env or any(
            a == "--memory-limit" or a.startswith("--memory-limit=") for a in given
        )
        values["extra_modules"] = tuple(
            dict.fromkeys((*profile.extra_modules, *values["extra_modules"]))
        )
        values["preload"] = profile.preload
        if not explicit:
            values["memory_bytes"] = profile.memory_bytes
    settings = Settings(**values)
    try:  # the sandbox's values, checked once, by pysandbox's declaration of their bounds
        settings.sandbox_config()
    except (TypeError, ValueError) as exc:
        raise ConfigError(_by_flag(str(exc))) from None
    return settings


def _by_flag(message: str) -> str:
    """Pysandbox's refusal with each field it names (``Limits.memory_bytes``) as its flag."""
    for option in _OPTIONS:
        name = option.settings_field
        if name is None:
            continue
        for owner in ("Limits", "SandboxConfig"):
            message = message.replace(f"{owner}.{name} ", f"{option.flag} ")
    return message.replace("Limits.timeout_s ", "--max-timeout ")


def _outside_the_interpreter(path: Path) -> bool:
    prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return not any(path == prefix or path.is_relative_to(prefix) for prefix in prefixes)


def _searchable_dir(entry: str) -> bool:
    """Whether ``entry`` is a directory this process can search (no error on EACCES).

    A ``sys.path`` entry the server cannot search is no directory it imports from, and a
    non-root server must start whatever its ``sys.path`` holds.
    """
    try:
        return Path(entry).is_dir()
    except OSError:
        return False


def _import_roots() -> list[tuple[Path, str]]:
    """Directories the server imports from that pysandbox's workspace check does not cover.

    pysandbox refuses a workspace overlapping the interpreter's prefixes (and so a virtual
    environment's packages); these are the rest: ``site-packages`` entries of ``sys.path``
    outside them (a ``pip install --user``) and this package's own directory (an editable
    install). Code in such a workspace would be imported by the next server start.
    """
    roots: list[tuple[Path, str]] = []
    for entry in sys.path:
        if entry and "site-packages" in entry and _searchable_dir(entry):
            roots.append((Path(entry).resolve(), "installed packages"))
    roots.append((Path(__file__).resolve().parent, "the server's own package"))
    return [(root, what) for root, what in roots if _outside_the_interpreter(root)]


def check_importable_overlap(workspace: Path) -> None:
    """Refuse a workspace overlapping a directory the server imports from (see above).

    The rest of the workspace's location (``/``, a home directory, the interpreter, system
    directories) is pysandbox's check, the store's overlap wsnapshot's; both are mapped to
    :class:`ConfigError` by :func:`mcp_secure_sandbox.server.create_server`.

    Raises:
        ConfigError: The workspace equals, contains or lies inside such a directory.
    """
    ws = workspace.resolve()
    for root, what in _import_roots():
        if ws == root or ws.is_relative_to(root) or root.is_relative_to(ws):
            raise ConfigError(f"workspace {workspace} overlaps {what} ({root})")


def _make_dir(path: Path, what: str, created: list[Path] | None) -> None:
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
        if created is not None:
            created.append(path)
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {path} is not writable by this user")


def _fallback_base(environ: Mapping[str, str]) -> Path:
    data_home = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "mcp-secure-sandbox"


def prepare_directories(
    settings: Settings,
    environ: Mapping[str, str] | None = None,
    *,
    created: list[Path] | None = None,
) -> Settings:
    """Create the workspace and snapshot directories if missing, and check they are writable.

    Whether the workspace's location is safe is checked once, by pysandbox, when the server is
    created (:func:`mcp_secure_sandbox.server.create_server`); a caller that is refused there
    removes the directories this call created, listed in ``created``.

    When both directories are the defaults and the current directory is ``/`` or not writable
    (as when a desktop client starts the server), they move to the user's data directory
    (``$XDG_DATA_HOME/mcp-secure-sandbox``) and ``workspace_fallback`` is set.

    Args:
        settings: Parsed settings.
        environ: Environment for the data-directory lookup (``os.environ`` when ``None``).
        created: When given, each directory this call creates is appended to it (the workspace
            before the snapshot directory).

    Returns:
        Settings with absolute, existing, writable directories.

    Raises:
        ConfigError: A directory cannot be used: it is a symbolic link or not a directory, its
            parent is missing, or it is not writable.
    """
    env = os.environ if environ is None else environ
    cwd = Path.cwd()
    is_default = settings.workspace == cwd / "sandbox_workspace" and (
        settings.snapshots == cwd / "sandbox_snapshots"
    )
    if is_default and (cwd == Path(cwd.anchor) or not os.access(cwd, os.W_OK)):
        base = _fallback_base(env)
        base.mkdir(parents=True, exist_ok=True, mode=0o700)
        settings = replace(
            settings,
            workspace=base / "sandbox_workspace",
            snapshots=base / "sandbox_snapshots",
            workspace_fallback=True,
        )
    _make_dir(settings.workspace, "workspace", created)
    _make_dir(settings.snapshots, "snapshot directory", created)
    return settings
