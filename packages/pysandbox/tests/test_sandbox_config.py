"""SandboxConfig: one frozen configuration, validated once, bounds declared with the fields."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import pytest

from pysandbox import (
    DATASCIENCE,
    DEFAULT,
    KERNEL_LAYERS,
    PROFILES,
    READY_MIN_IDLE_S,
    ExecutionMode,
    Layer,
    Limits,
    Sandbox,
    SandboxConfig,
    bound_of,
)

REFUSED: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"require": "landlock"}, TypeError, "require must be an iterable of layer names"),
    ({"require": b"seccomp"}, TypeError, "require must be an iterable"),
    ({"require": ("bwrap",)}, ValueError, r"unknown layer\(s\) in require: \['bwrap'\]"),
    ({"require": ("Landlock",)}, ValueError, "unknown layer"),
    ({"execution": "cold"}, ValueError, "execution must be one of"),
    ({"execution": "WARM"}, ValueError, "execution must be one of"),
    ({"max_concurrent_runs": 0}, ValueError, "max_concurrent_runs must be at least 1"),
    ({"max_concurrent_runs": -3}, ValueError, "at least 1"),
    ({"max_concurrent_runs": 1.5}, TypeError, "max_concurrent_runs must be an int"),
    ({"max_concurrent_runs": True}, TypeError, "max_concurrent_runs must be a number"),
    ({"ready_children": -1}, ValueError, "ready_children must be at least 0"),
    ({"ready_children": "2"}, TypeError, "ready_children must be a number"),
    ({"ready_max_idle_s": 0.05}, ValueError, "ready_max_idle_s must be at least 0.1"),
    ({"ready_max_idle_s": float("inf")}, ValueError, "finite number of at least 0.1"),
    ({"ready_max_idle_s": float("nan")}, ValueError, "finite number of at least 0.1"),
    ({"extra_modules": "numpy"}, TypeError, "extra_modules must be an iterable"),
    ({"extra_modules": ["os path"]}, ValueError, "'os path' is not a dotted module name"),
    ({"extra_modules": ["a..b"]}, ValueError, "not a dotted module name"),
    ({"preload": "json"}, TypeError, "preload must be an iterable"),
    ({"preload": [3]}, ValueError, "3 is not a dotted module name"),
    ({"extra_read_paths": "/etc"}, TypeError, "extra_read_paths must be an iterable"),
    ({"kernel_layers": 1}, TypeError, "kernel_layers must be a bool"),
    ({"seccomp_debug": "yes"}, TypeError, "seccomp_debug must be a bool"),
    ({"limits": {"timeout_s": 1}}, TypeError, "limits must be a pysandbox.Limits"),
    ({"policy": object()}, TypeError, "policy must be an astguard.Policy"),
]


@pytest.mark.parametrize(("kwargs", "error", "message"), REFUSED)
def test_a_hostile_value_is_refused_by_the_config(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        SandboxConfig(**kwargs)


@pytest.mark.parametrize(("kwargs", "error", "message"), REFUSED)
def test_the_sandbox_refuses_the_same_before_touching_the_workspace(
    kwargs: dict[str, Any], error: type[Exception], message: str, tmp_path: pathlib.Path
) -> None:
    # A missing workspace would be refused too: the configuration is checked first.
    with pytest.raises(error, match=message):
        Sandbox(tmp_path / "missing", **kwargs)


def test_values_are_normalized_and_frozen() -> None:
    config = SandboxConfig(
        require=["seccomp", "landlock", "seccomp"],  # type: ignore[arg-type]
        extra_modules=iter(["json", "json", "csv"]),  # type: ignore[arg-type]
        preload=("json",),
        extra_read_paths=[pathlib.Path("/usr/share")],  # type: ignore[arg-type]
        execution="spawn",  # type: ignore[arg-type]
        ready_max_idle_s=5,
    )
    assert config.require == (Layer.SECCOMP, Layer.LANDLOCK)
    assert config.extra_modules == ("json", "csv")
    assert config.extra_read_paths == ("/usr/share",)
    assert config.execution is ExecutionMode.SPAWN
    assert config.ready_max_idle_s == 5.0
    assert isinstance(config.ready_max_idle_s, float)
    assert SandboxConfig(require=("seccomp", "landlock")).requires_kernel_layers  # type: ignore[arg-type]
    assert not SandboxConfig(kernel_layers=False).requires_kernel_layers
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.execution = ExecutionMode.WARM  # type: ignore[misc]


def test_the_bounds_are_read_from_the_declaration() -> None:
    assert bound_of(SandboxConfig, "ready_max_idle_s").minimum == READY_MIN_IDLE_S
    assert bound_of(SandboxConfig, "max_concurrent_runs").minimum == 1
    assert bound_of(SandboxConfig, "ready_children").minimum == 0
    assert bound_of(Limits, "memory_bytes").minimum == 64 * 1024 * 1024
    assert bound_of(Limits, "open_files").minimum == 16
    assert bound_of(Limits, "output_bytes").positive
    with pytest.raises(KeyError):
        bound_of(SandboxConfig, "policy")


def test_enums_are_their_strings() -> None:
    assert KERNEL_LAYERS == ("landlock", "seccomp")
    assert str(Layer.LANDLOCK) == "landlock"
    assert "landlock" in {Layer.LANDLOCK}
    assert f"{Layer.SECCOMP}" == "seccomp"
    assert {"warm"} == {ExecutionMode.WARM}
    assert [str(mode) for mode in ExecutionMode] == ["warm", "spawn"]


def test_the_profiles_are_data() -> None:
    assert dict(PROFILES) == {"datascience": DATASCIENCE}
    assert DATASCIENCE.required_layers == KERNEL_LAYERS
    assert DATASCIENCE.memory_bytes == 1024**3
    assert DEFAULT.memory_bytes == Limits().memory_bytes
    assert DEFAULT.extra_modules == DEFAULT.preload == DEFAULT.required_layers == ()
    with pytest.raises(TypeError):
        PROFILES["x"] = DEFAULT  # type: ignore[index]
    config = SandboxConfig.for_profile(DATASCIENCE, extra_modules=["json"])
    assert config.extra_modules == (*DATASCIENCE.extra_modules, "json")
    assert config.preload == DATASCIENCE.preload
    assert config.limits.memory_bytes == DATASCIENCE.memory_bytes
    explicit = Limits(memory_bytes=768 * 1024 * 1024)
    assert SandboxConfig.for_profile(DATASCIENCE, limits=explicit).limits == explicit
    for options in ({"require": ()}, {"require": ("seccomp",)}, {"kernel_layers": False}):
        with pytest.raises(ValueError, match="needs the kernel layers on and required"):
            SandboxConfig.for_profile(DATASCIENCE, **options)
    assert SandboxConfig.for_profile(DEFAULT, require=()).extra_modules == ()


def test_from_config_builds_the_same_sandbox(tmp_path: pathlib.Path) -> None:
    config = SandboxConfig(require=(), execution="spawn", max_concurrent_runs=3)  # type: ignore[arg-type]
    with Sandbox.from_config(tmp_path, config) as sandbox:
        assert sandbox.config == config
        assert sandbox.max_concurrent_runs == 3
        assert sandbox.capabilities().execution["requested"] == "spawn"
    with Sandbox(tmp_path, require=(), execution="spawn", max_concurrent_runs=3) as same:
        assert same.config == config
    with pytest.raises(TypeError, match=r"config must be a pysandbox\.SandboxConfig"):
        Sandbox.from_config(tmp_path, {"require": ()})  # type: ignore[arg-type]
