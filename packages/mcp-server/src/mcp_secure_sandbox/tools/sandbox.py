"""``run_sandbox_code``: run a script in the sandbox (pysandbox)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

import astguard
from mcp_secure_sandbox import rich, surface
from mcp_secure_sandbox._schemas import RunOutput
from mcp_secure_sandbox.principals import principal_of
from mcp_secure_sandbox.profiles import profile_offer
from mcp_secure_sandbox.sessions import error_text
from mcp_secure_sandbox.settings import Settings
from mcp_secure_sandbox.state import ServerState
from mcp_secure_sandbox.tools._tool import Admission, note, state_of, tool
from pysandbox import (
    PROFILES,
    IsolationUnavailable,
    RunResult,
    SandboxSetupError,
    SessionBudgetExceeded,
    SessionEndedError,
    UnknownSession,
)

__all__ = [
    "PROGRESS_AFTER_S",
    "PROGRESS_EVERY_S",
    "TOOLS",
    "offer_profiles",
    "refusal_text",
    "run_sandbox_code",
]

log = logging.getLogger("mcp_secure_sandbox")

PROGRESS_AFTER_S = 2.0
PROGRESS_EVERY_S = 2.0


def _params(settings: Settings) -> dict[str, Any]:
    """``timeout_sec`` bounded by the live maximum, and ``session_id``'s description."""
    return {
        "timeout_sec": Annotated[
            float | None,
            Field(
                strict=True,
                gt=0,
                le=settings.max_timeout_s,
                description=(
                    f"Wall-clock limit in seconds; default {settings.default_timeout_s:g}, "
                    f"at most {settings.max_timeout_s:g}."
                ),
            ),
        ],
        "session_id": Annotated[
            str | None,
            Field(description="A create_session id. Omitted: a fresh interpreter."),
        ],
    }


def _wait(state: ServerState, arguments: Mapping[str, Any]) -> float:
    """A run waits its time-out plus a grace (a bad ``timeout_sec`` is refused before)."""
    return state.run_wait_s(state.timeout_for(arguments["timeout_sec"]))


async def _shape(state: ServerState, result: RunResult, arguments: Mapping[str, Any]) -> Any:
    """The run's answer, once its slot is released: the detail, profile offers, rich content."""
    timeout_sec = arguments["timeout_sec"]
    timeout = state.timeout_for(timeout_sec)
    state.metrics.record_run(result.status.value, result.peak_memory_bytes)
    output = _run_output(result, arguments["session_id"])
    output["detail"] = _explain_limit(state, result, timeout_sec is None, timeout)
    if any(v["rule_id"] in _IMPORT_RULES for v in output["violations"]):
        output["violations"] = await anyio.to_thread.run_sync(
            offer_profiles,
            arguments["code"],
            state.policy,
            state.settings.profile,
            output["violations"],
            limiter=state.admission.limiter("light"),
        )
    if not rich.reads_files(result):
        return rich.build(state, output, result)
    return await anyio.to_thread.run_sync(
        rich.build, state, output, result, limiter=state.admission.limiter("light")
    )


@tool(
    admit=Admission(
        "run",
        workspace="shared",
        wait=_wait,
        bound=lambda state: state.run_bound,
        consistent=True,
    ),
    after=_shape,
    output=RunOutput,
    params=_params,
    fill=lambda settings: {
        "imports": surface.imports_clause(settings),
        "limits": surface.run_limits(settings),
        "figures": surface.figures_clause(settings),
    },
    annotations=ToolAnnotations(
        title="Run Python in the sandbox",
        read_only_hint=False,
        destructive_hint=False,
        idempotent_hint=False,
        open_world_hint=False,
    ),
)
async def run_sandbox_code(
    code: Annotated[
        str,
        Field(
            description=(
                f"The Python source, at most {astguard.DEFAULT_MAX_SOURCE_BYTES:,} bytes of UTF-8."
            )
        ),
    ],
    ctx: Context,
    timeout_sec: float | None = None,
    session_id: str | None = None,
) -> RunResult:
    """Run a Python script in the sandbox and return its outcome.

    It runs in a fresh interpreter (or a session's) in the workspace directory:
    `open("data.csv")` reads a workspace file; written files stay. {imports}. No network,
    processes or files outside the workspace. Print what you want to see. {limits}; a cut
    stream holds a marker and sets its *_truncated flag.

    Returns status (ok, error, rejected, timeout, memory_limit, output_limit, disk_limit,
    killed), exit_code or signal, the streams, timings, peak memory, violations when
    rejected, a detail naming the limit hit and how to raise it, result (the final
    expression's {type, text} or null) and session_ended with session_end_reason
    (timeout, memory_limit, exit, killed). A rejection, exception or time-out is a normal
    result: fix the code and run again.

    PNG, JPEG or GIF files the run wrote{figures} come back as image content, a few per
    run, the rest in images_omitted; changed files are in files, linked as
    sandbox://workspace/{+path}.
    """
    state = state_of(ctx)
    timeout = state.timeout_for(timeout_sec)
    progress = _Progress(ctx, timeout)
    try:
        began = time.perf_counter()
        if session_id is None:
            result = await state.sandbox.arun(code, timeout=timeout)
        else:
            result = await _in_session(state, ctx, session_id, code, timeout)
        if state.timer is not None:
            state.timer.library(ctx.request_id, time.perf_counter() - began, result.duration_ms)
    except (IsolationUnavailable, SandboxSetupError) as exc:
        raise ToolError(refusal_text(exc)) from None
    finally:
        progress.stop()
    note(status=result.status.value, message=f"run {result.status.value} {result.detail}".strip())
    return result


TOOLS = (run_sandbox_code,)
"""The tools of this module, in the order they are listed."""


def _explain_limit(state: ServerState, result: RunResult, default: bool, timeout: float) -> str:
    """The run's detail, with what to do when the time-out stopped it.

    pysandbox names its own knob where a limit can be raised (``Limits.memory_bytes``); a
    caller of the server raises it with the server's flag, which the detail then names.
    """
    if result.status.value != "timeout":
        return result.detail.replace(
            "(Limits.memory_bytes)",
            "(the server's --memory-limit / SANDBOX_MEMORY_LIMIT, "
            f"now {state.settings.memory_bytes // 2**20} MiB)",
        )
    maximum = state.settings.max_timeout_s
    if default and timeout < maximum:
        return (
            f"stopped after {timeout:g} s, the default; pass timeout_sec up to {maximum:g} "
            "for a longer run"
        )
    return (
        f"stopped after {timeout:g} s, the time-out asked for (the server's maximum is "
        f"{maximum:g} s)"
    )


#: astguard's rules for an import off the allow-list (``import m``, ``from m import sub``).
_IMPORT_RULES = frozenset({"AG101", "AG103"})
#: Largest source checked again for :func:`offer_profiles`, in UTF-8 bytes: the second check
#: runs after the run's admission, so its cost is kept to milliseconds (a 200 KB hostile
#: source cost up to 3 s, red team 2026-12-01); a larger source gets no offer.
OFFER_MAX_SOURCE_BYTES = 16 * 1024


def offer_profiles(
    code: str, policy: astguard.Policy, active: str, violations: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """End each refused import a profile would allow with how to start the server with it.

    The code is checked again under the policy plus each other profile's modules: an import
    violation that check no longer reports (same rule, same place) is one the profile allows.
    astguard knows nothing of the server's profiles; this is where the two meet. Only when an
    import was refused and the source is at most :data:`OFFER_MAX_SOURCE_BYTES`.

    Args:
        code: The rejected source.
        policy: The policy it was checked under.
        active: The server's profile (``"none"`` or a name of :data:`PROFILES`); not offered.
        violations: The run's violations as JSON-compatible dicts (``rule_id``, ``message``,
            ``line``, ``col``, ...).

    Returns:
        The violations, those a profile would allow with its :func:`profile_offer` clause
        appended to the message (new dicts; the others as given).
    """
    offers: dict[tuple[str, int, int], str] = {}
    if not any(v["rule_id"] in _IMPORT_RULES for v in violations):
        return violations
    if len(code.encode("utf-8", "surrogatepass")) > OFFER_MAX_SOURCE_BYTES:
        return violations
    for profile in PROFILES.values():
        if profile.name == active:
            continue
        wider = astguard.check(code, policy.with_modules(*profile.extra_modules))
        left = {(v.rule_id, v.line, v.col) for v in wider.violations}
        for v in violations:
            key = (v["rule_id"], v["line"], v["col"])
            if v["rule_id"] in _IMPORT_RULES and key not in left:
                offers.setdefault(key, profile_offer(profile))
    return [
        {**v, "message": f"{v['message']}; {offers[key]}"}
        if (key := (v["rule_id"], v["line"], v["col"])) in offers
        else v
        for v in violations
    ]


def refusal_text(exc: IsolationUnavailable | SandboxSetupError) -> str:
    """The tool error text of a run the sandbox refused: which layer, why, which setting.

    Args:
        exc: pysandbox's refusal (a required layer is unavailable, or the child could not
            apply one; neither carries text of the user's code).

    Returns:
        One paragraph for the client.
    """
    if isinstance(exc, IsolationUnavailable):
        reasons = "; ".join(
            f"{name}: {exc.reasons.get(name, 'unavailable')}" for name in exc.missing
        )
        return (
            f"the sandbox refused to run: required isolation layer(s) unavailable ({reasons}). "
            "The server requires them by --require-layers (SANDBOX_REQUIRE_LAYERS); an operator "
            "can make the layer available, or list fewer layers (none: Python-level isolation "
            "only, unsafe)."
        )
    return f"the sandbox could not start the run: {exc}"


async def _in_session(
    state: ServerState, ctx: Context, session_id: str, code: str, timeout: float
) -> RunResult:
    """Run ``code`` in the caller's session ``session_id`` (its turn and gate already held).

    The lookup and the memory budget read ``/proc``: in a thread. A cancelled call kills the
    session (pysandbox), which the registry then forgets.

    Raises:
        ToolError: The contract's texts (unknown session, the memory budget).
    """
    principal = principal_of(ctx)
    try:
        session = await anyio.to_thread.run_sync(
            state.sessions.begin_call,
            session_id,
            principal,
            limiter=state.admission.limiter("light"),
        )
    except (UnknownSession, SessionBudgetExceeded) as exc:
        raise ToolError(error_text(exc, state.settings)) from None
    result: RunResult | None = None
    try:
        result = await session.arun(code, timeout)
    except SessionEndedError:
        raise ToolError(error_text(UnknownSession(session_id), state.settings)) from None
    finally:
        state.sessions.end_call(session_id, principal, result)
    return result


def _run_output(result: RunResult, session_id: str | None = None) -> dict[str, Any]:
    """The server's view of a run: ``RunResult``'s fields, the status as its value.

    A violation is astguard's ``Violation`` (pysandbox's own source-size rule ``PS001``
    too); it is dumped to JSON here, and the SDK validates it against ``Violation``'s schema.
    The isolation layers are in ``sandbox://status``, not in every result.
    """
    return {
        "status": result.status.value,
        "exit_code": result.exit_code,
        "signal": result.signal,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "stdout_truncated": result.stdout_truncated,
        "stderr_truncated": result.stderr_truncated,
        "duration_ms": result.duration_ms,
        "cpu_time_ms": result.cpu_time_ms,
        "peak_memory_bytes": result.peak_memory_bytes,
        "violations": [v.to_dict() for v in result.violations],
        "detail": result.detail,
        "result": dict(result.result) if result.result is not None else None,
        "session_id": session_id,
        "session_ended": result.session_ended,
        "session_end_reason": result.session_end_reason,
    }


class _Progress:
    """``elapsed of timeout`` progress every few seconds once a run is past a couple.

    Timers on the event loop instead of a task beside each run: a run shorter than
    :data:`PROGRESS_AFTER_S` costs one timer set and cancelled. A notification that cannot be
    sent (the client went away) is logged and does not fail the run.
    """

    def __init__(self, ctx: Context, timeout: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._ctx = ctx
        self._timeout = timeout
        self._started = self._loop.time()
        self._sending: asyncio.Task[None] | None = None
        self._timer = self._loop.call_later(PROGRESS_AFTER_S, self._tick)

    def _tick(self) -> None:
        if self._sending is None or self._sending.done():
            self._sending = self._loop.create_task(self._send())
        self._timer = self._loop.call_later(PROGRESS_EVERY_S, self._tick)

    async def _send(self) -> None:
        elapsed = self._loop.time() - self._started
        timeout = self._timeout
        try:
            await self._ctx.report_progress(
                min(elapsed, timeout), timeout, f"running for {elapsed:.0f} s of {timeout:.0f} s"
            )
        except Exception as exc:  # a lost notification is no failure of the run
            log.info("progress notification not sent: %s", type(exc).__name__)

    def stop(self) -> None:
        """Stop reporting (the run ended); a notification being sent is cancelled."""
        self._timer.cancel()
        if self._sending is not None:
            self._sending.cancel()
