"""Command-line entry point: ``mcp-secure-sandbox`` and ``python -m mcp_secure_sandbox``."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from mcp_secure_sandbox.exclusive import (
    DirectoryClaim,
    claim_directories,
    refuse_inside_claimed,
)
from mcp_secure_sandbox.settings import ConfigError, prepare_directories, settings_from_args

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse settings, prepare the directories and serve MCP until the client goes away.

    Nothing but MCP messages is ever written to stdout; logs and errors go to stderr.

    Args:
        argv: Arguments without the program name (``sys.argv[1:]`` when ``None``).

    Returns:
        The process exit status: 0 after a clean shutdown, 2 for a configuration error (one
        line on stderr, no traceback), another server on the workspace or snapshot directory
        included (:mod:`mcp_secure_sandbox.exclusive`), and an HTTP port that cannot be bound
        (in use, say: bound before the server says it is serving).
    """
    created: list[Path] = []
    claim: DirectoryClaim | None = None
    listening: socket.socket | None = None
    try:
        settings = settings_from_args(argv)
        # A missing directory inside another server's workspace or store is not even created.
        refuse_inside_claimed(settings.workspace, settings.snapshots)
        settings = prepare_directories(settings, created=created)
        # Before any library opens them: one server per workspace and per store.
        claim = claim_directories(settings.workspace, settings.snapshots)
        logging.basicConfig(
            stream=sys.stderr,
            level=settings.log_level,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        for ancestor in dict.fromkeys(claim.unlocked):
            logging.getLogger("mcp_secure_sandbox").warning(
                "%s cannot be opened (no read permission), so it is not locked: another server "
                "using it as its workspace or snapshot directory would not be detected",
                ancestor,
            )
        if settings.transport == "streamable-http":
            from mcp_secure_sandbox.http_transport import bind_http

            listening = bind_http(settings)  # a port in use is refused before "serving"
        for ancestor, pid in dict.fromkeys(claim.contested):
            logging.getLogger("mcp_secure_sandbox").warning(
                "%s is locked (flock) by pid %d of another user, which is not taken for a "
                "server's lock: it is not locked here, so another server using it as its "
                "workspace or snapshot directory would not be detected",
                ancestor,
                pid,
            )
        from mcp_secure_sandbox.server import create_server

        app, state = create_server(settings)
    except ConfigError as exc:
        if listening is not None:
            listening.close()
        if claim is not None:
            claim.release()
        # Refused (by the settings or by a library): leave no directory this start created.
        for path in reversed(created):
            with contextlib.suppress(OSError):
                path.rmdir()
        print(f"mcp-secure-sandbox: error: {exc}", file=sys.stderr)
        return 2
    log = logging.getLogger("mcp_secure_sandbox")
    log.info(
        "serving on %s, workspace %s, snapshots %s",
        settings.transport
        if listening is None
        else "http://{}:{}/mcp".format(
            f"[{settings.host}]" if ":" in settings.host else settings.host, settings.port
        ),
        settings.workspace,
        settings.snapshots,
    )

    def terminate(signum: int, frame: FrameType | None) -> None:
        # SIGTERM (docker stop, a supervisor) or SIGINT: kill every run in progress with its
        # process tree, then leave at once. A graceful loop shutdown would wait forever for the
        # thread blocked reading stdin; an interrupted snapshot restore is completed from its
        # journal when the store is next opened.
        log.warning("signal %d: stopping the runs in progress and exiting", signum)
        state.close()
        logging.shutdown()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, terminate)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            if settings.transport == "streamable-http":
                from mcp_secure_sandbox.http_transport import serve_http

                try:
                    serve_http(app, settings, state.health, listening)
                except ConfigError as exc:
                    print(f"mcp-secure-sandbox: error: {exc}", file=sys.stderr)
                    return 2
            elif state.timer is not None:
                import anyio

                anyio.run(state.timer.serve_stdio, app)
            else:
                app.run("stdio")
    finally:
        state.close()
        if claim is not None:
            claim.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
