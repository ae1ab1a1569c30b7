"""Server settings: command-line flags over ``SANDBOX_*`` environment variables over defaults.

Each setting is declared once, as a field of :class:`Settings` whose ``metadata`` holds its
:class:`~mcp_secure_sandbox._declare.Setting` (flag, variable, parse, bounds, help); the parser,
the environment, ``--help`` and the settings page (``docs/settings.md``, written by
``python -m mcp_secure_sandbox._settings_page``) are derived from them, and the bounds and
the cross-field rules (:data:`CHECKS`) hold for every :class:`Settings`, however it was built.
Secrets have no flag (command lines are readable by every local user): the HTTP token comes
from the environment or a file, the principals' tokens from ``--tokens-file``
(:mod:`mcp_secure_sandbox.principals`).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import astguard
from mcp_secure_sandbox import _sizes
from mcp_secure_sandbox._declare import (
    SETTING,
    Check,
    Setting,
    csv_list,
    positive,
    size,
    size_text,
    size_words,
)
from mcp_secure_sandbox._sizes import MAX_WRITE_BYTES
from mcp_secure_sandbox.concurrency import RUN_WAIT_GRACE_S
from pysandbox import (
    KERNEL_LAYERS,
    PROFILES,
    READY_CHILDREN,
    READY_MAX_IDLE_S,
    ExecutionMode,
    Layer,
    Limits,
    SandboxConfig,
    bound_of,
)
from wsnapshot import S3_SCHEME, StoreConfigError, parse_s3_url

if TYPE_CHECKING:  # principals imports this module (the token rule): imported where used
    from mcp_secure_sandbox.principals import Principals

__all__ = [
    "CHECKS",
    "DEFAULT_PRINCIPAL",
    "DEFAULT_SNAPSHOTS",
    "DEFAULT_WORKSPACE",
    "LOOPBACK_HOSTS",
    "MAX_READY_CHILDREN",
    "PRINCIPAL_NAME_PATTERN",
    "PRINCIPAL_TOKEN_MIN_CHARS",
    "TOKENS_FILE_MAX_BYTES",
    "TOKEN_FILE_MAX_BYTES",
    "TOKEN_MIN_CHARS",
    "ConfigError",
    "Settings",
    "build_parser",
    "check_importable_overlap",
    "check_token",
    "declarations",
    "prepare_directories",
    "settings_from_args",
    "settings_page",
]

DEFAULT_WORKSPACE = "./sandbox_workspace"
DEFAULT_SNAPSHOTS = "./sandbox_snapshots"
#: Most ready children a server keeps (``--ready-children``): 8 pids of compose's 128, ~20 MiB.
MAX_READY_CHILDREN = 8
_MIB = 1024 * 1024
#: The most bytes a token file may hold (a token is one short line; a larger file is the wrong
#: file, or ``/dev/zero``, and is not read further).
TOKEN_FILE_MAX_BYTES = 4096
#: The least characters a token may have.
TOKEN_MIN_CHARS = 16
#: The principal of stdio, of the single HTTP token and of an unauthenticated loopback server
#: (:mod:`mcp_secure_sandbox.principals` exports it).
DEFAULT_PRINCIPAL = "default"
#: What a principal's name is: lower-case ASCII letters, digits, ``_`` and ``-``, 1 to 64
#: characters, beginning with a letter or a digit (safe in a log line and a metric label).
PRINCIPAL_NAME_PATTERN = r"[a-z0-9][a-z0-9_-]{0,63}"
#: The least characters a token of the tokens file has.
PRINCIPAL_TOKEN_MIN_CHARS = 32
#: The most bytes a tokens file may hold (about 700 principals with 64-character tokens); a
#: larger file is the wrong file, or ``/dev/zero``, and is not read further.
TOKENS_FILE_MAX_BYTES = 64 * 1024
#: What a token is made of: visible ASCII, the characters a client can send after ``Bearer``.
_TOKEN_CHARS = frozenset(chr(c) for c in range(0x21, 0x7F))
#: Default ``--max-body``: the largest content a tool takes (8 MiB) as Base64 (x 4/3, rounded up
#: to a MiB), plus 1 MiB for the JSON-RPC envelope and the other arguments: 12 MiB.
DEFAULT_MAX_BODY = -(-MAX_WRITE_BYTES * 4 // 3 // _MIB) * _MIB + _MIB
#: The memory rlimits pysandbox sets for ``Limits.memory_bytes`` (``pysandbox._config.rlimits``:
#: the data segment, and twice it as address space); a test holds this to pysandbox's.
RUN_MEMORY_RLIMITS = "RLIMIT_DATA of this size and RLIMIT_AS of twice it"
_LAYERS = tuple(str(layer) for layer in KERNEL_LAYERS)
#: pysandbox's limit defaults (``pysandbox.Limits``, their one home): the run limits' defaults.
_LIMITS = Limits()


def _braces(text: str) -> str:
    """``text`` for a ``doc`` (which is ``format_map``-ed): its braces doubled."""
    return text.replace("{", "{{").replace("}", "}}")


def _at_least(cls: type, name: str) -> tuple[float | None, None]:
    """The lower bound pysandbox declares for ``cls.name``, as a :class:`Setting`'s bounds."""
    minimum = bound_of(cls, name).minimum
    return (int(minimum) if minimum is not None and minimum == int(minimum) else minimum, None)


class ConfigError(Exception):
    """A setting is invalid or the directories it names cannot be used.

    The message is one line meant for a person reading a terminal; the server prints it on stderr
    and exits with status 2 instead of showing a traceback.
    """


_ONE_LINE_ADVICE = (
    "write the token as one line of visible ASCII characters (letters, digits, punctuation; "
    "no spaces or control characters), for example: openssl rand -hex 32"
)


def check_token(token: str, source: str) -> str:
    """Check an HTTP bearer token without ever repeating it: the one home of the token rule.

    Every token is held to it: one from ``SANDBOX_HTTP_TOKEN`` or ``--token-file``, one given
    to ``Settings(token=...)`` in code (:meth:`Settings.__post_init__`) and one given to
    :class:`~mcp_secure_sandbox.http_transport.BearerAuth`.

    Args:
        token: The token, surrounding whitespace (a file's final line break) already removed.
        source: Where it came from, for the message (``SANDBOX_HTTP_TOKEN``, ``--token-file
            PATH``).

    Returns:
        ``token``, unchanged.

    Raises:
        ConfigError: The token is not a ``str``, spans several lines, holds a character a
            client cannot send in an ``Authorization`` header (a control character, a space, a
            non-ASCII letter), or is shorter than :data:`TOKEN_MIN_CHARS`. The message names
            ``source`` and the remedy, never the token or a part of it.
    """
    if not isinstance(token, str):
        raise ConfigError(
            f"{source}: the token must be a str, not {type(token).__name__}; {_ONE_LINE_ADVICE}"
        )
    if "\n" in token or "\r" in token:
        raise ConfigError(f"{source}: the token spans more than one line; {_ONE_LINE_ADVICE}")
    if not _TOKEN_CHARS.issuperset(token):
        raise ConfigError(
            f"{source}: the token holds a space, a control or a non-ASCII character, which a "
            f"client cannot send in an Authorization header; {_ONE_LINE_ADVICE}"
        )
    if len(token) < TOKEN_MIN_CHARS:
        raise ConfigError(
            f"{source}: the HTTP token must be at least {TOKEN_MIN_CHARS} characters long"
        )
    return token


#: ``--require-layers``' word for no kernel layer (any case).
NO_LAYERS = "none"


def _layers(text: str) -> tuple[str, ...]:
    """``--require-layers``: a comma-separated list, :data:`NO_LAYERS` standing for no layer."""
    return tuple(x for x in csv_list(text) if x.lower() != NO_LAYERS)


def _profiles_help() -> str:
    return "; ".join(
        f"'{p.name}' allows and preloads {', '.join(p.extra_modules)} (install "
        f"mcp-secure-sandbox[{p.extra or p.name}]) and raises the default memory limit to "
        f"{size_text(p.memory_bytes)}; it needs --require-layers {','.join(p.required_layers)}"
        for p in PROFILES.values()
    )


@dataclass(frozen=True)
class Settings:
    """The settings in force for one server process.

    Each field with a :class:`~mcp_secure_sandbox._declare.Setting` in its metadata is a
    setting: its flag, ``SANDBOX_*`` variable, bounds and meaning are declared there and listed
    by ``mcp-secure-sandbox --help`` and ``docs/settings.md`` (:func:`settings_page`). Sizes are
    in bytes (fields ``*_bytes``), times in seconds (``*_s``). The bounds and :data:`CHECKS`
    are checked for every instance: a violation raises :class:`ConfigError`.

    The other fields: ``preload`` (modules the warm zygote imports once: the profile's),
    ``workspace_fallback`` (True when the default workspace could not be used in the current
    directory and the user's data directory was used instead), ``snapshots_url``
    (``s3://BUCKET/PREFIX`` when ``--snapshots`` names S3-compatible storage, else ``None``;
    ``snapshots`` is then the store's local state directory), ``principals`` (the
    :class:`~mcp_secure_sandbox.principals.Principals` read from ``tokens_file``, or given in
    code without one; :attr:`http_principals` is what HTTP authenticates against) and ``given``
    (the fields a flag or variable set, empty for settings built in code). ``token`` and the
    principals' tokens are never printed, logged or returned.
    """

    workspace: Path = field(
        metadata=Setting(
            flag="--workspace",
            env="SANDBOX_WORKSPACE",
            help="directory the sandboxed code runs in; created if missing",
            default_text=DEFAULT_WORKSPACE,
        ).metadata
    )
    snapshots: Path = field(
        metadata=Setting(
            flag="--snapshots",
            env="SANDBOX_SNAPSHOTS",
            help="directory of the snapshot store, created if missing; or s3://BUCKET/PREFIX "
            "for S3-compatible storage (the [s3] extra; endpoint and credentials from the "
            "AWS_* environment, never a flag)",
            default_text=DEFAULT_SNAPSHOTS,
        ).metadata
    )
    default_timeout_s: float = field(
        default=10.0,
        metadata=Setting(
            flag="--default-timeout",
            env="SANDBOX_DEFAULT_TIMEOUT",
            parse=float,
            positive=True,
            unit="s",
            help="time-out of a run in seconds when the call gives none",
        ).metadata,
    )
    max_timeout_s: float = field(
        default=60.0,
        metadata=Setting(
            flag="--max-timeout",
            env="SANDBOX_MAX_TIMEOUT",
            parse=float,
            positive=True,
            unit="s",
            help="largest time-out in seconds a call may ask for; also the CPU-time limit "
            "(RLIMIT_CPU, rounded up) of every run",
        ).metadata,
    )
    memory_bytes: int = field(
        default=_LIMITS.memory_bytes,
        metadata=Setting(
            flag="--memory-limit",
            env="SANDBOX_MEMORY_LIMIT",
            parse=size,
            positive=True,
            bounds=_at_least(Limits, "memory_bytes"),
            unit="bytes",
            help=f"memory limit of one run in bytes ({RUN_MEMORY_RLIMITS}); K, M, G suffixes",
        ).metadata,
    )
    output_bytes: int = field(
        default=_LIMITS.output_bytes,
        metadata=Setting(
            flag="--output-limit",
            env="SANDBOX_OUTPUT_LIMIT",
            parse=size,
            positive=True,
            unit="bytes",
            help="cap on each of stdout and stderr of a run in bytes; passing it stops the run "
            "(status output_limit); what an answer keeps of each stream is --stream-excerpt",
        ).metadata,
    )
    file_size_bytes: int = field(
        default=_LIMITS.file_size_bytes,
        metadata=Setting(
            flag="--file-size-limit",
            env="SANDBOX_FILE_SIZE_LIMIT",
            parse=size,
            positive=True,
            unit="bytes",
            help="largest file a run may write, in bytes (RLIMIT_FSIZE; a larger write fails "
            "with EFBIG)",
        ).metadata,
    )
    workspace_bytes: int = field(
        default=_LIMITS.workspace_bytes,
        metadata=Setting(
            flag="--workspace-quota",
            env="SANDBOX_WORKSPACE_QUOTA",
            parse=size,
            positive=True,
            unit="bytes",
            help="largest total size of the workspace in bytes",
        ).metadata,
    )
    workspace_files: int = field(
        default=_LIMITS.workspace_files,
        metadata=Setting(
            flag="--workspace-max-files",
            env="SANDBOX_WORKSPACE_MAX_FILES",
            parse=int,
            help="largest number of files in the workspace",
        ).metadata,
    )
    max_concurrent_runs: int = field(
        default_factory=lambda: os.cpu_count() or 1,
        metadata=Setting(
            flag="--max-concurrent-runs",
            env="SANDBOX_MAX_CONCURRENT_RUNS",
            parse=int,
            bounds=_at_least(SandboxConfig, "max_concurrent_runs"),
            help="runs executing at once; further runs queue",
            default_doc="CPU count",
        ).metadata,
    )
    ready_children: int = field(
        default=READY_CHILDREN,
        metadata=Setting(
            flag="--ready-children",
            env="SANDBOX_READY_CHILDREN",
            parse=int,
            bounds=(0, MAX_READY_CHILDREN),
            help="children the warm zygote keeps forked and confined for the next runs (0: "
            "off); each idle one is 1 pid and about 2.3 MiB",
            doc="warm mode: children kept forked and confined (every layer applied) for the "
            "next runs, each used for one run and never reused (pysandbox's READY_CHILDREN "
            "by default); `0` switches the pool off. Budget: an idle ready child is 1 pid (one "
            "thread) and about 2.3 MiB of private memory (its ~11 MiB RSS is the zygote's "
            "pages, shared copy-on-write); a claimed child is a run under `--memory-limit`, "
            "and the pool refills after the run ends, so at most `--max-concurrent-runs` + "
            "`--ready-children` children exist. Under compose's 1 GiB / 128 pids, 2 ready "
            "children take 2 pids and ~5 MiB (8: 8 pids, ~20 MiB)",
        ).metadata,
    )
    ready_max_idle_s: float = field(
        default=READY_MAX_IDLE_S,
        metadata=Setting(
            flag="--ready-max-idle",
            env="SANDBOX_READY_MAX_IDLE",
            parse=float,
            bounds=_at_least(SandboxConfig, "ready_max_idle_s"),
            unit="s",
            help="seconds a ready child waits before it is replaced (pysandbox's "
            "READY_MAX_IDLE_S by default)",
        ).metadata,
    )
    extra_modules: tuple[str, ...] = field(
        default=(),
        metadata=Setting(
            flag="--extra-modules",
            env="SANDBOX_EXTRA_MODULES",
            parse=csv_list,
            help="comma-separated extra modules the policy allows",
            doc="comma-separated modules allowed beyond the default policy, a profile's "
            "included (a module that reaches the system, such as `os`, logs a warning: only "
            "the kernel layers confine it then)",
        ).metadata,
    )
    profile: str = field(
        default="none",
        metadata=Setting(
            flag="--profile",
            env="SANDBOX_PROFILE",
            choices=("none", *PROFILES),
            help=_profiles_help(),
            doc=f'{_profiles_help()} (see the README\'s "Data science")',
        ).metadata,
    )
    preload: tuple[str, ...] = ()
    require_layers: tuple[str, ...] = field(
        default=_LAYERS,
        metadata=Setting(
            flag="--require-layers",
            env="SANDBOX_REQUIRE_LAYERS",
            parse=_layers,
            choices=_LAYERS,
            help="comma-separated kernel layers a run requires, refusing to run without them; "
            "'none' accepts Python-level isolation only, which is unsafe",
        ).metadata,
    )
    execution: str = field(
        default=str(ExecutionMode.WARM),
        metadata=Setting(
            flag="--execution",
            env="SANDBOX_EXECUTION",
            choices=tuple(str(mode) for mode in ExecutionMode),
            help="how runs start: 'warm' forks each run from a prepared zygote process (every "
            "layer applied per run, a few ms), 'spawn' starts a fresh interpreter per run",
            doc="`warm`: each run is forked from a prepared zygote process and gets every layer "
            "applied after the fork (about 6 ms for `print(1)` against 20 ms); `spawn`: a "
            "fresh interpreter per run. Warm falls back to spawn, with the reason in "
            "`sandbox://status`, when the zygote cannot start",
        ).metadata,
    )
    log_level: str = field(
        default="INFO",
        metadata=Setting(
            flag="--log-level",
            env="SANDBOX_LOG_LEVEL",
            parse=str.upper,
            choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
            help="level of the log written to stderr",
        ).metadata,
    )
    transport: str = field(
        default="stdio",
        metadata=Setting(
            flag="--transport",
            env="SANDBOX_TRANSPORT",
            choices=("stdio", "streamable-http"),
            help="MCP transport",
        ).metadata,
    )
    host: str = field(
        default="127.0.0.1",
        metadata=Setting(
            flag="--host", env="SANDBOX_HOST", help="address the HTTP transport binds"
        ).metadata,
    )
    port: int = field(
        default=8000,
        metadata=Setting(
            flag="--port", env="SANDBOX_PORT", parse=int, help="port of the HTTP transport"
        ).metadata,
    )
    allowed_hosts: tuple[str, ...] = field(
        default=(),
        metadata=Setting(
            flag="--allowed-hosts",
            env="SANDBOX_ALLOWED_HOSTS",
            parse=csv_list,
            help="comma-separated Host header values HTTP accepts (DNS-rebinding protection); "
            "empty means the bound host and port",
        ).metadata,
    )
    allowed_origins: tuple[str, ...] = field(
        default=(),
        metadata=Setting(
            flag="--allowed-origins",
            env="SANDBOX_ALLOWED_ORIGINS",
            parse=csv_list,
            help="comma-separated Origin values HTTP accepts (empty: http:// and each allowed "
            "host)",
        ).metadata,
    )
    allow_unauthenticated_http: bool = field(
        default=False,
        metadata=Setting(
            flag="--allow-unauthenticated-http",
            env="SANDBOX_ALLOW_UNAUTHENTICATED_HTTP",
            switch=True,
            help="serve HTTP without a token on a loopback address; unsafe: every local user "
            "can then run code as this server's user",
            doc="serve HTTP without a token, on a loopback host only (unsafe: every local user "
            "can run code as the server's user; logged and shown in `sandbox://status` "
            "`warnings`)",
        ).metadata,
    )
    max_body_bytes: int = field(
        default=DEFAULT_MAX_BODY,
        metadata=Setting(
            flag="--max-body",
            env="SANDBOX_MAX_BODY",
            parse=size,
            positive=True,
            unit="bytes",
            help=f"largest HTTP request body in bytes (the default holds "
            f"{size_words(MAX_WRITE_BYTES)} of content as Base64); a larger one gets 413 "
            "naming the limit",
            doc=f"largest HTTP request body, bytes: {size_words(MAX_WRITE_BYTES)} of content "
            "(what `write_workspace_file` takes) as Base64, plus 1 MiB. A larger body gets "
            "`413` with a JSON-RPC error the SDK client shows (the limit, and to pass large "
            "data as a workspace file by path: `csv_path`, `data_path`)",
        ).metadata,
    )
    max_body_in_flight_bytes: int = field(
        default=64 * _MIB,
        metadata=Setting(
            flag="--max-body-in-flight",
            env="SANDBOX_MAX_BODY_IN_FLIGHT",
            parse=size,
            positive=True,
            unit="bytes",
            help="HTTP request bodies held at once in bytes (each counted by its "
            "Content-Length); past it a request waits up to --admission-wait, then gets 503 "
            "with Retry-After: 1",
            doc="request bodies held at once, bytes (each counted by its `Content-Length`, "
            "else `--max-body`, until its request is answered); past it a request waits up to "
            "`--admission-wait`, then gets `503` with `Retry-After: 1` (its "
            "`--http-request-timeout` runs meanwhile: a body not all sent by then closes the "
            "connection first)",
        ).metadata,
    )
    http_request_timeout_s: float = field(
        default=30.0,
        metadata=Setting(
            flag="--http-request-timeout",
            env="SANDBOX_HTTP_REQUEST_TIMEOUT",
            parse=positive(float),
            positive=True,
            unit="s",
            help="seconds a client has to send a whole HTTP request (request line, headers and "
            "body) from its connection or first byte; slower connections are closed (408 if no "
            "request line arrived). Also the write deadline: a client that leaves what the "
            "server sends unread this long (the server paused for writing) is disconnected. "
            "Responses read by their client, including long event streams, are never cut",
        ).metadata,
    )
    http_max_connections: int = field(
        default=512,
        metadata=Setting(
            flag="--http-max-connections",
            env="SANDBOX_HTTP_MAX_CONNECTIONS",
            parse=positive(int),
            positive=True,
            help="open HTTP connections at most (also kept below the soft RLIMIT_NOFILE); over "
            "it, the oldest connection not being served is closed, or the new one refused",
            doc="open HTTP connections at most, lowered to leave a quarter (at least 64) of the "
            "soft `RLIMIT_NOFILE` to the rest of the server; over it the oldest connection not "
            "being served is closed, or the new one gets `503` when all are being served",
        ).metadata,
    )
    worker_pool_size: int = field(
        default=2,
        metadata=Setting(
            flag="--worker-pool-size",
            env="SANDBOX_WORKER_POOL_SIZE",
            parse=positive(int),
            positive=True,
            help="confined worker processes that validate JSON and CSV input (each a fresh "
            "interpreter with rlimits, read-only Landlock and seccomp); also the validations "
            "running at once. With compose's 1 GiB / 128 pids, 2 workers of 256 MiB leave room "
            "for runs",
            doc="confined worker processes validating JSON and CSV input (each a fresh "
            "`python -I` with an empty environment, rlimits, no_new_privs, read-only Landlock "
            "and seccomp without exec or sockets; JSON lines, never pickle, each answer "
            "shape-checked: a malformed one kills and replaces its worker; a worker is retired "
            "after 200 jobs or before its CPU limit could cut a job short); also the "
            "validations running at once",
        ).metadata,
    )
    worker_deadline_s: float = field(
        default=10.0,
        metadata=Setting(
            flag="--worker-deadline",
            env="SANDBOX_WORKER_DEADLINE",
            parse=positive(float),
            positive=True,
            unit="s",
            help="seconds one validation may take in a worker; past it the worker is killed "
            "and replaced and the call gets a tool error",
            doc="seconds one validation may take; past it the worker is killed and replaced, "
            'and the call gets "validation stopped after {worker_deadline_s} / '
            '{worker_memory_bytes}: the schema or data is too expensive"',
        ).metadata,
    )
    worker_memory_bytes: int = field(
        default=256 * _MIB,
        metadata=Setting(
            flag="--worker-memory",
            env="SANDBOX_WORKER_MEMORY",
            parse=size,
            positive=True,
            unit="bytes",
            help="address-space budget of each validation worker in bytes (RLIMIT_AS); K, M, "
            "G suffixes",
        ).metadata,
    )
    diff_deadline_s: float = field(
        default=30.0,
        metadata=Setting(
            flag="--diff-deadline",
            env="SANDBOX_DIFF_DEADLINE",
            parse=positive(float),
            positive=True,
            unit="s",
            help="seconds one snapshot diff may take in its confined worker (read-only on the "
            "store and workspace); past it the worker is killed and replaced",
            doc="seconds one `diff_state_snapshots` may take in its confined worker (one "
            "worker, read-only on the store and the workspace, started when first needed); "
            'past it the worker is killed and replaced, and the call gets "diff stopped after '
            '{diff_deadline_s} / {diff_memory_bytes}: the snapshots are too large to compare"',
        ).metadata,
    )
    diff_memory_bytes: int = field(
        default=512 * _MIB,
        metadata=Setting(
            flag="--diff-memory",
            env="SANDBOX_DIFF_MEMORY",
            parse=size,
            positive=True,
            unit="bytes",
            help="address-space budget of the diff worker in bytes (RLIMIT_AS); K, M, G suffixes",
        ).metadata,
    )
    admission_wait_s: float = field(
        default=30.0,
        metadata=Setting(
            flag="--admission-wait",
            env="SANDBOX_ADMISSION_WAIT",
            parse=positive(float),
            positive=True,
            unit="s",
            help="seconds a call other than a run waits in the queue for its turn (a worker, a "
            "snapshot or export slot, the workspace) before it is answered 'busy, retry'; a "
            f"run waits at most its timeout_sec + {RUN_WAIT_GRACE_S:g} s",
            doc="seconds a call other than a run waits in the admission queue for its turn (a "
            "validation worker, the snapshot slot, an export slot, the workspace); then it is "
            'answered "busy, retry: ..." naming what it waited for. A run waits at most its '
            f"own `timeout_sec` + {RUN_WAIT_GRACE_S:g} s. Metrics, status and listings never "
            "wait behind heavy work",
        ).metadata,
    )
    queue_length: int = field(
        default=32,
        metadata=Setting(
            flag="--queue-length",
            env="SANDBOX_QUEUE_LENGTH",
            parse=positive(int),
            positive=True,
            help="calls that may wait for their turn at once (runs, validations, snapshot "
            "operations, exports, workspace writes together); a call finding it full is "
            "answered 'busy, retry' at once",
        ).metadata,
    )
    export_max_bytes: int = field(
        default=256 * _MIB,
        metadata=Setting(
            flag="--export-max",
            env="SANDBOX_EXPORT_MAX",
            parse=size,
            positive=True,
            unit="bytes",
            help="largest snapshot export served over MCP (in chunks) in bytes; larger ones are "
            "refused with the host command (wsnapshot export)",
        ).metadata,
    )
    max_concurrent_exports: int = field(
        default=2,
        metadata=Setting(
            flag="--max-concurrent-exports",
            env="SANDBOX_MAX_CONCURRENT_EXPORTS",
            parse=positive(int),
            positive=True,
            help="export calls and export chunk reads served at once",
        ).metadata,
    )
    max_images: int = field(
        default=4,
        metadata=Setting(
            flag="--max-images",
            env="SANDBOX_MAX_IMAGES",
            parse=positive(int),
            positive=True,
            help="most images (files the run wrote, figures it showed) one run result carries "
            "as image content, within the response budget; the rest are named in "
            "images_omitted",
        ).metadata,
    )
    stream_excerpt_bytes: int = field(
        default=16 * 1024,
        metadata=Setting(
            flag="--stream-excerpt",
            env="SANDBOX_STREAM_EXCERPT",
            parse=size,
            bounds=(_sizes.STREAM_EXCERPT_MIN_BYTES, _sizes.STREAM_EXCERPT_MAX_BYTES),
            unit="bytes",
            help="what a run's answer keeps of each of stdout and stderr (head and tail, bytes "
            "of UTF-8 before JSON escaping); K, M suffixes",
        ).metadata,
    )
    max_sessions: int = field(
        default=8,
        metadata=Setting(
            flag="--max-sessions",
            env="SANDBOX_MAX_SESSIONS",
            parse=positive(int),
            positive=True,
            help="sessions (create_session) live at once, every principal's together; each is "
            "one stopped interpreter process (1 pid) until it is closed or expires",
            doc="sessions (`create_session`) live at once, all principals together; each is "
            "one confined interpreter process (1 pid), stopped between calls, until "
            "`close_session`, its idle time-out or its maximum lifetime. A create over it "
            'gets "the server holds its maximum of N sessions (M of them yours): close_session '
            'one; list_sessions shows them"',
        ).metadata,
    )
    max_sessions_per_principal: int = field(
        default=4,
        metadata=Setting(
            flag="--max-sessions-per-principal",
            env="SANDBOX_MAX_SESSIONS_PER_PRINCIPAL",
            parse=positive(int),
            positive=True,
            help="sessions one principal may hold at once (stdio has one principal)",
        ).metadata,
    )
    sessions_memory_budget_bytes: int = field(
        default=256 * _MIB,
        metadata=Setting(
            flag="--sessions-memory-budget",
            env="SANDBOX_SESSIONS_MEMORY_BUDGET",
            parse=size,
            positive=True,
            unit="bytes",
            help="resident memory of the live sessions, the ready children and the runs "
            "together, in bytes, checked at each create_session and each session call: at or "
            "over it they are refused; K, M, G suffixes",
            doc="resident memory (RSS) of the live sessions, the ready children and the runs "
            "together, bytes, checked at each `create_session` and each call into a session; "
            'at or over it they are refused ("the sessions memory budget (B) is in use: '
            "close_session one\"). The README gives the arithmetic for compose's 1 GiB",
        ).metadata,
    )
    session_idle_timeout_s: float = field(
        default=900.0,
        metadata=Setting(
            flag="--session-idle-timeout",
            env="SANDBOX_SESSION_IDLE_TIMEOUT",
            parse=positive(float),
            positive=True,
            unit="s",
            help="seconds a session lives after its last call ended; then it is closed",
        ).metadata,
    )
    session_max_lifetime_s: float = field(
        default=4 * 3600.0,
        metadata=Setting(
            flag="--session-max-lifetime",
            env="SANDBOX_SESSION_MAX_LIFETIME",
            parse=positive(float),
            positive=True,
            unit="s",
            help="seconds a session lives at most from its creation, however busy; then it is "
            "closed as on its idle time-out",
        ).metadata,
    )
    workspace_fallback: bool = False
    snapshots_url: str | None = None
    tokens_file: str = field(
        default="",
        metadata=Setting(
            flag="--tokens-file",
            env="SANDBOX_TOKENS_FILE",
            help="file naming the principals of streamable HTTP, one NAME:TOKEN per line (a "
            f"token per principal, at least {PRINCIPAL_TOKEN_MIN_CHARS} characters); read at "
            "start, it must not be readable by group or others (chmod 600); instead of "
            "SANDBOX_HTTP_TOKEN and --token-file",
            doc="file naming the principals of streamable HTTP, read at start: one `NAME:TOKEN` "
            f"per line, split at the first `:`; NAME `{_braces(PRINCIPAL_NAME_PATTERN)}`, TOKEN "
            f"at least {PRINCIPAL_TOKEN_MIN_CHARS} visible ASCII characters, no two alike; "
            "blank lines and `#` lines ignored; at most "
            f"{size_words(TOKENS_FILE_MAX_BYTES)}; refused when the group or others may read "
            "or write it (`chmod 600`). Each request is authenticated as the principal whose "
            "token it sends; principal names appear in the log and in a caller's own "
            "`get_sandbox_metrics`, tokens never. Without it, the "
            f"single token (`SANDBOX_HTTP_TOKEN`, `--token-file`) is the principal "
            f"`{DEFAULT_PRINCIPAL}`, as is stdio",
        ).metadata,
    )
    principals: Principals | None = field(default=None, repr=False, compare=False)
    token: str | None = field(
        default=None,
        repr=False,
        compare=False,
        metadata=Setting(
            env="SANDBOX_HTTP_TOKEN",
            secret=True,
            help=f"the HTTP bearer token, one line of at least {TOKEN_MIN_CHARS} visible ASCII "
            "characters; deliberately no flag, since command lines are visible to every local user",
            file_flag="--token-file",
            file_env="SANDBOX_TOKEN_FILE",
            file_help="file holding the HTTP bearer token, or set SANDBOX_HTTP_TOKEN; there is "
            "deliberately no flag for the token itself: command lines are visible to every "
            "local user",
            check=check_token,
        ).metadata,
    )
    given: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    def __post_init__(self) -> None:
        """Check every declared bound, choice and secret, then every rule of :data:`CHECKS`.

        A secret set in code is held to its declared check like one read from its variable or
        file (the token to :func:`check_token`); the message names ``Settings.<field>``, never
        the value.

        ``tokens_file`` is read here when ``principals`` is not what it holds already (built
        in code, or changed with :func:`dataclasses.replace`); ``principals`` given without a
        tokens file is kept.

        Raises:
            ConfigError: The first setting out of its bounds or choices, a secret its check
                refuses, a tokens file :func:`~mcp_secure_sandbox.principals.read_tokens_file`
                refuses, or the first rule broken, in one line naming the flags.
        """
        from mcp_secure_sandbox.principals import Principals, read_tokens_file

        if self.tokens_file:
            if self.principals is None or self.principals.source != _tokens_source(self):
                object.__setattr__(self, "principals", read_tokens_file(self.tokens_file))
        elif self.principals is not None and not isinstance(self.principals, Principals):
            raise ConfigError(
                f"Settings.principals must be a Principals, not {type(self.principals).__name__}"
            )
        for item, setting in declarations():
            value = getattr(self, item.name)
            problem = setting.problem(value)
            if problem is not None:
                raise ConfigError(problem)
            if setting.check is not None and value is not None:
                # a value read from its variable or file was checked there, naming the source
                setting.check(value, f"Settings.{item.name}")
        for check in CHECKS:
            if not check.holds(self):
                raise ConfigError(check.message(self))

    def sandbox_config(self, policy: astguard.Policy | None = None) -> SandboxConfig:
        """The sandbox's configuration from these settings, in one call (pysandbox validates it).

        The run's ceiling is the maximum time-out (each call passes its own, shorter one), and
        the CPU-time limit matches it so a long CPU-bound run ends by its time-out.

        Args:
            policy: The astguard policy; ``None`` for astguard's default with
                :attr:`extra_modules` and the profile's checker rules, as the server builds it.

        Returns:
            The configuration ``pysandbox.Sandbox.from_config`` takes.

        Raises:
            ValueError: A value is out of pysandbox's bounds (the settings' own bounds are
                pysandbox's, so a checked ``Settings`` passes).
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
        if policy is None:
            policy = astguard.Policy().with_modules(*self.extra_modules)
            profile = PROFILES.get(self.profile)
            if profile is not None:
                policy = profile.policy_for(policy)
        return SandboxConfig(
            limits=limits,
            policy=policy,
            require=tuple(Layer(name) for name in self.require_layers),
            extra_modules=self.extra_modules,
            execution=ExecutionMode(self.execution),
            max_concurrent_runs=self.max_concurrent_runs,
            preload=self.preload,
            ready_children=self.ready_children,
            ready_max_idle_s=self.ready_max_idle_s,
        )

    @property
    def http_principals(self) -> Principals | None:
        """Whom streamable HTTP authenticates: the principals, or the single token's ``default``.

        Returns:
            :attr:`principals` when set (``--tokens-file``); else the token as the one
            principal :data:`~mcp_secure_sandbox.principals.DEFAULT_PRINCIPAL`; else ``None``
            (HTTP without a token, on loopback with ``--allow-unauthenticated-http`` only).
        """
        from mcp_secure_sandbox.principals import Principals

        if self.principals is not None:
            return self.principals
        return None if self.token is None else Principals.single(self.token)

    def to_dict(self) -> dict[str, Any]:
        """Return the settings as JSON-compatible data, paths absolute, without any secret.

        The HTTP tokens never appear, not even as a length or a mask: only whether auth is on
        (``http_auth``); nor do the principals' names (a caller sees no other principal).
        """
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for item, setting in declarations():
            if setting.secret:
                del data[item.name]
        del data["given"], data["principals"]
        data["workspace"] = str(self.workspace)
        data["snapshots"] = str(self.snapshots)
        for key, value in data.items():
            if isinstance(value, tuple):
                data[key] = list(value)
        data["http_auth"] = self.token is not None or self.principals is not None
        return data


def declarations() -> Iterator[tuple[Field[Any], Setting]]:
    """Each :class:`Settings` field that is a setting, with its declaration, in field order.

    Returns:
        An iterator of ``(dataclasses.Field, Setting)`` pairs.
    """
    for item in fields(Settings):
        setting = item.metadata.get(SETTING)
        if isinstance(setting, Setting):
            yield item, setting


def _flag(name: str) -> str:
    """The flag (or variable) of the setting held in field ``name``, for messages."""
    (setting,) = [s for f, s in declarations() if f.name == name]
    return setting.name


def _profile_layers_missing(settings: Settings) -> list[str]:
    profile = PROFILES.get(settings.profile)
    if profile is None:
        return []
    return [layer for layer in profile.required_layers if layer not in settings.require_layers]


#: The rules between settings, checked for every :class:`Settings` and listed on the page.
CHECKS: tuple[Check, ...] = (
    Check(
        fields=("default_timeout_s", "max_timeout_s"),
        holds=lambda s: s.default_timeout_s <= s.max_timeout_s,
        message=lambda s: (
            f"{_flag('default_timeout_s')} {s.default_timeout_s} s exceeds "
            f"{_flag('max_timeout_s')} {s.max_timeout_s} s"
        ),
        doc="the default time-out is at most the largest one",
    ),
    Check(
        fields=("max_body_bytes", "max_body_in_flight_bytes"),
        holds=lambda s: s.max_body_bytes <= s.max_body_in_flight_bytes,
        message=lambda s: (
            f"{_flag('max_body_bytes')} {size_text(s.max_body_bytes)} exceeds "
            f"{_flag('max_body_in_flight_bytes')} {size_text(s.max_body_in_flight_bytes)}: one "
            f"body could never be received; raise {_flag('max_body_in_flight_bytes')} or lower "
            f"{_flag('max_body_bytes')}"
        ),
        doc="one body fits the bodies held at once",
    ),
    Check(
        fields=("max_sessions_per_principal", "max_sessions"),
        holds=lambda s: s.max_sessions_per_principal <= s.max_sessions,
        message=lambda s: (
            f"{_flag('max_sessions_per_principal')} {s.max_sessions_per_principal} exceeds "
            f"{_flag('max_sessions')} {s.max_sessions}"
        ),
        doc="one principal's sessions fit the server's",
    ),
    Check(
        fields=("profile", "require_layers"),
        holds=lambda s: not _profile_layers_missing(s),
        message=lambda s: (
            f"{_flag('profile')} {s.profile} allows native extension modules, which the "
            f"Python-level layers cannot confine: it needs {_flag('require_layers')} "
            f"{','.join(PROFILES[s.profile].required_layers)} (missing: "
            f"{', '.join(_profile_layers_missing(s))})"
        ),
        doc="a profile allows native extension modules, which only the kernel layers confine: "
        "it needs the layers it names (both)",
    ),
    Check(
        fields=("tokens_file", "token"),
        holds=lambda s: s.principals is None or s.token is None,
        message=lambda s: (
            f"{_flag('tokens_file')} names every principal and its token, so the single token "
            f"({_flag('token')} or --token-file) cannot be given with it: put that token in "
            "the tokens file on a line of its own principal (NAME:TOKEN), or leave out "
            f"{_flag('tokens_file')} (the single token is then the principal "
            f"'{DEFAULT_PRINCIPAL}')"
        ),
        doc="the tokens file and the single token (`SANDBOX_HTTP_TOKEN`, `--token-file`) "
        "exclude each other: with the tokens file, every principal has its line in it",
    ),
    Check(
        fields=("transport", "token", "host", "allow_unauthenticated_http"),
        holds=lambda s: (
            not _serves_http_without_a_token(s)
            or _unauthenticated_http_refusal(s.host, s.allow_unauthenticated_http) is None
        ),
        message=lambda s: str(_unauthenticated_http_refusal(s.host, s.allow_unauthenticated_http)),
        doc="HTTP without a token is served only with the opt-in and on a loopback host",
    ),
)


def _default(item: Field[Any], setting: Setting, defaults: Settings | None) -> str:
    """The default of a setting as its flag spells it: ``defaults``' value, else the field's."""
    if defaults is not None and item.name not in ("workspace", "snapshots", "token"):
        return setting.text(getattr(defaults, item.name))
    if setting.default_text is not None:
        return setting.default_text
    if item.default is not MISSING:
        return setting.text(item.default)
    if item.default_factory is not MISSING:
        return setting.text(item.default_factory())
    return ""


class _Given(argparse.Action):
    """Stores the value and records that the flag was given (``namespace._given``)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, True if self.nargs == 0 else values)
        namespace.__dict__.setdefault("_given", set()).add(self.dest)


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults in each option's help; the description and epilog as written (a URL whole)."""


def _source_url() -> str | None:
    """Where the server's source is read: the distribution's ``Source`` URL (``pyproject.toml``)."""
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
    return None


#: Where the settings page is in the package folder (and in the sdist).
SETTINGS_PAGE = "docs/settings.md"


def _settings_page_links() -> list[str]:
    """Where the settings page is read.

    Returns:
        This package folder's copy when there is one (a checkout, an unpacked sdist), then the
        ``Source`` URL's (when the distribution's metadata names one).
    """
    links: list[str] = []
    local = Path(__file__).resolve().parents[2] / SETTINGS_PAGE
    if local.is_file():
        links.append(str(local))
    source = _source_url()
    if source is not None:
        links.append(f"{source}/{SETTINGS_PAGE}")
    return links


def _choices_text(item: Field[Any], setting: Setting, quote: Callable[[str], str]) -> str:
    """A setting's choices as the help and the settings page list them ("" without choices)."""
    if not setting.choices or setting.switch:
        return ""
    listed = ", ".join(quote(choice) for choice in setting.choices)
    if item.name == "require_layers":
        listed += f" or {quote(NO_LAYERS)}"
    return listed


def _help(item: Field[Any], setting: Setting) -> str:
    bounds = setting.bounds_text() if setting.bounds is not None else ""
    choices = _choices_text(item, setting, str)
    env = f"{setting.env}=1" if setting.switch else setting.env
    return (
        f"{setting.help}{f' (choices: {choices})' if choices else ''}"
        f"{f' ({bounds})' if bounds else ''} (env {env})"
    )


def build_parser(
    environ: Mapping[str, str] | None = None, *, defaults: Settings | None = None
) -> argparse.ArgumentParser:
    """Build the command-line parser from the declarations; ``SANDBOX_*`` variables are defaults.

    A malformed variable is reported like a malformed flag (argparse converts string defaults
    with the option's type): one usage line and exit status 2. A flag given is recorded in the
    namespace's ``_given`` set (:func:`settings_from_args` reads it).

    Args:
        environ: The environment to read defaults from (``os.environ`` when ``None``).
        defaults: Settings whose values are the defaults shown and used (the fields' defaults
            when ``None``); the directories keep their own defaults.

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
            "bearer token in SANDBOX_HTTP_TOKEN or --token-file, or one per principal in\n"
            "--tokens-file). Every flag also reads the SANDBOX_* environment variable it\n"
            "names; the flag wins."
        ),
        epilog=(
            "Every setting, its choices and bounds, and the rules between settings are\n"
            f"documented on the settings page, {SETTINGS_PAGE} of the package\n"
            f"(packages/mcp-server/{SETTINGS_PAGE} in the repository):\n"
            + "".join(f"  {link}\n" for link in _settings_page_links())
        ),
        formatter_class=_HelpFormatter,
        # No prefix of a flag stands for it: "--token SECRET" must not become --token-file,
        # and a flag added later cannot change what an abbreviation meant.
        allow_abbrev=False,
    )
    for item, setting in declarations():
        if setting.secret:
            if setting.file_flag is not None and setting.file_env is not None:
                parser.add_argument(
                    setting.file_flag,
                    dest=f"{item.name}_file",
                    action=_Given,
                    default=env.get(setting.file_env, ""),
                    help=f"{setting.file_help} (env {setting.file_env})",
                )
            continue
        if setting.switch:
            parser.add_argument(
                str(setting.flag),
                dest=item.name,
                action=_Given,
                nargs=0,
                default=env.get(setting.env, "") == "1",
                help=_help(item, setting),
            )
            continue
        scalar = not isinstance(getattr(defaults, item.name, item.default), tuple)
        parser.add_argument(
            str(setting.flag),
            dest=item.name,
            action=_Given,
            metavar=str(setting.flag)[2:].replace("-", "_").upper(),
            type=setting.parse,
            choices=setting.choices if scalar else None,
            default=env.get(setting.env, _default(item, setting, defaults)),
            help=_help(item, setting),
        )
    return parser


def _read_token_file(flag: str, token_file: str) -> str:
    """The token in ``token_file``: at most :data:`TOKEN_FILE_MAX_BYTES`, ASCII, one line."""
    source = f"{flag} {token_file}"
    try:
        with Path(token_file).open("rb") as handle:
            raw = handle.read(TOKEN_FILE_MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{source}: {exc.strerror}") from None
    if len(raw) > TOKEN_FILE_MAX_BYTES:
        raise ConfigError(
            f"{source} holds more than {TOKEN_FILE_MAX_BYTES} bytes: is it the right file? "
            f"{_ONE_LINE_ADVICE}"
        )
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise ConfigError(
            f"{source} is not ASCII text (a binary file, or another encoding); {_ONE_LINE_ADVICE}"
        ) from None
    token = text.strip()
    if not token:
        raise ConfigError(f"{source} is empty; {_ONE_LINE_ADVICE}")
    return check_token(token, source)


def _read_token(setting: Setting, token_file: str, environ: Mapping[str, str]) -> str | None:
    """The secret ``setting`` from its variable, or from the file ``token_file`` (which wins).

    Both are held to :func:`check_token`; a file's surrounding whitespace (its final line
    break, LF or CRLF) is not part of the token.
    """
    if token_file:
        return _read_token_file(str(setting.file_flag), token_file)
    token = environ.get(setting.env) or None
    return None if token is None else check_token(token, setting.env)


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
"""Bind addresses that only local processes can reach."""


def _check_unauthenticated_http(host: str, allowed: bool, environ: Mapping[str, str]) -> None:
    """Refuse HTTP without a token unless opted in, and anywhere but on loopback."""
    if environ.get("SANDBOX_ALLOW_REMOTE_WITHOUT_TOKEN"):
        raise ConfigError(
            "SANDBOX_ALLOW_REMOTE_WITHOUT_TOKEN is no longer supported: HTTP without a token is "
            f"served on loopback only; {_TOKEN_REMEDY}"
        )
    refusal = _unauthenticated_http_refusal(host, allowed)
    if refusal is not None:
        raise ConfigError(refusal)


#: How to give the HTTP token (said by every refusal of HTTP without one).
_TOKEN_REMEDY = (
    "set SANDBOX_HTTP_TOKEN or --token-file (one token), "  # noqa: S105 - a sentence, not a token
    "or --tokens-file (a token per principal)"
)


def _unauthenticated_http_refusal(host: str, allowed: bool) -> str | None:
    """Why HTTP without a token may not be served on ``host`` (``None``: it may)."""
    if host not in LOOPBACK_HOSTS:
        return (
            f"refusing to serve HTTP on {host} without a token: {_TOKEN_REMEDY} (--allow-"
            "unauthenticated-http is honoured on a loopback host only: "
            f"{', '.join(LOOPBACK_HOSTS)})"
        )
    if not allowed:
        return (
            f"refusing to serve HTTP without a token: {_TOKEN_REMEDY}, or pass "
            "--allow-unauthenticated-http (SANDBOX_ALLOW_UNAUTHENTICATED_HTTP=1) to let every "
            "local user run code as this server's user"
        )
    return None


def _serves_http_without_a_token(s: Settings) -> bool:
    return s.transport == "streamable-http" and s.token is None and s.principals is None


def _tokens_source(s: Settings) -> str:
    """The ``source`` of the principals read from ``s.tokens_file``."""
    from mcp_secure_sandbox.principals import TOKENS_FILE_FLAG

    return f"{TOKENS_FILE_FLAG} {s.tokens_file}"


def _snapshots_url(value: str) -> str | None:
    """``--snapshots`` as an ``s3://`` URL (checked by wsnapshot), or ``None`` for a directory."""
    if not value.startswith(S3_SCHEME):
        return None
    try:
        bucket, prefix = parse_s3_url(value)
    except StoreConfigError as exc:
        raise ConfigError(f"--snapshots: {exc}") from None
    return f"{S3_SCHEME}{bucket}/{prefix}"


def _secret_flags(item: Field[Any], setting: Setting) -> set[str]:
    """The flags a person might try for a secret: its field's name and its variable's."""
    variable = setting.env.removeprefix("SANDBOX_").lower().replace("_", "-")
    return {f"--{item.name.replace('_', '-')}", f"--{variable}"}


def _refuse_secret_flags(argv: Sequence[str]) -> None:
    """Refuse a secret on the command line, without repeating it (argparse would echo it).

    Raises:
        ConfigError: An argument is a secret's would-be flag, alone or with ``=value``.
    """
    for item, setting in declarations():
        if not setting.secret:
            continue
        tried = _secret_flags(item, setting)
        for arg in argv:
            if arg.split("=", 1)[0] in tried:
                where = f"set {setting.env}"
                if setting.file_flag:
                    where += f" or {setting.file_flag}"
                raise ConfigError(
                    f"{arg.split('=', 1)[0]}: the HTTP token has no flag, since command lines "
                    f"are visible to every local user; {where} (the value given was not used)"
                )


def settings_from_args(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Parse flags and environment into :class:`Settings` (directories not yet prepared).

    A profile's defaults (its memory limit) apply to the settings neither a flag nor a variable
    gave (``Settings.given``), however the flag was spelt (``--memory-limit=1G``, ``--memory
    1G``).

    Args:
        argv: Command-line arguments without the program name (``sys.argv[1:]`` when ``None``).
        environ: Environment for ``SANDBOX_*`` defaults (``os.environ`` when ``None``).

    Returns:
        The parsed settings, paths made absolute but not created.

    Raises:
        ConfigError: A value out of its bounds or choices, a rule of :data:`CHECKS` broken
            (the default time-out over the maximum, a body limit over the in-flight budget, a
            profile without both kernel layers), a bad token file; HTTP would be served
            without a token without ``--allow-unauthenticated-http`` or on a non-loopback host.
        SystemExit: From argparse, for unknown flags, unparsable values or ``--help``.
    """
    env = os.environ if environ is None else environ
    given_argv = sys.argv[1:] if argv is None else argv
    _refuse_secret_flags(given_argv)
    args = build_parser(env).parse_args(given_argv)
    flags_given: set[str] = args.__dict__.pop("_given", set())
    values: dict[str, Any] = {}
    given: set[str] = set()
    for item, setting in declarations():
        if setting.secret:
            values[item.name] = _read_token(setting, getattr(args, f"{item.name}_file"), env)
            if values[item.name] is not None:
                given.add(item.name)
            continue
        value = getattr(args, item.name)
        # argparse checks choices on flags, not on defaults from variables
        if setting.choices and not isinstance(value, tuple) and value not in setting.choices:
            choices = ", ".join(setting.choices)
            raise ConfigError(f"{setting.env}={value!r}: choose one of {choices}")
        values[item.name] = value
        if item.name in flags_given or setting.env in env:
            given.add(item.name)
    if (
        values["transport"] == "streamable-http"
        and values["token"] is None
        and not values["tokens_file"]
    ):
        _check_unauthenticated_http(values["host"], values["allow_unauthenticated_http"], env)
    url = _snapshots_url(str(values["snapshots"]))
    values.update(
        # absolute, without symlink resolution: the workspace checks resolve it themselves
        workspace=Path(os.path.abspath(values["workspace"])),  # noqa: PTH100
        snapshots=Path(os.path.abspath(DEFAULT_SNAPSHOTS if url else values["snapshots"])),  # noqa: PTH100
        snapshots_url=url,
        given=frozenset(given),
    )
    profile = PROFILES.get(values["profile"])
    if profile is not None:
        values["extra_modules"] = tuple(
            dict.fromkeys((*profile.extra_modules, *values["extra_modules"]))
        )
        values["preload"] = profile.preload
        if "memory_bytes" not in given:
            values["memory_bytes"] = profile.memory_bytes
    return Settings(**values)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def settings_page(defaults: Settings | None = None) -> str:
    """The settings page (``docs/settings.md``), derived from the declarations.

    Args:
        defaults: Settings whose values are the defaults shown (the fields' defaults, and
            ``default_doc`` for a machine-dependent one, when ``None``).

    Returns:
        Markdown: a table of every setting (flag, variable, default, bounds, meaning) and the
        rules between settings.
    """
    words: dict[str, str] = {}
    for item, setting in declarations():
        if setting.secret or (item.default is MISSING and defaults is None):
            continue
        value = getattr(defaults, item.name) if defaults is not None else item.default
        words[item.name] = setting.words(value)
    lines = [
        "# Settings of mcp-secure-sandbox",
        "",
        "<!-- Generated from the declarations in src/mcp_secure_sandbox/settings.py; do not edit.",
        "     Regenerate: python -m mcp_secure_sandbox._settings_page > docs/settings.md -->",
        "",
        "Each setting has a flag and a `SANDBOX_*` environment variable (the flag wins), except",
        "secrets, which have no flag; `mcp-secure-sandbox --help` prints the same list. Sizes",
        "accept `K`, `M` and `G` suffixes (powers of 1024). A value out of its bounds, or",
        "settings breaking a rule below, stop the server at start with one line on stderr",
        "(status 2).",
        "",
        "| flag | environment | default | bounds | meaning |",
        "|---|---|---|---|---|",
    ]
    for item, setting in declarations():
        if setting.secret and setting.file_flag is not None:
            lines.append(
                f"| `{setting.file_flag}` | `{setting.file_env}` | none | | "
                f"{_cell(setting.file_help)} |"
            )
        flag = f"`{setting.flag}`" if setting.flag else "(none)"
        env = f"`{setting.env}=1`" if setting.switch else f"`{setting.env}`"
        if setting.secret:
            default = "none"
        elif setting.switch:
            default = "off"
        elif setting.default_doc is not None and defaults is None:
            default = setting.default_doc
        else:
            shown = _default(item, setting, defaults)
            default = f"`{shown}`" if shown else "none"
        bounds = _choices_text(item, setting, lambda c: f"`{c}`") or setting.bounds_text()
        meaning = (setting.doc or setting.help).format_map(words)
        lines.append(f"| {flag} | {env} | {default} | {_cell(bounds)} | {_cell(meaning)} |")
    lines += ["", "Rules between settings, checked however the settings were given:", ""]
    for check in CHECKS:
        names = ", ".join(f"`{_flag(name)}`" for name in check.fields)
        lines.append(f"- {names}: {check.doc}.")
    return "\n".join(lines) + "\n"


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
