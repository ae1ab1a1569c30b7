"""The ABI module: one table per architecture, selected by machine, used by the child."""

from __future__ import annotations

import marshal
import pathlib
import platform

import pytest

from pysandbox import _abi, _landlock, _seccomp


def test_machines_select_their_tables() -> None:
    assert _abi.syscall_table("x86_64")["prlimit64"] == 302
    assert _abi.syscall_table("AMD64")["capset"] == 126
    assert _abi.syscall_table("aarch64")["prlimit64"] == 261
    assert _abi.syscall_table("arm64")["capset"] == 91
    assert _abi.canonical_machine("riscv64") is None


def test_unknown_machine_is_a_clear_error() -> None:
    with pytest.raises(_abi.UnsupportedMachineError, match=r"riscv64.*kernel layers"):
        _abi.syscall_table("riscv64")
    with pytest.raises(_abi.UnsupportedMachineError):
        _abi.child_abi("riscv64")
    assert _abi.child_abi("riscv64", required=False)["nr"] == {}


def test_aarch64_uses_the_generic_table() -> None:
    arm = _abi.SYSCALLS["aarch64"]
    # The asm-generic table never had these.
    for legacy in ("fork", "vfork", "chmod", "chown", "lchown", "modify_ldt", "iopl", "uselib"):
        assert legacy not in arm
    assert arm["socket"] == 198
    assert arm["clone"] == 220
    assert arm["execve"] == 221
    assert arm["seccomp"] == 277
    assert arm["landlock_create_ruleset"] == 444


def test_each_table_has_distinct_numbers() -> None:
    for table in _abi.SYSCALLS.values():
        assert len(set(table.values())) == len(table)


def test_the_unified_range_is_shared() -> None:
    x86, arm = _abi.SYSCALLS["x86_64"], _abi.SYSCALLS["aarch64"]
    for name, number in x86.items():
        if number >= 424:
            assert arm[name] == number


def test_every_name_the_filter_uses_is_in_an_abi_table() -> None:
    from pysandbox import _syscall_policy

    x86, arm = _abi.SYSCALLS["x86_64"], _abi.SYSCALLS["aarch64"]
    missing = [name for name in _syscall_policy.POLICY if name not in x86 and name not in arm]
    assert missing == []
    # aarch64 lacks only the legacy calls the generic table never had.
    x86_only = {name for name in _syscall_policy.POLICY if name not in arm}
    legacy = (
        "access alarm chmod chown creat dup2 epoll_create epoll_wait eventfd fork getpgrp "
        "ioperm iopl lchown link lstat mkdir mknod modify_ldt open pause pipe poll readlink "
        "rename rmdir select stat symlink time unlink uselib utime utimes vfork"
    )
    assert x86_only == set(legacy.split())
    for machine in ("x86_64", "aarch64"):
        (program,) = _seccomp.build_filters(machine)
        assert program.machine == machine
        assert 0 < program.length < 4096
    assert _seccomp.AUDIT_ARCH_X86_64 == _abi.AUDIT_ARCH["x86_64"] == 0xC000003E
    assert _abi.AUDIT_ARCH["aarch64"] == 0xC00000B7


def test_child_abi_is_plain_data_for_the_child() -> None:
    data = _abi.child_abi("aarch64")
    assert marshal.loads(marshal.dumps(dict(data))) == data  # noqa: S302 - our own bytes
    assert data["nr"] == {
        "prlimit64": 261,
        "capset": 91,
        "landlock_create_ruleset": 444,
        "landlock_add_rule": 445,
        "landlock_restrict_self": 446,
    }


def test_landlock_rights_come_from_the_abi_module() -> None:
    assert _landlock.fs_rights_for_abi(1) == (1 << 13) - 1
    assert _landlock.fs_rights_for_abi(5) == (1 << 16) - 1
    assert _abi.LANDLOCK["ACCESS_FS_READ_FILE"] == _landlock.READ_FILE


def test_an_unknown_machine_reports_the_kernel_layers_unavailable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    from pysandbox import IsolationUnavailable, Sandbox, _probe

    monkeypatch.setattr(platform, "machine", lambda: "riscv64")
    monkeypatch.setattr(_probe, "_probe_cache", [])
    monkeypatch.setattr(_landlock, "_abi_cache", [])
    probe = _probe.probe_kernel()
    assert probe.landlock_abi == 0
    assert "riscv64" in probe.landlock_reason
    assert not probe.seccomp
    assert "riscv64" in probe.seccomp_reason
    sb = Sandbox(tmp_path, require=("landlock", "seccomp"), kernel_layers=False)
    with sb, pytest.raises(IsolationUnavailable, match="riscv64"):
        sb.run("print(1)")
