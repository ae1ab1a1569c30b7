from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import pytest

import datavalidate
from datavalidate import (
    DataValidateError,
    JsonReport,
    SchemaError,
    SchemaRegistry,
    UnknownSchemaError,
    UnresolvableReferenceError,
    UnsupportedPatternError,
    asserted_formats,
    default_registry,
    is_valid,
    validate_json,
)

# Patterns with exponential (or high-polynomial) backtracking in Python's ``re``.
CATASTROPHIC = [
    (r"^(a+)+$", "a" * 5000 + "!"),
    (r"^(a|aa)+$", "a" * 5000 + "!"),
    (r"^(a|a?)+$", "a" * 5000 + "!"),
    (r"^(\w+\s?)*$", "word " * 2000 + "!"),
    (
        r"^([a-zA-Z0-9])(([\-.]|[_]+)?([a-zA-Z0-9]+))*(@){1}[a-z0-9]+[.]{1}(([a-z]{2,3})|([a-z]{2,3}[.]{1}[a-z]{2,3}))$",
        "a" * 5000 + "!",
    ),
    (r"(x+x+)+y", "x" * 5000),
    (r"^\d*\d*\d*\d*\d*\d*$", "1" * 5000 + "a"),
]


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a test tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_public_names() -> None:
    for name in datavalidate.__all__:
        assert hasattr(datavalidate, name)
    assert datavalidate.__version__.count(".") == 2


def test_valid_instance_report() -> None:
    report = validate_json({"a": 1}, {"type": "object"})
    assert report == JsonReport(valid=True, errors=(), error_count=0, draft="draft2020-12")
    assert report.to_dict() == {
        "valid": True,
        "draft": "draft2020-12",
        "error_count": 0,
        "truncated": False,
        "errors": [],
    }
    json.dumps(report.to_dict())


def test_error_details_are_pointers() -> None:
    schema = {
        "type": "object",
        "properties": {"a/b": {"type": "array", "items": {"type": "integer", "maximum": 3}}},
    }
    report = validate_json({"a/b": [1, 2, "x", 9]}, schema)
    assert not report.valid
    assert report.error_count == 2
    by_location = {e.instance_location: e for e in report.errors}
    assert set(by_location) == {"/a~1b/2", "/a~1b/3"}
    type_error = by_location["/a~1b/2"]
    assert type_error.keyword == "type"
    assert type_error.schema_location == "/properties/a~1b/items/type"
    assert type_error.value == '"x"'
    assert "is not of type 'integer'" in type_error.message
    assert by_location["/a~1b/3"].keyword == "maximum"
    assert by_location["/a~1b/3"].value == "9"


def test_error_count_past_max_errors_and_truncation() -> None:
    report = validate_json(list(range(50)), {"items": {"type": "string"}}, max_errors=5)
    assert report.error_count == 50
    assert len(report.errors) == 5
    assert report.truncated
    assert report.to_dict()["truncated"] is True
    assert [e.instance_location for e in report.errors] == ["/0", "/1", "/2", "/3", "/4"]
    zero = validate_json(list(range(3)), {"items": {"type": "string"}}, max_errors=0)
    assert zero.error_count == 3 and zero.errors == () and not zero.valid


def test_most_relevant_first() -> None:
    schema = {
        "type": "object",
        "required": ["name"],
        "properties": {"deep": {"properties": {"x": {"type": "string"}}}},
        "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
    }
    report = validate_json({"deep": {"x": 1}}, schema)
    assert [e.keyword for e in report.errors] == ["required", "type", "anyOf"]


def test_long_values_are_shortened() -> None:
    report = validate_json({"k": "x" * 10_000, "n": 10**2000}, {"type": "array"})
    value = report.errors[0].value
    assert len(value) == 80
    assert value.startswith('{"k": "xxx') and value.endswith("\u2026")
    big = validate_json(10**2000, {"type": "string"})
    assert big.errors[0].value == "<integer of 6644 bits>"
    assert len(big.errors[0].message) <= 400


@pytest.mark.parametrize(
    ("schema", "draft"),
    [
        ({"$schema": "http://json-schema.org/draft-04/schema#"}, "draft4"),
        ({"$schema": "http://json-schema.org/draft-06/schema#"}, "draft6"),
        ({"$schema": "http://json-schema.org/draft-07/schema#"}, "draft7"),
        ({"$schema": "https://json-schema.org/draft/2019-09/schema"}, "draft2019-09"),
        ({"$schema": "https://json-schema.org/draft/2020-12/schema"}, "draft2020-12"),
        ({}, "draft2020-12"),
    ],
)
def test_draft_from_schema(schema: dict[str, Any], draft: str) -> None:
    assert validate_json(1, schema).draft == draft


def test_draft_argument_and_semantics() -> None:
    # draft 4: exclusiveMaximum is a boolean modifier; 2020-12: a number.
    assert not validate_json(5, {"maximum": 5, "exclusiveMaximum": True}, draft="4").valid
    assert validate_json(5, {"exclusiveMaximum": 6}, draft="2020-12").valid
    assert validate_json(5, {}, draft="draft-07").draft == "draft7"
    with pytest.raises(ValueError, match="unknown draft 'draft3'"):
        validate_json(1, {}, draft="draft3")


def test_unknown_schema_uri() -> None:
    with pytest.raises(SchemaError, match="unknown \\$schema") as info:
        validate_json(1, {"$schema": "https://example.com/my-meta"})
    assert info.value.location == "/$schema"


def test_invalid_schema_names_location() -> None:
    with pytest.raises(SchemaError) as info:
        validate_json(1, {"properties": {"age": {"type": "integr"}}})
    assert info.value.location == "/properties/age/type"
    assert "invalid schema at /properties/age/type" in str(info.value)
    with pytest.raises(SchemaError, match="minimum"):
        validate_json(1, {"minimum": "zero"})
    with pytest.raises(SchemaError, match="not JSON data"):
        validate_json(1, {"enum": [object()]})
    with pytest.raises(SchemaError, match="object or a boolean"):
        SchemaRegistry().register("listy", [1, 2])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="registered name or a schema object"):
        validate_json(1, [1, 2])  # type: ignore[arg-type]


def test_invalid_schema_is_rejected_before_the_instance_is_looked_at() -> None:
    class Exploding(dict[str, Any]):
        def items(self) -> Any:
            raise AssertionError("instance was inspected")

    with pytest.raises(SchemaError):
        validate_json(Exploding(), {"type": 12})


def test_unknown_name_lists_known() -> None:
    with pytest.raises(UnknownSchemaError) as info:
        validate_json({}, "users")
    assert info.value.known == ("config", "dataset", "user")
    assert str(info.value) == "unknown schema 'users'; registered schemas: config, dataset, user"
    assert isinstance(info.value, DataValidateError)


@pytest.mark.parametrize("name", ["config", "user", "dataset"])
def test_builtin_schemas_ship_with_example(name: str) -> None:
    schema = default_registry().get(name)
    assert schema["$id"].endswith(f"/{name}.json")
    assert schema["title"] and schema["description"]
    assert validate_json(schema["examples"][0], name).valid
    assert not validate_json({}, name).valid


def test_builtin_dataset_refs_user_by_id() -> None:
    example = default_registry().get("dataset")["examples"][0]
    example["owner"]["email"] = "not an email"
    report = validate_json(example, "dataset")
    assert [(e.instance_location, e.keyword) for e in report.errors] == [("/owner/email", "format")]
    # Like jsonschema, the path goes on inside the referenced schema without a "$ref" step.
    assert report.errors[0].schema_location == "/properties/owner/properties/email/format"


def test_register_and_ref_by_id() -> None:
    registry = SchemaRegistry()
    info = registry.register(
        "point",
        {
            "$id": "https://example.com/point",
            "type": "object",
            "required": ["x", "y"],
            "title": "P",
        },
    )
    assert info.uri == "https://example.com/point" and info.title == "P" and not info.builtin
    schema = {"type": "array", "items": {"$ref": "https://example.com/point"}}
    assert validate_json([{"x": 1, "y": 2}], schema, registry=registry).valid
    assert not validate_json([{"x": 1}], schema, registry=registry).valid
    assert validate_json({"x": 1, "y": 2}, "point", registry=registry).valid
    assert "point" in registry and "point" not in default_registry()
    assert [i.name for i in registry.list()] == ["config", "dataset", "point", "user"]
    assert registry.list()[0].to_dict()["builtin"] is True


def test_register_under_extra_uri_and_draft() -> None:
    registry = SchemaRegistry(builtins=False)
    registry.register("int", {"type": "integer"}, uri="http://localhost:1234/int.json", draft="4")
    ref = {"$ref": "http://localhost:1234/int.json"}
    assert validate_json(3, ref, registry=registry).valid
    assert not validate_json("3", ref, registry=registry).valid


def test_register_checks_schema_and_names() -> None:
    registry = SchemaRegistry(builtins=False)
    with pytest.raises(SchemaError):
        registry.register("bad", {"type": "strin"})
    assert "bad" not in registry
    registry.register("ok", {"$id": "urn:x:ok"})
    with pytest.raises(ValueError, match="registered already"):
        registry.register("ok", {})
    with pytest.raises(ValueError, match="URI 'urn:x:ok' is registered already"):
        registry.register("other", {"$id": "urn:x:ok"})
    with pytest.raises(ValueError, match="invalid schema name"):
        registry.register("has space", {})
    with pytest.raises(TypeError):
        registry.register(3, {})  # type: ignore[arg-type]
    with pytest.raises(UnknownSchemaError):
        registry.get("nope")


def test_registered_schema_is_a_private_copy() -> None:
    registry = SchemaRegistry(builtins=False)
    schema: dict[str, Any] = {"type": "integer"}
    registry.register("n", schema)
    schema["type"] = "string"
    assert validate_json(1, "n", registry=registry).valid
    got = registry.get("n")
    got["type"] = "null"
    assert registry.get("n") == {"type": "integer"}


@pytest.mark.parametrize(
    "ref",
    [
        "https://example.com/schema.json",
        "http://127.0.0.1:9/schema.json",
        "file:///etc/passwd",
        "ftp://example.com/x",
    ],
)
def test_remote_ref_is_never_fetched(ref: str) -> None:
    with pytest.raises(UnresolvableReferenceError) as info:
        validate_json({}, {"$ref": ref})
    assert info.value.remote and info.value.ref == ref
    assert "never fetched" in str(info.value)


def test_local_unresolvable_ref() -> None:
    with pytest.raises(UnresolvableReferenceError) as info:
        validate_json({}, {"$ref": "#/$defs/missing"})
    assert not info.value.remote


def test_formats_are_asserted() -> None:
    checks = {
        "date": ("2024-02-29", "2023-02-29"),
        "date-time": ("2024-01-01T10:00:00Z", "2024-01-01 10:00"),
        "time": ("10:00:00Z", "25:00:00Z"),
        "email": ("a@example.com", "example.com"),
        "ipv4": ("192.168.0.1", "256.1.1.1"),
        "ipv6": ("::1", "1::2::3"),
        "uri": ("https://example.com/a?b", "not a uri"),
        "uuid": ("2eb8aa08-aa98-11ea-b4aa-73b441d16380", "2eb8aa08aa98"),
        "regex": ("^a+$", "(unclosed"),
        "hostname": ("example.com", "-bad-.com"),
        "duration": ("P1D", "1D"),
        "json-pointer": ("/a/b", "a/b"),
    }
    formats = asserted_formats()
    for name, (good, bad) in checks.items():
        assert name in formats
        assert validate_json(good, {"format": name}).valid, name
        report = validate_json(bad, {"format": name})
        assert not report.valid, name
        assert report.errors[0].keyword == "format"
        assert validate_json(bad, {"format": name}, check_formats=False).valid
    # The same strict checkers in every draft: a known format is never left unchecked.
    assert asserted_formats("draft4") == asserted_formats("draft7") == asserted_formats()


def test_cache_reuses_compiled_validators() -> None:
    registry = SchemaRegistry(builtins=False, cache_size=2)
    schema = {"type": "integer"}
    first = registry._compiled(schema, None, True)
    assert registry._compiled({"type": "integer"}, None, True) is first
    assert registry._compiled(schema, None, False) is not first
    registry._compiled({"type": "string"}, None, True)
    assert registry.cache_info() == (2, 2)
    assert registry._compiled(schema, None, True) is not first  # evicted (LRU)
    with pytest.raises(ValueError, match="cache_size"):
        SchemaRegistry(cache_size=0)


def test_cache_key_is_content_not_identity() -> None:
    registry = SchemaRegistry(builtins=False)
    schema: dict[str, Any] = {"type": "integer"}
    assert validate_json(1, schema, registry=registry).valid
    schema["type"] = "string"
    assert not validate_json(1, schema, registry=registry).valid
    assert validate_json(1, {"const": 1}, registry=registry).valid
    assert not validate_json(1, {"const": True}, registry=registry).valid


def test_is_valid() -> None:
    assert is_valid({"id": "x"}, {"type": "object"})
    assert not is_valid([], "user")


def test_max_errors_validation() -> None:
    with pytest.raises(ValueError, match="max_errors"):
        validate_json(1, {}, max_errors=-1)
    # The CSV report's bound (one home): at most 1,000 listed, the count covers all.
    with pytest.raises(ValueError, match=r"from 0 to 1,000 .*not 1001"):
        validate_json(1, {}, max_errors=1001)
    with pytest.raises(ValueError, match=r"from 0 to 1,000 .*not 1001"):
        datavalidate.compile({}).validate(1, max_errors=1001)
    report = validate_json(list(range(1500)), {"items": {"type": "string"}}, max_errors=1000)
    assert (report.error_count, len(report.errors)) == (1500, 1000)


def test_deep_instance_is_a_clear_error() -> None:
    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    schema = {"$defs": {"n": {"items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"}
    # Valid: the fast path (jsonschema-rs) decides it without Python recursion.
    assert validate_json(deep, schema).valid
    # Invalid at the bottom: our validator writes the report and cannot go that deep.
    invalid = {**schema, "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}
    with pytest.raises(ValueError, match="nested too deeply"):
        validate_json(deep, invalid)


def test_deep_schema_is_a_clear_error() -> None:
    deep: Any = {}
    for _ in range(5000):
        deep = {"not": deep}
    with pytest.raises(SchemaError, match="nested too deeply"):
        validate_json(1, deep)


def test_pattern_uses_ecma_syntax() -> None:
    assert validate_json("π", {"pattern": "^\\p{Letter}+$"}).valid
    assert not validate_json("12", {"pattern": "^\\p{Letter}+$"}).valid
    assert validate_json("A", {"pattern": "^\\u0041$"}).valid
    # ECMA-262: \d is ASCII only and $ is the end of input (Python's re differs on both).
    assert not validate_json("\u0663", {"pattern": "^\\d$"}).valid
    assert not validate_json("a\n", {"pattern": "^a$"}).valid


@pytest.mark.parametrize(("regex", "text"), CATASTROPHIC)
def test_hostile_patterns_do_not_hang(regex: str, text: str) -> None:
    """These take minutes to years in Python's ``re``; RE2 answers in linear time.

    The test asserts the answers. A regression to ``re`` would hang rather than fail, so the
    run is made in a thread and the test fails if it is still running after 60 s.
    """
    results: dict[str, Any] = {}

    def run() -> None:
        results["pattern"] = validate_json(text, {"pattern": regex}).valid
        results["props"] = validate_json({text: 1}, {"patternProperties": {regex: False}}).valid
        results["additional"] = validate_json(
            {text: 1}, {"patternProperties": {regex: True}, "additionalProperties": False}
        ).valid
        results["unevaluated"] = validate_json(
            {text: 1}, {"patternProperties": {regex: True}, "unevaluatedProperties": False}
        ).valid
        results["names"] = validate_json({text: 1}, {"propertyNames": {"pattern": regex}}).valid

    worker = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), f"pattern {regex!r} hung"
    assert time.monotonic() - started < 60
    assert results == {
        "pattern": False,
        "props": True,
        "additional": False,
        "unevaluated": False,
        "names": False,
    }


@pytest.mark.parametrize("regex", [r"(a)\1", r"(?=a)b", r"(?<!a)b", "a{1000}{1000}", "(" * 20_000])
def test_unsupported_patterns_are_refused_with_location(regex: str) -> None:
    with pytest.raises(UnsupportedPatternError) as info:
        validate_json("a", {"properties": {"p": {"pattern": regex}}})
    assert info.value.location == "/properties/p/pattern"
    assert isinstance(info.value, SchemaError)
    with pytest.raises(UnsupportedPatternError) as info:
        validate_json({}, {"patternProperties": {regex: {}}})
    assert info.value.location.startswith("/patternProperties/")


def test_pattern_in_data_positions_is_not_compiled() -> None:
    assert validate_json({"pattern": "(?=x)"}, {"const": {"pattern": "(?=x)"}}).valid


def test_thread_safety_of_registry() -> None:
    registry = SchemaRegistry()
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for j in range(30):
                assert validate_json(j, {"maximum": i + j}, registry=registry).valid
                assert validate_json(
                    default_registry().get("user")["examples"][0], "user", registry=registry
                ).valid
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_reports_are_utf8_encodable() -> None:
    report = validate_json({"k\ud800": "\udcff"}, {"additionalProperties": {"type": "integer"}})
    json.dumps(report.to_dict(), ensure_ascii=False).encode("utf-8")
    assert report.errors[0].value == '"\\udcff"'


def test_schema_objects_marshal_cannot_key_still_work() -> None:
    from collections import OrderedDict

    class Schema(dict[str, Any]):
        pass

    assert not validate_json("x", OrderedDict(type="integer")).valid
    assert validate_json(3, Schema(type="integer")).valid
    with pytest.raises(SchemaError, match="not JSON data"):
        validate_json(1, {"const": {1, 2}})


@pytest.mark.parametrize("fmt", ["iri", "iri-reference", "uri", "uri-reference"])
def test_uri_formats_are_linear_time(fmt: str) -> None:
    """jsonschema's own iri checker (an Earley parser) needs ~20 s for this 20 KB string."""
    hostile = "http://" + "a." * 10_000 + " "
    results: list[bool] = []
    worker = threading.Thread(
        target=lambda: results.append(validate_json(hostile, {"format": fmt}).valid), daemon=True
    )
    worker.start()
    worker.join(60)
    assert results == [False]
    assert validate_json("http://example.com/a?b#c", {"format": fmt}).valid
    assert validate_json("http://[::1]:8080/", {"format": fmt}).valid
    assert not validate_json("http://a b", {"format": fmt}).valid


def test_iri_allows_unicode_uri_does_not() -> None:
    assert validate_json("http://例え.jp/パス", {"format": "iri"}).valid
    assert not validate_json("http://例え.jp/パス", {"format": "uri"}).valid
