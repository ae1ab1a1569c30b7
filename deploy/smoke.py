"""Drive the server the way the container image runs it; run by ``nox -s smoke``.

The server runs as an unprivileged user, with the image's environment, over stdio, driven by the
MCP SDK client.

Checks: the server answers; code writes into the workspace and the file belongs to the server's
user; a snapshot is taken, the workspace changed and restored byte for byte; the snapshot store's
files belong to that user; ``sandbox://status`` reports Landlock and seccomp active and shows the
image's directories.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

# The runtime environment of the final image stage (Dockerfile ENV), minus PATH and the two
# directories, which point at this machine's stand-ins for the image's volumes.
IMAGE_ENV = {
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    "HOME": "/tmp",  # noqa: S108 - the image sets HOME=/tmp
    "LANG": "C.UTF-8",
}


def _check(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"smoke: FAILED: {what}")
    print(f"smoke: ok: {what}")


async def _call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    if result.is_error or result.structured_content is None:
        raise SystemExit(f"smoke: FAILED: {tool} -> {result.content}")
    return dict(result.structured_content)


async def scenario(args: argparse.Namespace) -> None:
    """Start the server as ``args.user`` and run every check; exit at the first failure."""
    server = Path(args.server)
    env = {
        **IMAGE_ENV,
        "PATH": f"{server.parent}:/usr/bin:/bin",
        "SANDBOX_WORKSPACE": args.workspace,
        "SANDBOX_SNAPSHOTS": args.snapshots,
    }
    if os.geteuid() == 0:
        command = "setpriv"
        argv = [f"--reuid={args.user}", f"--regid={args.user}", "--init-groups", "env", "-i"]
        argv += [f"{k}={v}" for k, v in env.items()] + [str(server)]
    else:
        command, argv = str(server), []
    params = StdioServerParameters(
        command=command, args=argv, env=None if os.geteuid() == 0 else env
    )
    uid = pwd.getpwnam(args.user).pw_uid
    workspace, snapshots = Path(args.workspace), Path(args.snapshots)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        _check(
            init.server_info.name == "secure-sandbox",
            f"server answers ({init.server_info.version})",
        )
        run = await _call(
            session,
            "run_sandbox_code",
            code="import pathlib\npathlib.Path('out').mkdir()\n"
            "pathlib.Path('out/result.txt').write_text('v1')\nprint('written')",
        )
        _check(run["status"] == "ok", f"code runs in the sandbox (status {run['status']})")
        _check(run["stdout"] == "written\n", "the run's output came back")
        result = workspace / "out" / "result.txt"
        _check(result.read_text() == "v1", "the file landed in the mounted workspace")
        _check(result.stat().st_uid == uid, f"the file belongs to {args.user}")
        info = await _call(session, "create_state_snapshot", description="smoke")
        _check(info["file_count"] == 1, "snapshot created")
        owners = {p.stat().st_uid for p in snapshots.rglob("*")}
        _check(owners == {uid}, f"every snapshot-store file belongs to {args.user}")
        await _call(session, "run_sandbox_code", code="open('out/result.txt', 'w').write('v2')")
        _check(result.read_text() == "v2", "the workspace changed")
        report = await _call(session, "restore_state_snapshot", snapshot_id=info["id"])
        _check(report["rewritten"] == ["out/result.txt"], "restore rewrote the changed file")
        _check(result.read_text() == "v1", "the workspace is back to the snapshot")
        status_text = (await session.read_resource("sandbox://status")).contents[0]
        status = json.loads(status_text.text)  # type: ignore[union-attr]
        layers = status["isolation"]["layers"]
        for name in ("landlock", "seccomp"):
            _check(layers[name]["active"] is True, f"{name} is active for {args.user}")
        _check(status["settings"]["workspace"] == str(workspace), "status shows the workspace")
        _check(status["snapshot_count"] == 1, "status counts the snapshot")


def main() -> None:
    """Parse the arguments and run the smoke scenario; exit non-zero on the first failure."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server", required=True, help="the installed mcp-secure-sandbox script")
    parser.add_argument("--user", required=True, help="the unprivileged user to run it as")
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--snapshots", required=True)
    anyio.run(scenario, parser.parse_args())
    print("smoke: all checks passed")
    sys.exit(0)


if __name__ == "__main__":
    main()
