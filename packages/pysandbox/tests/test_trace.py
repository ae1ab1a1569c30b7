"""The committed syscall trace against the filter: every traced call is allowed or refused on
purpose.

``harness/traced-syscalls.json`` (written by ``nox -s trace-syscalls``) lists the system calls
sandboxed runs made after the seccomp point, per interpreter. Each of them must be allowed by
the x86-64 filter in at least one argument form (the BPF interpreter decides, on the filter
``_seccomp.build_filters`` assembles), or be refused with a stated reason: an entry in
``_seccomp.REFUSED_REASONS`` (``{name: reason}``, the interface the allow-list is expected to
offer) or, while that table does not exist, a rule of ``_seccomp.denied_rules()`` naming the call.

``harness/traced-syscalls-datascience.json`` is the same for the data-science corpus with numpy,
pandas and matplotlib allowed and preloaded: its calls too are allowed or refused with a reason,
and an allow-list entry made for the stack (its family names "the data-science stack") must
name calls that only the stack makes: nothing enters the list for the stack's sake unseen.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import re
from collections.abc import Mapping
from typing import Any

import pytest

from bpf_interp import SeccompData, evaluate_stack
from filter_helpers import POINTER, SELF_PID, filters_for
from pysandbox import _abi, _seccomp, _syscall_policy

TRACE = pathlib.Path(__file__).resolve().parents[1] / "harness" / "traced-syscalls.json"
DS_TRACE = TRACE.with_name("traced-syscalls-datascience.json")
#: The phrase in a family's name that marks an entry made for the data-science stack.
FOR_THE_STACK = "the data-science stack"
ARCH = "x86_64"  # the trace was taken on x86-64
ALLOW = 0x7FFF0000
#: Argument forms tried for each call: a call is allowed when one of them passes the filter.
PROBES: tuple[tuple[int, ...], ...] = (
    (0, 0, 0, 0, 0, 0),
    (0, 0, 0, POINTER, 0, 0),  # prlimit64 reading its own limits
    (SELF_PID, 0, 0, 0, 0, 0),  # kill/tgkill/sched_* aimed at the caller
    (SELF_PID, SELF_PID, 0, 0, 0, 0),
    (1, 1, 0, POINTER, 0, 0),  # socketpair(AF_UNIX, SOCK_STREAM, 0, fds)
    (0x003D0F00, POINTER, POINTER, POINTER, POINTER, 0),  # clone with pthread's flags
    (3, 1, 0, 0, 0, 0),  # fcntl(fd, F_GETFD)
    (1, 0x5401, POINTER, 0, 0, 0),  # ioctl(fd, TCGETS)
)


@pytest.fixture(scope="module")
def trace() -> dict[str, Any]:
    report: dict[str, Any] = json.loads(TRACE.read_text(encoding="utf-8"))
    return report


@pytest.fixture(scope="module")
def ds_trace() -> dict[str, Any]:
    report: dict[str, Any] = json.loads(DS_TRACE.read_text(encoding="utf-8"))
    return report


@pytest.fixture(scope="module")
def filters() -> tuple[bytes, ...]:
    return filters_for(ARCH)


def refused_reasons() -> Mapping[str, str]:
    """``{name: reason}`` for the calls the filter refuses on purpose."""
    table = getattr(_seccomp, "REFUSED_REASONS", None)
    if table is not None:
        return dict(table)
    reasons: dict[str, str] = {}
    for rule in _seccomp.denied_rules():
        for name in re.findall(r"[a-z_][a-z0-9_]*", rule.split(":")[0].split(" unless")[0]):
            if name in _abi.SYSCALLS[ARCH]:
                reasons.setdefault(name, rule)
    return reasons


def test_the_trace_covers_every_interpreter_and_mode(trace: dict[str, Any]) -> None:
    interpreters = trace["interpreters"]
    versions = {entry["version"].rsplit(".", 1)[0] for entry in interpreters.values()}
    assert {"3.10", "3.11", "3.12", "3.13"} <= versions
    assert any(label.startswith("debian-") for label in interpreters)
    assert trace["machine"] == ARCH
    for label, entry in interpreters.items():
        assert set(entry["modes"]) == {"spawn", "warm"}, label
        for mode, seen in entry["modes"].items():
            # The runs happened and mostly succeeded (a few cases end in an error on purpose).
            assert seen["runs"] >= 30, (label, mode)
            assert seen["statuses"].get("ok", 0) >= seen["runs"] - 3, (label, mode, seen)
            assert {"read", "write", "mmap", "exit_group"} <= set(seen["syscalls"]), label
        assert sorted(entry["syscalls"]) == entry["syscalls"]
    union = set().union(*(set(e["syscalls"]) for e in interpreters.values()))
    assert sorted(union) == trace["union"]


def test_every_traced_name_is_a_system_call_of_the_table(trace: dict[str, Any]) -> None:
    unknown = sorted(set(trace["union"]) - set(_abi.SYSCALLS[ARCH]))
    assert unknown == []


def allowed_in_some_form(filters: tuple[bytes, ...], name: str) -> bool:
    """Whether the filter lets ``name`` pass in one of the :data:`PROBES` argument forms."""
    table, arch = _abi.SYSCALLS[ARCH], _abi.AUDIT_ARCH[ARCH]
    verdicts = {evaluate_stack(filters, SeccompData(table[name], arch, 0, a)) for a in PROBES}
    return any(v.action == ALLOW for v in verdicts)


def unexplained(filters: tuple[bytes, ...], names: list[str]) -> tuple[list[str], int, int]:
    """``(calls neither allowed nor refused with a reason, allowed count, refused count)``."""
    reasons = refused_reasons()
    missing: list[str] = []
    allowed = refused = 0
    for name in names:
        if allowed_in_some_form(filters, name):
            allowed += 1
        elif name in reasons:
            refused += 1
        else:
            missing.append(name)
    return missing, allowed, refused


def test_every_traced_call_is_allowed_or_refused_with_a_reason(
    trace: dict[str, Any], filters: tuple[bytes, ...]
) -> None:
    missing, allowed, refused = unexplained(filters, trace["union"])
    assert missing == [], "traced calls the filter refuses without a stated reason"
    assert allowed >= 25
    assert allowed + refused == len(trace["union"])


def test_the_datascience_trace_covers_both_modes_of_each_interpreter(
    trace: dict[str, Any], ds_trace: dict[str, Any]
) -> None:
    interpreters = ds_trace["interpreters"]
    versions = {entry["version"].rsplit(".", 1)[0] for entry in interpreters.values()}
    assert {"3.11", "3.12", "3.13"} <= versions
    assert any(label.startswith("debian-") for label in interpreters)
    # Where the stack did not import in the sandbox, the reason is kept (3.10: see the README).
    assert all(reason for reason in ds_trace["not_traced"].values())
    assert ds_trace["machine"] == ARCH
    assert ds_trace["stack"] == ["numpy", "pandas", "matplotlib"]
    corpus = TRACE.parents[3] / ds_trace["corpus"]
    runs = sum(1 for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip())
    assert runs >= 20
    for label, entry in interpreters.items():
        assert set(entry["modes"]) == {"spawn", "warm"}, label
        for mode, seen in entry["modes"].items():
            # Every case of the corpus ran and succeeded with the stack imported.
            assert (seen["runs"], seen["statuses"]) == (runs, {"ok": runs}), (label, mode)
            assert {"read", "write", "mmap", "exit_group"} <= set(seen["syscalls"])
        every = set().union(*(set(m["syscalls"]) for m in entry["modes"].values()))
        assert entry["syscalls"] == sorted(every), label
        same = trace["interpreters"].get(label, {}).get("syscalls", trace["union"])
        assert entry["beyond_standard_library"] == sorted(every - set(same)), label
    union = set().union(*(set(e["syscalls"]) for e in interpreters.values()))
    assert ds_trace["union"] == sorted(union)
    assert ds_trace["beyond_standard_library"] == sorted(union - set(trace["union"]))


def test_every_call_of_the_stack_is_allowed_or_refused_with_a_reason(
    ds_trace: dict[str, Any], filters: tuple[bytes, ...]
) -> None:
    unknown = sorted(set(ds_trace["union"]) - set(_abi.SYSCALLS[ARCH]))
    assert unknown == []
    missing, allowed, refused = unexplained(filters, ds_trace["union"])
    assert missing == [], "calls of the data-science stack refused without a stated reason"
    assert allowed + refused == len(ds_trace["union"])
    assert refused >= 1  # mbind (OpenBLAS), refused with ENOSYS on purpose


def test_entries_made_for_the_stack_name_only_calls_the_stack_alone_makes(
    ds_trace: dict[str, Any], filters: tuple[bytes, ...]
) -> None:
    beyond = set(ds_trace["beyond_standard_library"])
    for_the_stack = {
        name
        for family, _action, names, _why in _syscall_policy.FAMILIES
        if FOR_THE_STACK in family
        for name in names
    }
    assert for_the_stack, "the stack's entries are marked in their family's name"
    assert for_the_stack <= beyond
    # A call only the stack makes and the filter refuses says why: its family is the stack's.
    refused = {name for name in beyond if not allowed_in_some_form(filters, name)}
    assert refused <= for_the_stack
    assert "mbind" in refused


def test_the_check_is_not_vacuous(filters: tuple[bytes, ...]) -> None:
    # A call the filter refuses in every probed form, and the reason found for it.
    table, arch = _abi.SYSCALLS[ARCH], _abi.AUDIT_ARCH[ARCH]
    for name in ("ptrace", "bpf", "unshare"):
        for args in PROBES:
            verdict = evaluate_stack(filters, SeccompData(table[name], arch, 0, args))
            assert verdict.action != ALLOW, (name, args)
        assert name in refused_reasons()
    assert "getpid" not in refused_reasons()


def _tool() -> Any:
    path = TRACE.parent / "trace_syscalls.py"
    spec = importlib.util.spec_from_file_location("trace_syscalls", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_trace_reader_follows_the_child_from_its_marker() -> None:
    trace = "\n".join(
        [
            '100 openat(AT_FDCWD, "x", O_RDONLY) = 3',  # the parent: never counted
            # The capability self-test loads the real filters: not a marker.
            "200 prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, {len=274, filter=0x1}) = 0",
            "200 socket(AF_INET, SOCK_STREAM, IPPROTO_IP) = -1 EPERM (Operation not permitted)",
            "300 landlock_restrict_self(3, 0) = 0",  # the child's bootstrap, before the marker
            "300 prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, {len=1, filter=0x2}) = 0",
            "300 read(0, <unfinished ...>",
            '300 <... read resumed>"", 10) = 0',
            "300 clone3({flags=CLONE_VM|CLONE_THREAD, ...} <unfinished ...>",
            "300 <... clone3 resumed> => {parent_tid=[301]}, 88) = 301",
            "301 futex(0x1, FUTEX_WAIT, 0, NULL) = 0",
            "301 syscall_0x1d5(0x1, 0x2) = -1 ENOSYS (Function not implemented)",
            "--- SIGCHLD {si_signo=SIGCHLD} ---",
            "300 exit_group(0) = ?",
        ]
    )
    numbers = {number: name for name, number in _abi.SYSCALLS[ARCH].items()}
    found = _tool().calls_after_marker(trace, numbers)
    assert found == {"read", "clone3", "futex", "file_setattr", "exit_group"}


def test_what_the_trace_cannot_show_the_fallbacks_are_allowed(
    trace: dict[str, Any], filters: tuple[bytes, ...]
) -> None:
    # The trace runs with everything allowed, so glibc's threads use clone3; the filter answers
    # clone3 with ENOSYS and glibc falls back to clone, which the trace never shows.
    assert "clone3" in trace["union"]
    table, arch = _abi.SYSCALLS[ARCH], _abi.AUDIT_ARCH[ARCH]
    clone3 = evaluate_stack(filters, SeccompData(table["clone3"], arch, 0, (POINTER, 88)))
    if clone3.action != ALLOW:
        assert str(clone3) == "errno(38)"  # ENOSYS: the only answer glibc falls back on
        thread = (0x003D0F00, POINTER, POINTER, POINTER, POINTER)
        clone = evaluate_stack(filters, SeccompData(table["clone"], arch, 0, thread))
        assert clone.action == ALLOW
