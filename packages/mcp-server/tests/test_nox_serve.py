"""``nox -s serve`` (the repository's ``noxfile.py``): what a stdio client that starts it gets.

The session is taken from the noxfile's source and run against a recording session: the server
runs in the directory nox was invoked from (relative paths are the caller's), its stderr is not
sent to stdout (nox's default for a command), and the environment is installed once and again
only when a ``pyproject.toml`` changes or a profile's extra (``--profile datascience``) is not
installed yet.
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


#: The server's extras as the fake noxfile sees them (the real ones: a test below).
EXTRAS = {"s3": ["wsnapshot[s3]"], "datascience": ["secure-pysandbox[datascience]"]}


def _serve_namespace(
    packages: list[pathlib.Path],
    installs: list[dict[str, Any]],
    environ: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The noxfile's serve session and its helpers, with nox and the installer left out."""
    module = ast.parse(NOXFILE.read_text(encoding="utf-8"))
    wanted = {
        "serve",
        "install_state",
        "serve_extras",
        "SERVE_STAMP",
        "SERVE_PROFILE_FLAG",
        "SERVE_PROFILE_ENV",
    }
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
        "os": SimpleNamespace(environ={} if environ is None else environ),
        "PACKAGES": {
            "mcp-secure-sandbox": SimpleNamespace(
                pyproject={"project": {"optional-dependencies": EXTRAS}}
            )
        },
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
    assert installs[0]["extras"] == ()
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


def _checkout(tmp_path: pathlib.Path) -> list[pathlib.Path]:
    packages = []
    for name in ("astguard", "pysandbox", "mcp-server"):
        (tmp_path / "packages" / name).mkdir(parents=True)
        (tmp_path / "packages" / name / "pyproject.toml").write_text(f"[project]\nname='{name}'\n")
        packages.append(tmp_path / "packages" / name)
    return packages


@pytest.mark.parametrize(
    ("posargs", "environ"),
    [
        pytest.param(["--profile", "datascience"], {}, id="flag"),
        pytest.param(["--workspace", "ws", "--profile=datascience"], {}, id="flag-equals"),
        pytest.param([], {"SANDBOX_PROFILE": "datascience"}, id="variable"),
        pytest.param(["--profile", "none", "--profile", "datascience"], {}, id="last-flag-wins"),
        pytest.param(
            ["--profile", "datascience"], {"SANDBOX_PROFILE": "none"}, id="flag-over-variable"
        ),
    ],
)
def test_serve_installs_the_extra_of_the_profile_it_starts_with(
    tmp_path: pathlib.Path, posargs: list[str], environ: dict[str, str]
) -> None:
    packages = _checkout(tmp_path)
    venv, caller = tmp_path / "venv", tmp_path / "elsewhere"
    venv.mkdir()
    caller.mkdir()
    installs: list[dict[str, Any]] = []
    namespace = _serve_namespace(packages, installs, environ)

    session = _Session(venv, caller, list(posargs))
    namespace["serve"](session)
    assert installs == [{"dist": "mcp-secure-sandbox", "groups": (), "silent": True,
                         "extras": ("datascience",)}]  # fmt: skip
    assert [c[0] for c in session.calls] == ["install", "chdir", "run"]
    assert session.calls[2][1] == ("mcp-secure-sandbox", *posargs)
    stamp = (venv / namespace["SERVE_STAMP"]).read_text(encoding="utf-8").splitlines()
    assert stamp[1] == "datascience"

    # Started again with the profile, or without one: the extra is installed, nothing is.
    namespace["serve"](_Session(venv, caller, list(posargs)))
    environ.clear()
    namespace["serve"](_Session(venv, caller, []))
    assert len(installs) == 1
    # A pyproject.toml changed: installed again, the extra kept current though not asked for.
    (packages[1] / "pyproject.toml").write_text("[project]\nname='pysandbox'\nversion='2'\n")
    namespace["serve"](_Session(venv, caller, []))
    assert len(installs) == 2 and installs[1]["extras"] == ("datascience",)


@pytest.mark.parametrize(
    ("posargs", "environ"),
    [
        pytest.param([], {}, id="no-profile"),
        pytest.param(["--profile", "none"], {}, id="none"),
        pytest.param([], {"SANDBOX_PROFILE": "none"}, id="variable-none"),
        pytest.param(["--profile=none"], {"SANDBOX_PROFILE": "datascience"}, id="flag-wins"),
        pytest.param(["--profile", "datasciences"], {}, id="unknown: the server refuses it"),
        pytest.param(["--", "--profile", "datascience"], {}, id="after-double-dash"),
    ],
)
def test_serve_installs_no_extra_without_a_profile(
    tmp_path: pathlib.Path, posargs: list[str], environ: dict[str, str]
) -> None:
    venv, caller = tmp_path / "venv", tmp_path / "elsewhere"
    venv.mkdir()
    caller.mkdir()
    installs: list[dict[str, Any]] = []
    namespace = _serve_namespace(_checkout(tmp_path), installs, environ)
    namespace["serve"](_Session(venv, caller, list(posargs)))
    assert [i["extras"] for i in installs] == [()]


def test_an_environment_installed_without_the_extra_gets_it(tmp_path: pathlib.Path) -> None:
    packages = _checkout(tmp_path)
    venv, caller = tmp_path / "venv", tmp_path / "elsewhere"
    venv.mkdir()
    caller.mkdir()
    installs: list[dict[str, Any]] = []
    namespace = _serve_namespace(packages, installs)
    stamp = venv / namespace["SERVE_STAMP"]
    # The stamp of the session before extras: the digest alone; it stays current without one.
    stamp.write_text(namespace["install_state"]("mcp-secure-sandbox"), encoding="utf-8")
    namespace["serve"](_Session(venv, caller, []))
    assert installs == []
    namespace["serve"](_Session(venv, caller, ["--profile", "datascience"]))
    assert [i["extras"] for i in installs] == [("datascience",)]


def test_install_local_installs_the_extra_on_the_server_s_folder() -> None:
    module = ast.parse(NOXFILE.read_text(encoding="utf-8"))
    (node,) = [
        n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "install_local"
    ]
    node.decorator_list = []
    folders = [pathlib.Path("/c/packages/pysandbox"), pathlib.Path("/c/packages/mcp-server")]
    dists = ["secure-pysandbox", "mcp-secure-sandbox"]
    namespace: dict[str, Any] = {
        "__builtins__": __builtins__,
        "closure": lambda dist: [
            SimpleNamespace(path=f, dist=d) for f, d in zip(folders, dists, strict=True)
        ],
    }
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(NOXFILE), "exec"), namespace)  # noqa: S102
    installed: list[tuple[tuple[str, ...], dict[str, Any]]] = []
    session = SimpleNamespace(install=lambda *a, **k: installed.append((a, k)))
    namespace["install_local"](session, "mcp-secure-sandbox", silent=True, extras=("datascience",))
    assert installed == [
        (
            ("-e", "/c/packages/pysandbox", "-e", "/c/packages/mcp-server[datascience]"),
            {"silent": True},
        )
    ]
    # The fake's extras are the server's real ones.
    pyproject = (ROOT / "packages" / "mcp-server" / "pyproject.toml").read_text(encoding="utf-8")
    for extra in EXTRAS:
        assert f"\n{extra} = [" in pyproject.split("[project.optional-dependencies]")[1]


def test_the_readme_says_where_serve_resolves_paths() -> None:
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "`nox -s serve -- --workspace DIR`" in readme
    assert "relative to the directory you run nox from" in readme
    assert "stdout carries only the MCP protocol" in readme
