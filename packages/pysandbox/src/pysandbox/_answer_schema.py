"""Checking a confined worker's answer against a caller-given JSON Schema, without a dependency.

pysandbox must not depend on a JSON Schema library (datavalidate depends on nothing of ours and
the direction is server -> libraries), so :class:`~pysandbox.ConfinedPool` checks answers with
this small subset of draft 2020-12: ``type``, ``enum``, ``const``, ``properties``,
``required``, ``additionalProperties``, ``items``, ``minimum``, ``maximum``, ``minLength``,
``maxLength``, ``minItems``, ``maxItems`` (and the annotations ``title``, ``description``,
``$schema``). A schema using any other keyword is refused when the pool is built: a keyword
that would be ignored silently is a check that is not made.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["KEYWORDS", "compile_schema"]

KEYWORDS = frozenset(
    {
        "type",
        "enum",
        "const",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "title",
        "description",
        "$schema",
    }
)
"""The keywords an answer schema may use."""

_TYPES = frozenset({"null", "boolean", "integer", "number", "string", "array", "object"})


def _is_type(value: object, name: str) -> bool:
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "string":
        return isinstance(value, str)
    if name == "array":
        return isinstance(value, list)
    return isinstance(value, dict)


def _same(a: object, b: object) -> bool:
    """JSON equality: ``True`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _audit(schema: object, where: str) -> None:
    """Refuse (``ValueError``) a schema that is not a dict of known keywords, recursively."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, Mapping):
        raise ValueError(f"answer_schema{where}: a schema is an object or a boolean")
    unknown = sorted(set(schema) - KEYWORDS)
    if unknown:
        raise ValueError(
            f"answer_schema{where}: keyword(s) {unknown} are not checked by pysandbox "
            f"(it checks {sorted(KEYWORDS)}); pass a validator callable instead"
        )
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else kinds
        if not isinstance(names, list) or not names or set(names) - _TYPES:
            raise ValueError(f"answer_schema{where}: 'type' names JSON types {sorted(_TYPES)}")
    for key, sub in (schema.get("properties") or {}).items():
        _audit(sub, f"{where}.properties.{key}")
    for key in ("additionalProperties", "items"):
        if key in schema:
            _audit(schema[key], f"{where}.{key}")


def _errors(value: Any, schema: object, where: str) -> str | None:
    """The first way ``value`` fails ``schema`` (a path and a rule), or ``None``."""
    if schema is True:
        return None
    if schema is False or not isinstance(schema, Mapping):
        return f"{where}: not allowed"
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is_type(value, n) for n in names):
            return f"{where}: not of type {kinds}"
    if "const" in schema and not _same(value, schema["const"]):
        return f"{where}: not the constant"
    if "enum" in schema and not any(_same(value, e) for e in schema["enum"]):
        return f"{where}: not one of the enum"
    if _is_type(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where}: below the minimum"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where}: above the maximum"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{where}: shorter than minLength"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{where}: longer than maxLength"
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return f"{where}: fewer items than minItems"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{where}: more items than maxItems"
        if "items" in schema:
            for index, item in enumerate(value):
                found = _errors(item, schema["items"], f"{where}[{index}]")
                if found:
                    return found
    if isinstance(value, dict):
        missing = [k for k in schema.get("required", ()) if k not in value]
        if missing:
            return f"{where}: missing {missing[:5]}"
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            sub = properties.get(key, extra)
            found = _errors(item, sub, f"{where}.{key}" if len(key) <= 64 else f"{where}.<key>")
            if found:
                return found
    return None


def compile_schema(schema: Mapping[str, Any] | bool) -> Callable[[Any], Any]:
    """A check for answers: returns the value when it matches ``schema``, else raises.

    Args:
        schema: A JSON Schema using only :data:`KEYWORDS` (or ``True`` / ``False``).

    Returns:
        ``check(value) -> value``, raising ``ValueError`` naming the first rule that fails.

    Raises:
        ValueError: The schema uses a keyword outside :data:`KEYWORDS` or a type that is no
            JSON type.
    """
    _audit(schema, "")

    def check(value: Any) -> Any:
        found = _errors(value, schema, "answer")
        if found is not None:
            raise ValueError(found)
        return value

    return check
