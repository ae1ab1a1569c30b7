"""The child configuration: built once per sandbox, one wire format for spawn and zygote."""

from __future__ import annotations

import marshal
import resource

import pytest

from pysandbox import Sandbox, _bootstrap, _config


@pytest.mark.e2e
def test_built_once_per_sandbox(python_only: Sandbox) -> None:
    first = python_only._child_config()
    assert python_only._child_config() is first
    assert python_only.run("print(1)").stdout == "1\n"
    assert python_only._child_config() is first


def test_spawn_wire_is_the_zygote_start_plus_the_run_request(python_only: Sandbox) -> None:
    config = python_only._child_config()
    code = "print(1)"
    wire = config.wire(code, None)
    fixed = config.fixed_wire()
    request = config.run_request(code, None, "m")
    assert not set(fixed) & set(_config.RUN_KEYS)
    assert request.pop("env") == {_config.MARKER_NAME: "m"}
    assert wire == {**fixed, **request}
    marshal.dumps(wire)  # plain data only


def test_shrink_only_forbids_growth_and_creation(python_only: Sandbox) -> None:
    config = python_only._child_config()
    shrink = config.shrink_only()
    limits = {kind: (soft, hard) for kind, soft, hard in shrink.rlimits}
    assert limits[resource.RLIMIT_FSIZE] == (0, 0)
    assert shrink.wire("", None)["no_create"] is True
    assert "no_create" not in config.wire("", None)


def test_layers_follow_the_configuration(python_only: Sandbox) -> None:
    config = python_only._child_config()
    active = ("ast_gate", "rlimits", "open_guard", "landlock", "seccomp")
    assert config.layers(active) == ("ast_gate", "rlimits", "open_guard")


def test_one_stub_for_spawn_and_zygote() -> None:
    spawn = _bootstrap.argv(5)
    zygote = _bootstrap.argv(5, 6)
    assert spawn[:-1] == zygote[:-2]
    assert spawn[-2:] == [_bootstrap.STUB, "5"]
    packed = _bootstrap.payload(_bootstrap.ZYGOTE, {"x": 1})
    size = int.from_bytes(packed[:8], "little")
    modules = marshal.loads(packed[8 : 8 + size])  # noqa: S302 - our own bytes
    assert [name for name, _ in modules] == ["pysandbox._child", "pysandbox._zygote"]
    assert [[c.co_filename.rsplit("/", 1)[-1] for c in codes] for _, codes in modules] == [
        [
            "_child_kernel.py",
            "_library_getters.py",
            "_sqlite_guard.py",
            "_generators.py",
            "_child.py",
        ],
        ["_zygote.py"],
    ]
    assert marshal.loads(packed[8 + size :]) == {"x": 1}  # noqa: S302 - our own bytes
