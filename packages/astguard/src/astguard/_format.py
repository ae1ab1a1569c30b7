"""Static checks of ``str.format`` templates: which attributes and items a field walks."""

from __future__ import annotations

import string
from collections.abc import Iterator

from astguard._policy import (
    FORBIDDEN_ATTRIBUTES,
    MODULE_NAME_ATTRIBUTES,
    SPAWN_ATTRIBUTES,
    Policy,
    _normalize,
    is_dunder,
)

__all__ = ["template_problems"]

_PARSER = string.Formatter()


def _split_field(field: str) -> Iterator[tuple[bool, str]]:
    """Yield ``(is_attribute, name_or_key)`` for each step after the first part of a field.

    Follows CPython's ``field_name_split``; raises ``ValueError`` where ``str.format`` would.
    """
    i = 0
    n = len(field)
    while i < n and field[i] not in ".[":
        i += 1
    while i < n:
        c = field[i]
        i += 1
        if c == ".":
            start = i
            while i < n and field[i] not in ".[":
                i += 1
            if i == start:
                raise ValueError("Empty attribute in format string")
            yield True, field[start:i]
        elif c == "[":
            end = field.find("]", i)
            if end < 0:
                raise ValueError("Missing ']' in format string")
            yield False, field[i:end]
            i = end + 1
            if i < n and field[i] not in ".[":
                raise ValueError("Only '.' or '[' may follow ']' in format field specifier")
        else:  # pragma: no cover - the loop above only stops on '.' or '['
            raise ValueError("bad field")


def _attribute_refused(name: str) -> bool:
    # Stricter than attribute syntax: a template may read no dunder at all (`{0.__class__}`).
    name = _normalize(name)
    return (
        name.startswith("_")
        or name in FORBIDDEN_ATTRIBUTES
        or name in SPAWN_ATTRIBUTES
        or name in MODULE_NAME_ATTRIBUTES
    )


def _key_refused(key: str) -> bool:
    key = _normalize(key)
    return is_dunder(key) or key in FORBIDDEN_ATTRIBUTES


def template_problems(template: str, policy: Policy, *, _depth: int = 0) -> list[tuple[str, str]]:
    """Return the problems of one ``str.format`` template.

    Args:
        template: The template text (the literal the code formats with).
        policy: The policy (reserved for policy-dependent template rules).

    Returns:
        A list of ``(rule_id, message)`` pairs, empty when the template is safe. ``AG401``
        for a field that walks a refused or private attribute or a refused item key,
        ``AG404`` for a template that does not parse. Templates are stricter than attribute
        syntax: no dunder or private attribute and no dunder item key at all, since a template
        is data that may come from anywhere and is walked in C.
    """
    problems: list[tuple[str, str]] = []
    try:
        parsed = list(_PARSER.parse(template))
    except ValueError as exc:
        return [("AG404", f"format template does not parse ({exc}); fix the template")]
    for _literal, field, spec, _conversion in parsed:
        if field:
            try:
                steps = list(_split_field(field))
            except ValueError as exc:
                problems.append(
                    ("AG404", f"format field {field!r} does not parse ({exc}); fix the template")
                )
                continue
            for is_attr, name in steps:
                if is_attr and _attribute_refused(name):
                    problems.append(
                        (
                            "AG401",
                            f"format field {field!r} reads the attribute {name!r}; format "
                            "plain values and compute attributes in code (f-strings work)",
                        )
                    )
                elif not is_attr and _key_refused(name):
                    problems.append(
                        (
                            "AG401",
                            f"format field {field!r} looks up the key {name!r}; format plain "
                            "values instead",
                        )
                    )
        if spec and "{" in spec and _depth < 4:
            problems.extend(template_problems(spec, policy, _depth=_depth + 1))
        elif spec and "{" in spec:
            problems.append(("AG404", "format template nests too deeply; simplify it"))
    return problems
