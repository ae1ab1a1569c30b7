"""Rich run results: images as image content, changed files as resource links.

A run's result carries, after its text (:func:`mcp_secure_sandbox.budget.run_text`):

- **images**, at most ``--max-images`` (``SANDBOX_MAX_IMAGES``, default 4) per run: first the
  image files the run created or changed in the workspace (PNG, JPEG, GIF: pysandbox's
  ``RunResult.changed_files``, from the walks it does anyway), in path order, then the
  figures it showed without saving them (``RunResult.figures``, pysandbox's figure channel);
- **resource links** to the files the run created or changed, at most :data:`MAX_LINKS`,
  on the workspace-file template (``sandbox://workspace/{+path}``).

Every image is untrusted bytes: its media type comes from its magic bytes (never from the
file name), a file whose bytes are no PNG, JPEG or GIF is no image (it still gets its link),
and the server never decodes an image. An image that does not fit (over the count, over
:data:`mcp_secure_sandbox.budget.IMAGE_MAX_BYTES`, or over what the response budget leaves)
is named in the structured result's ``images_omitted`` with the reason; a file's reason
names its resource URI, which the client reads in ranges.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any
from urllib.parse import quote

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ImageContent, ResourceLink

from mcp_secure_sandbox import budget
from mcp_secure_sandbox.state import ServerState
from pysandbox import RunResult
from wsnapshot import WorkspaceError

__all__ = [
    "IMAGE_SUFFIXES",
    "MAGIC",
    "MAX_LINKS",
    "MAX_OMITTED",
    "MAX_PATH_BYTES",
    "MAX_READS",
    "build",
    "media_type",
    "reads_files",
    "workspace_uri",
]

MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
"""Magic bytes of the image types a run result carries, and their media types."""
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif")
"""Names of workspace files read as candidate images (case-insensitive)."""
MAX_LINKS = 32
"""Most files a run result links to; ``files_omitted`` counts the rest."""
MAX_PATH_BYTES = 1024
"""A changed file with a longer path (UTF-8) is neither linked nor shown; it is counted."""
MAX_OMITTED = 16
"""Most entries of ``images_omitted``; the last one sums up the rest."""
LINKS_BYTES = 128 * 1024
"""Most bytes the resource links and their ``files`` entries may add to a result (paths are
the run's text: 32 long names of control characters would otherwise pass the budget)."""
MAX_READS = 16
"""Most candidate image files read for one run beyond ``--max-images`` (files named ``.png``
that are no image cost a read each; the rest are left out unread)."""
#: Room kept for the envelope's rounding (the rich part itself is counted as it grows).
_SLACK = 2048


def media_type(data: bytes) -> str | None:
    """The media type of ``data`` from its magic bytes, or ``None``: no PNG, JPEG or GIF."""
    for magic, kind in MAGIC:
        if data.startswith(magic):
            return kind
    return None


def workspace_uri(path: str) -> str | None:
    """The workspace-file resource of ``path``, or ``None``.

    ``None`` when the name is not UTF-8 or longer than :data:`MAX_PATH_BYTES`.
    """
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError:
        return None
    if len(encoded) > MAX_PATH_BYTES:
        return None
    return "sandbox://workspace/" + quote(encoded, safe="/")


def reads_files(result: RunResult) -> bool:
    """Whether :func:`build` may read workspace files for ``result`` (then run it in a thread)."""
    return any(path.lower().endswith(IMAGE_SUFFIXES) for path, _ in result.changed_files)


def _entry_cost(entry: dict[str, Any]) -> int:
    """Bytes a structured entry adds to the message (structured content and text mirror)."""
    return 2 * (len(json.dumps(entry, ensure_ascii=False).encode("utf-8", "replace")) + 1)


def _b64_len(size: int) -> int:
    return 4 * ((size + 2) // 3)


def _read_file(state: ServerState, path: str) -> bytes | str:
    """The bytes of an image file of the workspace, or why it could not be read.

    Read through SafeWorkspace (beneath the workspace, no symlink, a regular file) and at
    most :data:`budget.IMAGE_MAX_BYTES`.
    """
    try:
        with state.workspace.open_read(path, max_bytes=budget.IMAGE_MAX_BYTES) as stream:
            data = stream.read(budget.IMAGE_MAX_BYTES + 1)
    except (WorkspaceError, OSError) as exc:
        return f"could not be read after the run ({exc.__class__.__name__})"
    if len(data) > budget.IMAGE_MAX_BYTES:
        return f"grew past {budget.IMAGE_MAX_BYTES:,} bytes"
    return data


def _links(result: RunResult) -> tuple[list[ResourceLink], list[dict[str, Any]], int]:
    """The changed files' resource links, their structured entries, and how many were left."""
    blocks: list[ResourceLink] = []
    entries: list[dict[str, Any]] = []
    room = LINKS_BYTES
    for path, size in result.changed_files:
        if len(blocks) >= MAX_LINKS:
            break
        uri = workspace_uri(path)
        if uri is None or not path.isprintable():  # control characters: counted, not linked
            continue
        block = ResourceLink(name=path, uri=uri, size=size, mime_type=_guess(path))
        entry = {"path": path, "bytes": size, "uri": uri}
        cost = budget.content_bytes(block) + _entry_cost(entry)
        if cost > room:
            break
        room -= cost
        blocks.append(block)
        entries.append(entry)
    return blocks, entries, len(result.changed_files) - len(blocks)


def build(state: ServerState, structured: dict[str, Any], result: RunResult) -> CallToolResult:
    """Build the run's tool result: its JSON, then images and links within the budget.

    A run's outcome always reaches the client: when the rich part cannot fit (whatever the
    run named its files), the result falls back to the streams alone with every changed file
    counted in ``files_omitted``.

    Blocking (it reads workspace files): call it in a worker thread. The streams are cut
    first, as for every run (:func:`budget.fit_streams`); the images then fill what the
    response budget leaves, in order (image files by path, then figures), up to
    ``settings.max_images``; a file is read only when it could still be shown. The links
    come last.

    Args:
        state: The server's state (its workspace and settings).
        structured: The run's structured result without its rich part.
        result: pysandbox's result (``changed_files``, ``figures``, ``figures_omitted``).

    Returns:
        The tool result, within :data:`budget.RESPONSE_BUDGET_BYTES`.

    Raises:
        ToolError: The result cannot fit even with its streams cut (as without images).
    """
    try:
        return _build(state, structured, result)
    except ToolError:
        bare = dict(structured, images=[], images_omitted=[], files=[])
        bare["files_omitted"] = len(result.changed_files)
        return budget.fit_streams(
            bare, ("stdout", "stderr"), stream_bytes=state.settings.stream_excerpt_bytes
        )


def _build(state: ServerState, structured: dict[str, Any], result: RunResult) -> CallToolResult:
    max_images = state.settings.max_images
    links, files, files_omitted = _links(result)
    link_bytes = sum(budget.content_bytes(link) for link in links)
    bare = dict(structured, images=[], images_omitted=[], files=files)
    bare["files_omitted"] = files_omitted
    excerpt = state.settings.stream_excerpt_bytes
    base = budget.fit_streams(bare, ("stdout", "stderr"), stream_bytes=excerpt)
    candidates: list[tuple[str, str | None, int, bytes | None]] = [
        ("file", path, size, None)
        for path, size in result.changed_files
        if path.lower().endswith(IMAGE_SUFFIXES) and workspace_uri(path) is not None
    ]
    candidates += [("figure", None, len(data), data) for data in result.figures]
    if not links and not candidates and not result.figures_omitted:
        return base  # nothing to add: no second measure of the message (most runs)
    room = budget.RESPONSE_BUDGET_BYTES - budget.message_bytes(base) - link_bytes - _SLACK
    shown: list[ImageContent] = []
    infos: list[dict[str, Any]] = []
    omitted: list[dict[str, Any]] = []
    left_out = 0  # entries beyond MAX_OMITTED - 1, summed up in the last one
    reads = 0
    seen: set[bytes] = set()  # digests of the images shown: a figure saved and left open once

    def leave_out(where: dict[str, Any], reason: str) -> None:
        nonlocal room, left_out
        if len(omitted) >= MAX_OMITTED - 1:
            left_out += 1
            return
        entry = {**where, "reason": reason}
        room -= _entry_cost(entry)
        omitted.append(entry)

    for source, path, size, carried in candidates:
        data = carried
        where = {"source": source, "path": path, "bytes": size}
        uri = workspace_uri(path) if path is not None else None
        later = f"read it in ranges from {uri}" if uri else "save it to a file to read it"
        if size > budget.IMAGE_MAX_BYTES:
            reason = f"larger than {budget.IMAGE_MAX_BYTES:,} bytes, the most a result carries"
            leave_out(where, f"{reason}; {later}")
            continue
        if len(shown) >= max_images:
            reason = f"over the count ({max_images} images per run, --max-images)"
            leave_out(where, f"{reason}; {later}")
            continue
        if _b64_len(size) + 2048 > room:
            leave_out(where, f"over the response budget; {later}")
            continue
        if data is None and path is not None:
            if reads >= max_images + MAX_READS:
                leave_out(where, f"not read (too many image files in one run); {later}")
                continue
            reads += 1
            got = _read_file(state, path)
            if isinstance(got, str):
                leave_out(where, got)
                continue
            data = got
        kind = media_type(data) if data is not None else None
        if data is None or kind is None:
            if source == "figure":
                leave_out(where, "the figure channel carried no PNG, JPEG or GIF")
            continue  # an image's name, not an image's bytes: only a changed file
        digest = hashlib.blake2b(data, digest_size=16).digest()
        if digest in seen:
            continue  # plt.savefig("x.png") without plt.close(): the file is the figure
        block = ImageContent(data=base64.b64encode(data).decode("ascii"), mime_type=kind)
        info = {**where, "bytes": len(data), "mime_type": kind}
        cost = budget.content_bytes(block) + _entry_cost(info)
        if cost > room:
            leave_out(where, f"over the response budget; {later}")
            continue
        room -= cost
        seen.add(digest)
        shown.append(block)
        infos.append(info)
    for _ in range(min(result.figures_omitted, MAX_OMITTED)):
        leave_out(
            {"source": "figure", "path": None, "bytes": 0},
            "not carried by the figure channel (over its caps); save it to a file",
        )
    left_out += max(0, result.figures_omitted - MAX_OMITTED)
    if left_out:
        omitted.append(
            {
                "source": "file",
                "path": None,
                "bytes": 0,
                "reason": f"{left_out} more images left out (not listed)",
            }
        )
    final = dict(bare, images=infos, images_omitted=omitted)
    extra = sum(budget.content_bytes(b) for b in shown) + link_bytes
    tool_result = budget.fit_streams(
        final,
        ("stdout", "stderr"),
        stream_bytes=excerpt,
        budget=budget.RESPONSE_BUDGET_BYTES - extra,
    )
    tool_result.content.extend(shown)
    tool_result.content.extend(links)
    return tool_result


def _guess(path: str) -> str | None:
    """A link's media type by its name (a hint for the client; images are checked by magic)."""
    import mimetypes

    return mimetypes.guess_type(path, strict=False)[0]
