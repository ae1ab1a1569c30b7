"""Sessions over MCP, in process with ``mcp.Client(app)`` (the default mode and ``legacy``).

The contract of issue 28: ``create_session``, ``run_sandbox_code(session_id=...)``,
``list_sessions``, ``close_session``, the fixed error texts, ``sandbox://sessions`` and the
sessions in ``get_sandbox_metrics`` (only the caller's), expiry, and no process left after
``close_session`` or the server's shutdown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

from mcp_secure_sandbox.server import create_server
from mcp_secure_sandbox.settings import ConfigError, prepare_directories, settings_from_args
from mcp_secure_sandbox.state import ServerState

T = TypeVar("T")
#: No ready children: the memory budget then counts the sessions only.
BASE = ("--ready-children", "0")
UNKNOWN = "unknown session {} (it may have been closed or expired): create_session starts a new one"


def _serve(
    dirs: tuple[Path, Path],
    flags: Sequence[str],
    body: Callable[[Client, ServerState], Awaitable[T]],
    mode: str = "auto",
) -> tuple[T, ServerState]:
    """Run ``body`` with ``mcp.Client`` connected in process to a server started with ``flags``."""
    workspace, snapshots = dirs
    settings = prepare_directories(
        settings_from_args(
            ["--workspace", str(workspace), "--snapshots", str(snapshots), *BASE, *flags], {}
        )
    )
    app, state = create_server(settings)

    async def main() -> T:
        try:
            async with Client(app, mode=mode) as client:
                return await body(client, state)
        finally:
            state.close()  # the in-process default mode may not run the lifespan's end

    return anyio.run(main), state


def _text(result: CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


def _error(result: CallToolResult) -> str:
    """The tool error's text without the SDK's ``Error executing tool NAME: `` prefix."""
    assert result.is_error, result
    return re.sub(r"^Error executing tool \w+: ", "", _text(result))


def _out(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, _text(result)
    out: dict[str, Any] | None = result.structured_content
    assert out is not None
    return out


async def _create(client: Client, description: str = "") -> dict[str, Any]:
    return _out(await client.call_tool("create_session", {"description": description}))


async def _run(client: Client, code: str, sid: str | None, **extra: Any) -> CallToolResult:
    args: dict[str, Any] = {"code": code, **extra}
    if sid is not None:
        args["session_id"] = sid
    return await client.call_tool("run_sandbox_code", args)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:  # noqa: PTH123
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _session_pids(state: ServerState) -> list[int]:
    sandbox = state.sandbox
    with sandbox._sessions_lock:
        return [s.pid for s in sandbox._sessions]


async def _persists(client: Client, state: ServerState) -> None:
    """x = 42 then print(x + 1); the value; list and close; the id is unknown after."""
    created = await _create(client, "analysis")
    sid = created["session_id"]
    assert re.fullmatch(r"sess_[A-Za-z0-9_-]{22}", sid)
    settings = state.settings
    assert created["idle_timeout_sec"] == settings.session_idle_timeout_s
    assert created["max_lifetime_sec"] == settings.session_max_lifetime_s
    expires = datetime.fromisoformat(created["expires_at"])
    assert expires.utcoffset() == timezone.utc.utcoffset(None)
    first = _out(await _run(client, "x = 42", sid))
    assert first["status"] == "ok" and first["result"] is None
    assert first["session_id"] == sid and first["session_ended"] is False
    second = _out(await _run(client, "print(x + 1)\nx * 2", sid))
    assert second["stdout"] == "43\n"
    assert second["result"] == {"type": "builtins.int", "text": "84"}
    assert second["session_end_reason"] is None
    # a one-shot run has a result too, and no session
    once = _out(await _run(client, "[1, 'a']", None))
    assert once["result"] == {"type": "builtins.list", "text": "[1, 'a']"}
    assert once["session_id"] is None and once["session_ended"] is None
    fresh = _out(await _run(client, "x", None))
    assert fresh["status"] == "error" and "NameError" in fresh["stderr"]
    (listed,) = await _list(client)
    assert listed["session_id"] == sid and listed["description"] == "analysis"
    assert listed["calls"] == 2 and listed["rss_bytes"] > 1 << 20
    assert listed["expires_at"] >= created["expires_at"]
    (pid,) = _session_pids(state)
    assert _alive(pid)
    assert _out(await client.call_tool("close_session", {"session_id": sid})) == {"closed": True}
    assert not _alive(pid)
    assert await _list(client) == []
    for again in (
        await _run(client, "x", sid),
        await client.call_tool("close_session", {"session_id": sid}),
    ):
        assert _error(again) == UNKNOWN.format(sid)


async def _unknown_ids(client: Client, state: ServerState) -> None:
    never = "sess_" + "A" * 22
    for sid, shown in ((never, never), ("nope", "nope"), ("a b\nc", "'a b\\nc'")):
        assert _error(await _run(client, "1", sid)) == UNKNOWN.format(shown)
    huge = _error(await _run(client, "1", "x" * 100_000))
    assert huge == UNKNOWN.format("'" + "x" * 36 + "...")


async def _other_principal(client: Client, state: ServerState) -> None:
    """Another principal's session: unknown to run and close, absent from every listing."""
    theirs = state.sessions.create("someone-else", "theirs").session_id
    mine = (await _create(client, "mine"))["session_id"]
    _out(await _run(client, "s = sum(range(200000))", mine))
    for result in (
        await _run(client, "1", theirs),
        await client.call_tool("close_session", {"session_id": theirs}),
    ):
        assert _error(result) == UNKNOWN.format(theirs)
    assert [s["session_id"] for s in await _list(client)] == [mine]
    metrics = _out(await client.call_tool("get_sandbox_metrics", {}))
    resource = await client.read_resource("sandbox://sessions")
    document = json.loads(resource.contents[0].text)  # type: ignore[union-attr]
    for view in (metrics["sessions"], document["sessions"]):
        (only,) = view
        assert only["session_id"] == mine and only["description"] == "mine"
        assert only["calls"] == 1 and only["cpu_time_ms"] >= 0 and only["rss_bytes"] > 1 << 20
    assert theirs not in json.dumps(metrics) and theirs not in json.dumps(document)
    assert state.sessions.count("someone-else") == 1  # untouched
    _out(await client.call_tool("close_session", {"session_id": mine}))
    state.sessions.close(theirs, "someone-else")


STUBBORN = (
    "while True:\n    try:\n        while True:\n            pass\n"
    "    except KeyboardInterrupt:\n        pass\n"
)


async def _endings(client: Client, state: ServerState) -> None:
    """output_limit and a stopped time-out leave it; an ignored interrupt and exit end it."""
    sid = (await _create(client))["session_id"]
    _out(await _run(client, "kept = 7", sid))
    flood = _out(await _run(client, "print('x' * 200_000)", sid))
    assert flood["status"] == "output_limit" and flood["session_ended"] is False
    assert _out(await _run(client, "kept", sid))["result"]["text"] == "7"
    stopped = _out(await _run(client, "while True:\n    pass", sid, timeout_sec=0.5))
    assert stopped["status"] == "timeout" and stopped["session_ended"] is False
    killed = _out(await _run(client, STUBBORN, sid, timeout_sec=0.5))
    assert killed["status"] == "timeout" and killed["session_ended"] is True
    assert killed["session_end_reason"] == "timeout"
    assert _error(await _run(client, "1", sid)) == UNKNOWN.format(sid)
    sid2 = (await _create(client))["session_id"]
    exited = _out(await _run(client, "raise SystemExit(3)", sid2))
    assert exited["session_ended"] is True and exited["session_end_reason"] == "exit"
    assert exited["status"] == "error" and exited["exit_code"] == 3
    assert await _list(client) == [] and _session_pids(state) == []


async def _two_left_open(client: Client, state: ServerState) -> list[int]:
    for _ in range(2):
        sid = (await _create(client))["session_id"]
        _out(await _run(client, "y = 1", sid))
    pids = _session_pids(state)
    assert len(pids) == 2 and all(_alive(pid) for pid in pids)
    return pids


def test_sessions_in_the_default_mode(dirs: tuple[Path, Path]) -> None:
    async def body(client: Client, state: ServerState) -> list[int]:
        for check in (_persists, _unknown_ids, _other_principal, _endings):
            await check(client, state)
        return await _two_left_open(client, state)

    pids, state = _serve(dirs, ("--output-limit", "64K"), body)
    assert not any(_alive(pid) for pid in pids)  # the shutdown closed them
    assert state.sessions.count() == 0


def test_sessions_in_the_legacy_mode(dirs: tuple[Path, Path]) -> None:
    async def body(client: Client, state: ServerState) -> list[int]:
        await _persists(client, state)
        await _unknown_ids(client, state)
        return await _two_left_open(client, state)

    pids, _ = _serve(dirs, (), body, mode="legacy")
    assert not any(_alive(pid) for pid in pids)


async def _list(client: Client) -> list[dict[str, Any]]:
    sessions: list[dict[str, Any]] = _out(await client.call_tool("list_sessions", {}))["sessions"]
    return sessions


def test_session_limits_texts_and_descriptions(dirs: tuple[Path, Path]) -> None:
    async def body(client: Client, state: ServerState) -> dict[str, str]:
        await _create(client)
        await _create(client)
        assert _error(await client.call_tool("create_session", {})) == (
            "the server holds its maximum of 2 sessions (2 of them yours): close_session one; "
            "list_sessions shows them"
        )
        first = (await _list(client))[0]["session_id"]
        _out(await client.call_tool("close_session", {"session_id": first}))
        state.sessions.create("other")
        state.sessions.create("other")  # the server's third and last
        assert _error(await client.call_tool("create_session", {})) == (
            "the server holds its maximum of 3 sessions (1 of them yours): close_session one; "
            "list_sessions shows them"
        )
        return {t.name: t.description or "" for t in (await client.list_tools()).tools}

    flags = (
        "--max-sessions",
        "3",
        "--max-sessions-per-principal",
        "2",
        "--session-idle-timeout",
        "120",
        "--session-max-lifetime",
        "600",
        "--sessions-memory-budget",
        "200M",
    )
    tools, _ = _serve(dirs, flags, body)
    assert (
        "Closed 120 s after its last call or 600 s after creation (expires_at); at most 3 "
        "sessions (2 per principal), while sessions and runs use under 200 MiB"
    ) in tools["create_session"]
    assert "sys.exit() ends it" in tools["create_session"]
    assert "session_ended" in tools["run_sandbox_code"]


def test_the_memory_budget_and_idle_expiry(dirs: tuple[Path, Path]) -> None:
    text = "the sessions memory budget (1 MiB) is in use: close_session one"

    async def body(client: Client, state: ServerState) -> None:
        sid = (await _create(client))["session_id"]  # nothing in use before it
        assert _error(await client.call_tool("create_session", {})) == text
        assert _error(await _run(client, "1", sid)) == text
        _out(await client.call_tool("close_session", {"session_id": sid}))
        sid = (await _create(client))["session_id"]
        (pid,) = _session_pids(state)
        await anyio.sleep(2.2)  # past the idle time-out of 2 s
        await anyio.to_thread.run_sync(state.sessions.sweep)  # the lifespan's sweep, driven
        assert await _list(client) == [] and not _alive(pid)
        assert _error(await _run(client, "1", sid)) == UNKNOWN.format(sid)

    _serve(dirs, ("--sessions-memory-budget", "1M", "--session-idle-timeout", "2"), body)


def test_spawn_mode_refuses_create_session(dirs: tuple[Path, Path]) -> None:
    async def body(client: Client, state: ServerState) -> None:
        refused = _error(await client.call_tool("create_session", {}))
        assert refused.startswith(
            "sessions need the server's warm execution (--execution warm, SANDBOX_EXECUTION)"
        )
        assert "run_sandbox_code without session_id" in refused
        assert _out(await _run(client, "6 * 7", None))["result"]["text"] == "42"

    _serve(dirs, ("--execution", "spawn"), body)


def test_session_settings_flags_variables_and_their_rule() -> None:
    env = {
        "SANDBOX_MAX_SESSIONS": "6",
        "SANDBOX_MAX_SESSIONS_PER_PRINCIPAL": "3",
        "SANDBOX_SESSIONS_MEMORY_BUDGET": "300M",
        "SANDBOX_SESSION_IDLE_TIMEOUT": "30",
        "SANDBOX_SESSION_MAX_LIFETIME": "600",
    }
    settings = settings_from_args([], env)
    assert (settings.max_sessions, settings.max_sessions_per_principal) == (6, 3)
    assert settings.sessions_memory_budget_bytes == 300 << 20
    assert (settings.session_idle_timeout_s, settings.session_max_lifetime_s) == (30.0, 600.0)
    assert settings_from_args(["--max-sessions", "9"], env).max_sessions == 9
    with pytest.raises(ConfigError) as over:
        settings_from_args(["--max-sessions", "2", "--max-sessions-per-principal", "3"], {})
    assert str(over.value) == "--max-sessions-per-principal 3 exceeds --max-sessions 2"
    for flag in ("--max-sessions", "--session-idle-timeout", "--sessions-memory-budget"):
        with pytest.raises(SystemExit):
            settings_from_args([flag, "0"], {})


def test_a_failing_sweep_is_logged_and_the_sweeps_go_on(caplog: pytest.LogCaptureFixture) -> None:
    """An exception from a sweep (killing or reaping a session failed) must not end the
    server's lifespan task group: it is logged and the next sweep runs (review 2026-12-07)."""
    from mcp_secure_sandbox.sessions import sweep_forever

    class Registry:
        idle_timeout_s = 0.5  # a sweep every 50 ms

        def __init__(self) -> None:
            self.calls = 0
            self.third = anyio.Event()

        def sweep(self) -> int:
            self.calls += 1
            if self.calls == 1:
                raise OSError("reap failed")
            if self.calls == 3:
                anyio.from_thread.run_sync(self.third.set)
            return 1

    registry = Registry()

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(sweep_forever, registry, anyio.CapacityLimiter(1))  # type: ignore[arg-type]
            await registry.third.wait()
            tg.cancel_scope.cancel()

    with caplog.at_level("INFO", logger="mcp_secure_sandbox"):
        anyio.run(main)
    assert registry.calls >= 3
    messages = [r.getMessage() for r in caplog.records]
    assert "sessions: a sweep failed; the next one retries" in messages
    assert "sessions: 1 expired session(s) closed" in messages
