"""JSON Schema keywords whose stock ``jsonschema`` versions call Python's backtracking ``re``.

``pattern``, ``patternProperties``, ``additionalProperties`` (which matches property names
against ``patternProperties``) and ``unevaluatedProperties`` (which does the same while
collecting evaluated keys) are re-implemented here on :mod:`datavalidate._regex` (RE2). The
logic follows ``jsonschema`` 4.x (MIT licence, Copyright (c) 2013 Julian Berman) keyword for
keyword; only the regular expression engine differs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema import ValidationError
from referencing.jsonschema import lookup_recursive_ref

from datavalidate._regex import compile_pattern

__all__ = [
    "additional_properties",
    "find_formats",
    "find_patterns",
    "pattern",
    "pattern_properties",
    "subschemas",
    "unevaluated_properties_2019",
    "unevaluated_properties_2020",
]

_Validator = Any  # jsonschema's Validator protocol is too dynamic for useful static types
_Errors = Iterator[ValidationError]


def _search(pattern_text: str, text: str) -> bool:
    return compile_pattern(pattern_text).search(text)


def pattern(validator: _Validator, patrn: str, instance: Any, schema: Any) -> _Errors:
    """``pattern``: the string matches the ECMA-262 regex somewhere (RE2, linear time)."""
    if validator.is_type(instance, "string") and not _search(patrn, instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def pattern_properties(validator: _Validator, pp: Any, instance: Any, schema: Any) -> _Errors:
    """``patternProperties``: values of matching property names satisfy the subschema."""
    if not validator.is_type(instance, "object"):
        return
    for regex, subschema in pp.items():
        for key, value in instance.items():
            if _search(regex, key):
                yield from validator.descend(value, subschema, path=key, schema_path=regex)


def _find_additional_properties(instance: Mapping[str, Any], schema: Any) -> Iterator[str]:
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    for key in instance:
        if key in properties:
            continue
        if any(_search(regex, key) for regex in patterns):
            continue
        yield key


def _extras_msg(extras: list[Any]) -> tuple[str, str]:
    verb = "was" if len(extras) == 1 else "were"
    return ", ".join(repr(extra) for extra in extras), verb


def additional_properties(validator: _Validator, ap: Any, instance: Any, schema: Any) -> _Errors:
    """``additionalProperties``: properties not named or pattern-matched satisfy ``ap``."""
    if not validator.is_type(instance, "object"):
        return
    extras = set(_find_additional_properties(instance, schema))
    if validator.is_type(ap, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], ap, path=extra)
    elif not ap and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            error = "Additional properties are not allowed (%s %s unexpected)"
            yield ValidationError(error % _extras_msg(sorted(extras, key=str)))


def _is_valid(errors: _Errors) -> bool:
    return next(errors, None) is None


def _references(validator: _Validator, schema: Any, draft: int) -> Iterator[tuple[_Validator, Any]]:
    """The ``(validator, subschema)`` pairs the schema's reference keywords resolve to.

    ``$ref`` in both drafts; ``$dynamicRef`` in 2020-12; ``$recursiveRef`` in 2019-09.
    """
    for keyword in ("$ref", "$dynamicRef") if draft == 2020 else ("$ref",):
        ref = schema.get(keyword)
        if ref is not None:
            resolved = validator._resolver.lookup(ref)
            yield (
                validator.evolve(schema=resolved.contents, _resolver=resolved.resolver),
                (resolved.contents),
            )
    if draft == 2019 and "$recursiveRef" in schema:
        resolved = lookup_recursive_ref(validator._resolver)
        yield (
            validator.evolve(schema=resolved.contents, _resolver=resolved.resolver),
            (resolved.contents),
        )


def _evaluated_keys(validator: _Validator, instance: Any, schema: Any, draft: int) -> list[str]:
    """The property names of ``instance`` that ``schema`` evaluates successfully.

    ``draft`` is ``2019`` (draft 2019-09) or ``2020`` (draft 2020-12); the two differ only in
    their dynamic reference keyword.
    """
    if validator.is_type(schema, "boolean"):
        return []
    keys: list[str] = []
    for sub_validator, contents in _references(validator, schema, draft):
        keys += _evaluated_keys(sub_validator, instance, contents, draft)
    properties = schema.get("properties")
    if validator.is_type(properties, "object"):
        keys += properties.keys() & instance.keys()
    # jsonschema 4.x counts the *subschema's* keys here for additionalProperties in 2019-09,
    # which fails the suite case "unevaluatedProperties with adjacent non-bool
    # additionalProperties"; both drafts mean the keys the keyword successfully evaluated.
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        subschema = schema.get(keyword)
        if subschema is None:
            continue
        keys += (k for k, v in instance.items() if _is_valid(validator.descend(v, subschema)))
    if "patternProperties" in schema:
        for key in instance:
            for regex in schema["patternProperties"]:
                if _search(regex, key):
                    keys.append(key)
    for key, subschema in schema.get("dependentSchemas", {}).items():
        if key in instance:
            keys += _evaluated_keys(validator, instance, subschema, draft)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, []):
            if _is_valid(validator.descend(instance, subschema)):
                keys += _evaluated_keys(validator, instance, subschema, draft)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys += _evaluated_keys(validator, instance, schema["if"], draft)
            if "then" in schema:
                keys += _evaluated_keys(validator, instance, schema["then"], draft)
        elif "else" in schema:
            keys += _evaluated_keys(validator, instance, schema["else"], draft)
    return keys


def _unevaluated(validator: _Validator, up: Any, instance: Any, evaluated: list[str]) -> _Errors:
    unevaluated = [
        key
        for key in instance
        if key not in evaluated
        and not _is_valid(validator.descend(instance[key], up, path=key, schema_path=key))
    ]
    if unevaluated:
        if up is False:
            error = "Unevaluated properties are not allowed (%s %s unexpected)"
            yield ValidationError(error % _extras_msg(sorted(unevaluated, key=str)))
        else:
            error = (
                "Unevaluated properties are not valid under the given schema "
                "(%s %s unevaluated and invalid)"
            )
            yield ValidationError(error % _extras_msg(unevaluated))


def unevaluated_properties_2020(
    validator: _Validator, up: Any, instance: Any, schema: Any
) -> _Errors:
    """``unevaluatedProperties`` (draft 2020-12)."""
    if validator.is_type(instance, "object"):
        evaluated = _evaluated_keys(validator, instance, schema, 2020)
        yield from _unevaluated(validator, up, instance, evaluated)


def unevaluated_properties_2019(
    validator: _Validator, up: Any, instance: Any, schema: Any
) -> _Errors:
    """``unevaluatedProperties`` (draft 2019-09)."""
    if validator.is_type(instance, "object"):
        evaluated = _evaluated_keys(validator, instance, schema, 2019)
        yield from _unevaluated(validator, up, instance, evaluated)


_SCHEMA_VALUED = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_SCHEMA_MAPS = frozenset(
    {"$defs", "definitions", "properties", "patternProperties", "dependentSchemas", "dependencies"}
)


def find_patterns(schema: Any, *, limit_depth: int = 500) -> Iterator[tuple[str, str]]:
    """Yield ``(pattern, JSON Pointer)`` for each ``pattern`` and ``patternProperties`` key.

    Only schema positions are walked (a ``pattern`` member inside ``enum`` or ``const`` data
    is not a pattern).

    Args:
        schema: The schema.
        limit_depth: Deepest nesting walked; deeper subschemas are left to the lazy check.

    Yields:
        Each pattern with its location in the schema.
    """
    return _find(schema, "pattern", limit_depth, pattern_keys=True)


def find_formats(schema: Any, *, limit_depth: int = 500) -> Iterator[tuple[str, str]]:
    """Yield ``(format name, JSON Pointer)`` for each ``format`` keyword in schema positions."""
    return _find(schema, "format", limit_depth, pattern_keys=False)


def _find(
    schema: Any, wanted: str, limit_depth: int, *, pattern_keys: bool
) -> Iterator[tuple[str, str]]:
    for where, node in subschemas(schema, limit_depth=limit_depth):
        value = node.get(wanted)
        if isinstance(value, str):
            yield value, f"{where}/{wanted}"
        if pattern_keys and isinstance(node.get("patternProperties"), Mapping):
            for key in node["patternProperties"]:
                if isinstance(key, str):
                    yield key, f"{where}/patternProperties/{_escape(key)}"


def subschemas(schema: Any, *, limit_depth: int = 500) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Yield ``(JSON Pointer, subschema)`` for every object subschema in a schema position.

    The root comes first (pointer ``""``); ``enum``/``const`` data and unknown keywords are not
    walked. Subschemas deeper than ``limit_depth`` are left out.
    """
    stack: list[tuple[Any, str, int]] = [(schema, "", 0)]
    while stack:
        node, where, depth = stack.pop()
        if not isinstance(node, Mapping) or depth > limit_depth:
            continue
        yield where, node
        for keyword, child in node.items():
            escaped = _escape(str(keyword))
            if keyword in _SCHEMA_MAPS and isinstance(child, Mapping):
                for key, sub in child.items():
                    stack.append((sub, f"{where}/{escaped}/{_escape(str(key))}", depth + 1))
            elif keyword in _SCHEMA_LISTS and isinstance(child, list):
                stack.extend(
                    (sub, f"{where}/{escaped}/{i}", depth + 1) for i, sub in enumerate(child)
                )
            elif keyword in _SCHEMA_VALUED:
                stack.append((child, f"{where}/{escaped}", depth + 1))


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")
