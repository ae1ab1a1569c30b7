"""JSON Schema validation (drafts 4, 6, 7, 2019-09, 2020-12) with a registry and a cache."""

from __future__ import annotations

import hashlib
import heapq
import importlib.resources
import itertools
import json
import marshal
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

import jsonschema
import jsonschema.exceptions
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema import validators as _validators

from datavalidate import _fast, _keywords, _numbers
from datavalidate._formats import FORMATS
from datavalidate._regex import compile_pattern
from datavalidate._report_limits import DEFAULT_MAX_ERRORS, check_max_errors
from datavalidate.exceptions import (
    SchemaError,
    UnknownSchemaError,
    UnresolvableReferenceError,
    UnsupportedPatternError,
)

__all__ = [
    "DEFAULT_DRAFT",
    "DRAFTS",
    "CompiledSchema",
    "JsonError",
    "JsonReport",
    "SchemaInfo",
    "SchemaRegistry",
    "asserted_formats",
    "compile",
    "default_registry",
    "is_valid",
    "validate_json",
]

#: The draft used when a schema has no ``$schema`` and no ``draft`` is given.
DEFAULT_DRAFT = "draft2020-12"

_BASE_CLASSES: dict[str, Any] = {
    "draft4": jsonschema.Draft4Validator,
    "draft6": jsonschema.Draft6Validator,
    "draft7": jsonschema.Draft7Validator,
    "draft2019-09": jsonschema.Draft201909Validator,
    "draft2020-12": jsonschema.Draft202012Validator,
}
#: Supported drafts, oldest first.
DRAFTS: tuple[str, ...] = tuple(_BASE_CLASSES)

_SPECIFICATIONS: dict[str, referencing.Specification[Any]] = {
    "draft4": referencing.jsonschema.DRAFT4,
    "draft6": referencing.jsonschema.DRAFT6,
    "draft7": referencing.jsonschema.DRAFT7,
    "draft2019-09": referencing.jsonschema.DRAFT201909,
    "draft2020-12": referencing.jsonschema.DRAFT202012,
}
_VALUE_CHARS = 80
_MESSAGE_CHARS = 400
_WEAK = frozenset({"anyOf", "oneOf"})
_STRONG: frozenset[str] = frozenset()
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_BUILTIN_NAMES = ("config", "dataset", "user")


def _strip_uri(uri: str) -> str:
    uri = uri.strip().rstrip("#")
    for scheme in ("https://", "http://"):
        if uri.startswith(scheme):
            return uri[len(scheme) :]
    return uri


_DRAFT_BY_URI: dict[str, str] = {}
_DRAFT_ALIASES: dict[str, str] = {}
for _name, _cls in _BASE_CLASSES.items():
    _meta_id = _cls.META_SCHEMA.get("$id", _cls.META_SCHEMA.get("id", ""))
    _DRAFT_BY_URI[_strip_uri(_meta_id)] = _name
    _short = _name.removeprefix("draft")
    _DRAFT_ALIASES.update({_name: _name, _short: _name, _meta_id: _name})
    if len(_short) == 1:
        _DRAFT_ALIASES[f"draft-0{_short}"] = _name
        _DRAFT_ALIASES[f"0{_short}"] = _name


def _normalize_draft(draft: str) -> str:
    if not isinstance(draft, str):
        raise TypeError(f"draft must be a string such as '2020-12', not {type(draft).__name__}")
    name = _DRAFT_ALIASES.get(draft.strip()) or _DRAFT_BY_URI.get(_strip_uri(draft))
    if name is None:
        raise ValueError(f"unknown draft {draft!r}; supported: {', '.join(DRAFTS)}")
    return name


def _applies_to_strings(check: Callable[[str], bool]) -> Callable[[object], bool]:
    def checker(instance: object) -> bool:
        return not isinstance(instance, str) or check(instance)

    return checker


def _format_checker() -> jsonschema.FormatChecker:
    """Our strict checkers (:data:`datavalidate._formats.FORMATS`), for every draft."""
    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = {name: (_applies_to_strings(check), ()) for name, check in FORMATS.items()}
    return checker


_FORMAT_CHECKER = _format_checker()
_FORMAT_CHECKERS = dict.fromkeys(DRAFTS, _FORMAT_CHECKER)


def _unknown_format(name: object, location: str = "") -> SchemaError:
    return SchemaError(
        f"unknown format {name!r} cannot be asserted; asserted formats: "
        f"{', '.join(sorted(FORMATS))}. Pass check_formats=False to treat every format as an "
        "annotation",
        location=location,
        keyword="format",
    )


def _format_keyword(validator: Any, name: Any, instance: Any, schema: Any) -> Any:
    """``format``: asserted with our strict checkers; an unknown name is refused, not skipped."""
    if validator.format_checker is None:
        return
    check = FORMATS.get(name) if isinstance(name, str) else None
    if check is None:
        raise _unknown_format(name)
    if isinstance(instance, str) and not check(instance):
        yield jsonschema.ValidationError(f"{_shorten(instance)} is not a {name!r}")


def asserted_formats(draft: str = DEFAULT_DRAFT) -> tuple[str, ...]:
    """Return the ``format`` names checked (asserted) for a draft, sorted.

    The same strict checkers apply in every draft and to CSV string columns; with
    ``check_formats=True`` a schema naming any other format is refused with
    :class:`~datavalidate.SchemaError` (never silently unchecked).

    Args:
        draft: A draft name (``"2020-12"``, ``"draft7"``, a metaschema URI...).

    Returns:
        The asserted format names.

    Raises:
        ValueError: ``draft`` is not one of the supported drafts.
    """
    return tuple(sorted(_FORMAT_CHECKERS[_normalize_draft(draft)].checkers))


_EXACT_KEYWORDS: dict[str, Any] = {
    "minimum": _numbers.minimum,
    "maximum": _numbers.maximum,
    "exclusiveMinimum": _numbers.exclusive_minimum,
    "exclusiveMaximum": _numbers.exclusive_maximum,
    "multipleOf": _numbers.multiple_of,
    "enum": _numbers.enum,
    "const": _numbers.const,
    "uniqueItems": _numbers.unique_items,
}
_EXACT_KEYWORDS_DRAFT4: dict[str, Any] = {
    **{k: v for k, v in _EXACT_KEYWORDS.items() if not k.startswith("exclusive") and k != "const"},
    "minimum": _numbers.minimum_draft4,
    "maximum": _numbers.maximum_draft4,
}


def _make_class(draft: str, numbers: str) -> Any:
    base = _BASE_CLASSES[draft]
    overrides: dict[str, Any] = {
        "format": _format_keyword,
        "pattern": _keywords.pattern,
        "patternProperties": _keywords.pattern_properties,
        "additionalProperties": _keywords.additional_properties,
    }
    if draft == "draft2019-09":
        overrides["unevaluatedProperties"] = _keywords.unevaluated_properties_2019
    elif draft == "draft2020-12":
        overrides["unevaluatedProperties"] = _keywords.unevaluated_properties_2020
    type_checker = None
    if numbers == "exact":
        exact = _EXACT_KEYWORDS_DRAFT4 if draft == "draft4" else _EXACT_KEYWORDS
        overrides.update({k: v for k, v in exact.items() if k in base.VALIDATORS})
        integer = _numbers.is_integer_type_draft4 if draft == "draft4" else _numbers.is_integer_type
        type_checker = base.TYPE_CHECKER.redefine_many(
            {"number": _numbers.is_number_type, "integer": integer}
        )
    elif "multipleOf" in base.VALIDATORS:
        overrides["multipleOf"] = _numbers.multiple_of_ieee
    return cast("Any", _validators.extend)(base, overrides, type_checker=type_checker)


_SAFE_CLASSES = {
    (name, numbers): _make_class(name, numbers)
    for name in DRAFTS
    for numbers in _numbers.NUMBER_MODES
}


def _check_numbers(numbers: str) -> None:
    if numbers not in _numbers.NUMBER_MODES:
        raise ValueError(
            f"numbers must be one of {', '.join(_numbers.NUMBER_MODES)}, not {numbers!r}"
        )


@dataclass(frozen=True)
class JsonError:
    """One place where a JSON instance does not satisfy its schema.

    Attributes:
        instance_location: Where in the instance, as an RFC 6901 JSON Pointer (``""`` = root).
        schema_location: The failing keyword's place in the schema, as a JSON Pointer (through
            ``$ref`` it continues inside the referenced schema, as ``jsonschema`` reports it).
        keyword: The failing keyword (``"type"``, ``"required"``, ``"pattern"``...).
        message: What is wrong, for a person (at most 400 characters).
        value: The offending value rendered as JSON and shortened to 80 characters.
    """

    instance_location: str
    schema_location: str
    keyword: str
    message: str
    value: str

    def to_dict(self) -> dict[str, Any]:
        """Return the error as JSON-compatible data."""
        return {
            "instance_location": self.instance_location,
            "schema_location": self.schema_location,
            "keyword": self.keyword,
            "message": self.message,
            "value": self.value,
        }


@dataclass(frozen=True)
class JsonReport:
    """The outcome of :func:`validate_json`.

    Attributes:
        valid: Whether the instance satisfies the schema.
        errors: At most ``max_errors`` errors, most relevant first.
        error_count: How many errors there are in all (also those past ``max_errors``).
        draft: The draft used (``"draft2020-12"``...).
    """

    valid: bool
    errors: tuple[JsonError, ...]
    error_count: int
    draft: str

    @property
    def truncated(self) -> bool:
        """Whether more errors exist than :attr:`errors` holds."""
        return self.error_count > len(self.errors)

    def to_dict(self) -> dict[str, Any]:
        """Return the report as JSON-compatible data."""
        return {
            "valid": self.valid,
            "draft": self.draft,
            "error_count": self.error_count,
            "truncated": self.truncated,
            "errors": [error.to_dict() for error in self.errors],
        }


@dataclass(frozen=True)
class SchemaInfo:
    """What a registry knows about one registered schema.

    Attributes:
        name: The registered name.
        uri: The URI other schemas ``$ref`` it by (its ``$id``, or the ``uri`` given), if any.
        draft: The draft its checks and references follow.
        title: Its ``title``, if it has one.
        description: Its ``description``, if it has one.
        builtin: Whether it ships with ``datavalidate``.
    """

    name: str
    uri: str | None
    draft: str
    title: str | None
    description: str | None
    builtin: bool

    def to_dict(self) -> dict[str, Any]:
        """Return the information as JSON-compatible data."""
        return {
            "name": self.name,
            "uri": self.uri,
            "draft": self.draft,
            "title": self.title,
            "description": self.description,
            "builtin": self.builtin,
        }


@dataclass(frozen=True)
class _Entry:
    info: SchemaInfo
    schema: Any
    canonical: str
    digest: str


@dataclass(frozen=True)
class _Compiled:
    validator: Any
    draft: str
    numbers: str = "exact"
    fast: _fast.FastValidator | None = None


def _pointer(parts: Iterable[object]) -> str:
    return _utf8("".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts))


def _utf8(text: str) -> str:
    """Escape lone surrogates (from the data) so the text encodes as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _canonical(schema: object) -> tuple[str, Any]:
    """Return the canonical JSON text of ``schema`` and a private deep copy parsed from it."""
    try:
        text = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except RecursionError:
        raise SchemaError("the schema is nested too deeply") from None
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"the schema is not JSON data: {exc}") from None
    try:
        copy = json.loads(text)
    except RecursionError:
        raise SchemaError("the schema is nested too deeply") from None
    return text, copy


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20).hexdigest()


def _refuse_retrieval(uri: str) -> referencing.Resource[Any]:
    raise UnresolvableReferenceError(uri, remote=True)


def _draft_of(schema: Any, draft: str | None, known: Mapping[str, Any]) -> str:
    if draft is not None:
        return _normalize_draft(draft)
    if not isinstance(schema, Mapping) or "$schema" not in schema:
        return DEFAULT_DRAFT
    uri = schema["$schema"]
    if not isinstance(uri, str):
        raise SchemaError("$schema must be a string (a metaschema URI)", location="/$schema")
    found = _DRAFT_BY_URI.get(_strip_uri(uri))
    if found is not None:
        return found
    meta = known.get(uri.rstrip("#")) or known.get(uri)
    if isinstance(meta, Mapping) and isinstance(meta.get("$schema"), str):
        found = _DRAFT_BY_URI.get(_strip_uri(meta["$schema"]))
        if found is not None:
            return found
    raise SchemaError(
        f"unknown $schema {uri!r}; supported drafts: {', '.join(DRAFTS)} "
        "(or a registered metaschema based on one of them)",
        location="/$schema",
        keyword="$schema",
    )


def _check_schema(schema: Any, draft: str, *, check_formats: bool = False) -> None:
    if not isinstance(schema, (Mapping, bool)):
        raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}")
    if isinstance(schema, bool) and draft == "draft4":
        raise SchemaError("boolean schemas need draft 6 or later")
    for regex, where in _keywords.find_patterns(schema):
        try:
            compile_pattern(regex)
        except UnsupportedPatternError as exc:
            raise UnsupportedPatternError(regex, exc.reason, location=where) from None
    if check_formats:
        for name, where in _keywords.find_formats(schema):
            if name not in FORMATS:
                raise _unknown_format(name, where)
    cls = _BASE_CLASSES[draft]
    meta_validator = cls(cls.META_SCHEMA, format_checker=_FORMAT_CHECKERS[draft])
    try:
        error = jsonschema.exceptions.best_match(meta_validator.iter_errors(schema))
    except RecursionError:
        raise SchemaError("the schema is nested too deeply") from None
    if error is not None:
        raise SchemaError(
            _cap(error.message, _MESSAGE_CHARS),
            location=_pointer(error.absolute_path),
            keyword=str(error.validator),
        )


def _is_count(value: object) -> bool:
    """Whether ``value`` is an ``int`` (``bool`` excluded); callers may pass anything."""
    return isinstance(value, int) and not isinstance(value, bool)


def _cap(text: str, limit: int) -> str:
    return _utf8(text if len(text) <= limit else text[: limit - 1] + "\u2026")


def _shorten(value: object, limit: int = _VALUE_CHARS) -> str:
    parts: list[str] = []
    budget = [limit + 1]

    def put(text: str) -> bool:
        parts.append(text)
        budget[0] -= len(text)
        return budget[0] > 0

    def walk(item: object) -> bool:
        if isinstance(item, Mapping):
            if not put("{"):
                return False
            for i, (key, sub) in enumerate(item.items()):
                if (i and not put(", ")) or not put(json.dumps(str(key)[:limit]) + ": "):
                    return False
                if not walk(sub):
                    return False
            return put("}")
        if isinstance(item, (list, tuple)):
            if not put("["):
                return False
            for i, sub in enumerate(item):
                if (i and not put(", ")) or not walk(sub):
                    return False
            return put("]")
        if isinstance(item, str):
            return put(json.dumps(item[: limit + 1], ensure_ascii=False))
        if isinstance(item, bool) or item is None:
            return put(json.dumps(item))
        if isinstance(item, int):
            if item.bit_length() > 256:
                return put(f"<integer of {item.bit_length()} bits>")
            return put(str(item))
        if isinstance(item, float):
            return put(repr(item))
        if isinstance(item, Decimal):
            return put(str(item) if len(item.as_tuple().digits) <= 40 else f"{item:.6e}")
        return put(f"<{type(item).__name__}>")

    walk(value)
    return _cap("".join(parts), limit)


def _relevance(error: jsonschema.ValidationError) -> tuple[bool, bool, int]:
    keyword = error.validator
    return (keyword in _WEAK, keyword not in _STRONG, len(error.path))


def _to_error(error: jsonschema.ValidationError) -> JsonError:
    return JsonError(
        instance_location=_pointer(error.absolute_path),
        schema_location=_pointer(error.absolute_schema_path),
        keyword=str(error.validator),
        message=_cap(error.message, _MESSAGE_CHARS),
        value=_shorten(error.instance),
    )


class SchemaRegistry:
    """Named JSON Schemas, the ``$ref`` targets between them, and a cache of validators.

    A new registry holds the built-in schemas ``config``, ``user`` and ``dataset`` (shipped as
    JSON files inside the package, each with ``$id``, ``title``, ``description`` and a valid
    ``examples`` entry) unless ``builtins=False``. ``$ref`` works by URI between registered
    schemas (each is reachable by its ``$id`` or the ``uri`` it was registered under);
    anything else, ``http``, ``https`` and ``file`` included, is never fetched and raises
    :class:`~datavalidate.UnresolvableReferenceError` when a validation reaches it.

    Compiled validators are kept in a bounded LRU cache keyed by the schema's canonical JSON
    text (plus draft and format setting), so repeated validations neither re-check nor
    re-compile a schema. Registering a schema clears the cache. Instances are thread-safe.

    Args:
        builtins: Register the built-in schemas.
        cache_size: Most compiled validators kept (least recently used dropped first).

    Raises:
        ValueError: ``cache_size`` is smaller than 1.
    """

    def __init__(self, *, builtins: bool = True, cache_size: int = 128) -> None:
        if not _is_count(cache_size) or cache_size < 1:
            raise ValueError(f"cache_size must be a positive integer, not {cache_size!r}")
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self._by_uri: dict[str, Any] = {}
        self._registry: referencing.Registry[Any] = referencing.Registry(
            retrieve=_refuse_retrieval  # type: ignore[call-arg]
        )
        self._cache: OrderedDict[tuple[str, str, bool, str], _Compiled] = OrderedDict()
        self._cache_size = cache_size
        if builtins:
            folder = importlib.resources.files("datavalidate") / "schemas"
            for name in _BUILTIN_NAMES:
                text = (folder / f"{name}.json").read_text(encoding="utf-8")
                self._register(name, json.loads(text), uri=None, draft=None, builtin=True)

    def register(
        self,
        name: str,
        schema: Mapping[str, Any] | bool,
        *,
        uri: str | None = None,
        draft: str | None = None,
    ) -> SchemaInfo:
        """Check a schema against its metaschema and register it under ``name``.

        The registry keeps its own copy; later changes to ``schema`` have no effect.

        Args:
            name: 1-128 characters from ``A-Z a-z 0-9 _ . -``, not yet registered.
            schema: The schema (an object, or a boolean for drafts 6 and later).
            uri: A URI under which ``$ref`` reaches it, in addition to its ``$id``
                (for example the URL another schema refers to it by). Nothing is fetched.
            draft: The draft when the schema has no ``$schema`` (default 2020-12).

        Returns:
            What the registry now knows about the schema.

        Raises:
            SchemaError: The schema is invalid (the error names where) or uses a refused pattern.
            ValueError: The name is invalid or taken, or the URI is registered already.
            TypeError: ``name`` or ``uri`` is not a string.
        """
        return self._register(name, schema, uri=uri, draft=draft, builtin=False)

    def _register(
        self, name: str, schema: object, *, uri: str | None, draft: str | None, builtin: bool
    ) -> SchemaInfo:
        if not isinstance(name, str):
            raise TypeError(f"a schema name must be a string, not {type(name).__name__}")
        if not 1 <= len(name) <= 128 or not set(name) <= _NAME_CHARS:
            raise ValueError(f"invalid schema name {name!r}: use 1-128 of A-Z a-z 0-9 _ . -")
        if uri is not None and not isinstance(uri, str):
            raise TypeError(f"uri must be a string, not {type(uri).__name__}")
        canonical, copy = _canonical(schema)
        with self._lock:
            if name in self._entries:
                raise ValueError(f"a schema named {name!r} is registered already")
            used = _draft_of(copy, draft, self._by_uri)
            _check_schema(copy, used)
            resource = referencing.Resource.from_contents(
                copy, default_specification=_SPECIFICATIONS[used]
            )
            schema_id = resource.id() if isinstance(copy, Mapping) else None
            uris = [u.rstrip("#") for u in (uri, schema_id) if u]
            for each in uris:
                if each in self._by_uri and self._by_uri[each] is not copy:
                    raise ValueError(f"the URI {each!r} is registered already")
            registry = self._registry.with_resources((each, resource) for each in uris)
            self._registry = registry.crawl()
            for each in uris:
                self._by_uri[each] = copy
            get = copy.get if isinstance(copy, Mapping) else (lambda _key: None)
            info = SchemaInfo(
                name=name,
                uri=uris[0] if uris else None,
                draft=used,
                title=get("title") if isinstance(get("title"), str) else None,
                description=get("description") if isinstance(get("description"), str) else None,
                builtin=builtin,
            )
            self._entries[name] = _Entry(info, copy, canonical, _digest(canonical))
            self._cache.clear()
            return info

    def names(self) -> tuple[str, ...]:
        """Return the registered names, sorted."""
        with self._lock:
            return tuple(sorted(self._entries))

    def list(self) -> list[SchemaInfo]:
        """Return what is known about each registered schema, sorted by name."""
        with self._lock:
            return [self._entries[name].info for name in sorted(self._entries)]

    def get(self, name: str) -> Any:
        """Return a copy of the schema registered under ``name``.

        Args:
            name: The registered name.

        Returns:
            A deep copy (changing it does not change the registry).

        Raises:
            UnknownSchemaError: Nothing is registered under ``name``; lists the known names.
        """
        with self._lock:
            entry = self._entries.get(name)
            if entry is None:
                raise UnknownSchemaError(name, self._entries)
            return json.loads(entry.canonical)

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._entries

    def _compiled(
        self,
        schema: Mapping[str, Any] | bool | str,
        draft: str | None,
        check_formats: bool,
        numbers: str = "exact",
    ) -> _Compiled:
        copy: Any = None
        if isinstance(schema, str):
            with self._lock:
                entry = self._entries.get(schema)
                if entry is None:
                    raise UnknownSchemaError(schema, self._entries)
            key = ("name:" + entry.digest, draft or entry.info.draft, check_formats, numbers)
            used_draft: str | None = draft or entry.info.draft
            copy = entry.schema
        elif isinstance(schema, (Mapping, bool)):
            try:
                # Type-exact (True is not 1) and C-fast; no code runs for foreign objects,
                # which marshal refuses (they then fail in _canonical with a clear error).
                raw = marshal.dumps(cast("Any", schema), 2)
            except ValueError:
                canonical, copy = _canonical(schema)
                raw = canonical.encode("utf-8", "surrogatepass")
            used_draft = draft
            key = (
                hashlib.blake2b(raw, digest_size=20).hexdigest(),
                draft or "",
                check_formats,
                numbers,
            )
        else:
            raise TypeError(
                f"schema must be a registered name or a schema object, not {type(schema).__name__}"
            )
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
            registry = self._registry
            known = dict(self._by_uri)
        if copy is None:
            _, copy = _canonical(schema)
        name = _draft_of(copy, used_draft, known)
        _check_schema(copy, name, check_formats=check_formats)
        cls = _SAFE_CLASSES[name, numbers]
        checker = _FORMAT_CHECKERS[name] if check_formats else None
        validator = cls(copy, registry=registry, format_checker=checker)
        fast = _fast.build(copy, name, check_formats=check_formats)
        compiled = _Compiled(validator, name, numbers, fast)
        with self._lock:
            self._cache[key] = compiled
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return compiled

    def cache_info(self) -> tuple[int, int]:
        """Return ``(entries, capacity)`` of the compiled-validator cache."""
        with self._lock:
            return len(self._cache), self._cache_size


_default: SchemaRegistry | None = None
_default_lock = threading.Lock()


def default_registry() -> SchemaRegistry:
    """Return the process-wide registry used when no ``registry`` is passed (built-ins only)."""
    global _default  # noqa: PLW0603 - a lazily created process-wide singleton
    with _default_lock:
        if _default is None:
            _default = SchemaRegistry()
        return _default


def _iter_errors(compiled: _Compiled, instance: object) -> Iterator[jsonschema.ValidationError]:
    if compiled.numbers == "ieee":
        instance = _numbers.to_floats(instance)
    given = 0
    try:
        for error in _raw_errors(compiled, instance):
            given += 1
            yield error
    except ValueError as exc:
        if not _numbers.is_digit_limit_error(exc):
            raise
        # A message printed an int of more than 4,300 digits (Python 3.11+ refuses): run again
        # on a copy whose huge ints print their size, skipping the errors already given.
        again = _raw_errors(compiled, _numbers.printable_ints(instance))
        yield from itertools.islice(again, given, None)


def _raw_errors(compiled: _Compiled, instance: object) -> Iterator[jsonschema.ValidationError]:
    try:
        yield from compiled.validator.iter_errors(instance)
    except referencing.exceptions.Unresolvable as exc:
        ref = str(getattr(exc, "ref", "") or exc)
        cause: BaseException | None = exc
        while cause is not None:
            if isinstance(cause, UnresolvableReferenceError):
                raise UnresolvableReferenceError(cause.ref, remote=True) from None
            cause = cause.__cause__ or cause.__context__
        raise UnresolvableReferenceError(ref, remote=False, detail=str(exc)) from None
    except UnsupportedPatternError:
        raise
    except RecursionError:
        raise ValueError("the instance (or the schema's recursion) is nested too deeply") from None


def validate_json(
    instance: object,
    schema: Mapping[str, Any] | bool | str,
    *,
    draft: str | None = None,
    check_formats: bool = True,
    max_errors: int = DEFAULT_MAX_ERRORS,
    registry: SchemaRegistry | None = None,
    numbers: str = "exact",
) -> JsonReport:
    """Validate a JSON instance against a JSON Schema and report every error.

    Args:
        instance: JSON data (``dict``, ``list``, ``str``, ``int``, ``float``, ``bool``, ``None``).
        schema: A registered schema name (``"config"``, ``"user"``, ``"dataset"`` or one added
            with :meth:`SchemaRegistry.register`) or a schema object.
        draft: Force a draft (``"4"``, ``"6"``, ``"7"``, ``"2019-09"``, ``"2020-12"``, with or
            without a ``draft`` prefix, or a metaschema URI). By default the schema's
            ``$schema`` decides, and 2020-12 applies when there is none.
        check_formats: Assert ``format`` (see :func:`asserted_formats`); when false,
            ``format`` is an annotation only (the specifications' default).
        max_errors: Most errors kept in the report, from 0 to
            :data:`~datavalidate.MAX_ERRORS_LIMIT` (1,000; default 100); ``error_count``
            still counts all.
        registry: Where names and ``$ref`` URIs are looked up; the default registry otherwise.
        numbers: ``"exact"`` (default): every number means the decimal it spells (a ``float``
            its shortest ``repr``, a ``Decimal`` from :func:`parse_json` its value); bounds,
            ``multipleOf``, ``enum``, ``const`` and ``uniqueItems`` are decided in exact
            rational arithmetic, so ``19.99`` is a multiple of ``0.01``. ``"ieee"``: binary64
            floating point as ``jsonschema`` does it (``Decimal`` values become ``float``).

    Returns:
        The report: validity, errors most relevant first (anyOf/oneOf summaries after direct
        failures, shallower instance locations first, then document order), the total error
        count and the draft used.

    Raises:
        SchemaError: The schema is invalid (raised before the instance is looked at), uses a
            pattern RE2 refuses (:class:`~datavalidate.UnsupportedPatternError`), or has a
            ``$ref`` that is not registered (:class:`~datavalidate.UnresolvableReferenceError`).
        UnknownSchemaError: ``schema`` is a name that is not registered.
        ValueError: ``draft`` or ``numbers`` is unknown, ``max_errors`` is outside 0 to 1,000,
            or the instance is nested too deeply to walk.
        TypeError: ``schema`` is neither a name nor a schema object.
    """
    check_max_errors(max_errors)
    _check_numbers(numbers)
    compiled = (registry or default_registry())._compiled(schema, draft, check_formats, numbers)
    return _report(compiled, instance, max_errors)


def _report(compiled: _Compiled, instance: object, max_errors: int) -> JsonReport:
    if compiled.fast is not None and compiled.fast.accepts(instance):
        return JsonReport(valid=True, errors=(), error_count=0, draft=compiled.draft)
    errors = _iter_errors(compiled, instance)
    first = next(errors, None)
    if first is None:
        return JsonReport(valid=True, errors=(), error_count=0, draft=compiled.draft)
    count = 1

    def counted() -> Iterator[jsonschema.ValidationError]:
        nonlocal count
        yield first
        for error in errors:
            count += 1
            yield error

    kept = heapq.nsmallest(max_errors, counted(), key=_relevance) if max_errors else []
    for _ in errors:  # max_errors == 0: count the rest
        count += 1
    return JsonReport(
        valid=False,
        errors=tuple(_to_error(error) for error in kept),
        error_count=count,
        draft=compiled.draft,
    )


def _decide(compiled: _Compiled, instance: object) -> bool:
    if compiled.fast is not None and compiled.fast.accepts(instance):
        return True
    return next(_iter_errors(compiled, instance), None) is None


def is_valid(
    instance: object,
    schema: Mapping[str, Any] | bool | str,
    *,
    draft: str | None = None,
    check_formats: bool = True,
    registry: SchemaRegistry | None = None,
    numbers: str = "exact",
) -> bool:
    """Return whether ``instance`` satisfies ``schema``; stops at the first error.

    Takes the same arguments and raises the same exceptions as :func:`validate_json`.
    """
    _check_numbers(numbers)
    compiled = (registry or default_registry())._compiled(schema, draft, check_formats, numbers)
    return _decide(compiled, instance)


class CompiledSchema:
    """A schema checked and compiled once, for validating many instances.

    Made by :func:`compile`. Instances are thread-safe and hold no reference to the caller's
    schema object. When the schema is in the fast subset (:attr:`fast`), valid instances are
    decided by ``jsonschema-rs`` (see ``datavalidate._fast``); invalid ones always get our own
    full report.

    Attributes:
        draft: The draft used (``"draft2020-12"``...).
        fast: Whether the fast path is used for this schema.
    """

    __slots__ = ("_compiled", "_fast", "draft", "fast")

    def __init__(self, compiled: _Compiled) -> None:
        self._compiled = compiled
        self._fast = compiled.fast
        self.draft = compiled.draft
        self.fast = compiled.fast is not None

    def is_valid(self, instance: object) -> bool:
        """Return whether ``instance`` satisfies the schema (stops at the first error).

        Raises:
            UnresolvableReferenceError: Validation reached a ``$ref`` that is not registered.
            SchemaError: Validation reached an unknown format while asserting formats.
            ValueError: The instance is nested too deeply to walk.
        """
        fast = self._fast
        if fast is not None and fast.accepts(instance):
            return True
        return next(_iter_errors(self._compiled, instance), None) is None

    def validate(self, instance: object, *, max_errors: int = DEFAULT_MAX_ERRORS) -> JsonReport:
        """Validate ``instance`` and report every error, as :func:`validate_json` does.

        Raises:
            ValueError: ``max_errors`` is outside 0 to 1,000; or as :meth:`is_valid`.
        """
        check_max_errors(max_errors)
        return _report(self._compiled, instance, max_errors)

    def __repr__(self) -> str:
        return f"<CompiledSchema {self.draft} fast={self.fast}>"


def compile(
    schema: Mapping[str, Any] | bool | str,
    *,
    draft: str | None = None,
    check_formats: bool = True,
    numbers: str = "exact",
    registry: SchemaRegistry | None = None,
) -> CompiledSchema:
    """Check and compile a schema once; validate many instances with the result.

    Takes the arguments of :func:`validate_json` (except the instance and ``max_errors``); the
    compiled validator is also kept in the registry's cache, so named schemas and the server
    reuse it.

    Returns:
        The compiled schema (:meth:`CompiledSchema.is_valid`, :meth:`CompiledSchema.validate`).

    Raises:
        SchemaError: The schema is invalid, uses a refused pattern, or (asserting formats)
            names an unknown format.
        UnknownSchemaError: ``schema`` is a name that is not registered.
        ValueError: ``draft`` or ``numbers`` is unknown.
        TypeError: ``schema`` is neither a name nor a schema object.
    """
    _check_numbers(numbers)
    return CompiledSchema(
        (registry or default_registry())._compiled(schema, draft, check_formats, numbers)
    )
