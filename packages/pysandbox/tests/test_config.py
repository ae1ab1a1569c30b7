"""The child configuration: built once per sandbox, one wire format for spawn and zygote."""

from __future__ import annotations

import marshal
import resource

import pytest

from pysandbox import Sandbox, _bootstrap, _config, _wire


@pytest.mark.e2e
def test_built_once_per_sandbox(python_only: Sandbox) -> None:
    first = python_only._child_config()
    assert python_only._child_config() is first
    assert python_only.run("print(1)").stdout == "1\n"
    assert python_only._child_config() is first


def test_spawn_wire_is_the_zygote_start_plus_the_run_request(python_only: Sandbox) -> None:
    config = python_only._child_config()
    code = "print(1)"
    wire = config.wire(code, None, setup_fd=7, figure_fd=8)
    fixed = config.fixed_wire()
    request = dict(config.run_request(code, None, "m"))
    assert not set(fixed) & set(_config.RUN_KEYS)
    assert request.pop("env") == {_config.MARKER_NAME: "m"}
    assert wire == {**fixed, **request, "setup_fd": 7, "figure_fd": 8, "enter_workspace": True}
    marshal.dumps(dict(wire))  # plain data only


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
    packed = _bootstrap.payload(_bootstrap.ZYGOTE, {"x": 1})  # type: ignore[arg-type]
    size = int.from_bytes(packed[:8], "little")
    schemas, entry, modules = marshal.loads(packed[8 : 8 + size])  # noqa: S302 - our own bytes
    assert schemas == _wire.schemas()
    assert entry == "pysandbox.child._zygote"
    files = {name: code.co_filename.rsplit("/", 2)[-2:] for name, (_, code) in modules.items()}
    assert files == {
        "pysandbox": ["<pysandbox>"],
        "pysandbox.child": ["child", "__init__.py"],
        **{f"pysandbox.child.{m}": ["child", f"{m}.py"] for m in _bootstrap.ZYGOTE},
    }
    assert [name for name, (package, _) in modules.items() if package] == [
        "pysandbox",
        "pysandbox.child",
    ]
    spawn_blob = _bootstrap.payload(_bootstrap.CHILD, {"x": 1})  # type: ignore[arg-type]
    spawn_size = int.from_bytes(spawn_blob[:8], "little")
    _, entry, modules = marshal.loads(spawn_blob[8 : 8 + spawn_size])  # noqa: S302 - ours
    assert entry == "pysandbox.child._main"
    assert "pysandbox.child._zygote" not in modules
    assert marshal.loads(packed[8 + size :]) == {"x": 1}  # noqa: S302 - our own bytes
