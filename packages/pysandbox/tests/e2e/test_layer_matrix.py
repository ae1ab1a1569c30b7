"""The same attacks against each layer alone and against all of them together.

Shows which layer covers what: the Python guards (audit hook), Landlock and seccomp each stop
their own share, and together they stop everything in the matrix.
"""

from __future__ import annotations

import pathlib

import pytest

from pysandbox import RunStatus, Sandbox
from sandbox_helpers import needs_kernel, raw_run

pytestmark = needs_kernel

ATTACKS = {
    "read_outside": "os.close(os.open('../CANARY.txt', os.O_RDONLY))",
    "write_outside": "os.close(os.open('../PWNED', os.O_WRONLY | os.O_CREAT, 0o600))",
    "udp_socket": "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()",
    "fork": "pid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)",
    "signal_parent": "os.kill(os.getppid(), 0)",
}

# (python guards, landlock, seccomp) -> attacks that must be stopped
CONFIGS = {
    "guards_only": ((True, False, False), set(ATTACKS)),
    "landlock_only": ((False, True, False), {"read_outside", "write_outside", "signal_parent"}),
    "seccomp_only": ((False, False, True), {"udp_socket", "fork", "signal_parent"}),
    "all": ((True, True, True), set(ATTACKS)),
    "none": ((False, False, False), set()),
}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_matrix(sandbox: Sandbox, workspace: pathlib.Path, config: str, attack: str) -> None:
    (workspace.parent / "CANARY.txt").write_text("token")
    (guards, landlock, seccomp), stopped = CONFIGS[config]
    body = "\n    ".join(ATTACKS[attack].splitlines())
    code = (
        "import os, socket\n"
        "try:\n"
        f"    {body}\n"
        "    print('ALLOWED')\n"
        "except OSError as exc:\n"
        "    print('STOPPED', type(exc).__name__)\n"
    )
    result = raw_run(
        sandbox,
        code,
        landlock=landlock,
        seccomp=seccomp,
        python_guards=guards,
        extra_allowed=("os", "socket"),
    )
    assert result.status is RunStatus.OK, result.stderr
    expected = "STOPPED" if attack in stopped else "ALLOWED"
    assert result.stdout.split()[0] == expected, result.stdout
    if attack == "write_outside" and expected == "STOPPED":
        assert not (workspace.parent / "PWNED").exists()
