"""Landlock rules, each shown failing with Landlock alone (plus rlimits) active."""

from __future__ import annotations

import os
import pathlib
import socket
import threading

import pytest

from pysandbox import RunStatus, Sandbox
from pysandbox import _landlock as ll
from sandbox_helpers import KERNEL, needs_landlock, raw_run

pytestmark = needs_landlock

PRELUDE = """
import errno, os, socket
def attempt(name, fn):
    try:
        fn()
        print(name, 'ok')
    except OSError as exc:
        print(name, errno.errorcode.get(exc.errno, exc.errno))
"""


def landlock_only(sb: Sandbox, body: str) -> list[str]:
    result = raw_run(sb, PRELUDE + body, landlock=True, seccomp=False)
    assert result.status is RunStatus.OK, result.stderr
    assert "landlock" in result.layers
    assert "seccomp" not in result.layers
    return result.stdout.splitlines()


@pytest.fixture
def outside(workspace: pathlib.Path) -> pathlib.Path:
    canary = workspace.parent / "CANARY.txt"
    canary.write_text("token-123")
    victim = workspace.parent / "VICTIM"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep")
    return workspace.parent


def test_filesystem_rules(sandbox: Sandbox, outside: pathlib.Path) -> None:
    body = f"""
attempt('read_outside', lambda: open('../CANARY.txt').read())
attempt('read_outside_osopen', lambda: os.open('../CANARY.txt', os.O_RDONLY))
attempt('write_outside', lambda: open('../PWNED', 'w'))
attempt('write_tmp', lambda: open('/tmp/PWNED-{os.getpid()}', 'w'))
attempt('list_outside', lambda: os.listdir('..'))
attempt('read_etc_passwd', lambda: open('/etc/passwd').read())
attempt('read_proc_environ', lambda: open('/proc/self/environ', 'rb').read())
attempt('read_stdlib', lambda: open(os.__file__).read(10))
attempt('write_stdlib', lambda: open(os.__file__, 'a'))
attempt('write_ws', lambda: open('f.txt', 'w').write('x'))
attempt('mkdir_ws', lambda: os.mkdir('sub'))
attempt('rename_out', lambda: os.rename('f.txt', '../moved.txt'))
attempt('link_in', lambda: os.link('../VICTIM/keep.txt', 'hl'))
attempt('symlink_ws', lambda: os.symlink('../CANARY.txt', 'up'))
attempt('read_via_symlink', lambda: open('up').read())
attempt('mkfifo_ws', lambda: os.mkfifo('fifo'))
attempt('mknod_char_ws', lambda: os.mknod('dev', 0o600 | 0o020000, os.makedev(1, 3)))
attempt('exec_binary', lambda: os.execv('/bin/true', ['true']))
attempt('chmod_victim', lambda: os.chmod('../VICTIM/keep.txt', 0o777))
attempt('unlink_victim', lambda: os.unlink('../VICTIM/keep.txt'))
"""
    lines = landlock_only(sandbox, body)
    result = dict(line.split(" ", 1) for line in lines)
    assert result["read_outside"] == "EACCES"
    assert result["read_outside_osopen"] == "EACCES"
    assert result["write_outside"] == "EACCES"
    assert result["write_tmp"] == "EACCES"
    assert result["list_outside"] == "EACCES"
    assert result["read_etc_passwd"] == "EACCES"
    assert result["read_proc_environ"] == "EACCES"
    assert result["read_stdlib"] == "ok"
    assert result["write_stdlib"] == "EACCES"
    assert result["write_ws"] == "ok"
    assert result["mkdir_ws"] == "ok"
    assert result["rename_out"] in {"EACCES", "EXDEV"}
    assert result["link_in"] in {"EXDEV", "EACCES", "EPERM"}
    assert result["symlink_ws"] == "ok"
    assert result["read_via_symlink"] == "EACCES"
    assert result["mkfifo_ws"] == "EACCES"
    assert result["mknod_char_ws"] in {"EACCES", "EPERM"}
    assert result["exec_binary"] == "EACCES"
    # chmod is not a Landlock right; DAC decides (root may chmod) - the Python hook and the
    # workspace-only write rule cover it above the kernel.
    assert result["unlink_victim"] == "EACCES"
    assert (outside / "VICTIM" / "keep.txt").read_text() == "keep"
    assert not (outside / "PWNED").exists()
    assert not (outside / "moved.txt").exists()


def test_unix_socket_creation_in_workspace_denied(sandbox: Sandbox) -> None:
    body = """
s = socket.socket(socket.AF_UNIX)
attempt('bind_path_sock', lambda: s.bind('sock'))
"""
    assert landlock_only(sandbox, body) == ["bind_path_sock EACCES"]


@pytest.mark.skipif(KERNEL.landlock_abi < 4, reason="Landlock ABI < 4: no TCP rules")
def test_tcp_denied(sandbox: Sandbox) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        body = f"""
attempt('tcp_connect', lambda: socket.create_connection(('127.0.0.1', {port}), timeout=2))
s = socket.socket()
attempt('tcp_bind', lambda: s.bind(('127.0.0.1', 0)))
"""
        assert landlock_only(sandbox, body) == ["tcp_connect EACCES", "tcp_bind EACCES"]
    finally:
        server.close()


@pytest.mark.skipif(KERNEL.landlock_abi < 6, reason="Landlock ABI < 6: no scoping")
def test_signal_and_abstract_socket_scoped(sandbox: Sandbox) -> None:
    name = f"\0pysandbox-test-{os.getpid()}-{threading.get_ident()}"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(name)
    listener.listen(1)
    try:
        body = f"""
attempt('kill_parent', lambda: os.kill(os.getppid(), 0))
attempt('kill_self', lambda: os.kill(os.getpid(), 0))
c = socket.socket(socket.AF_UNIX)
attempt('abstract_connect', lambda: c.connect({name!r}))
"""
        assert landlock_only(sandbox, body) == [
            "kill_parent EPERM",
            "kill_self ok",
            "abstract_connect EPERM",
        ]
    finally:
        listener.close()


def test_without_landlock_same_calls_succeed(sandbox: Sandbox, outside: pathlib.Path) -> None:
    result = raw_run(
        sandbox,
        PRELUDE + "attempt('read_outside', lambda: open('../CANARY.txt').read())\n",
        landlock=False,
        seccomp=False,
    )
    assert result.stdout == "read_outside ok\n"


def test_plan_masks_rights_by_abi(workspace: pathlib.Path) -> None:
    p1 = ll.plan(1, workspace=str(workspace), read_only=())
    assert p1.handled_fs == (1 << 13) - 1
    assert p1.handled_net == 0
    assert p1.scoped == 0
    assert all(rights & ll.REFER == 0 for _, rights in p1.rules)
    p6 = ll.plan(6, workspace=str(workspace), read_only=())
    assert p6.handled_fs & ll.TRUNCATE
    assert p6.handled_fs & ll.IOCTL_DEV
    assert p6.handled_net == ll.NET_BIND_TCP | ll.NET_CONNECT_TCP
    assert p6.scoped == ll.SCOPE_SIGNAL | ll.SCOPE_ABSTRACT_UNIX_SOCKET
    ws_rights = dict(p6.rules)[str(workspace)]
    for forbidden in (ll.MAKE_FIFO, ll.MAKE_SOCK, ll.MAKE_CHAR, ll.MAKE_BLOCK, ll.EXECUTE):
        assert not ws_rights & forbidden
    assert "/etc" not in dict(p6.rules)
    assert all(not path.startswith("/etc/") or path == "/etc/ld.so.cache" for path, _ in p6.rules)
    described = p6.describe()
    assert described["tcp_denied"] is True
    assert described["scoped"] == {"abstract_unix_socket": True, "signal": True}


def test_describe_counts_the_standard_librarys_rules_per_directory(
    tmp_path: pathlib.Path, workspace: pathlib.Path
) -> None:
    # A tree granted entry by entry (it holds the extension-module directory), also named on
    # its own as sys.path names lib-dynload: each rule is planned once.
    dynload = sorted(ll._dynload_dirs())[0]
    stdlib = str(pathlib.Path(dynload).parent)
    plan = ll.plan(6, workspace=str(workspace), read_only=(stdlib, dynload))
    assert len(plan.rules) == len(set(plan.rules))
    read = ll.rights_names(ll.READ_ONLY & plan.handled_fs)
    files = [p for p, _ in plan.rules if str(pathlib.Path(p).parent) == dynload]
    assert len(files) >= ll.DESCRIBE_GROUP_AT
    described = plan.describe()
    assert described["rule_count"] == len(plan.rules)
    rules = described["rules"]
    assert isinstance(rules, list)
    assert {"path": f"{dynload}/*", "rights": read, "count": len(files)} in rules
    assert {"path": dynload, "rights": ["read_dir"]} in rules
    assert rules[-1] == {"path": str(workspace), "rights": ll.rights_names(plan.rules[-1][1])}
    assert all(r["path"] not in files for r in rules)
    # Every rule, on request; and few siblings stay listed one by one.
    every = plan.describe(every_rule=True)["rules"]
    assert every == [{"path": p, "rights": ll.rights_names(m)} for p, m in plan.rules]
    few = tmp_path / "few"
    few.mkdir()
    for name in ("a", "b"):
        (few / name).write_text(name)
    small = ll.LandlockPlan(6, plan.handled_fs, 0, 0, ((str(few / "a"), 1), (str(few / "b"), 1)))
    assert small.describe()["rules"] == [
        {"path": str(few / name), "rights": ll.rights_names(1)} for name in ("a", "b")
    ]
