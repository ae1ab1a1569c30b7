"""What the model reads about the live server: the instructions and the limits in descriptions.

One home for the sentences that depend on the settings in force: which modules code may import
(the standard-library allow-list, the profile's extra modules and ``--extra-modules``) and the
limits of a run (time-out, memory, output), and the sizes the transport accepts. The server's
instructions and the tool descriptions are built from them at start-up, from the live
:class:`~mcp_secure_sandbox.settings.Settings`, so what the model is told is what is enforced.

It is also the home of the size the whole tool listing may take (:data:`TOOLS_LIST_MAX_BYTES`):
a client sends ``tools/list`` into the model's context with every request.
"""

from __future__ import annotations

from mcp_secure_sandbox._declare import size_words
from mcp_secure_sandbox.settings import Settings, declarations
from pysandbox import PROFILES

__all__ = [
    "TOOLS_LIST_MAX_BYTES",
    "TOOLS_LIST_PROFILE_MAX_BYTES",
    "body_limit",
    "figures_clause",
    "imports_clause",
    "instructions",
    "run_limits",
    "session_limits",
    "setting_words",
    "size_words",
    "tools_list_max_bytes",
]

TOOLS_LIST_MAX_BYTES = 24_576
"""Largest ``tools/list`` result without a profile: UTF-8 bytes of its compact JSON
(``separators=(",", ":")``), as a client in the 2026-07-28 protocol receives it."""
TOOLS_LIST_PROFILE_MAX_BYTES = 26_624
"""Largest ``tools/list`` result under a profile (``--profile datascience``), likewise."""


def tools_list_max_bytes(profile: str) -> int:
    """The bound of the tool listing for a server started with ``--profile profile``.

    Args:
        profile: ``"none"`` or a name of :data:`pysandbox.PROFILES`.

    Returns:
        :data:`TOOLS_LIST_PROFILE_MAX_BYTES` for a profile, else :data:`TOOLS_LIST_MAX_BYTES`.
    """
    return TOOLS_LIST_PROFILE_MAX_BYTES if profile in PROFILES else TOOLS_LIST_MAX_BYTES


def setting_words(settings: Settings, name: str) -> str:
    """The value of setting ``name`` in ``settings`` as a person reads it, by its declaration.

    Args:
        settings: The settings in force.
        name: A declared field of :class:`~mcp_secure_sandbox.settings.Settings`.

    Returns:
        For example ``"30 s"`` for ``diff_deadline_s``, ``"256 MiB"`` for ``export_max_bytes``.

    Raises:
        KeyError: ``name`` is no declared setting.
    """
    declared = {item.name: setting for item, setting in declarations()}
    return declared[name].words(getattr(settings, name))


def imports_clause(settings: Settings) -> str:
    """What code may import under ``settings``: one clause, for instructions and descriptions.

    Without a profile and ``--extra-modules`` it claims no third-party module; with them it
    names each extra module (the profile's first) and says where it came from.

    Args:
        settings: The settings in force (``profile``, ``extra_modules``).

    Returns:
        For example ``"Imports: the standard-library modules the policy allows, plus numpy,
        pandas, matplotlib (--profile datascience); no other third-party module (an operator
        adds some with --extra-modules)"``.
    """
    profile = PROFILES.get(settings.profile)
    from_profile = [m for m in settings.extra_modules if profile and m in profile.extra_modules]
    from_flag = [m for m in settings.extra_modules if m not in from_profile]
    extras = []
    if from_profile and profile is not None:
        extras.append(f"{', '.join(from_profile)} (--profile {profile.name})")
    if from_flag:
        extras.append(f"{', '.join(from_flag)} (--extra-modules)")
    plus = f", plus {'; '.join(extras)}" if extras else ""
    return (
        f"Imports: the standard-library modules the policy allows{plus}; no other third-party "
        "module (an operator adds some with --extra-modules)"
    )


def figures_clause(settings: Settings) -> str:
    """The figures a run's answer shows, when code may import matplotlib, else nothing.

    Args:
        settings: The settings in force (``extra_modules``).

    Returns:
        ``", then matplotlib figures left open (plt.show()),"`` or ``""``.
    """
    if "matplotlib" not in settings.extra_modules:
        return ""
    return ", then matplotlib figures left open (plt.show()),"


def run_limits(settings: Settings) -> str:
    """The limits of one run under ``settings``, in one clause.

    Args:
        settings: The settings in force.

    Returns:
        For example ``"Limits: time-out 10 s by default, at most 60 s (timeout_sec); 512 MiB
        of memory; a stream past 8 MiB stops the run (output_limit); an answer keeps 16 KiB of
        each of stdout and stderr (head and tail)"``.
    """
    return (
        f"Limits: time-out {settings.default_timeout_s:g} s by default, at most "
        f"{settings.max_timeout_s:g} s (timeout_sec); {size_words(settings.memory_bytes)} of "
        f"memory; a stream past {size_words(settings.output_bytes)} stops the run "
        f"(output_limit); an answer keeps {size_words(settings.stream_excerpt_bytes)} of each "
        "of stdout and stderr (head and tail)"
    )


def session_limits(settings: Settings) -> str:
    """The lifetimes and limits of sessions under ``settings``, in one sentence.

    Args:
        settings: The settings in force (the ``--max-sessions*``, ``--session-*`` and
            ``--sessions-memory-budget`` settings).

    Returns:
        For example ``"Closed 900 s after its last call or 14400 s after creation
        (expires_at); at most 8 sessions (4 per principal), while sessions and runs use under
        256 MiB"``.
    """
    idle = setting_words(settings, "session_idle_timeout_s")
    life = setting_words(settings, "session_max_lifetime_s")
    return (
        f"Closed {idle} after its last call or {life} after creation (expires_at); at most "
        f"{settings.max_sessions} sessions ({settings.max_sessions_per_principal} per "
        f"principal), while sessions and runs use under "
        f"{size_words(settings.sessions_memory_budget_bytes)}"
    )


def body_limit(settings: Settings, alternative: str) -> str:
    """What the transport accepts of one large argument, and the way around it.

    Args:
        settings: The settings in force (``max_body_bytes``).
        alternative: What to do instead, e.g. ``"use data_path"``.

    Returns:
        For example ``"A request over HTTP is at most 12 MiB, escapes included; larger: use
        data_path."``.
    """
    return (
        f"A request over HTTP is at most {size_words(settings.max_body_bytes)}, escapes "
        f"included; larger: {alternative}."
    )


def instructions(settings: Settings) -> str:
    """The server's instructions (the ``initialize``/``server/discover`` result) for ``settings``.

    Args:
        settings: The settings in force.

    Returns:
        A paragraph naming the tools' purpose, what code may import and the limits of a run.
    """
    return (
        "Runs Python you write in an isolated sandbox whose current directory is a persistent "
        "workspace, validates JSON and CSV data, and snapshots and restores that workspace. "
        f"{imports_clause(settings)}. Code cannot reach the network, start processes or touch "
        f"files outside the workspace. {run_limits(settings)}. An exception, rejection or "
        "time-out in your code is a normal result with a status: read stdout, stderr and "
        "violations, fix the code and run it again. To keep variables across calls (load data "
        "once, then explore), create_session and pass its session_id. Snapshot before a risky "
        "step; restore to start over."
    )
