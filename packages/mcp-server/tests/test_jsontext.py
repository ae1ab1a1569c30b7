"""JSON text given to tools: datavalidate's parser, the input limit and one-sentence reasons."""

from __future__ import annotations

from decimal import Decimal

import pytest

from mcp_secure_sandbox.jsontext import MAX_INPUT_BYTES, JsonTextError, loads_strict


def test_values_and_exact_numbers() -> None:
    value = loads_strict('{"a": [1, 0.1, 2.5e3, true, null, "x"], "b": {}}')
    assert value == {"a": [1, Decimal("0.1"), Decimal("2.5e3"), True, None, "x"], "b": {}}
    assert type(value["a"][1]) is Decimal
    assert loads_strict("9" * 5000) == 10**5000 - 1  # beyond int()'s 4300-digit default


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"a": 1,}', "is not valid JSON: "),  # the json module's wording varies by version
        ('{"a": 1,}', " at line 1 column "),
        ("", "is not valid JSON: Expecting value at line 1 column 1"),
        ('{"a": 1, "a": 2}', "is not valid JSON: the JSON text repeats the key 'a'"),
        ('[{"k": 1, "k": 1}]', "is not valid JSON: the JSON text repeats the key 'k'"),
        ("NaN", "is not accepted: the JSON number NaN is refused"),
        ("[-Infinity]", "is not accepted: the JSON number -Infinity is refused"),
        ("1e999", "is not accepted: the JSON number 1e999 is refused: it overflows"),
        ("1e-400", "is not accepted: the JSON number 1e-400 is refused: it underflows"),
        ("1" * 60_000, "digits is longer than the 50000 allowed"),
        ("[" * 100_000 + "]" * 100_000, "is not valid JSON: the JSON text is nested too deeply"),
    ],
)
def test_refusals_name_the_reason(text: str, reason: str) -> None:
    with pytest.raises(JsonTextError) as info:
        loads_strict(text)
    assert reason in str(info.value)
    assert "Traceback" not in str(info.value)


def test_size_limit_counts_utf8_bytes() -> None:
    # 3 bytes per character: under the limit in characters, over it in bytes.
    text = '"' + "\u20ac" * (MAX_INPUT_BYTES // 3 + 1) + '"'
    with pytest.raises(JsonTextError, match=f"is larger than {MAX_INPUT_BYTES} bytes"):
        loads_strict(text)
