"""One strict checker per format, shared by JSON Schema and CSV, tested per format."""

from __future__ import annotations

import pytest

from datavalidate import (
    SchemaError,
    SchemaRegistry,
    asserted_formats,
    is_valid,
    validate_csv,
    validate_json,
)

# format -> (valid values, invalid values). Several of each; the invalid ones include what a weak
# checker lets through (the class of python-jsonschema#804).
CASES: dict[str, tuple[list[str], list[str]]] = {
    "email": (
        [
            "joe.bloggs@example.com",
            "bob@example",
            '"joe bloggs"@example.com',
            "a@[127.0.0.1]",
            "x@[IPv6:::1]",
            "te~st+tag@sub.example.org",
        ],
        [
            "a@",
            "@example.com",
            "a@@example.com",
            ".a@example.com",
            "a..b@example.com",
            "a b@example.com",
            "a@exa_mple.com",
            "a@[127.0.0.300]",
            "josé@example.com",
            "a@example.com\n",
        ],
    ),
    "idn-email": (
        ["실례@실례.테스트", "δοκιμή@example.com", "user@café.com", "joe@example.com"],
        ["a@", "user\uff20example.com", "@example.com", "a@-bad.com"],
    ),
    "hostname": (
        ["example.com", "a", "a--b.com", "xn--9n2bp8q.xn--9t4b11yi5a", "1host", "a" * 63 + ".com"],
        [
            "",
            "example.",
            "-a.com",
            "a-.com",
            "a_b.com",
            "a" * 64 + ".com",
            "ab--cd.com",
            "xn--X",
            "\u212aelvin.com",
            "example.com\n",
            ("a" * 63 + ".") * 4 + "a",
        ],
    ),
    "idn-hostname": (
        ["실례.테스트", "example.com", "xn--ll-0ea", "café.fr"],
        ["example.", "실례。", "-a.com", "xn--X", "a" * 64],
    ),
    "ipv4": (
        [
            "0.0.0.0",  # noqa: S104 - a format test, not a bind address
            "192.168.0.1",
            "255.255.255.255",
            "10.0.0.10",
        ],
        ["256.1.1.1", "01.2.3.4", "1.2.3", "1.2.3.4.5", "1.2.3.4\n", "\uff11.2.3.4"],
    ),
    "ipv6": (
        ["::1", "::", "2001:db8::1", "::ffff:192.168.0.1", "fe80::1:2:3:4"],
        ["1::2::3", "::ffff:192.168.0.01", "fe80::1%eth0", "12345::", "::1\n", ":::"],
    ),
    "date": (
        ["2024-02-29", "1963-06-19", "0001-01-01"],
        ["2023-02-29", "2024-13-01", "2024-1-01", "2024-01-01\n", "२०२४-01-01", "20240101"],
    ),
    "time": (
        ["08:30:06Z", "23:59:60Z", "01:29:60+01:30", "12:34:56.789-08:00", "08:30:06z"],
        ["12:00:00", "24:00:00Z", "22:59:60Z", "08:30:06+24:00", "08:30:06 PST", "8:30:06Z"],
    ),
    "date-time": (
        [
            "1963-06-19T08:30:06.283185Z",
            "1998-12-31T23:59:60Z",
            "1963-06-19t08:30:06z",
            "1990-12-31T15:59:50.123-08:00",
        ],
        [
            "1990-02-31T15:59:59Z",
            "1985-04-12T23:20:50Z\n",
            "1963-06-19 08:30:06Z",
            "1998-12-31T23:58:60Z",
            "1985-04-12T23:20:50+01",
        ],
    ),
    "duration": (
        ["P4DT12H30M5S", "P1Y", "PT1S", "P2W", "P1Y2M3D", "PT36H"],
        ["P", "PT", "1D", "P1D2H", "P1.5D", "-P1D", "P1WT1H", "P1Y1D", "PT1H1S"],
    ),
    "uuid": (
        [
            "2eb8aa08-aa98-11ea-b4aa-73b441d16380",
            "00000000-0000-0000-0000-000000000000",
            "2EB8AA08-AA98-11EA-B4AA-73B441D16380",
        ],
        [
            "2eb8aa08aa9811eab4aa73b441d16380",
            "2eb8aa08-aa98-11ea-b4aa-73b441d1638",
            "2eb8aa08-aa98-11ea-b4aa-73b441d16380-",
            "{2eb8aa08-aa98-11ea-b4aa-73b441d16380}",
            "2eb8aa08-aa98-11ea-b4aa-73b441d1638_",
        ],
    ),
    "uri": (
        [
            "https://example.com/a?b#c",
            "urn:isbn:0451450523",
            "mailto:a@example.com",
            "http://[2001:db8::1]/",
            "http://[V1.fe]",
        ],
        ["not a uri", "/relative", "http://[::ffff:192.168.0.01]", "http://a b", "ht tp://a"],
    ),
    "uri-reference": (["/relative/path", "#frag", "", "https://example.com"], ["\\\\bad", "a b"]),
    "iri": (["http://ƒøø.ßår/?∂éœ=πîx", "https://example.com"], ["/abc", "http://ƒøø.ßår/\n"]),
    "iri-reference": (["/ƒøø", "#ƒrag"], ["\\\\WINDOWS\\filëßåré"]),
    "uri-template": (
        ["http://example.com/{id}", "{+path}/here", "{?x,y}", "{var:30}", "{list*}", "lit'eral"],
        ["{", "{a.}", "{a..b}", "{a,}", "{var:0}", "a b", "{var=default}"],
    ),
    "json-pointer": (["", "/", "/a/b", "/a~0b/~1"], ["a", "/~2", "/a~"]),
    "relative-json-pointer": (
        ["0", "1/a", "0#", "120/foo"],
        ["/a", "01/a", "-1", "0##", "\u0661/a"],
    ),
    "regex": (["^a+$", "[a-z]{2,}", "\\p{L}"], ["(unclosed", "a{2,1}", "(a)\\1"]),
}


def test_every_asserted_format_is_tested() -> None:
    assert set(CASES) == set(asserted_formats())


@pytest.mark.parametrize("name", sorted(CASES))
def test_format(name: str) -> None:
    good, bad = CASES[name]
    for value in good:
        assert validate_json(value, {"format": name}).valid, (name, value)
    for value in bad:
        report = validate_json(value, {"format": name})
        assert not report.valid, (name, value)
        assert report.errors[0].keyword == "format"
        # Annotation mode: format is not checked at all.
        assert is_valid(value, {"format": name}, check_formats=False)
    others: list[object] = [12, 1.5, None, [], {}, True]
    for other in others:  # formats apply to strings only
        assert is_valid(other, {"format": name})


@pytest.mark.parametrize("name", ["email", "uri", "uuid"])
def test_csv_and_json_agree(name: str) -> None:
    good, bad = CASES[name]
    values = [v for v in good + bad if v and "\n" not in v and '"' not in v and "," not in v]
    csv = "value\n" + "".join(f"{v}\n" for v in values)
    report = validate_csv(csv, constraints={"value": {"type": "string", "format": name}})
    rejected = {e.value for e in report.errors}
    for value in values:
        assert (value not in rejected) is is_valid(value, {"format": name}), (name, value)
    assert rejected  # some of each list is invalid


@pytest.mark.parametrize("draft", ["4", "7", "2020-12"])
def test_unknown_format_is_refused_when_asserting(draft: str) -> None:
    schema = {"properties": {"a": {"format": "colour"}}}
    with pytest.raises(SchemaError) as info:
        validate_json({"a": "red"}, schema, draft=draft)
    assert info.value.location == "/properties/a/format"
    assert "check_formats=False" in str(info.value)
    assert validate_json({"a": "red"}, schema, draft=draft, check_formats=False).valid


def test_unknown_format_in_a_registered_schema_is_refused_when_reached() -> None:
    registry = SchemaRegistry(builtins=False)
    registry.register("colour", {"format": "colour"}, uri="https://example.com/colour")
    schema = {"items": {"$ref": "https://example.com/colour"}}
    with pytest.raises(SchemaError, match="unknown format 'colour'"):
        validate_json(["red"], schema, registry=registry)
    assert validate_json(["red"], schema, registry=registry, check_formats=False).valid
