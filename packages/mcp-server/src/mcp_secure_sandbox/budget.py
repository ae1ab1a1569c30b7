"""The response budget: how many bytes one answer of the server may take, and how content fits.

One home for the size of what the server sends back. Every tool result and resource read is one
JSON-RPC message; its encoded size (UTF-8 bytes of the message, plus an allowance for the
envelope and the transport's framing) stays within :data:`RESPONSE_BUDGET_BYTES`. Clients cap
messages too (the Python SDK's streamable-HTTP client refuses a server-sent event over 1 MiB),
and a model's context pays for every byte.

Two output caps have two owners. pysandbox's kill cap (``Limits.output_bytes``, 8 MiB per stream
by default) bounds the work of a run and stops it (status ``output_limit``). The server's return
cap here keeps the head and the tail of each stream, ``--stream-excerpt`` in total per stream
(head, tail and marker together; ``Settings.stream_excerpt_bytes``), says how many bytes it cut,
and never stops a run; when a result would still pass the budget (escaped control characters,
two streams), the cap shrinks until it fits.

A run's images and links (:mod:`mcp_secure_sandbox.rich`) come after the streams: the streams
are cut first, the images take what the budget leaves (each at most :data:`IMAGE_MAX_BYTES`),
and the streams are cut further only if that still passes it.

The text mirror of a structured result (the MCP specification's backwards-compatibility
recommendation) is its compact JSON, once, except for a run's result: clients show the model
either the structured content or the text, and a run's text repeating the JSON sent every stream
excerpt a second time, escaped again. Its text is :func:`run_text`: each scalar field as a
``name: value`` line, the list items one line each, then the stream excerpts once, as they are.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from mcp_secure_sandbox._sizes import (
    MAX_WRITE_BYTES,
    RESPONSE_BUDGET_BYTES,
    STREAM_EXCERPT_MAX_BYTES,
    STREAM_EXCERPT_MIN_BYTES,
)

__all__ = [
    "ENVELOPE_BYTES",
    "IMAGE_MAX_BYTES",
    "MAX_WRITE_BYTES",
    "READ_CHUNK_BYTES",
    "RESPONSE_BUDGET_BYTES",
    "STREAM_EXCERPT_MAX_BYTES",
    "STREAM_EXCERPT_MIN_BYTES",
    "content_bytes",
    "cut_marker",
    "fit_streams",
    "head_tail",
    "message_bytes",
    "resource_bytes",
    "resource_text",
    "run_text",
    "tool_result",
]

_MIN_STREAM_BYTES = 256
READ_CHUNK_BYTES = RESPONSE_BUDGET_BYTES // 4
"""Largest byte range of a file one read returns: Base64 and the text mirror fit the budget."""
EXPORT_CHUNK_BYTES = RESPONSE_BUDGET_BYTES // 2
"""Bytes of an export record one chunk read returns (as a Base64 blob: 4/3 of it, within the
budget)."""
ENVELOPE_BYTES = 1024
"""Allowance for what wraps a result: ``jsonrpc``, ``id``, and a transport's framing."""
_CHAR_BYTES = 12
_BOUND_FIXED_BYTES = 256 + ENVELOPE_BYTES
IMAGE_MAX_BYTES = (RESPONSE_BUDGET_BYTES - 64 * 1024) * 3 // 4
"""Largest image a run result carries as image content (its Base64 and the rest of a result
fit the budget), in bytes; a larger one is named as omitted, to be read in ranges."""


def cut_marker(cut: int) -> str:
    """The line put where ``cut`` bytes of a stream were left out."""
    return f"\n[... {cut:,} bytes cut by the server: the head and tail are shown ...]\n"


def head_tail(text: str, max_bytes: int) -> tuple[str, int]:
    """Keep the head and tail of ``text`` within ``max_bytes`` UTF-8 bytes, marker included.

    Args:
        text: The whole stream.
        max_bytes: Most UTF-8 bytes the result may take (head, marker and tail together).

    Returns:
        ``(text, 0)`` when it fits, else ``(head + marker + tail, bytes_cut)``; the cut never
        splits a character, the head takes about two thirds of the room.
    """
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text, 0
    room = max(0, max_bytes - len(cut_marker(len(data)).encode()))
    head_len = room * 2 // 3
    tail_len = room - head_len
    head = data[:head_len].decode("utf-8", "ignore")
    tail = data[len(data) - tail_len :].decode("utf-8", "ignore") if tail_len else ""
    cut = len(data) - len(head.encode("utf-8", "surrogatepass")) - len(tail.encode())
    return head + cut_marker(cut) + tail, cut


def message_bytes(result: BaseModel) -> int:
    """The encoded size of ``result`` as a JSON-RPC response, in bytes (envelope allowed for)."""
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode()) + ENVELOPE_BYTES


def content_bytes(block: BaseModel) -> int:
    """What adding ``block`` to a result's content costs in the encoded message, in bytes."""
    return len(block.model_dump_json(by_alias=True, exclude_none=True).encode()) + 1


def _compact(structured: Mapping[str, Any]) -> str:
    return json.dumps(structured, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


#: Characters a line of the text content shows escaped: C0 and C1 controls and the Unicode line
#: and paragraph separators, each of which some reader takes for a line break, and the bidi
#: controls (marks, embeddings, overrides, isolates), which make a line read in another order
#: than it is (Trojan Source, CVE-2021-42574).
_LINE_BREAKERS = {
    **{c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))},
    ord("\\"): "\\\\",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
    **{c: f"\\u{c:04x}" for c in (0x200E, 0x200F, *range(0x202A, 0x202F))},
    **{c: f"\\u{c:04x}" for c in range(0x2066, 0x206A)},
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}
#: A mapping key shown bare in the text content; any other key is quoted as string values are.
_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _one_line(text: str) -> str:
    """``text`` on one line: backslashes, controls and line separators escaped."""
    return text.translate(_LINE_BREAKERS)


def _value_text(value: Any) -> str:
    """A field's value on one line.

    A string is escaped, a mapping is ``k=v`` pairs whose string values are quoted, and whose
    keys are too unless they are identifiers (so neither a value nor a key holding ``, k=v``
    can pass for another pair), anything else is JSON.
    """
    if isinstance(value, str):
        return _one_line(value)
    if isinstance(value, Mapping):
        return ", ".join(
            f"{_key_text(k)}={_value_text(v) if not isinstance(v, str) else _quoted(v)}"
            for k, v in value.items()
        )
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _key_text(key: object) -> str:
    text = str(key)
    return text if _BARE_KEY.fullmatch(text) else _quoted(text)


def _quoted(text: str) -> str:
    return '"' + _one_line(text).replace('"', '\\"') + '"'


def _boundary(streams: Sequence[str]) -> str:
    """A line that none of ``streams`` contains, to fence the excerpts.

    As MIME's multipart boundary does: output printed by the run cannot end its excerpt early or
    pass for a field, since it was printed before the line was drawn.
    """
    while True:
        line = f"----- {secrets.token_hex(6)} -----"
        if not any(line in text for text in streams):
            return line


def run_text(structured: Mapping[str, Any], streams: Sequence[str]) -> str:
    r"""The text content of a run's result: every field of ``structured``, the streams last.

    Args:
        structured: The run's structured result (JSON-compatible).
        streams: The names of its stream fields (``stdout``, ``stderr``), already cut.

    Returns:
        One ``name: value`` line per scalar field (strings on one line: backslashes, controls,
        line separators and bidi controls escaped as ``\\``, ``\n``, ``\x01``, ``\u202e``;
        numbers, booleans and null as in JSON), one ``name: k=v, k=v`` line per item of a list
        field (string values, and keys other than identifiers, quoted; nothing for an empty
        list), then each non-empty stream as it was printed, between two copies of a random
        boundary line that no stream contains, announced on the line before
        (``stdout (between the two "----- 3f09a1c2b7d4 -----" lines):``); an empty stream is
        ``name: (empty)``.
    """
    lines: list[str] = []
    for name, value in structured.items():
        if name in streams:
            continue
        if isinstance(value, list):
            lines.extend(f"{name}: {_value_text(item)}" for item in value)
        else:
            lines.append(f"{name}: {_value_text(value)}")
    texts = [str(structured[name]) for name in streams]
    fence = _boundary(texts)
    for name, text in zip(streams, texts, strict=True):
        if text:
            lines += [f'{name} (between the two "{fence}" lines):', fence, text, fence]
        else:
            lines.append(f"{name}: (empty)")
    return "\n".join(lines)


def _build(structured: Mapping[str, Any], text: str | None = None) -> tuple[CallToolResult, int]:
    """The result, and an upper bound of its :func:`message_bytes` (no encoding needed).

    Args:
        structured: The structured content.
        text: The text content; ``None``: the compact JSON of ``structured``.
    """
    compact = _compact(structured)
    text = compact if text is None else text
    result = CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=dict(structured)
    )
    return result, _CHAR_BYTES * (len(compact) + len(text)) + _BOUND_FIXED_BYTES


def _fits(result: CallToolResult, bound: int, budget: int) -> tuple[bool, int]:
    """Whether ``result`` fits ``budget``, and its size (``bound`` when that settles it).

    The result holds the structured content, the values of a compact JSON text ``t``
    serialized again, and a text ``x`` as a JSON string. Each takes at most 12 bytes for a
    character of ``t`` or ``x`` (the widest escape, a surrogate pair, is 12 bytes for one
    character; a number's digits are serialized alike), so ``12 * (len(t) + len(x))`` plus the
    fixed keys and the envelope bounds :func:`message_bytes`; a result within the budget by
    that bound is not encoded again to be measured.
    """
    if bound <= budget:
        return True, bound
    size = message_bytes(result)
    return size <= budget, size


def tool_result(
    structured: Mapping[str, Any], *, budget: int = RESPONSE_BUDGET_BYTES
) -> CallToolResult:
    """Build a tool result: ``structured`` as the structured content, its compact JSON as text.

    Args:
        structured: The JSON-compatible structured result (the tool's output schema).
        budget: Largest encoded message, in bytes.

    Raises:
        ToolError: The message would pass ``budget``; the text says by how much and what to do.
    """
    result, bound = _build(structured)
    fits, size = _fits(result, bound, budget)
    if not fits:
        raise ToolError(
            f"the answer would be {size:,} bytes, more than the server's response budget of "
            f"{budget:,} bytes; ask for less (a smaller file range, a narrower listing)"
        )
    return result


def fit_streams(
    structured: Mapping[str, Any],
    streams: Sequence[str],
    *,
    stream_bytes: int,
    budget: int = RESPONSE_BUDGET_BYTES,
) -> CallToolResult:
    """Build a run's tool result whose text fields ``streams`` are cut to head and tail to fit.

    The text content is :func:`run_text` of the cut result.

    Each stream starts with ``stream_bytes`` of room; while the message passes ``budget`` the
    room halves. A cut stream gets a marker naming the bytes cut and ``<name>_truncated`` is set
    true (it stays true when it already was, e.g. pysandbox's kill cap stopped the run).

    Args:
        structured: The structured result; each of ``streams`` names a ``str`` field, and a
            ``<name>_truncated`` boolean field exists for each.
        streams: The names of the fields to cut, e.g. ``("stdout", "stderr")``.
        stream_bytes: Room of each stream at first, in UTF-8 bytes (marker included).
        budget: Largest encoded message, in bytes.

    Returns:
        The result, within ``budget`` whenever the other fields leave room for markers.

    Raises:
        ToolError: Even with every stream cut to its marker the message passes ``budget``.
    """
    room = max(_MIN_STREAM_BYTES, stream_bytes)
    while True:
        shaped = dict(structured)
        for name in streams:
            text, cut = head_tail(str(structured[name]), room)
            shaped[name] = text
            shaped[f"{name}_truncated"] = bool(structured[f"{name}_truncated"]) or cut > 0
        result, bound = _build(shaped, run_text(shaped, streams))
        fits, size = _fits(result, bound, budget)
        if fits:
            return result
        if room <= _MIN_STREAM_BYTES:
            raise ToolError(
                f"the answer would be {size:,} bytes, more than the server's response budget "
                f"of {budget:,} bytes even with each stream cut to {room} bytes"
            )
        room = max(_MIN_STREAM_BYTES, room // 2)


def resource_bytes(text: str, uri: str) -> int:
    """The encoded size of a resource read answering ``text`` for ``uri``, in bytes."""
    escaped = json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return len(escaped) + 2 * len(uri.encode()) + ENVELOPE_BYTES


def resource_text(text: str, uri: str, hint: str, *, budget: int = RESPONSE_BUDGET_BYTES) -> str:
    """Return ``text`` when a resource read of it fits ``budget``.

    Args:
        text: The resource's content.
        uri: The URI read.
        hint: What to do instead, e.g. "run `wsnapshot export` on the host".
        budget: Largest encoded message, in bytes.

    Raises:
        ResourceError: The read would pass ``budget``; the message names the sizes and ``hint``.
    """
    size = resource_bytes(text, uri)
    if size > budget:
        raise ResourceError(
            f"{uri} would be {size:,} bytes, more than the server's response budget of "
            f"{budget:,} bytes; {hint}"
        )
    return text
