"""pysandbox's system-call tables against Debian's UAPI headers and the vendored kernel tables.

Numbers the Debian 12 headers know (Linux 6.1) are compared with them; later numbers with the
kernel tables vendored in ``data/linux-syscalls/`` (Linux 6.18). The header tests need
``linux-libc-dev`` and ``linux-libc-dev-arm64-cross``; without them they are skipped, unless
``PYSANDBOX_REQUIRE_UAPI_HEADERS=1`` (set by the nox test session under CI), which makes a
missing header a failure, so CI shows these comparisons ran.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from pysandbox import _abi, _abi_tables
from uapi_headers import (
    AARCH64_HEADER,
    AARCH64_WANT,
    VENDORED,
    X86_64_HEADER,
    _condition,
    arm64_wanted,
    generic_header,
    kernel_table,
    x86_64_header,
)

X86_64_ABIS = frozenset({"common", "64"})
AARCH64_ABIS = frozenset({"common", "64", "renameat", "rlimit", "memfd_secret"})
#: The first number the Debian 12 headers (Linux 6.1) do not have: from here on, vendored.
FIRST_AFTER_HEADERS = 451
REQUIRED = os.environ.get("PYSANDBOX_REQUIRE_UAPI_HEADERS") == "1"
HARNESS = pathlib.Path(__file__).resolve().parents[1] / "harness"


def _header(path: pathlib.Path, package: str) -> pathlib.Path:
    if not path.is_file():
        message = f"{path} missing: apt-get install {package}"
        if REQUIRED:
            pytest.fail(f"{message} (PYSANDBOX_REQUIRE_UAPI_HEADERS=1)")
        pytest.skip(message)
    return path


@pytest.fixture(scope="module")
def x86_header() -> dict[str, int]:
    return x86_64_header(_header(X86_64_HEADER, "linux-libc-dev"))


@pytest.fixture(scope="module")
def arm_header() -> dict[str, int]:
    path = _header(AARCH64_HEADER, "linux-libc-dev-arm64-cross")
    wanted = arm64_wanted(path.parent.parent / "asm" / "unistd.h")
    assert wanted == AARCH64_WANT  # the arch header still defines what the reader assumes
    return generic_header(path, defined=wanted)


def _compare(table: dict[str, int], header: dict[str, int], vendored: dict[str, int]) -> int:
    """Assert ``table`` is exactly header + vendored; return the number of entries compared."""
    compared = 0
    for name, number in header.items():
        assert table.get(name) == number, f"{name}: table {table.get(name)}, header {number}"
        compared += 1
    for name, number in vendored.items():
        assert table.get(name) == number, f"{name}: table {table.get(name)}, vendored {number}"
        if name in header:  # where both sources know a call they agree
            assert header[name] == number
        compared += 1
    for name, number in table.items():
        assert name in header or name in vendored, f"{name} ({number}) has no source"
        if number >= FIRST_AFTER_HEADERS:
            assert name in vendored, f"{name} ({number}) is newer than the headers: vendor it"
    return compared


def test_x86_64_table_matches_the_header_and_the_kernel_table(x86_header: dict[str, int]) -> None:
    vendored = kernel_table(VENDORED / "syscall_64.tbl", X86_64_ABIS)
    table = dict(_abi.SYSCALLS["x86_64"])
    assert _compare(table, x86_header, vendored) == len(x86_header) + len(vendored)
    assert len(x86_header) == 362  # Linux 6.1: 0-334 and 424-450 (no gaps left out)
    assert max(x86_header.values()) == FIRST_AFTER_HEADERS - 1
    assert len(table) == 383


def test_aarch64_table_matches_the_header_and_the_kernel_table(arm_header: dict[str, int]) -> None:
    vendored = kernel_table(VENDORED / "syscall.tbl", AARCH64_ABIS)
    table = dict(_abi.SYSCALLS["aarch64"])
    assert _compare(table, arm_header, vendored) == len(arm_header) + len(vendored)
    assert len(arm_header) == 306
    assert max(arm_header.values()) == FIRST_AFTER_HEADERS - 1
    assert len(table) == 325


def test_the_3264_indirection_is_resolved_as_on_arm64(arm_header: dict[str, int]) -> None:
    # The generic header names these __NR3264_*; a 64-bit build maps each to one name.
    expected = {
        "fcntl": 25,
        "statfs": 43,
        "fstatfs": 44,
        "truncate": 45,
        "ftruncate": 46,
        "lseek": 62,
        "sendfile": 71,
        "newfstatat": 79,
        "fstat": 80,
        "mmap": 222,
        "fadvise64": 223,
    }
    assert {name: arm_header.get(name) for name in expected} == expected
    # The 32-bit spellings and the intermediate names are not system calls of arm64.
    for absent in ("fcntl64", "statfs64", "llseek", "sendfile64", "fstatat64", "mmap2", "stat"):
        assert absent not in arm_header
    assert not any(name.startswith("3264") for name in arm_header)
    # Conditional entries arm64 wants (and one it does not).
    assert arm_header["renameat"] == 38
    assert arm_header["getrlimit"] == 163
    assert arm_header["clone3"] == 435
    assert arm_header["memfd_secret"] == 447
    assert arm_header["sync_file_range"] == 84
    assert "sync_file_range2" not in arm_header


@pytest.mark.e2e
def test_the_generated_module_is_current() -> None:
    _header(X86_64_HEADER, "linux-libc-dev")
    _header(AARCH64_HEADER, "linux-libc-dev-arm64-cross")
    script = HARNESS / "gen_abi_tables.py"
    done = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_the_vendored_tables_from_451_on() -> None:
    x86 = kernel_table(VENDORED / "syscall_64.tbl", X86_64_ABIS)
    generic = kernel_table(VENDORED / "syscall.tbl", AARCH64_ABIS)
    newer = {
        "cachestat": 451,
        "fchmodat2": 452,
        "map_shadow_stack": 453,  # in the generic table too (arm64 GCS)
        "futex_wake": 454,
        "futex_wait": 455,
        "futex_requeue": 456,
        "statmount": 457,
        "listmount": 458,
        "lsm_get_self_attr": 459,
        "lsm_set_self_attr": 460,
        "lsm_list_modules": 461,
        "mseal": 462,
        "setxattrat": 463,
        "getxattrat": 464,
        "listxattrat": 465,
        "removexattrat": 466,
        "open_tree_attr": 467,
        "file_getattr": 468,
        "file_setattr": 469,
    }
    for source, table in ((x86, _abi.SYSCALLS["x86_64"]), (generic, _abi.SYSCALLS["aarch64"])):
        assert {n: v for n, v in source.items() if v >= FIRST_AFTER_HEADERS} == newer
        assert {n: v for n, v in table.items() if v >= FIRST_AFTER_HEADERS} == newer
    assert x86["uretprobe"] == _abi.SYSCALLS["x86_64"]["uretprobe"] == 335
    assert x86["uprobe"] == 336
    assert "uretprobe" not in _abi.SYSCALLS["aarch64"]
    for line in (VENDORED / "syscall_64.tbl", VENDORED / "syscall.tbl"):
        first = line.read_text(encoding="utf-8").splitlines()[0]
        assert first == "# SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note"
    assert "Linux-syscall-note" in (VENDORED / "README.md").read_text(encoding="utf-8")


def test_the_tables_module_is_the_abi_modules_data() -> None:
    assert _abi.SYSCALLS["x86_64"] == _abi_tables.X86_64
    assert _abi.SYSCALLS["aarch64"] == _abi_tables.AARCH64
    for table in (_abi_tables.X86_64, _abi_tables.AARCH64):
        assert len(set(table.values())) == len(table)
    # x32 entries (512-547) are not in the 64-bit table; the filter refuses the x32 bit.
    assert max(_abi_tables.X86_64.values()) < 512
    assert _abi_tables.X86_64["rt_sigaction"] == 13


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("defined(__ARCH_WANT_NEW_STAT) || defined(__ARCH_WANT_STAT64)", True),
        ("defined(__ARCH_WANT_STAT64)", False),
        ("__BITS_PER_LONG == 32 || defined(__SYSCALL_COMPAT)", False),
        ("__BITS_PER_LONG == 64 && !defined(__SYSCALL_COMPAT)", True),
        ("defined(__ARCH_WANT_TIME32_SYSCALLS) || __BITS_PER_LONG != 32", True),
        ("!(__BITS_PER_LONG != 32)", False),
    ],
)
def test_the_condition_reader(expr: str, expected: bool) -> None:
    defined = frozenset({"__ARCH_WANT_NEW_STAT", "__ARCH_WANT_TIME32_SYSCALLS"})
    assert _condition(expr, defined, {"__BITS_PER_LONG": 64}) is expected


def test_the_readers_refuse_what_they_do_not_understand(tmp_path: pathlib.Path) -> None:
    header = tmp_path / "unistd.h"
    header.write_text("#if X\n#define __NR_a 1\n#elif Y\n#endif\n", encoding="utf-8")
    with pytest.raises(ValueError, match="elif"):
        generic_header(header)
    header.write_text("#ifdef X\n#define __NR_a 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="unterminated"):
        generic_header(header)
    header.write_text("#define __NR_a __NR3264_missing\n", encoding="utf-8")
    with pytest.raises(ValueError, match="resolve"):
        generic_header(header)
    header.write_text("#if defined(A) +\n#endif\n", encoding="utf-8")
    with pytest.raises(ValueError, match="condition"):
        generic_header(header)
    table = tmp_path / "syscall.tbl"
    table.write_text("1\tcommon\ta\tsys_a\n1\t64\tb\tsys_b\n", encoding="utf-8")
    with pytest.raises(ValueError, match="twice"):
        kernel_table(table, X86_64_ABIS)
    header.write_text(
        "#define __NR3264_x 7\n#ifdef W\n#define __NR_y 8\n#else\n#define __NR_z 9\n#endif\n"
        "#define __NR_x __NR3264_x\n#define __NR_syscalls 10\n",
        encoding="utf-8",
    )
    assert generic_header(header, defined=frozenset()) == {"x": 7, "z": 9}
    assert generic_header(header, defined=frozenset({"W"})) == {"x": 7, "y": 8}


def test_a_missing_header_skips_or_fails_when_required(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    absent = tmp_path / "unistd_64.h"
    monkeypatch.setitem(globals(), "REQUIRED", False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install linux-libc-dev"):
        _header(absent, "linux-libc-dev")
    monkeypatch.setitem(globals(), "REQUIRED", True)
    with pytest.raises(pytest.fail.Exception, match="PYSANDBOX_REQUIRE_UAPI_HEADERS=1"):
        _header(absent, "linux-libc-dev")
