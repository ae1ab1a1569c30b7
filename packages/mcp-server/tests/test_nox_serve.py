"""``nox -s serve`` (the repository's ``noxfile.py``): what a stdio client that starts it gets.

The session is taken from the noxfile's source and run against a recording session: the server
runs in the directory nox was invoked from (relative paths are the caller's), its stderr is not
sent to stdout (nox's default for a command), and the environment is installed once and again
only when a ``pyproject.toml`` changes.
"""

from __future__ import annotations

import ast
import hashlib
import pathlib
import subprocess
from types import SimpleNamespace
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
NOXFILE = ROOT / "noxfile.py"
pytestmark = pytest.mark.skipif(
    not NOXFILE.is_file(),
    reason="not in the repository checkout (an unpacked sdist has one package)",
)


class _Session:
    """Records what the serve session asks of nox, in order."""

    def __init__(self, venv: pathlib.Path, invoked_from: pathlib.Path, posargs: list[str]):
        self.virtualenv = SimpleNamespace(location=str(venv))
        self.invoked_from = str(invoked_from)
        self.posargs = posargs
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def chdir(self, path: str) -> None:
        self.calls.append(("chdir", (path,), {}))

    def run(self, *args: str, **kwargs: Any) -> None:
        self.calls.append(("run", args, kwargs))


def _serve_namespace(
    packages: list[pathlib.Path], installs: list[dict[str, Any]]
) -> dict[str, Any]:
    """The noxfile's serve session and its helpers, with nox and the installer left out."""
    module = ast.parse(NOXFILE.read_text(encoding="utf-8"))
    wanted = {"serve", "install_state", "SERVE_STAMP"}
    body: list[ast.stmt] = []
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name in wanted:
            node.decorator_list = []
            body.append(node)
        elif isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) in wanted:
            body.append(node)
    assert len(body) == len(wanted), [getattr(n, "name", None) for n in body]

    def closure(dist: str) -> list[SimpleNamespace]:
        assert dist == "mcp-secure-sandbox"
        return [SimpleNamespace(path=path) for path in packages]

    def install_local(session: _Session, dist: str, *groups: str, **kwargs: Any) -> None:
        installs.append({"dist": dist, "groups": groups, **kwargs})
        session.calls.append(("install", (dist,), kwargs))

    namespace: dict[str, Any] = {
        "__builtins__": __builtins__,
        "hashlib": hashlib,
        "pathlib": pathlib,
        "subprocess": subprocess,
        "closure": closure,
        "install_local": install_local,
        "nox": SimpleNamespace(Session=_Session),
    }
    exec(compile(ast.Module(body=body, type_ignores=[]), str(NOXFILE), "exec"), namespace)  # noqa: S102
    return namespace


def test_serve_runs_in_the_caller_s_directory_and_keeps_stdout_for_the_protocol(
    tmp_path: pathlib.Path,
) -> None:
    packages = []
    for name in ("astguard", "mcp-server"):
        (tmp_path / "packages" / name).mkdir(parents=True)
        (tmp_path / "packages" / name / "pyproject.toml").write_text(
            f"[project]\nname = '{name}'\n"
        )
        packages.append(tmp_path / "packages" / name)
    venv, caller = tmp_path / "venv", tmp_path / "elsewhere"
    venv.mkdir()
    caller.mkdir()
    installs: list[dict[str, Any]] = []
    namespace = _serve_namespace(packages, installs)
    posargs = ["--workspace", "ws", "--snapshots=snaps", "--token-file", "token"]

    session = _Session(venv, caller, list(posargs))
    namespace["serve"](session)
    # Installed quietly (the installer's output would reach stdout), then run in the caller's
    # directory with the arguments as given, its stderr its own.
    assert [c[0] for c in session.calls] == ["install", "chdir", "run"]
    assert session.calls[0][2].get("silent") is True
    assert session.calls[1] == ("chdir", (str(caller),), {})
    name, args, kwargs = session.calls[2]
    assert args == ("mcp-secure-sandbox", *posargs)
    assert "stderr" in kwargs and kwargs["stderr"] is None
    assert kwargs.get("stdout") is None and not kwargs.get("silent")

    # Started again: the environment is current, nothing is installed.
    again = _Session(venv, caller, [])
    namespace["serve"](again)
    assert [c[0] for c in again.calls] == ["chdir", "run"]
    assert len(installs) == 1

    # A package's pyproject.toml changed (a dependency, an entry point): installed again, once.
    (packages[0] / "pyproject.toml").write_text("[project]\nname = 'astguard'\ndependencies = []\n")
    for _ in range(2):
        namespace["serve"](_Session(venv, caller, []))
    assert len(installs) == 2
    # A new environment (no stamp in it) is installed.
    fresh = tmp_path / "fresh-venv"
    fresh.mkdir()
    namespace["serve"](_Session(fresh, caller, []))
    assert len(installs) == 3


def test_the_readme_says_where_serve_resolves_paths() -> None:
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "`nox -s serve -- --workspace DIR`" in readme
    assert "relative to the directory you run nox from" in readme
    assert "stdout carries only the MCP protocol" in readme
