"""The ``kernel`` marker skips where a layer it names is missing, and refuses a typo."""

from __future__ import annotations

import pytest

import sandbox_helpers
from sandbox_helpers import kernel_skip_reason


@pytest.mark.parametrize(
    ("landlock", "seccomp", "layers", "reason"),
    [
        (True, True, ("landlock", "seccomp"), None),
        (True, True, (), None),
        (False, False, (), None),
        (False, True, ("landlock",), "Landlock unavailable"),
        (True, False, ("seccomp",), "seccomp unavailable"),
        (True, False, ("landlock",), None),
        (False, True, ("seccomp",), None),
        (False, True, ("landlock", "seccomp"), "kernel layers unavailable"),
        (True, False, ("landlock", "seccomp"), "kernel layers unavailable"),
    ],
)
def test_the_reason_names_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
    landlock: bool,
    seccomp: bool,
    layers: tuple[str, ...],
    reason: str | None,
) -> None:
    monkeypatch.setitem(sandbox_helpers.KERNEL_LAYERS, "landlock", landlock)
    monkeypatch.setitem(sandbox_helpers.KERNEL_LAYERS, "seccomp", seccomp)
    assert kernel_skip_reason(layers) == reason


@pytest.mark.parametrize("layers", [("Landlock",), ("seccomp", "namespaces"), (1,)])
def test_an_unknown_layer_is_refused(layers: tuple[object, ...]) -> None:
    with pytest.raises(ValueError, match=r"pytest\.mark\.kernel takes"):
        kernel_skip_reason(layers)
