"""The child's check of a message against its schema (standard library only, no ``typing``).

The schemas are derived on the host from the declarations of :mod:`pysandbox._wire` and shipped
with the child's code (:mod:`pysandbox._bootstrap`); this module only walks them. Executed in the
child's namespace by the bootstrap, imported by the host and the tests.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["WireError", "check_message"]

_TYPES: dict[str, type] = {
    "int": int,
    "str": str,
    "bool": bool,
    "float": float,
    "bytes": bytes,
    "None": type(None),
}


class WireError(ValueError):
    """A message does not match its declaration (the text names the key)."""


def check_message(
    schemas: dict[str, tuple[tuple[Any, ...], str]], name: str, message: object
) -> None:
    """Check ``message`` against the schema of the message ``name``; raise if it differs.

    Args:
        schemas: :func:`pysandbox._wire.schemas` (as shipped to the child).
        name: The message's name in :data:`pysandbox._wire.MESSAGES` (``"ChildConfig"``).
        message: What was received.

    Raises:
        WireError: ``"<what>: unknown key 'x'"``, ``"<what>: missing key 'y'"``, ``"<what>: key
            'z': expected int, got str"`` (nested keys dotted, items indexed), or no schema of
            that name was shipped (fail closed).
    """
    if name not in schemas:
        raise WireError(f"no schema for the message {name!r}")
    node, what = schemas[name]
    problem = _problem(node, message, "")
    if problem is not None:
        raise WireError(f"{what}: {problem}")


def _got(value: object) -> str:
    return "None" if value is None else type(value).__name__


_TYPES["code"] = type(_got.__code__)  # types.CodeType, without importing types


def _problem(node: tuple[Any, ...], value: object, path: str) -> str | None:
    """What is wrong with ``value`` at ``path`` (``None``: nothing)."""
    kind = node[0]
    if kind == "any":
        return None
    if kind == "is":
        if type(value) is _TYPES[node[2]]:
            return None
    elif kind == "td":
        if type(value) is dict:
            return _record(node, value, path)
    elif kind in {"list", "tuplev"}:
        if type(value) is (list if kind == "list" else tuple):
            item_node = node[2]
            if item_node[0] == "is":  # the common case, long lists of names: one loop
                wanted = _TYPES[item_node[2]]
                for index, item in enumerate(value):
                    if type(item) is not wanted:
                        where = f"{path}[{index}]"
                        return f"key {where!r}: expected {item_node[1]}, got {_got(item)}"
                return None
            if item_node[0] == "tuple" and all(sub[0] == "is" for sub in item_node[2]):
                # (path, rights) pairs, rlimit triples: thousands of Landlock rules, one loop
                wanted_types = tuple(_TYPES[sub[2]] for sub in item_node[2])
                if all(
                    type(item) is tuple and tuple(map(type, item)) == wanted_types for item in value
                ):
                    return None
            for index, item in enumerate(value):
                problem = _problem(item_node, item, f"{path}[{index}]")
                if problem is not None:
                    return problem
            return None
    elif kind == "tuple":
        if type(value) is tuple and len(value) == len(node[2]):
            for index, (sub, item) in enumerate(zip(node[2], value, strict=True)):
                problem = _problem(sub, item, f"{path}[{index}]")
                if problem is not None:
                    return problem
            return None
    elif kind == "dict":
        if type(value) is dict:
            key_node, value_node = node[2], node[3]
            if key_node[0] == "is" and value_node[0] == "is":  # name -> number tables
                wanted_key, wanted_value = _TYPES[key_node[2]], _TYPES[value_node[2]]
                for key, item in value.items():
                    if type(key) is not wanted_key or type(item) is not wanted_value:
                        break
                else:
                    return None
            for key, item in value.items():
                problem = _problem(key_node, key, f"{path}[{key!r}]")
                if problem is None:
                    problem = _problem(value_node, item, f"{path}[{key!r}]")
                if problem is not None:
                    return problem
            return None
    elif kind == "lit":
        for allowed in node[2]:
            if type(value) is type(allowed) and value == allowed:
                return None
    elif kind == "union":
        if any(_problem(sub, value, path) is None for sub in node[2]):
            return None
    else:
        return f"key {path!r}: unknown schema kind {kind!r}"
    where = f"key {path!r}: " if path else ""
    return f"{where}expected {node[1]}, got {_got(value)}"


def _record(node: tuple[Any, ...], value: dict[Any, Any], path: str) -> str | None:
    """Exact key set, then each value (a TypedDict node)."""
    fields: dict[str, tuple[Any, ...]] = node[3]
    prefix = f"{path}." if path else ""
    for key in value:
        if type(key) is not str or key not in fields:
            return f"unknown key {prefix + key!r}" if type(key) is str else f"unknown key {key!r}"
    for key in node[2]:
        if key not in value:
            return f"missing key {prefix + key!r}"
    for key, item in value.items():
        problem = _problem(fields[key], item, prefix + key)
        if problem is not None:
            return problem
    return None
