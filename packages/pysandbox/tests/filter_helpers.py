"""The seccomp filters pysandbox builds, as the child would load them (a test utility)."""

from __future__ import annotations

import inspect

import pytest

from pysandbox import _abi, _seccomp
from pysandbox.child import _kernel as _child_kernel

__all__ = ["POINTER", "SELF_PID", "filters_for"]

#: The pid the child would patch into the filters; any value below the placeholder.
SELF_PID = 4242
#: A plausible user-space address, for pointer arguments.
POINTER = 0x7FFF_DEAD_B000


def filters_for(arch: str) -> tuple[bytes, ...]:
    """The stacked filters for ``arch``, pid placeholder patched as the child patches it.

    ``_seccomp.build_filters`` builds for the running machine only until it accepts
    ``machine=`` (the allow-list work adds the aarch64 filter); another architecture's cases
    are skipped until then, saying so.
    """
    if "machine" in inspect.signature(_seccomp.build_filters).parameters:
        programs = _seccomp.build_filters(machine=arch)  # type: ignore[call-arg,unused-ignore]
    elif _abi.canonical_machine() == arch:
        programs = _seccomp.build_filters()
    else:
        pytest.skip(
            f"_seccomp.build_filters() builds for this machine only on this branch: the {arch} "
            "cases run once it accepts machine= (issue 13 item 1, the allow-list)"
        )
    jeq_k = _abi.SECCOMP["BPF_JMP_JEQ_K"]
    return tuple(
        _child_kernel.patch_self_pid(p.code, _seccomp.PID_PLACEHOLDER, SELF_PID, jeq_k)
        for p in programs
    )
