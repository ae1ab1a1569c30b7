"""The figure channel: figures a run shows without saving them, carried out of the child.

One home for the channel's caps and its frame format. At the end of the user's code, a child
that imported ``matplotlib.pyplot`` renders every figure still open (``plt.show()`` under the
Agg backend leaves figures open; notebooks show what is open at the end of a cell) to PNG in
memory and writes it to a pipe whose read end only the parent holds
(:func:`pysandbox.child._main.show_figures`). Nothing is written to the workspace.

The rendering counts as user code: it runs under every layer, after the user's code, and its
failure only writes a line to stderr; it never changes the run's exit status and is never a
setup error. The user's code can write to the channel's descriptor too, so the parent treats
every byte on it as hostile: it keeps at most :data:`FIGURE_CHANNEL_BYTES` (further bytes are
read and dropped, so the child cannot block) and at most :data:`FIGURE_CHANNEL_COUNT`
figures; a malformed or cut frame ends the parse. What a figure's bytes are (PNG or not) is
not checked here: the caller checks the magic before it shows anything.

Frames: ``b"F"`` + 4-byte big-endian length + that many bytes (a figure), or ``b"O"`` +
4-byte big-endian size (a figure the child did not send: over the count or the bytes left), or
``b"V"`` + 4-byte big-endian length + a result frame (:mod:`pysandbox.child._values`: the run's
final value, sent after the figures; :func:`value_frame` finds it).
"""

from __future__ import annotations

from pysandbox.child._values import RESULT_FRAME_MAX

__all__ = [
    "FIGURE_CHANNEL_BYTES",
    "FIGURE_CHANNEL_COUNT",
    "FRAME_HEADER_BYTES",
    "channel_caps",
    "parse_frames",
    "read_cap",
    "value_frame",
]

#: Most figure bytes (payloads) one run's channel carries.
FIGURE_CHANNEL_BYTES = 4 * 1024 * 1024
#: Most figures one run's channel carries.
FIGURE_CHANNEL_COUNT = 8
#: Bytes of a frame's header (kind and length).
FRAME_HEADER_BYTES = 5
#: Most omitted-figure frames counted (a hostile writer could send any number).
_MAX_OMITTED = 1000


def channel_caps() -> tuple[int, int]:
    """``(figures, bytes)``: what the child may send, as its configuration carries it."""
    return FIGURE_CHANNEL_COUNT, FIGURE_CHANNEL_BYTES


def read_cap() -> int:
    """Most bytes the parent keeps from the channel (payloads and headers)."""
    headers = FRAME_HEADER_BYTES * (FIGURE_CHANNEL_COUNT + _MAX_OMITTED + 1)
    return FIGURE_CHANNEL_BYTES + headers + RESULT_FRAME_MAX


def parse_frames(data: bytes, cut: bool) -> tuple[tuple[bytes, ...], int]:
    """Split the channel's bytes into figures.

    Args:
        data: What the parent kept of the channel (at most :func:`read_cap` bytes).
        cut: More bytes were written than kept.

    Returns:
        ``(figures, omitted)``: at most :data:`FIGURE_CHANNEL_COUNT` figures of at most
        :data:`FIGURE_CHANNEL_BYTES` bytes in all, in the order sent, and how many more
        figures the run showed without them being carried (reported by the child, beyond
        the caps, or in a frame that was cut or malformed).
    """
    figures: list[bytes] = []
    omitted = 0
    room = FIGURE_CHANNEL_BYTES
    at = 0
    while at < len(data):
        kind = data[at : at + 1]
        if at + FRAME_HEADER_BYTES > len(data) or kind not in (b"F", b"O", b"V"):
            omitted += 1
            break
        size = int.from_bytes(data[at + 1 : at + FRAME_HEADER_BYTES], "big")
        at += FRAME_HEADER_BYTES
        if kind == b"V":  # the run's value: value_frame()
            at += size
            continue
        if kind == b"O":
            omitted = min(omitted + 1, _MAX_OMITTED)
            continue
        body = data[at : at + size]
        at += size
        if len(body) < size or size > room or len(figures) >= FIGURE_CHANNEL_COUNT:
            omitted += 1
            continue
        figures.append(body)
        room -= size
    if cut and not omitted:
        omitted = 1
    return tuple(figures), min(omitted, _MAX_OMITTED)  # every kind of frame counts in the cap


def value_frame(data: bytes) -> bytes | None:
    """The result frame of the channel's one ``V`` frame (the run's final value), or ``None``.

    Args:
        data: What the parent kept of the channel.

    Returns:
        The frame's bytes (parse them with :func:`pysandbox._session.claim_of`, call 0), or
        ``None`` when there is none, more than one, or the frames do not parse to the end.
    """
    found: list[bytes] = []
    at = 0
    while at < len(data):
        kind = data[at : at + 1]
        if at + FRAME_HEADER_BYTES > len(data) or kind not in (b"F", b"O", b"V"):
            return None
        size = int.from_bytes(data[at + 1 : at + FRAME_HEADER_BYTES], "big")
        at += FRAME_HEADER_BYTES
        if kind == b"O":
            continue
        if at + size > len(data):
            return None
        if kind == b"V":
            found.append(data[at : at + size])
        at += size
    return found[0] if len(found) == 1 else None
