"""The typed process boundary: messages declared once (``_wire``), checked by their reader.

The real-process tests go through the child (spawn), the zygote's start and a forked child's
request (warm): each refuses a message that differs from its declaration, naming the key.
"""

from __future__ import annotations

import os
import pathlib
import types
from collections.abc import Iterator
from typing import Any, Literal, TypedDict

import pytest

from pysandbox import RunStatus, Sandbox, SandboxSetupError, _bootstrap, _config, _wire
from pysandbox._launch import SpawnLauncher
from pysandbox.child import _zygote
from pysandbox.child._wire_check import WireError, check_message
from sandbox_helpers import kernel_only_sandbox


# --------------------------------------------------------------------------------------------
# The schema derived from the declaration, and the check
# --------------------------------------------------------------------------------------------
class _Inner(TypedDict):
    n: int


class _OptionalPart(TypedDict, total=False):
    maybe: str


class _Sample(_OptionalPart):
    number: int
    flag: bool
    text: str | None
    pairs: list[tuple[str, int]]
    table: dict[int, str]
    mode: Literal["a", "b"]
    inner: _Inner
    many: tuple[int, ...]
    names: list[str]
    code: types.CodeType
    anything: Any


def _sample() -> dict[str, Any]:
    return {
        "number": 1,
        "flag": True,
        "text": None,
        "pairs": [("a", 1)],
        "table": {1: "x"},
        "mode": "a",
        "inner": {"n": 2},
        "many": (1, 2),
        "names": ["a", "b"],
        "code": compile("1", "<t>", "exec"),
        "anything": object(),
    }


def _refusal(message: dict[str, Any]) -> str:
    schemas = {"Sample": (_wire.schema(_Sample), "sample")}
    with pytest.raises(WireError) as info:
        check_message(schemas, "Sample", message)
    return str(info.value)


def test_a_matching_message_passes_with_or_without_its_optional_key() -> None:
    schemas = {"Sample": (_wire.schema(_Sample), "sample")}
    check_message(schemas, "Sample", _sample())
    check_message(schemas, "Sample", {**_sample(), "maybe": "yes"})


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"extra": 1}, "sample: unknown key 'extra'"),
        ({3: 1}, "sample: unknown key 3"),
        ({"number": "1"}, "sample: key 'number': expected int, got str"),
        ({"number": True}, "sample: key 'number': expected int, got bool"),
        ({"flag": 1}, "sample: key 'flag': expected bool, got int"),
        ({"text": 5}, "sample: key 'text': expected str | None, got int"),
        ({"pairs": [("a", "1")]}, "sample: key 'pairs[0][1]': expected int, got str"),
        ({"pairs": [("a",)]}, "sample: key 'pairs[0]': expected tuple[str, int], got tuple"),
        ({"pairs": (("a", 1),)}, "sample: key 'pairs': expected list[tuple[str, int]], got tuple"),
        ({"table": {"1": "x"}}, "sample: key \"table['1']\": expected int, got str"),
        ({"mode": "c"}, "sample: key 'mode': expected Literal['a', 'b'], got str"),
        ({"inner": {"n": 1, "m": 2}}, "sample: unknown key 'inner.m'"),
        ({"inner": {}}, "sample: missing key 'inner.n'"),
        ({"many": [1]}, "sample: key 'many': expected tuple[int, ...], got list"),
        ({"many": (1, "2")}, "sample: key 'many[1]': expected int, got str"),
        ({"names": ["a", None]}, "sample: key 'names[1]': expected str, got None"),
        ({"table": {1: b"x"}}, "sample: key 'table[1]': expected str, got bytes"),
        ({"code": "1"}, "sample: key 'code': expected code, got str"),
        ({"maybe": 1}, "sample: key 'maybe': expected str, got int"),
    ],
)
def test_a_differing_message_is_refused_naming_the_key(
    change: dict[Any, Any], expected: str
) -> None:
    assert _refusal({**_sample(), **change}) == expected


@pytest.mark.parametrize("key", ["number", "inner", "code", "anything"])
def test_a_missing_required_key_is_refused(key: str) -> None:
    message = _sample()
    del message[key]
    assert _refusal(message) == f"sample: missing key {key!r}"


def test_not_a_dict_and_no_schema_are_refused() -> None:
    assert _refusal([]) == "sample: expected _Sample, got list"  # type: ignore[arg-type]
    with pytest.raises(WireError, match="no schema for the message 'ChildConfig'"):
        check_message({}, "ChildConfig", {})


def test_every_message_has_a_schema_the_child_can_read() -> None:
    import marshal

    shipped = marshal.loads(marshal.dumps(_wire.schemas()))  # noqa: S302 - our own bytes
    assert shipped == _wire.schemas()
    assert set(shipped) == set(_wire.MESSAGES)
    child = shipped["ChildConfig"][0]
    assert child[0] == "td"
    assert set(child[3]) == set(_wire.ChildConfig.__annotations__) | set(
        _wire.ChildConfig.__required_keys__ | _wire.ChildConfig.__optional_keys__
    )


def test_the_writers_messages_match_their_declarations(python_only: Sandbox) -> None:
    config = python_only._child_config()
    schemas = _wire.schemas()
    check_message(schemas, "ChildConfig", config.wire("print(1)", None))
    check_message(schemas, "ChildConfig", config.shrink_only().wire("", None))
    check_message(schemas, "RunRequest", config.run_request("print(1)", None, "m"))
    check_message(schemas, "ReadyCode", {"code": "", "code_object": None})


def test_an_undeclared_type_is_refused_at_derivation() -> None:
    with pytest.raises(TypeError, match="no run-time check"):
        _wire.schema(set[int])


# --------------------------------------------------------------------------------------------
# Through the real child, the zygote and a forked child
# --------------------------------------------------------------------------------------------
def _spawn_run(sb: Sandbox) -> SandboxSetupError:
    with pytest.raises(SandboxSetupError) as info:
        sb._execute(sb._child_config(), "print('never')", 10.0, launcher=SpawnLauncher())
    return info.value


def _changed_wire(
    monkeypatch: pytest.MonkeyPatch, method: str, change: dict[str, Any], drop: str = ""
) -> None:
    real = getattr(_config.ChildConfig, method)

    def changed(self: _config.ChildConfig, *args: Any, **kwargs: Any) -> dict[str, Any]:
        message = {**real(self, *args, **kwargs), **change}
        message.pop(drop, None)
        return message

    monkeypatch.setattr(_config.ChildConfig, method, changed)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("change", "drop", "detail"),
    [
        ({"x": 1}, "", "child configuration: unknown key 'x'"),
        ({}, "workspace", "child configuration: missing key 'workspace'"),
        ({}, "figure_fd", "child configuration: missing key 'figure_fd'"),
        (
            {"rlimits": [(1, "2", 3)]},
            "",
            "child configuration: key 'rlimits[0][1]': expected int, got str",
        ),
        (
            {"python_guards": 1},
            "",
            "child configuration: key 'python_guards': expected bool, got int",
        ),
    ],
)
def test_the_spawned_child_refuses_a_differing_configuration(
    workspace: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    change: dict[str, Any],
    drop: str,
    detail: str,
) -> None:
    with Sandbox(workspace, require=(), execution="spawn") as sb:
        sb.capabilities()  # the kernel probe (cached) first: its children use the same wire
        _changed_wire(monkeypatch, "wire", change, drop)
        assert _spawn_run(sb).detail == detail
    assert list(workspace.iterdir()) == []


def _extend(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every declaration gains a required field its writer does not know (yet)."""

    class ChildConfig(_wire.ChildConfig):
        session: int

    class ZygoteConfig(_wire.ZygoteConfig):
        session: int

    class RunRequest(_wire.RunRequest):
        session: int

    messages = dict(_wire.MESSAGES)
    messages["ChildConfig"] = (ChildConfig, messages["ChildConfig"][1])
    messages["ZygoteConfig"] = (ZygoteConfig, messages["ZygoteConfig"][1])
    messages["RunRequest"] = (RunRequest, messages["RunRequest"][1])
    monkeypatch.setattr(_wire, "MESSAGES", messages)
    _wire.schemas.cache_clear()
    _bootstrap._packed.clear()


@pytest.fixture(autouse=True)
def _fresh_schemas() -> Iterator[None]:
    """No schema derived from a test's declaration outlives it."""
    yield
    _wire.schemas.cache_clear()
    _bootstrap._packed.clear()


@pytest.mark.e2e
def test_a_field_added_to_the_declaration_only_is_refused_by_the_child(
    workspace: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Sandbox(workspace, require=(), execution="spawn") as sb:
        sb.capabilities()  # the kernel probe (cached) first: its children use the same wire
        _extend(monkeypatch)
        assert _spawn_run(sb).detail == "child configuration: missing key 'session'"


@pytest.mark.e2e
def test_a_field_added_to_the_declaration_only_is_refused_by_a_forked_child(
    workspace: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Sandbox(workspace, require=(), execution="warm", ready_children=0) as sb:
        sb.capabilities()  # the kernel probe (cached) first: its children use the same wire
        _extend(monkeypatch)
        monkeypatch.setitem(_wire.MESSAGES, "ZygoteConfig", (_wire.ZygoteConfig, "zygote"))
        _wire.schemas.cache_clear()  # the zygote starts; its run requests lack the field
        with pytest.raises(SandboxSetupError) as info:
            sb.run("print('never')")
        assert sb.capabilities().execution["mode"] == "warm"
    assert info.value.detail == "run request: missing key 'session'"


@pytest.mark.e2e
def test_a_field_added_to_the_declaration_only_is_refused_by_the_zygote(
    python_only: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    python_only.capabilities()
    _extend(monkeypatch)
    fixed = python_only._child_config().fixed_wire()
    start: _wire.ZygoteConfig = {**fixed, "env": {}, "preimport": [], "server_pid": os.getpid()}
    zygote = _zygote.Zygote(start, "/", {})
    with pytest.raises(_zygote.ZygoteError) as info:
        zygote.start()
    assert str(info.value).endswith("zygote configuration: missing key 'session'")
    zygote.close()


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("change", "drop", "detail"),
    [
        ({"x": 1}, "", "run request: unknown key 'x'"),
        ({}, "rlimits", "run request: missing key 'rlimits'"),
        ({"code": b"print(1)"}, "", "run request: key 'code': expected str, got bytes"),
    ],
)
def test_the_forked_child_refuses_a_differing_run_request(
    workspace: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    change: dict[str, Any],
    drop: str,
    detail: str,
) -> None:
    with Sandbox(workspace, require=(), execution="warm") as sb:
        sb.capabilities()
        _changed_wire(monkeypatch, "run_request", change, drop)
        with pytest.raises(SandboxSetupError) as info:
            sb.run("print('never')")
        assert sb.capabilities().execution["mode"] == "warm"
    assert info.value.detail == detail


@pytest.mark.e2e
def test_the_zygote_refuses_a_differing_start_configuration(python_only: Sandbox) -> None:
    fixed = dict(python_only._child_config().fixed_wire())
    del fixed["workspace"]
    start: Any = {**fixed, "env": {}, "preimport": [], "server_pid": os.getpid(), "y": 1}
    zygote = _zygote.Zygote(start, "/", {})
    with pytest.raises(_zygote.ZygoteError) as info:
        zygote.start()
    assert str(info.value).endswith("zygote configuration: unknown key 'y'")
    zygote.close()
    del start["y"]
    zygote = _zygote.Zygote(start, "/", {})
    with pytest.raises(_zygote.ZygoteError) as info:
        zygote.start()
    assert str(info.value).endswith("zygote configuration: missing key 'workspace'")
    zygote.close()


# --------------------------------------------------------------------------------------------
# The child's package: loaded from the shipped code, out of user code's reach
# --------------------------------------------------------------------------------------------
_REACH = """
import gc, sys
gc.collect()
print(sorted(name for name in sys.modules if name.partition(".")[0] == "pysandbox"))
print([getattr(finder, "__name__", type(finder).__name__) for finder in sys.meta_path])
loader_like = [  # the bootstrap's loader class, or an instance of it
    o for o in gc.get_objects()
    if hasattr(o, "exec_module") and getattr(o, "__module__", "") in ("__main__", "builtins")
    and "L" in (getattr(o, "__name__", ""), type(o).__name__)
]
print(len(loader_like))
for name in ("pysandbox", "pysandbox.child", "pysandbox.child._main", "pysandbox.child._zygote"):
    try:
        __import__(name)
    except ImportError as exc:
        print(type(exc).__name__)
    else:
        print("imported", name)
"""


@pytest.mark.e2e
@pytest.mark.parametrize("execution", ["spawn", "warm"])
def test_user_code_cannot_import_the_child_package_or_reach_its_loader(
    workspace: pathlib.Path, monkeypatch: pytest.MonkeyPatch, execution: str
) -> None:
    # No AST gate and no Python-level guards: only the bootstrap keeps the package away.
    sb = kernel_only_sandbox(monkeypatch, workspace, require=(), execution=execution)
    with sb:
        result = sb.run(_REACH)
        assert sb.capabilities().execution["mode"] == execution
    assert result.stderr == ""
    assert result.stdout.splitlines() == [
        "[]",
        "['BuiltinImporter', 'FrozenImporter', 'PathFinder']",
        "0",
        *["ModuleNotFoundError"] * 4,
    ]


@pytest.mark.e2e
@pytest.mark.parametrize("execution", ["spawn", "warm"])
@pytest.mark.parametrize(
    "code",
    [
        "import pysandbox.child._main",
        "from pysandbox.child import _kernel",
        "__import__('pysandbox.child._zygote')",
        "import importlib\nimportlib.import_module('pysandbox')",
    ],
)
def test_the_guarded_child_refuses_the_child_package(
    workspace: pathlib.Path, execution: str, code: str
) -> None:
    with Sandbox(workspace, require=(), execution=execution) as sb:
        result = sb.run(f"print('start')\n{code}\nprint('imported')")
    assert "imported" not in result.stdout
    assert result.status in (RunStatus.REJECTED, RunStatus.ERROR), result
