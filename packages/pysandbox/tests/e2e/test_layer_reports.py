"""Each kernel layer is probed on its own: a blocked one never takes the other down with it.

Before, both layers were proven in one probe child: with Landlock blocked (or seccomp
unavailable) the child's failed check of the missing layer demoted the *working* one, with the
missing layer's reason, and the sandbox never used it. A blocked layer is simulated here by
patching what the kernel probe reports, or by making the layer fail in its probe child.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Iterator

import pytest

from pysandbox import IsolationUnavailable, RunStatus, Sandbox, _landlock, _probe
from sandbox_helpers import KERNEL, needs_kernel

pytestmark = needs_kernel

BLOCKED = "blocked for the test (as by a container profile that denies landlock_*)"


@pytest.fixture
def fresh_probe(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Forget the verified probes, so that each test proves its layers again."""
    monkeypatch.setattr(_probe, "_verified", {})
    yield


def _report_kernel(monkeypatch: pytest.MonkeyPatch, **changes: object) -> None:
    blocked = dataclasses.replace(KERNEL, **changes)  # type: ignore[arg-type]
    monkeypatch.setattr(_probe, "probe_kernel", lambda: blocked)


@pytest.mark.usefixtures("fresh_probe")
def test_seccomp_is_used_when_landlock_is_blocked(
    monkeypatch: pytest.MonkeyPatch, workspace: pathlib.Path
) -> None:
    _report_kernel(monkeypatch, landlock_abi=0, landlock_reason=BLOCKED)
    with Sandbox(workspace, require=("seccomp",)) as sb:
        caps = sb.capabilities()
        landlock, seccomp = caps.layer("landlock"), caps.layer("seccomp")
        assert (landlock.available, landlock.active, landlock.reason) == (False, False, BLOCKED)
        assert (seccomp.available, seccomp.active, seccomp.reason) == (True, True, "")
        result = sb.run("print(1)")
        assert result.ok
        assert "seccomp" in result.layers
        assert "landlock" not in result.layers
    # Requiring the blocked layer refuses with its own reason, naming the setting.
    with Sandbox(workspace) as sb, pytest.raises(IsolationUnavailable) as info:
        sb.run("print(1)")
    assert info.value.missing == ("landlock",)
    assert info.value.reasons == {"landlock": BLOCKED}
    assert "require=()" in str(info.value)


@pytest.mark.usefixtures("fresh_probe")
def test_landlock_is_used_when_seccomp_is_unavailable(
    monkeypatch: pytest.MonkeyPatch, workspace: pathlib.Path
) -> None:
    reason = "seccomp filters unsupported: simulated"
    _report_kernel(monkeypatch, seccomp=False, seccomp_reason=reason)
    with Sandbox(workspace, require=("landlock",)) as sb:
        caps = sb.capabilities()
        assert (caps.layer("seccomp").active, caps.layer("seccomp").reason) == (False, reason)
        assert (caps.layer("landlock").active, caps.layer("landlock").reason) == (True, "")
        result = sb.run("print(open('/etc/hostname').read())")
        assert result.status is RunStatus.ERROR  # Landlock (and the open guard) still hold
        assert "landlock" in result.layers


@pytest.mark.usefixtures("fresh_probe")
def test_a_layer_that_fails_in_its_probe_child_is_demoted_alone(
    monkeypatch: pytest.MonkeyPatch, workspace: pathlib.Path
) -> None:
    # Rights the kernel does not know: landlock_create_ruleset fails in the probe child.
    monkeypatch.setattr(_landlock, "fs_rights_for_abi", lambda abi: (1 << 40) - 1)
    roots = Sandbox(workspace, require=())._read_roots
    verified = _probe.verify_kernel(roots)
    assert verified.landlock_abi == 0
    assert verified.landlock_reason.startswith(
        "the probe child could not apply it: landlock_create_ruleset: "
    )
    assert (verified.seccomp, verified.seccomp_reason) == (True, "")
