"""Policy, its copy helpers, and the helpers the run-time guards share with the checker."""

from __future__ import annotations

import dataclasses
import json

import pytest

import astguard
from astguard import Policy, check, is_forbidden_attribute, is_module_allowed


def test_default_policy_is_frozen_and_safe() -> None:
    policy = Policy()
    assert policy == Policy()
    assert hash(policy) == hash(Policy())
    assert policy.runtime_attribute_guard is False
    assert {"json", "math", "collections", "pathlib"} <= policy.allowed_modules
    assert isinstance(policy.allowed_modules, frozenset)
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.max_nodes = 1  # type: ignore[misc]
    for dangerous in (
        "os",
        "sys",
        "subprocess",
        "socket",
        "importlib",
        "builtins",
        "types",
        "inspect",
        "gc",
        "ctypes",
        "pickle",
        "marshal",
        "threading",
        "multiprocessing",
        "timeit",
        "code",
        "shutil",
        "tempfile",
    ):
        assert dangerous not in policy.allowed_modules
        assert not is_module_allowed(dangerous, policy)


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("collections", True),
        ("collections.abc", True),
        ("json.decoder", True),
        ("json.tool", False),
        ("logging", True),
        ("logging.config", False),
        ("logging.handlers", False),
        ("asyncio", True),
        ("asyncio.subprocess", False),
        ("urllib.parse", True),
        ("urllib", False),
        ("urllib.request", False),
        ("collections._private", False),
        ("asyncio.__main__", False),
        ("__future__", True),
        ("__main__", False),
        ("os", False),
        ("os.path", False),
        ("", False),
        (".math", False),
        ("math.", False),
        ("ma th", False),
        ("\uff4d\uff41\uff54\uff48", True),
    ],
)
def test_is_module_allowed_default(name: str, allowed: bool) -> None:
    assert is_module_allowed(name) is allowed
    assert is_module_allowed(name, Policy()) is allowed


def test_is_module_allowed_rejects_non_str() -> None:
    assert is_module_allowed(None) is False  # type: ignore[arg-type]
    assert is_module_allowed(b"math") is False  # type: ignore[arg-type]


def test_with_modules_adds_and_most_specific_wins() -> None:
    policy = Policy().with_modules("numpy", "logging.handlers")
    assert policy is not Policy()
    assert is_module_allowed("numpy", policy)
    assert is_module_allowed("numpy.linalg", policy)
    assert is_module_allowed("logging.handlers", policy)
    assert not is_module_allowed("logging.config", policy)
    assert check("import numpy as np\nnp.zeros(3)", policy).ok
    assert not check("import numpy", Policy()).ok
    # The original is unchanged.
    assert not is_module_allowed("numpy")


def test_without_modules_removes_and_carves_out_submodules() -> None:
    policy = Policy().without_modules("asyncio", "collections.abc")
    assert not is_module_allowed("asyncio", policy)
    assert not is_module_allowed("asyncio.events", policy)
    assert is_module_allowed("collections", policy)
    assert not is_module_allowed("collections.abc", policy)
    assert "collections.abc" in policy.denied_modules
    assert "asyncio" not in policy.denied_modules  # nothing above it is allowed
    assert "AG101" in check("from collections.abc import Mapping", policy).rule_ids
    again = policy.with_modules("collections.abc")
    assert is_module_allowed("collections.abc", again)


def test_submodule_of_denied_stays_denied() -> None:
    # Allowing the parent does not allow what lies below a denied name.
    policy = Policy().with_modules("logging")
    assert not is_module_allowed("logging.config", policy)
    assert not is_module_allowed("logging.config.sub", policy)


@pytest.mark.parametrize("bad", ["", "os..path", "1abc", "a-b", None])
def test_helpers_validate_names(bad: object) -> None:
    with pytest.raises(ValueError, match="not a module name"):
        Policy().with_modules(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a module name"):
        Policy().without_modules(bad)  # type: ignore[arg-type]


def test_policy_validation() -> None:
    with pytest.raises(ValueError, match="max_nodes"):
        Policy(max_nodes=0)
    with pytest.raises(ValueError, match="max_depth"):
        Policy(max_depth=True)
    with pytest.raises(TypeError, match="allowed_modules"):
        Policy(allowed_modules="os")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="runtime_attribute_guard"):
        Policy(runtime_attribute_guard=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"allowed_modules holds invalid names: 'os\.\.path'"):
        Policy(allowed_modules=frozenset({"os..path"}))
    with pytest.raises(ValueError, match="denied_builtins holds invalid names: 1"):
        Policy(denied_builtins=frozenset({1}))  # type: ignore[arg-type]
    policy = Policy(allowed_modules=["math"])  # type: ignore[arg-type]
    assert policy.allowed_modules == frozenset({"math"})


def test_with_limits_and_guard() -> None:
    policy = Policy().with_limits(max_source_bytes=10, max_nodes=20, max_depth=30)
    assert (policy.max_source_bytes, policy.max_nodes, policy.max_depth) == (10, 20, 30)
    assert policy.with_limits() == policy
    guarded = Policy().with_runtime_attribute_guard()
    assert guarded.runtime_attribute_guard is True
    assert guarded.with_runtime_attribute_guard(installed=False) == Policy()
    with pytest.raises(ValueError, match="max_depth"):
        Policy().with_limits(max_depth=-1)


def test_policy_to_dict_is_json() -> None:
    data = Policy().to_dict()
    assert json.loads(json.dumps(data)) == data
    assert "math" in data["allowed_modules"]
    assert data["runtime_attribute_guard"] is False
    assert data["allowed_modules"] == sorted(data["allowed_modules"])


@pytest.mark.parametrize(
    ("name", "forbidden"),
    [
        ("__globals__", True),
        ("__class__", False),
        ("__init__", False),
        ("__subclasses__", True),
        ("__getattribute__", True),
        ("gi_frame", True),
        ("f_back", True),
        ("tb_frame", True),
        ("co_code", True),
        ("cr_frame", True),
        ("create_subprocess_shell", True),
        ("os", True),
        ("sys", True),
        ("_flavour", True),
        ("_items", False),
        ("name", False),
        ("__\uff47lobals__", True),
        ("", True),
    ],
)
def test_is_forbidden_attribute(name: str, forbidden: bool) -> None:
    assert is_forbidden_attribute(name) is forbidden


@pytest.mark.parametrize(
    ("module", "name", "forbidden"),
    [
        ("random", "_os", True),
        ("random", "choice", False),
        ("random", "os", True),
        ("asyncio.events", "os", True),
        ("pathlib", "Path", False),
        ("logging", "config", True),
        ("io", "FileIO", True),
        ("io", "StringIO", False),
        ("collections", "abc", False),
        ("statistics", "random", False),
        ("datetime", "datetime", False),
        ("posix", "system", True),
    ],
)
def test_is_forbidden_attribute_on_modules(module: str, name: str, forbidden: bool) -> None:
    assert is_forbidden_attribute(name, module=module) is forbidden


@pytest.mark.parametrize("name", ["format", "format_map", "attrgetter", "methodcaller"])
def test_is_forbidden_attribute_dynamic(name: str) -> None:
    assert is_forbidden_attribute(name) is False
    assert is_forbidden_attribute(name, dynamic=True) is True
    assert is_forbidden_attribute("name", dynamic=True) is False


@pytest.mark.parametrize("name", ["__class__", "__match_args__"])
def test_is_forbidden_attribute_write(name: str) -> None:
    assert is_forbidden_attribute(name) is False
    assert is_forbidden_attribute(name, write=True) is True
    assert is_forbidden_attribute("__init__", write=True) is False


def test_is_forbidden_attribute_follows_policy() -> None:
    policy = dataclasses.replace(
        Policy(), allowed_dunder_attributes=Policy().allowed_dunder_attributes | {"__dict__"}
    )
    assert is_forbidden_attribute("__dict__")
    assert not is_forbidden_attribute("__dict__", policy)
    assert check("x.__dict__", policy).ok
    assert is_forbidden_attribute(42) is True  # type: ignore[arg-type]


def test_policy_lists_are_not_exported() -> None:
    # The lists are astguard's own; other packages ask through Policy and the functions.
    for name in (
        "ALLOWED_DUNDER_ATTRIBUTES",
        "ALLOWED_DUNDER_NAMES",
        "DEFAULT_ALLOWED_MODULES",
        "DEFAULT_DENIED_MODULES",
        "DEFINABLE_DUNDERS",
        "DENIED_BUILTINS",
        "DENIED_MODULE_ATTRIBUTES",
        "DYNAMIC_DENIED_ATTRIBUTES",
        "FORBIDDEN_ATTRIBUTES",
        "FORBIDDEN_NAMES",
        "FUTURE_FEATURES",
        "MODULE_NAME_ATTRIBUTES",
        "REFLECTION_BUILTINS",
        "SPAWN_ATTRIBUTES",
        "SPAWN_MODULE_ATTRIBUTES",
        "STDLIB_MODULE_NAMES",
        "WRITE_DENIED_ATTRIBUTES",
    ):
        assert name not in astguard.__all__, name
        assert not hasattr(astguard, name), name
    assert {
        "exec",
        "eval",
        "compile",
        "__import__",
        "globals",
        "locals",
        "vars",
        "breakpoint",
        "help",
        "input",
        "memoryview",
    } <= Policy().denied_builtins
