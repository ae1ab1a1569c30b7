"""Rich run results in process: images as image content, changed files as resource links.

The standard-library tests write image bytes directly, so the feature is tested without the
data-science stack; the matplotlib tests run the server with ``--profile datascience`` and are
skipped when the stack is not installed.
"""

from __future__ import annotations

import base64
import importlib.util
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mcp import Client
from mcp.types import CallToolResult, ImageContent, ResourceLink, TextContent

from _client import in_process
from mcp_secure_sandbox import budget, rich
from mcp_secure_sandbox.settings import Settings
from pysandbox import RunResult, RunStatus

#: The default --stream-excerpt.
EXCERPT = Settings(workspace=Path("w"), snapshots=Path("s")).stream_excerpt_bytes

PNG = b"\x89PNG\r\n\x1a\n"


def tiny_png() -> bytes:
    """The start of a 1x1 grey PNG, by bytes (no IEND: the server never decodes images)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = (1).to_bytes(4, "big") * 2 + bytes([8, 0, 0, 0, 0])
    return PNG + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0\x80"))


async def run(s: Client, code: str, **arguments: Any) -> CallToolResult:
    result = await s.call_tool("run_sandbox_code", {"code": code, **arguments})
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result


def images(result: CallToolResult) -> list[ImageContent]:
    return [c for c in result.content if isinstance(c, ImageContent)]


def links(result: CallToolResult) -> list[ResourceLink]:
    return [c for c in result.content if isinstance(c, ResourceLink)]


def size_of(result: CallToolResult) -> int:
    return budget.message_bytes(result)


def test_image_files_by_magic_and_links_to_changed_files(dirs: tuple[Path, Path]) -> None:
    workspace, _ = dirs
    (workspace / "old.txt").write_text("unchanged")
    png = tiny_png()
    code = (
        f"open('dot.png', 'wb').write({png!r})\n"
        "open('fake.png', 'w').write('not an image')\n"
        "open('photo.JPG', 'wb').write(b'\\xff\\xd8\\xff\\xe0' + bytes(60))\n"
        "open('anim.gif', 'wb').write(b'GIF89a' + bytes(30))\n"
        "open('out dir#1.csv', 'w').write('a,b\\n1,2\\n')\n"
        "print('written')\n"
    )

    async def scenario(s: Client) -> None:
        result = await run(s, code)
        out = result.structured_content
        assert out is not None
        assert out["status"] == "ok" and out["stdout"] == "written\n"
        first = result.content[0]
        assert isinstance(first, TextContent) and "status: ok" in first.text.split("\n")
        shown = images(result)
        assert [(i.mime_type, base64.b64decode(i.data)[:8]) for i in shown] == [
            ("image/gif", b"GIF89a\0\0"),
            ("image/png", PNG),
            ("image/jpeg", b"\xff\xd8\xff\xe0\0\0\0\0"),
        ]
        assert base64.b64decode(shown[1].data) == png
        assert out["images"] == [
            {"source": "file", "path": "anim.gif", "mime_type": "image/gif", "bytes": 36},
            {"source": "file", "path": "dot.png", "mime_type": "image/png", "bytes": len(png)},
            {"source": "file", "path": "photo.JPG", "mime_type": "image/jpeg", "bytes": 64},
        ]
        assert out["images_omitted"] == []  # fake.png is no image: only a changed file
        names = ["anim.gif", "dot.png", "fake.png", "out dir#1.csv", "photo.JPG"]
        assert [f["path"] for f in out["files"]] == names
        assert out["files_omitted"] == 0
        linked = links(result)
        assert [link.name for link in linked] == names
        assert linked[3].uri == "sandbox://workspace/out%20dir%231.csv"
        assert linked[3].size == 8
        read = await s.read_resource(linked[3].uri)
        assert read.contents[0].text == "a,b\n1,2\n"  # type: ignore[union-attr]
        # A run that changes nothing has no images and no links.
        again = await run(s, "print(1)")
        assert again.structured_content is not None
        assert again.structured_content["files"] == []
        assert len(again.content) == 1

    in_process(workspace, dirs[1], scenario)


def test_count_and_budget_caps(dirs: tuple[Path, Path]) -> None:
    workspace, _ = dirs
    big = budget.IMAGE_MAX_BYTES * 3 // 4  # two of them do not fit one response
    code = (
        "import random\n"
        "rng = random.Random(7)\n"
        f"for name, size in [('a.png', 100), ('b.png', {big}), ('c.png', {big}), "
        f"('d.png', 100), ('e.png', 100), ('huge.png', {budget.IMAGE_MAX_BYTES + 1})]:\n"
        f"    open(name, 'wb').write({PNG!r} + rng.randbytes(size - 8))\n"
        "print('x' * 200_000)\n"
    )

    async def scenario(s: Client) -> None:
        result = await run(s, code)
        out = result.structured_content
        assert out is not None
        assert [i["path"] for i in out["images"]] == ["a.png", "b.png", "d.png"]
        assert [(o["path"], o["bytes"]) for o in out["images_omitted"]] == [
            ("c.png", big),
            ("e.png", 100),
            ("huge.png", budget.IMAGE_MAX_BYTES + 1),
        ]
        reasons = [o["reason"] for o in out["images_omitted"]]
        assert reasons[0].startswith("over the response budget; read it in ranges from ")
        assert reasons[0].endswith("sandbox://workspace/c.png")
        assert reasons[1].startswith("over the count (3 images per run, --max-images)")
        assert reasons[2].startswith(f"larger than {budget.IMAGE_MAX_BYTES:,} bytes")
        assert [len(base64.b64decode(i.data)) for i in images(result)] == [100, big, 100]
        assert out["stdout_truncated"] is True  # the streams keep their usual cut
        size = size_of(result)
        assert budget.RESPONSE_BUDGET_BYTES // 2 < size <= budget.RESPONSE_BUDGET_BYTES

    in_process(workspace, dirs[1], scenario, "--max-images", "3")


def test_links_are_capped(dirs: tuple[Path, Path]) -> None:
    workspace, _ = dirs
    code = f"for i in range({rich.MAX_LINKS + 5}):\n    open(f'f{{i:03}}.txt', 'w').write('x')\n"

    async def scenario(s: Client) -> None:
        result = await run(s, code)
        out = result.structured_content
        assert out is not None
        assert len(links(result)) == rich.MAX_LINKS == len(out["files"])
        assert out["files"][0] == {
            "path": "f000.txt",
            "bytes": 1,
            "uri": "sandbox://workspace/f000.txt",
        }
        assert out["files_omitted"] == 5

    in_process(workspace, dirs[1], scenario)


# -- the data-science profile ------------------------------------------------------------------
STACK_MISSING = [m for m in ("numpy", "matplotlib") if importlib.util.find_spec(m) is None]
needs_stack = pytest.mark.skipif(
    bool(STACK_MISSING),
    reason=f"the data-science stack is not installed ({STACK_MISSING}): "
    "install mcp-secure-sandbox[datascience]",
)
PLOT = (
    "import matplotlib.pyplot as plt\n"
    "import numpy as np\n"
    "x = np.linspace(0, 6.3, 50)\n"
    "fig, ax = plt.subplots(figsize=(3, 2), dpi=60)\n"
    "ax.plot(x, np.sin(x))\n"
)


@needs_stack
def test_plots_come_back_as_png_images(dirs: tuple[Path, Path]) -> None:
    workspace, _ = dirs

    async def scenario(s: Client) -> dict[str, int]:
        sizes = {}
        saved = await run(s, PLOT + "fig.savefig('plot.png')\nplt.close(fig)\n", timeout_sec=60)
        out = saved.structured_content
        assert out is not None and out["status"] == "ok", out
        (image,) = images(saved)
        assert base64.b64decode(image.data) == (workspace / "plot.png").read_bytes()
        assert base64.b64decode(image.data)[:8] == PNG and image.mime_type == "image/png"
        assert out["images"][0]["source"] == "file"
        assert [link.name for link in links(saved)] == ["plot.png"]
        sizes["saved"] = size_of(saved)
        (workspace / "plot.png").unlink()

        kept = await run(s, PLOT + "fig.savefig('kept.png')\n", timeout_sec=60)  # not closed
        out = kept.structured_content
        assert out is not None and out["status"] == "ok", out
        assert [i["source"] for i in out["images"]] == ["file"], out["images"]  # once, a file
        assert len(images(kept)) == 1
        (workspace / "kept.png").unlink()

        shown = await run(s, PLOT + "plt.show()\nprint('shown')\n", timeout_sec=60)
        out = shown.structured_content
        assert out is not None and out["status"] == "ok" and out["stdout"] == "shown\n", out
        (image,) = images(shown)
        assert base64.b64decode(image.data)[:8] == PNG
        assert out["images"] == [
            {
                "source": "figure",
                "path": None,
                "mime_type": "image/png",
                "bytes": len(base64.b64decode(image.data)),
            }
        ]
        assert out["files"] == [] and links(shown) == []
        assert list(workspace.iterdir()) == []  # the figure channel leaves nothing behind
        sizes["shown"] = size_of(shown)

        broken = await run(s, PLOT + "ax.set_title(r'$\\frac{$')\nprint('end')\n", timeout_sec=60)
        out = broken.structured_content
        assert out is not None
        assert out["status"] == "ok" and out["exit_code"] == 0 and out["stdout"] == "end\n"
        assert images(broken) == [] and out["images"] == []
        assert "pysandbox: figure 1 was not shown" in out["stderr"]
        return sizes

    sizes = in_process(workspace, dirs[1], scenario, "--profile", "datascience")
    assert all(1000 < size < 64 * 1024 for size in sizes.values()), sizes


# -- the caps of the rich part, without a server ------------------------------------------------
class _NoWorkspace:
    """A workspace whose every file is missing (counts the reads)."""

    def __init__(self) -> None:
        self.reads = 0

    def open_read(self, path: str, *, max_bytes: int) -> Any:
        self.reads += 1
        raise FileNotFoundError(path)


def _state(max_images: int = 4) -> Any:
    return SimpleNamespace(
        settings=SimpleNamespace(max_images=max_images, stream_excerpt_bytes=EXCERPT),
        workspace=_NoWorkspace(),
    )


def _structured(stdout: str = "") -> dict[str, Any]:
    return {
        "status": "ok",
        "exit_code": 0,
        "signal": None,
        "stdout": stdout,
        "stderr": "",
        "stdout_truncated": False,
        "stderr_truncated": False,
        "duration_ms": 1.0,
        "cpu_time_ms": 1.0,
        "peak_memory_bytes": 1,
        "violations": [],
        "detail": "",
    }


def test_a_hostile_run_cannot_push_its_result_past_the_budget() -> None:
    # Thousands of changed ".png" files with long names, a figure channel full of junk and
    # omissions, and a long stdout: the answer stays within the budget and the lists capped.
    deep = "/".join(["d" * 200] * 4)  # 803 bytes: linked
    deeper = "/".join(["e" * 250] * 8)  # over MAX_PATH_BYTES: neither linked nor read
    changed = tuple((f"{deep}/{i:05}.png", 10) for i in range(3000))
    changed += tuple((f"{deeper}/{i}.png", 10) for i in range(100))
    result = RunResult(
        RunStatus.OK,
        changed_files=changed,
        figures=(b"NOTAPNG" * 1000,) * 8,
        figures_omitted=1000,
    )
    state = _state()
    built = rich.build(state, _structured("y" * 300_000), result)
    assert budget.message_bytes(built) <= budget.RESPONSE_BUDGET_BYTES
    out = built.structured_content
    assert out is not None
    assert 0 < len(out["files"]) == len(links(built)) <= rich.MAX_LINKS  # capped by bytes too
    assert out["files_omitted"] == len(changed) - len(out["files"])
    assert len(out["images_omitted"]) == rich.MAX_OMITTED
    assert out["images_omitted"][-1]["reason"].endswith("more images left out (not listed)")
    assert images(built) == [] and out["images"] == []
    assert state.workspace.reads == 4 + rich.MAX_READS  # unreadable files are not all tried
    assert out["stdout_truncated"] is True


class _Files:
    """A workspace holding given files (bytes by path)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def open_read(self, path: str, *, max_bytes: int) -> Any:
        import io

        return io.BytesIO(self.files[path])


def test_a_figure_saved_and_left_open_comes_back_once() -> None:
    # plt.savefig("plot.png") without plt.close(): the file and the open figure are the same
    # bytes; the image is shown once, as the file. Another figure is still shown.
    png, other = tiny_png(), tiny_png() + b"more"
    state: Any = SimpleNamespace(
        settings=SimpleNamespace(max_images=4, stream_excerpt_bytes=EXCERPT),
        workspace=_Files({"plot.png": png}),
    )
    result = RunResult(RunStatus.OK, changed_files=(("plot.png", len(png)),), figures=(png, other))
    built = rich.build(state, _structured(), result)
    out = built.structured_content
    assert out is not None
    assert [(i["source"], i["path"], i["bytes"]) for i in out["images"]] == [
        ("file", "plot.png", len(png)),
        ("figure", None, len(other)),
    ]
    assert [base64.b64decode(i.data) for i in images(built)] == [png, other]
    assert out["images_omitted"] == []


def test_hostile_file_names_never_hide_the_run_outcome() -> None:
    # Red team, 2026-12-01: 32 changed files with long names of control characters (six bytes
    # each in JSON) pushed the result past the budget: the client got a tool error instead of
    # the run's outcome. Links are budgeted by bytes and such names are counted, not linked.
    deep = "/".join(["\x01" * 250] * 3)
    name = "\x02" * 240
    changed = tuple((f"{deep}/{name}{i}", 1) for i in range(40))
    long_names = tuple((f"{'d' * 250}/{'e' * 250}/{'f' * 250}/{i:04}.txt", 1) for i in range(40))
    for files in (changed, long_names, changed + long_names):
        result = RunResult(RunStatus.OK, stdout="the run's real output\n", changed_files=files)
        built = rich.build(_state(), {**_structured("the run's real output\n")}, result)
        out = built.structured_content
        assert out is not None and out["status"] == "ok"
        assert out["stdout"] == "the run's real output\n"
        assert budget.message_bytes(built) <= budget.RESPONSE_BUDGET_BYTES
        assert len(out["files"]) + out["files_omitted"] == len(files)
        assert all(entry["path"].isprintable() for entry in out["files"])
        assert sum(len(e["path"]) for e in out["files"]) <= rich.LINKS_BYTES


def test_a_flood_of_omitted_figures_is_summed_up() -> None:
    result = RunResult(RunStatus.OK, figures_omitted=800_000)
    out = rich.build(_state(), _structured(), result).structured_content
    assert out is not None
    assert len(out["images_omitted"]) == rich.MAX_OMITTED
    last = out["images_omitted"][-1]["reason"]
    assert last == f"{800_000 - (rich.MAX_OMITTED - 1)} more images left out (not listed)"
