"""Rich results: the files a run created or changed, and the figures it showed.

``RunResult.changed_files`` comes from the walks pysandbox does anyway (the start of a run or
the kept manifest, and the end of the run); ``RunResult.figures`` from the figure channel
(:mod:`pysandbox._figures`). The standard-library tests need no third-party package; the
matplotlib ones are skipped without it.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import zlib

import pytest

from pysandbox import RunStatus, Sandbox, _figures
from pysandbox._disk import changed_files, workspace_usage
from sandbox_helpers import kernel_only_sandbox, needs_kernel

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def tiny_png() -> bytes:
    """The start of a 1x1 grey PNG, built by bytes (no IEND: nothing here decodes it)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = (1).to_bytes(4, "big") * 2 + bytes([8, 0, 0, 0, 0])
    return PNG_MAGIC + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0\x80"))


# -- changed files (standard library) --------------------------------------------------------
def test_changed_files_lists_created_and_changed_files_only(
    sandbox: Sandbox, workspace: pathlib.Path
) -> None:
    (workspace / "same.txt").write_text("same")
    (workspace / "edit.txt").write_text("old")
    (workspace / "gone.txt").write_text("gone")
    code = (
        f"open('dot.png', 'wb').write({tiny_png()!r})\n"
        "import pathlib\n"
        "pathlib.Path('sub/deeper').mkdir(parents=True)\n"
        "open('sub/deeper/x.csv', 'w').write('a,b\\n')\n"
        "open('edit.txt', 'w').write('newer')\n"
        "pathlib.Path('gone.txt').unlink()\n"
    )
    result = sandbox.run(code)
    assert result.status is RunStatus.OK, result.stderr
    assert result.changed_files == (
        ("dot.png", len(tiny_png())),
        ("edit.txt", 5),
        ("sub/deeper/x.csv", 4),
    )
    again = sandbox.run("print(open('edit.txt').read())")  # from the kept manifest
    assert again.stdout == "newer\n"
    assert again.changed_files == ()


def test_a_change_outside_a_run_is_not_the_next_runs(
    sandbox: Sandbox, workspace: pathlib.Path
) -> None:
    assert sandbox.run("print(1)").changed_files == ()
    (workspace / "host.txt").write_text("by the host")
    sandbox.invalidate_workspace_manifest()  # what the server does after writing a file
    assert sandbox.run("print(1)").changed_files == ()


def test_a_failing_run_still_reports_its_files(sandbox: Sandbox) -> None:
    result = sandbox.run("open('partial.txt', 'w').write('abc')\nraise ValueError('late')")
    assert result.status is RunStatus.ERROR
    assert result.changed_files == (("partial.txt", 3),)
    assert result.to_dict()["changed_files"] == [{"path": "partial.txt", "size": 3}]


def test_listing_and_diff(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"12345")
    (tmp_path / "link").symlink_to(tmp_path / "a" / "f")
    os.mkfifo(tmp_path / "pipe")
    listing: dict[str, tuple[int, int, int, int]] = {}
    workspace_usage(str(tmp_path), 100, listing)
    assert sorted(listing) == ["a/f"]  # regular files only: no link, no fifo, no directory
    assert listing["a/f"][1] == 5
    assert changed_files(listing, listing) == ()
    assert changed_files(None, listing) == (("a/f", 5),)
    (tmp_path / "a" / "f").write_bytes(b"123456")
    after: dict[str, tuple[int, int, int, int]] = {}
    workspace_usage(str(tmp_path), 100, after)
    assert changed_files(listing, after) == (("a/f", 6),)


# -- the figure channel's frames (standard library) ------------------------------------------
def frame(data: bytes) -> bytes:
    return b"F" + len(data).to_bytes(4, "big") + data


def test_parse_frames_keeps_whole_frames_within_the_caps() -> None:
    two = frame(b"one") + frame(b"two")
    assert _figures.parse_frames(two, cut=False) == ((b"one", b"two"), 0)
    omitted = b"O" + (99).to_bytes(4, "big")
    assert _figures.parse_frames(frame(b"a") + omitted, cut=False) == ((b"a",), 1)
    many = b"".join(frame(bytes([i])) for i in range(_figures.FIGURE_CHANNEL_COUNT + 3))
    figures, dropped = _figures.parse_frames(many, cut=False)
    assert len(figures) == _figures.FIGURE_CHANNEL_COUNT
    assert dropped == 3


@pytest.mark.parametrize(
    ("data", "cut", "expected"),
    [
        (frame(b"whole") + b"F\x00\x00\x10\x00short", False, ((b"whole",), 1)),
        (frame(b"whole") + b"X garbage", False, ((b"whole",), 1)),
        (frame(b"whole") + b"F\x00", False, ((b"whole",), 1)),
        (frame(b"whole"), True, ((b"whole",), 1)),
        (b"F\xff\xff\xff\xff" + b"x" * 100, False, ((), 1)),
        (b"", False, ((), 0)),
    ],
)
def test_parse_frames_hostile_bytes(
    data: bytes, cut: bool, expected: tuple[tuple[bytes, ...], int]
) -> None:
    assert _figures.parse_frames(data, cut) == expected


@pytest.mark.parametrize(
    "flood",
    [
        frame(b"") * 900_000,  # empty figures over the count (red team, 2026-12-01)
        frame(b"\0" * 1000) * 20_000,  # figures over the byte room
        (b"O" + (0).to_bytes(4, "big")) * 900_000,  # omitted-figure frames
        frame(b"a") * 8 + (b"O" + (0).to_bytes(4, "big") + frame(b"")) * 300_000,  # mixed
    ],
)
def test_parse_frames_counts_at_most_the_cap(flood: bytes) -> None:
    figures, omitted = _figures.parse_frames(flood, cut=True)
    assert len(figures) <= _figures.FIGURE_CHANNEL_COUNT
    assert 0 < omitted <= _figures._MAX_OMITTED


def test_parse_frames_byte_cap() -> None:
    big = b"\0" * (_figures.FIGURE_CHANNEL_BYTES - 10)
    figures, omitted = _figures.parse_frames(frame(big) + frame(b"y" * 11), cut=False)
    assert [len(f) for f in figures] == [len(big)]
    assert omitted == 1


@needs_kernel
def test_forged_frames_on_every_descriptor_change_nothing_but_figures(
    workspace: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kernel-only mode: the code may use os freely and writes forged frames, far over the
    # caps, to every descriptor; the run's status stands and the figures stay within them.
    code = (
        "import os\n"
        "junk = b'F' + (8).to_bytes(4, 'big') + b'NOTAPNG!'\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        for _ in range(2000):\n"
        "            os.write(fd, junk * 64)\n"
        "    except OSError:\n"
        "        pass\n"
        "print('done')\n"
    )
    with kernel_only_sandbox(monkeypatch, workspace) as sb:
        result = sb.run(code, timeout=30)
    assert result.status is RunStatus.OK, result.stderr
    assert result.stdout == "done\n"
    assert 0 < len(result.figures) <= _figures.FIGURE_CHANNEL_COUNT
    assert set(result.figures) == {b"NOTAPNG!"}
    assert result.figures_omitted >= 1
    assert list(workspace.iterdir()) == []


@needs_kernel
@pytest.mark.parametrize(
    "write",
    [
        "open(fd, 'wb', closefd=False).write(data)",  # the default policy: no os needed
        "f = open(fd, 'ab', buffering=0)\n        f.write(data)",
        "print(data.decode('latin-1'), end='', flush=True,\n"
        "              file=open(fd, 'w', encoding='latin-1', closefd=False))",
    ],
)
def test_forged_frames_under_the_default_policy_only_choose_the_run_s_figures(
    workspace: pathlib.Path, write: str
) -> None:
    # SECURITY.md, "Forged frames are harmless" (N2): user code under every layer finds the
    # channel and writes frames; it gets back the bytes it wrote as its figures, and nothing
    # else changes (status, output, the workspace).
    code = (
        "data = b'F' + (8).to_bytes(4, 'big') + b'FORGED!!'\n"
        "for fd in range(3, 32):\n"
        "    try:\n"
        f"        {write}\n"
        "    except Exception:\n"
        "        pass\n"
        "print('done')\n"
    )
    with Sandbox(workspace, require=("landlock", "seccomp")) as sb:
        result = sb.run(code, timeout=30)
    assert result.status is RunStatus.OK, result.stderr
    assert result.stdout == "done\n"
    assert result.figures == (b"FORGED!!",)
    assert result.figures_omitted == 0
    assert list(workspace.iterdir()) == []


# -- matplotlib --------------------------------------------------------------------------------
MPL = importlib.util.find_spec("matplotlib") is not None
needs_mpl = pytest.mark.skipif(not MPL, reason="matplotlib is not installed")

PLOT = (
    "import matplotlib\n"
    "matplotlib.use('Agg')\n"
    "import matplotlib.pyplot as plt\n"
    "fig, ax = plt.subplots(figsize=(2, 2), dpi=50)\n"
    "ax.plot([1, 3, 2])\n"
)


def mpl_sandbox(workspace: pathlib.Path) -> Sandbox:
    return Sandbox(workspace, require=("landlock", "seccomp"), extra_modules=("matplotlib",))


@needs_mpl
@needs_kernel
def test_open_figure_comes_back_and_leaves_nothing(workspace: pathlib.Path) -> None:
    with mpl_sandbox(workspace) as sb:
        result = sb.run(PLOT + "plt.show()\nprint('shown')\n", timeout=60)
    assert result.status is RunStatus.OK, result.stderr
    assert result.stdout == "shown\n"
    assert len(result.figures) == 1
    assert result.figures[0][:8] == PNG_MAGIC
    assert result.figures_omitted == 0
    assert result.changed_files == ()
    assert list(workspace.iterdir()) == []  # nothing of the figure in the workspace


@needs_mpl
@needs_kernel
def test_saved_and_closed_figure_is_a_changed_file_not_a_figure(workspace: pathlib.Path) -> None:
    with mpl_sandbox(workspace) as sb:
        result = sb.run(PLOT + "fig.savefig('plot.png')\nplt.close(fig)\n", timeout=60)
    assert result.status is RunStatus.OK, result.stderr
    assert result.figures == ()
    assert [path for path, _ in result.changed_files] == ["plot.png"]
    assert (workspace / "plot.png").read_bytes()[:8] == PNG_MAGIC


@needs_mpl
@needs_kernel
def test_figures_over_the_count_are_counted(workspace: pathlib.Path) -> None:
    extra = _figures.FIGURE_CHANNEL_COUNT + 2
    code = PLOT + f"for i in range({extra - 1}):\n    plt.figure(figsize=(1, 1), dpi=20)\n"
    with mpl_sandbox(workspace) as sb:
        result = sb.run(code, timeout=60)
    assert result.status is RunStatus.OK, result.stderr
    assert len(result.figures) == _figures.FIGURE_CHANNEL_COUNT
    assert result.figures_omitted == 2


@needs_mpl
@needs_kernel
def test_a_figure_that_fails_to_render_keeps_the_status(workspace: pathlib.Path) -> None:
    code = PLOT + "ax.set_title(r'$\\frac{$')\nprint('before the end')\nraise SystemExit(3)\n"
    with mpl_sandbox(workspace) as sb:
        failed = sb.run(code, timeout=60)
        fine = sb.run(PLOT.replace("ax.plot", "ax.set_title(r'$\\frac{$'); ax.plot"), timeout=60)
    assert failed.status is RunStatus.ERROR
    assert failed.exit_code == 3
    assert failed.stdout == "before the end\n"
    assert failed.figures == ()
    assert "pysandbox: figure 1 was not shown" in failed.stderr
    assert fine.status is RunStatus.OK
    assert fine.exit_code == 0
    assert fine.figures == ()
