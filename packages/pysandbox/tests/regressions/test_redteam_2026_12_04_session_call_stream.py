"""Bytes that are not the parent's call header never run as a call (red team 2026-12-04).

The finding: a time-out's ``SIGINT`` that landed while the session child was reading the next
call from its code pipe raised ``KeyboardInterrupt`` in the read; the loop went on reading from
the middle of the call, took bytes of the user's own source (a bytes constant) for a length and a
marshalled call, and ran the code object they held: no astguard, no guards, for the rest of the
session (about 1 attempt in 4). The class closed: the interrupt is ignored between calls, and a
call's header begins with the session's random key, so bytes the user chose (however the read
came to them: an interrupt, a thread reading the pipe) cannot pass for a call; a header without
the key ends the session. Here the misread is made deterministic: the bytes a misaligned read
would see are written to the code pipe as the next "call". Starts processes: ``e2e``.
"""

from __future__ import annotations

import marshal
import os
import pathlib
import signal
import time
from collections.abc import Iterator

import pytest

from pysandbox import Sandbox
from sandbox_helpers import KERNEL

pytestmark = [pytest.mark.e2e]

FORGED_SOURCE = "open('forged.txt', 'w').write('ran unchecked')\n"


def _forged_call(seq: int) -> bytes:
    body = marshal.dumps(
        {"code": "", "code_object": compile(FORGED_SOURCE, "<forged>", "exec"), "seq": seq}
    )
    return len(body).to_bytes(8, "little") + body


@pytest.fixture
def sandbox(workspace: pathlib.Path) -> Iterator[Sandbox]:
    require = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()
    with Sandbox(workspace, execution="warm", ready_children=0, require=require) as sb:
        yield sb


def _ended(pid: int) -> bool:
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat[stat.rindex(")") + 2] in "ZX"


@pytest.mark.parametrize(
    "prefix",
    [
        pytest.param(lambda key: b"", id="the unkeyed header a misread finds"),
        pytest.param(lambda key: bytes(len(key)), id="a zero key"),
        pytest.param(lambda key: key[:-1] + bytes([key[-1] ^ 1]), id="the key but one bit"),
        pytest.param(lambda key: key[: len(key) // 2], id="half the key"),
    ],
)
def test_bytes_without_the_sessions_key_never_run(
    sandbox: Sandbox, workspace: pathlib.Path, prefix: object
) -> None:
    with sandbox.open_session("stream") as session:
        assert session.run("x = 1").stdout == ""
        key: bytes = session._key
        forged = prefix(key) + _forged_call(2)  # type: ignore[operator]
        os.write(session._fds["code"], forged)
        os.kill(session.pid, signal.SIGCONT)
        for _ in range(1000):  # the child reads the header and ends (a bound, not a timing)
            if _ended(session.pid):
                break
            time.sleep(0.01)
        assert _ended(session.pid)
        assert not (workspace / "forged.txt").exists()


def test_the_parents_own_calls_carry_the_key_and_run(sandbox: Sandbox) -> None:
    with sandbox.open_session("keyed") as session:
        assert len(session._key) == 16
        assert session.run("x = 41").stdout == ""
        assert session.run("print(x + 1)").stdout == "42\n"
        other = sandbox.open_session("another")
        try:
            assert other._key != session._key
        finally:
            other.close()
