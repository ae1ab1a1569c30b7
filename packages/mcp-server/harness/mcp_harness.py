"""The red-team corpora through the MCP server: every case sent to ``run_sandbox_code`` over stdio.

Reuses the judging of ``packages/pysandbox/harness/harness.py`` (fixtures, markers, outer fence,
table and summary) with the sandbox replaced by a real server process per case, driven by the
MCP SDK client. On top of the library harness it checks what only the protocol can show: that
nothing the code prints (``INJECTED``, fake JSON-RPC lines) reaches the client as a protocol
message, that the server survives every case, and that the server's own read-back tools
(``read_workspace_file``, ``list_workspace_files``, a snapshot) neither follow planted links nor
leak a canary.

    python packages/mcp-server/harness/mcp_harness.py [--corpus-dir DIR] [--json-out FILE]
        [--profile datascience] [--execution warm|spawn]
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import pathlib
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters

import astguard
from pysandbox import RunResult, RunStatus

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from _client import connect_stdio  # the tests' client bootstrap (tests/_client.py)

ROOT = pathlib.Path(__file__).resolve().parents[3]
HARNESS = ROOT / "packages" / "pysandbox" / "harness" / "harness.py"


def _load_harness() -> Any:
    spec = importlib.util.spec_from_file_location("pysandbox_redteam_harness", HARNESS)
    if spec is None or spec.loader is None:
        raise SystemExit(f"mcp_harness: cannot load {HARNESS}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


harness = _load_harness()
#: The harness's ``--profile`` and ``--execution``, passed on to each server it starts.
SERVER_FLAGS: list[str] = []


def _server_args(workspace: pathlib.Path) -> list[str]:
    """Server flags matching the library harness's limits (read when each server starts)."""
    limits = harness.LIMITS
    return [
        "-m",
        "mcp_secure_sandbox",
        "--workspace",
        str(workspace),
        "--snapshots",
        str(workspace.parent / "snapshots"),
        "--default-timeout",
        str(limits.timeout_s),
        "--max-timeout",
        str(limits.timeout_s),
        "--memory-limit",
        str(limits.memory_bytes),
        "--output-limit",
        str(limits.output_bytes),
        "--workspace-quota",
        str(limits.workspace_bytes),
        "--workspace-max-files",
        str(limits.workspace_files),
        "--log-level",
        "WARNING",
        *SERVER_FLAGS,
    ]


class McpSandbox:
    """A ``pysandbox.Sandbox`` look-alike whose ``run`` goes through a real server over MCP.

    Args:
        workspace: The case's workspace; the server is started on it.
        **_: The library harness's Sandbox arguments (limits are passed as server flags).
    """

    protocol_problems: list[str] = []  # noqa: RUF012 - shared by every instance of one run
    #: The servers open now, by workspace (one server per workspace: the start-up lock).
    open_servers: dict[str, McpSandbox] = {}  # noqa: RUF012 - shared by every instance

    def __init__(self, workspace: pathlib.Path, **_: Any) -> None:
        self.workspace = workspace
        self._stack = ExitStack()
        self._portal: BlockingPortal = self._stack.enter_context(start_blocking_portal())
        params = StdioServerParameters(command=sys.executable, args=_server_args(workspace))
        # The initialize handshake, as the corpora's clients (and this harness before) speak it.
        client = connect_stdio(params, mode="legacy", message_handler=self._on_message)
        session_cm: AbstractContextManager[Client] = self._portal.wrap_async_context_manager(client)
        self.session = self._stack.enter_context(session_cm)
        McpSandbox.open_servers[str(workspace)] = self
        # The first run of a server pays its one-time set-up; keep it out of the case's timing.
        self._call("run_sandbox_code", code="pass")

    async def _on_message(self, message: Any) -> None:
        text = repr(message)
        if isinstance(message, Exception):
            self.protocol_problems.append(
                f"{self.workspace.parent.name}: bad bytes on stdout: {text[:200]}"
            )
        elif "INJECTED" in text:
            self.protocol_problems.append(
                f"{self.workspace.parent.name}: INJECTED in a protocol message"
            )

    def _call(self, tool: str, **arguments: Any) -> Any:
        return self._portal.call(self.session.call_tool, tool, arguments)

    def run(self, code: str, *, timeout: float | None = None) -> RunResult:
        """Run ``code`` with ``run_sandbox_code``; rebuild the library's ``RunResult``."""
        arguments: dict[str, Any] = {"code": code}
        if timeout is not None:
            arguments["timeout_sec"] = timeout
        result = self._call("run_sandbox_code", **arguments)
        if result.is_error or result.structured_content is None:
            raise RuntimeError(f"run_sandbox_code failed as a call: {result.content}")
        fields = {f.name for f in dataclasses.fields(RunResult)}
        data = {k: v for k, v in result.structured_content.items() if k in fields}
        data["status"] = RunStatus(data["status"])
        names = {f.name for f in dataclasses.fields(astguard.Violation)}
        data["violations"] = tuple(
            astguard.Violation(**{k: v for k, v in item.items() if k in names})
            for item in data["violations"]
        )
        # Run results no longer list the layers (sandbox://status does): take the active ones.
        data["layers"] = tuple(self.capabilities().active_layers)
        return RunResult(**data)

    def capabilities(self) -> Any:
        """The server's isolation report, read from ``sandbox://status``."""
        status = json.loads(
            self._portal.call(self.session.read_resource, "sandbox://status").contents[0].text
        )
        isolation = status["isolation"]

        class _Caps:
            active_layers = tuple(n for n, info in isolation["layers"].items() if info["active"])
            execution = isolation.get("execution", {})

        return _Caps()

    def read_back(self, token: str) -> list[str]:
        """The server's own read-back tools on a workspace the code controlled: no leak."""
        problems = []
        for tool, args in (
            ("list_workspace_files", {}),
            ("create_state_snapshot", {"description": "read-back"}),
            *(
                ("read_workspace_file", {"path": n})
                for n in ("output.txt", "result.txt", "result.json", "report.md", "env.txt")
            ),
        ):
            result = self._call(tool, **args)
            text = json.dumps(result.model_dump(mode="json"))
            if token in text or "secret-" in text:
                problems.append(f"{tool} {args} leaked a canary")
        return problems

    def close(self) -> None:
        """Stop the server (closing its stdin) and the client's event loop."""
        if McpSandbox.open_servers.get(str(self.workspace)) is self:
            del McpSandbox.open_servers[str(self.workspace)]
        self._stack.close()


def main(argv: list[str] | None = None) -> int:
    """Run the library harness with every run going through the MCP server."""
    harness.Sandbox = McpSandbox
    original_readback: Callable[..., str] = harness.readback_check

    def readback_check(fx: Any, report: Any) -> str:
        note = original_readback(fx, report)
        # One server per workspace (the start-up lock): read back through the case's own
        # server when it is still open, else through a fresh one.
        open_one = McpSandbox.open_servers.get(str(fx.workspace))
        sb = open_one or McpSandbox(fx.workspace)
        try:
            report.problems.extend(sb.read_back(fx.token))
        finally:
            if open_one is None:
                sb.close()
        return note + "; the server's read-back tools leaked nothing"

    harness.readback_check = readback_check
    args = list(sys.argv[1:] if argv is None else argv)
    for flag in ("--profile", "--execution"):  # the servers run as the library harness does
        if flag in args[:-1]:
            SERVER_FLAGS.extend([flag, args[args.index(flag) + 1]])
    status = harness.main(args)
    if McpSandbox.protocol_problems:
        print("PROTOCOL PROBLEMS:", *McpSandbox.protocol_problems, sep="\n  ")
        return 1
    print("protocol: no case put anything on the wire but MCP messages")
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
