"""The run-time rules other packages ask astguard about: dunders, forbidden attributes, modules
that reach the system, and the one source-size limit."""

from __future__ import annotations

import dataclasses
import sys

import pytest

import astguard
from astguard import (
    DEFAULT_MAX_SOURCE_BYTES,
    Policy,
    check,
    forbidden_attributes,
    is_dunder_allowed,
    is_forbidden_attribute,
    module_forbidden_attributes,
    reaches_system,
)
from astguard._policy import MODULE_NAME_ATTRIBUTES


@pytest.mark.parametrize(
    "name",
    [
        "os",
        "os.path",
        "posixpath",
        "sys",
        "subprocess",
        "_posixsubprocess",
        "socket",
        "ctypes",
        "ctypes.util",
        "pickle",
        "marshal",
        "threading",
        "multiprocessing.pool",
        "signal",
        "shutil",
        "importlib.util",
        "builtins",
        "inspect",
        "gc",
        "mmap",
        "fcntl",
        "pty",
        "runpy",
        # denied submodules of allowed packages reach the system too
        "logging.handlers",
        "logging.config",
        "asyncio.subprocess",
        "json.tool",
    ],
)
def test_modules_that_reach_the_system(name: str) -> None:
    assert reaches_system(name) is True
    assert Policy().reaches_system(name) is True


@pytest.mark.parametrize(
    "name",
    ["json", "json.decoder", "math", "collections.abc", "pathlib", "logging", "asyncio", "numpy"],
)
def test_modules_that_do_not_reach_the_system(name: str) -> None:
    assert reaches_system(name) is False
    assert Policy().reaches_system(name) is False


@pytest.mark.parametrize("name", ["", ".os", "os.", "1os", "a b", 42, None])
def test_malformed_module_names_count_as_reaching_the_system(name: object) -> None:
    assert reaches_system(name) is True  # type: ignore[arg-type]


def test_reaches_system_follows_the_policy_denials_and_normalizes() -> None:
    policy = Policy().without_modules("json.decoder")
    assert reaches_system("json.decoder") is False
    assert reaches_system("json.decoder", policy) is True
    assert reaches_system("json", policy) is False
    # NFKC look-alikes are the module the parser would import.
    assert reaches_system("\uff4f\uff53") is True  # fullwidth "os"


def test_every_module_named_as_a_refused_attribute_reaches_the_system() -> None:
    modules = {name for name in MODULE_NAME_ATTRIBUTES if name in sys.stdlib_module_names}
    assert {"os", "sys", "builtins", "posixpath", "_thread"} <= modules
    assert [name for name in sorted(modules) if not reaches_system(name)] == []


@pytest.mark.parametrize(
    "name",
    [
        "__init__",
        "__name__",
        "__qualname__",
        "__class__",
        "__repr__",
        "__eq__",
        "__add__",
        "__radd__",
        "__iadd__",
        "__cause__",
        "__post_init__",
        "__slots__",
        "__match_args__",
    ],
)
def test_allowed_dunders(name: str) -> None:
    assert is_dunder_allowed(name) is True
    assert Policy().is_dunder_allowed(name) is True
    assert is_forbidden_attribute(name) is False


@pytest.mark.parametrize(
    "name",
    [
        "__globals__",
        "__code__",
        "__closure__",
        "__builtins__",
        "__dict__",
        "__subclasses__",
        "__bases__",
        "__mro__",
        "__reduce__",
        "__getattribute__",
        "__import__",
        "__loader__",
        "__annotations__",
        "__dataclass_fields__",
        "__\uff47lobals__",  # fullwidth g
    ],
)
def test_forbidden_dunders(name: str) -> None:
    assert is_dunder_allowed(name) is False
    assert is_forbidden_attribute(name) is True
    assert is_forbidden_attribute(name, dynamic=True) is True


def test_dunder_writes_and_non_dunders() -> None:
    assert is_dunder_allowed("__class__") is True
    assert is_dunder_allowed("__class__", write=True) is False
    assert is_dunder_allowed("__match_args__", write=True) is False
    assert is_dunder_allowed("__init__", write=True) is True
    # NFKC look-alikes are the name the parser would see: a fullwidth low line or i.
    assert is_dunder_allowed("\uff3f_init__") is True
    assert is_dunder_allowed("__\uff49nit__") is True
    for name in ("x", "_private", "__private", "____", 42, None):
        assert is_dunder_allowed(name) is False  # type: ignore[arg-type]


def test_dunder_rule_follows_the_policy() -> None:
    policy = dataclasses.replace(
        Policy(), allowed_dunder_attributes=Policy().allowed_dunder_attributes | {"__dict__"}
    )
    assert is_dunder_allowed("__dict__") is False
    assert is_dunder_allowed("__dict__", policy) is True
    assert policy.is_dunder_allowed("__dict__") is True


def test_forbidden_attributes_on_every_object() -> None:
    static = forbidden_attributes()
    dynamic = forbidden_attributes(dynamic=True)
    assert static is Policy().forbidden_attributes()
    for name in ("f_globals", "f_back", "gi_frame", "tb_frame", "cell_contents", "_getframe"):
        assert name in static
    for name in ("create_subprocess_exec", "open_connection", "getaddrinfo", "os", "sys", "_os"):
        assert name in static
    for name in ("format", "format_map", "attrgetter", "methodcaller", "ForwardRef"):
        assert name not in static
        assert name in dynamic
    assert static < dynamic
    for name in ("append", "items", "name", "value", "system", "popen", "mro"):
        assert name not in dynamic
    assert not any(name.startswith("__") and name.endswith("__") for name in dynamic)


@pytest.mark.parametrize("dynamic", [False, True])
def test_forbidden_attributes_agree_with_is_forbidden_attribute(dynamic: bool) -> None:
    names = forbidden_attributes(dynamic=dynamic)
    assert [n for n in sorted(names) if not is_forbidden_attribute(n, dynamic=dynamic)] == []
    others = {"append", "items", "keys", "name", "x", "_private", "system", "format"} - names
    assert [n for n in sorted(others) if is_forbidden_attribute(n, dynamic=dynamic)] == []


def test_module_forbidden_attributes() -> None:
    names = module_forbidden_attributes()
    assert names is Policy().module_forbidden_attributes
    assert {"system", "popen", "Popen", "fork", "execv", "spawnv", "posix_spawn", "kill"} <= names
    assert not names & forbidden_attributes(dynamic=True)
    # Refused on a module, fine on the user's own objects.
    assert is_forbidden_attribute("system", module="time") is True
    assert is_forbidden_attribute("system") is False


def test_the_one_source_size_limit() -> None:
    assert DEFAULT_MAX_SOURCE_BYTES == 200_000
    assert Policy().max_source_bytes == DEFAULT_MAX_SOURCE_BYTES
    assert Policy().to_dict()["max_source_bytes"] == 200_000
    assert "DEFAULT_MAX_SOURCE_BYTES" in astguard.__all__


def _source_of(size: int) -> str:
    """A valid script of exactly ``size`` bytes of UTF-8 (one statement and a long comment)."""
    head = "x = 1\n#"
    source = head + "é" * ((size - len(head) - 1) // 2)
    source += "a" * (size - len(source.encode()) - 1) + "\n"
    assert len(source.encode()) == size
    return source


def test_source_at_the_limit_is_accepted_and_one_byte_more_is_refused() -> None:
    at_limit = _source_of(DEFAULT_MAX_SOURCE_BYTES)
    assert check(at_limit).ok
    assert check(at_limit.encode()).ok
    over = _source_of(DEFAULT_MAX_SOURCE_BYTES + 1)
    for source in (over, over.encode()):
        result = check(source)
        assert result.rule_ids == ("AG902",)
        assert "200001 bytes, over the limit of 200000 bytes" in result.violations[0].message
