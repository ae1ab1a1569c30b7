"""Red-team harness: run the escape and benign corpora through ``Sandbox.run`` and judge them.

Run with the package installed::

    python packages/pysandbox/harness/harness.py [--corpus-dir DIR] [--no-kernel-layers]
                                                 [--json-out FILE] [--only ID ...]

Each case gets a fresh scratch directory holding the workspace, ``CANARY.txt`` (a random
token), ``VICTIM/keep.txt`` and the environment canaries of ``redteam/README.md``; an optional
TCP listener on 127.0.0.1:8765 records connections. Cases run one at a time. The harness has
its own outer fence that does not rely on the code under test: a cgroup (v1 ``pids`` and
``memory``, nested under the harness's own) when running as root, otherwise ``setrlimit`` on
itself (inherited by every child), plus a size-limited tmpfs scratch directory when root.

Exit status: 0 when every case passed (or with ``--no-kernel-layers``, which only reports),
1 when a case failed, 2 on a usage or setup error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import resource
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil

from pysandbox import Limits, RunResult, RunStatus, Sandbox

STRICTNESS = {"rejected": 3, "blocked": 2, "contained": 1}
MiB = 1024 * 1024
LIMITS = Limits(
    timeout_s=5.0,
    cpu_time_s=5,
    memory_bytes=256 * MiB,
    file_size_bytes=16 * MiB,
    workspace_bytes=64 * MiB,
    workspace_files=2000,
    output_bytes=256 * 1024,
)
GRACE_S = 3.0
LISTEN_PORT = 8765


@dataclass
class CaseReport:
    """The verdict on one case."""

    id: str
    kind: str
    expected: str
    got: str
    status: str
    layer: str
    passed: bool
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    duration_ms: float = 0.0


# --------------------------------------------------------------------------------------------
# Outer fence
# --------------------------------------------------------------------------------------------
class Fence:
    """Limits around the whole harness that do not depend on pysandbox."""

    def __init__(self) -> None:
        self.description: list[str] = []
        self._cgroups: list[pathlib.Path] = []
        self._mount: pathlib.Path | None = None
        self.scratch = pathlib.Path(tempfile.mkdtemp(prefix="pysandbox-redteam-"))

    def __enter__(self) -> Fence:
        if os.geteuid() == 0:
            self._enter_cgroups()
            self._mount_tmpfs()
        else:
            self._prlimit()
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        return self

    def _own_cgroup(self, controller: str) -> pathlib.Path | None:
        try:
            lines = pathlib.Path("/proc/self/cgroup").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(","):
                base = pathlib.Path("/sys/fs/cgroup") / controller
                return base / path.lstrip("/")
        return None

    def _enter_cgroups(self) -> None:
        settings = {
            "pids": {"pids.max": "256"},
            "memory": {"memory.limit_in_bytes": str(2048 * MiB)},
        }
        for controller, values in settings.items():
            own = self._own_cgroup(controller)
            if own is None or not own.is_dir():
                self.description.append(f"cgroup {controller}: unavailable")
                continue
            group = own / f"pysandbox-redteam-{os.getpid()}"
            try:
                group.mkdir()
                for name, value in values.items():
                    (group / name).write_text(value)
                (group / "cgroup.procs").write_text(str(os.getpid()))
            except OSError as exc:
                self.description.append(f"cgroup {controller}: {exc.strerror}")
                with contextlib.suppress(OSError):
                    group.rmdir()
                continue
            self._cgroups.append(group)
            self.description.append(f"cgroup {controller}: {values}")

    def _mount_tmpfs(self) -> None:
        proc = subprocess.run(
            ["/bin/mount", "-t", "tmpfs", "-o", "size=1g,mode=0755", "tmpfs", str(self.scratch)],
            capture_output=True,
            check=False,
        )
        if proc.returncode == 0:
            self._mount = self.scratch
            self.description.append("scratch: tmpfs size=1g")
        else:
            self.description.append("scratch: plain directory (tmpfs mount failed)")

    def _prlimit(self) -> None:
        nproc = len(list(psutil.process_iter()))
        _soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        target = nproc + 256
        if hard == resource.RLIM_INFINITY or target < hard:
            resource.setrlimit(resource.RLIMIT_NPROC, (target, target))
            self.description.append(f"RLIMIT_NPROC={target}")
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * MiB, 256 * MiB))
        self.description.append("RLIMIT_FSIZE=256MiB, scratch: plain directory")

    def __exit__(self, *exc: object) -> None:
        if self._mount is not None:
            subprocess.run(["/bin/umount", "-l", str(self._mount)], check=False)
        shutil.rmtree(self.scratch, ignore_errors=True)
        for group in self._cgroups:
            parent_procs = group.parent / "cgroup.procs"
            with contextlib.suppress(OSError):
                parent_procs.write_text(str(os.getpid()))
            for _ in range(100):  # exiting children may still be listed for a moment
                try:
                    group.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)
            else:
                print(f"harness: could not remove {group}", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# Fixtures of one case
# --------------------------------------------------------------------------------------------
class Listener:
    """Records connections to 127.0.0.1:8765 (if the port is free)."""

    def __init__(self) -> None:
        self.connections = 0
        self._sock: socket.socket | None = None
        sock = socket.socket()
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", LISTEN_PORT))
            sock.listen(16)
            sock.settimeout(0.2)
        except OSError:
            sock.close()
            return
        self._sock = sock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def active(self) -> bool:
        """Whether the listener is bound."""
        return self._sock is not None

    def _serve(self) -> None:
        assert self._sock is not None  # noqa: S101
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self.connections += 1
            with contextlib.suppress(OSError):
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
            conn.close()

    def close(self) -> None:
        """Stop the listener."""
        if self._sock is not None:
            self._stop.set()
            self._thread.join(2)
            self._sock.close()


@dataclass
class Fixture:
    """One case's scratch directory."""

    root: pathlib.Path
    workspace: pathlib.Path
    token: str
    victim_state: tuple[Any, ...]


def victim_state(path: pathlib.Path) -> tuple[Any, ...]:
    """Content, mode, inode and owner of the victim file."""
    try:
        st = path.stat()
        return (path.read_bytes(), st.st_mode, st.st_ino, st.st_uid)
    except OSError as exc:
        return ("missing", exc.errno)


def make_fixture(scratch: pathlib.Path, case_id: str, files: dict[str, str]) -> Fixture:
    """Create the scratch directory of one case (README fixtures)."""
    root = scratch / case_id
    workspace = root / "ws"
    workspace.mkdir(parents=True)
    token = "CANARYTOKEN" + secrets.token_hex(12)
    (root / "CANARY.txt").write_text(token + "\n")
    (root / "VICTIM").mkdir()
    keep = root / "VICTIM" / "keep.txt"
    keep.write_text("keep me\n")
    for rel, text in files.items():
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    if os.geteuid() == 0:
        for path in (root, workspace):
            path.chmod(0o755)
    return Fixture(root, workspace, token, victim_state(keep))


def tmp_entries() -> set[str]:
    """Names in /tmp."""
    return {p.name for p in pathlib.Path("/tmp").iterdir()}  # noqa: S108


def pwned_outside(fx: Fixture, tmp_before: set[str]) -> list[str]:
    """``*PWNED*`` paths outside the workspace (beside it and new ones in /tmp)."""
    found = [str(p) for p in fx.root.glob("*PWNED*")]
    found += [str(p) for p in fx.root.glob("*/*PWNED*") if fx.workspace not in p.parents]
    new_in_tmp = tmp_entries() - tmp_before
    found += [f"/tmp/{n}" for n in new_in_tmp if "PWNED" in n]  # noqa: S108
    return sorted(set(found) - {str(p) for p in fx.workspace.rglob("*PWNED*")})


def leftover_processes(fx: Fixture) -> list[int]:
    """Kill and report processes whose cwd lies in the case's scratch directory."""
    left = []
    for proc in psutil.process_iter():
        try:
            cwd = proc.cwd()
        except (psutil.Error, OSError):
            continue
        if cwd.startswith(str(fx.root)):
            left.append(proc.pid)
            with contextlib.suppress(psutil.Error):
                proc.kill()
    return left


# --------------------------------------------------------------------------------------------
# Judging
# --------------------------------------------------------------------------------------------
def stopping_layer(result: RunResult) -> str:
    """Best reading of which layer stopped the attempt, from what the parent observed."""
    if result.status is RunStatus.REJECTED:
        rules = sorted({str(v.get("rule_id")) for v in result.to_dict()["violations"]})
        return "ast_gate:" + ",".join(rules)
    if result.status in (
        RunStatus.TIMEOUT,
        RunStatus.MEMORY_LIMIT,
        RunStatus.OUTPUT_LIMIT,
        RunStatus.DISK_LIMIT,
    ):
        return f"limit:{result.status.value}"
    if result.status is RunStatus.KILLED:
        return f"killed:{result.detail}"
    text = result.stderr + result.stdout
    checks = (
        ("SandboxDenied", "audit_hook"),
        ("sandbox: import of", "import_guard"),
        ("sandbox: attribute", "attribute_guard"),
        ("sandbox: setting attribute", "attribute_guard"),
        ("sandbox: access outside the workspace", "open_guard"),
        ("[Errno 13] Permission denied", "landlock"),
        ("[Errno 1] Operation not permitted", "seccomp"),
        ("File too large", "rlimit:fsize"),
    )
    for needle, layer in checks:
        if needle in text:
            return layer
    return "-"


def got_outcome(result: RunResult) -> str:
    """Map a status to the corpus vocabulary (rejected, blocked, contained)."""
    if result.status is RunStatus.REJECTED:
        return "rejected"
    if result.status in (RunStatus.OK, RunStatus.ERROR):
        return "blocked"
    return "contained"


def run_escape(
    sb_factory: Any,
    case: dict[str, Any],
    scratch: pathlib.Path,
    listener: Listener,
    secrets_env: dict[str, str],
) -> CaseReport:
    """Run one escape case and check every marker of the README."""
    fx = make_fixture(scratch, case["id"], {})
    tmp_before = tmp_entries()
    connections_before = listener.connections
    sb: Sandbox = sb_factory(fx.workspace)
    started = time.monotonic()
    result = sb.run(case["code"])
    elapsed = time.monotonic() - started
    report = CaseReport(
        id=case["id"],
        kind="escape",
        expected=case["expect"],
        got=got_outcome(result),
        status=result.status.value,
        layer=stopping_layer(result),
        passed=True,
        duration_ms=round(elapsed * 1000, 1),
    )
    blob = json.dumps(result.to_dict())
    if "ESCAPED" in blob:
        report.problems.append("ESCAPED marker in output")
    for value in (fx.token, *secrets_env.values()):
        if value in blob:
            report.problems.append("canary or secret leaked into the result")
    pwned = pwned_outside(fx, tmp_before)
    if pwned:
        report.problems.append(f"PWNED files outside the workspace: {pwned}")
    if victim_state(fx.root / "VICTIM" / "keep.txt") != fx.victim_state:
        report.problems.append("VICTIM/keep.txt changed")
    if listener.connections > connections_before:
        report.problems.append("a connection reached the 127.0.0.1:8765 listener")
    if "NETWORK_SYSCALLS_ALLOWED" in blob:
        report.notes.append("network system calls reached the kernel")
    if elapsed > LIMITS.timeout_s + GRACE_S:
        report.problems.append(f"the call took {elapsed:.1f} s")
    if len(result.stdout.encode()) > LIMITS.output_bytes or len(result.stderr.encode()) > (
        LIMITS.output_bytes
    ):
        report.problems.append("output above the cap")
    if case["id"] == "fs-symlink-server-readback":
        report.notes.append(readback_check(fx, report))
    left = leftover_processes(fx)
    if left:
        report.problems.append(f"processes of the run remained: {left}")
    follow = sb.run("print(1 + 1)")
    if follow.stdout != "2\n":
        report.problems.append(f"follow-up run failed: {follow.status.value}")
    if STRICTNESS[report.got] < STRICTNESS[report.expected]:
        report.problems.append(f"expected {report.expected}, got {report.got}")
    sb.close()
    report.passed = not report.problems
    return report


def readback_check(fx: Fixture, report: CaseReport) -> str:
    """Read result-like files back the way the server must: never following symlinks."""
    for name in ("output.txt", "result.txt", "result.json", "report.md", "env.txt"):
        path = fx.workspace / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(1 << 16)
        if fx.token.encode() in data or b"SANDBOX_CANARY_SECRET" in data:
            report.problems.append(f"read-back of {name} leaked a canary")
    return "read-back with O_NOFOLLOW refused the planted links"


def run_benign(sb_factory: Any, case: dict[str, Any], scratch: pathlib.Path) -> CaseReport:
    """Run one benign case and compare stdout (and the exception) exactly."""
    fx = make_fixture(scratch, case["id"], case.get("files") or {})
    sb: Sandbox = sb_factory(fx.workspace)
    started = time.monotonic()
    result = sb.run(case["code"])
    elapsed = time.monotonic() - started
    expected_exc = case.get("expected_exception")
    report = CaseReport(
        id=case["id"],
        kind="benign",
        expected="ok" if not expected_exc else f"error:{expected_exc}",
        got=result.status.value,
        status=result.status.value,
        layer=stopping_layer(result) if result.status is not RunStatus.OK else "-",
        passed=True,
        duration_ms=round(elapsed * 1000, 1),
    )
    if result.stdout != case["expected_stdout"]:
        report.problems.append("stdout differs from expected_stdout")
    if expected_exc:
        last = result.stderr.strip().splitlines()[-1:] or [""]
        if result.status is not RunStatus.ERROR or not last[0].startswith(expected_exc):
            report.problems.append(f"expected {expected_exc}, got {result.status.value}: {last[0]}")
        else:
            report.got = f"error:{expected_exc}"
    elif result.status is not RunStatus.OK:
        tail = (result.stderr.strip().splitlines() or [""])[-1]
        report.problems.append(f"status {result.status.value}: {tail}")
    sb.close()
    report.passed = not report.problems
    return report


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------
def default_corpus() -> pathlib.Path:
    """The folder of the red-team corpora (``escapes.jsonl``, ``benign.jsonl``).

    Looked for, in order, in ``<package>/tests/data/redteam`` (an unpacked sdist carries them
    there) and in ``<repo>/redteam`` (their one home in the repository, the nearest parent folder
    holding ``noxfile.py``). The package's tests and the MCP server's harness use this too.

    Returns:
        The first of those folders that holds ``escapes.jsonl``.

    Raises:
        FileNotFoundError: Neither does; the message names every place looked at.
    """
    here = pathlib.Path(__file__).resolve().parent
    candidates = [here.parent / "tests" / "data" / "redteam"]
    candidates += [p / "redteam" for p in here.parents if (p / "noxfile.py").is_file()][:1]
    for candidate in candidates:
        if (candidate / "escapes.jsonl").is_file():
            return candidate
    looked = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(
        f"red-team corpora not found (looked in {looked}); run from a checkout of the repository "
        "or an unpacked sdist, or pass --corpus-dir"
    )


def load(path: pathlib.Path) -> list[dict[str, Any]]:
    """Read a JSON Lines corpus."""
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@contextlib.contextmanager
def canary_environment() -> Iterator[dict[str, str]]:
    """Put the README's secret canaries into this process's environment."""
    values = {
        "SANDBOX_CANARY_SECRET": "secret-" + secrets.token_hex(12),
        "CANARY_PROXY": f"http://{secrets.token_hex(6)}.invalid:9",
    }
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield values
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def print_table(reports: list[CaseReport]) -> None:
    """Print one line per case."""
    width = max(len(r.id) for r in reports)
    header = f"{'case':<{width}}  {'expected':<22} {'got':<22} {'layer':<28} verdict"
    print(header)
    print("-" * len(header))
    for r in reports:
        verdict = "PASS" if r.passed else "FAIL: " + "; ".join(r.problems)
        print(f"{r.id:<{width}}  {r.expected:<22} {r.got:<22} {r.layer[:28]:<28} {verdict}")


def summarize(reports: list[CaseReport], kernel_layers: bool) -> dict[str, Any]:
    """Count cases by outcome and layer."""
    escapes = [r for r in reports if r.kind == "escape"]
    benign = [r for r in reports if r.kind == "benign"]
    by_outcome: dict[str, int] = {}
    by_layer: dict[str, int] = {}
    for r in escapes:
        by_outcome[r.got] = by_outcome.get(r.got, 0) + 1
        layer = r.layer.split(":")[0]
        by_layer[layer] = by_layer.get(layer, 0) + 1
    return {
        "mode": "all layers" if kernel_layers else "kernel layers off (Python-level + rlimits)",
        "escapes_total": len(escapes),
        "escapes_passed": sum(r.passed for r in escapes),
        "escapes_failed": [r.id for r in escapes if not r.passed],
        "benign_total": len(benign),
        "benign_passed": sum(r.passed for r in benign),
        "benign_failed": [r.id for r in benign if not r.passed],
        "by_outcome": by_outcome,
        "by_layer": by_layer,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the corpora; see the module docstring for the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--corpus-dir", type=pathlib.Path, default=None)
    parser.add_argument("--no-kernel-layers", action="store_true")
    parser.add_argument("--json-out", type=pathlib.Path, default=None)
    parser.add_argument("--only", nargs="*", default=None, help="case ids to run")
    parser.add_argument(
        "--execution",
        choices=("spawn", "warm"),
        default="warm",
        help="Sandbox execution mode (default: warm, the library's default)",
    )
    args = parser.parse_args(argv)
    try:
        corpus = args.corpus_dir or default_corpus()
        escapes = load(corpus / "escapes.jsonl")
        benign = load(corpus / "benign.jsonl")
    except OSError as exc:
        print(f"harness: cannot read the corpus: {exc}", file=sys.stderr)
        return 2
    kernel = not args.no_kernel_layers
    require = ("landlock", "seccomp") if kernel else ()

    def factory(ws: pathlib.Path) -> Sandbox:
        return Sandbox(
            ws, limits=LIMITS, require=require, kernel_layers=kernel, execution=args.execution
        )

    reports: list[CaseReport] = []
    with Fence() as fence, canary_environment() as secret_env:
        listener = Listener()
        try:
            probe_ws = fence.scratch / "_probe"
            probe_ws.mkdir()
            caps = factory(probe_ws).capabilities()
            print(
                f"mode: {'all layers' if kernel else 'kernel layers OFF'}; uid {os.geteuid()}; "
                f"python {sys.version.split()[0]} ({sys.executable})"
            )
            print(f"active layers: {', '.join(caps.active_layers)}")
            print(f"execution: {dict(caps.execution)}")
            print(f"fence: {'; '.join(fence.description)}; listener: {listener.active}")
            for case in escapes:
                if args.only and case["id"] not in args.only:
                    continue
                reports.append(run_escape(factory, case, fence.scratch, listener, secret_env))
            for case in benign:
                if args.only and case["id"] not in args.only:
                    continue
                reports.append(run_benign(factory, case, fence.scratch))
            time.sleep(GRACE_S)  # then look for processes that outlived their run
            for r in reports:
                ws = fence.scratch / r.id / "ws"
                if (ws / "LATE").exists():
                    r.problems.append("LATE file appeared after the run")
                    r.passed = False
        finally:
            listener.close()
    print()
    print_table(reports)
    summary = summarize(reports, kernel)
    print()
    print(
        f"SUMMARY [{summary['mode']}]: escapes {summary['escapes_passed']}/"
        f"{summary['escapes_total']} held (outcomes {summary['by_outcome']}, layers "
        f"{summary['by_layer']}); benign {summary['benign_passed']}/{summary['benign_total']}; "
        f"failed: {summary['escapes_failed'] + summary['benign_failed'] or 'none'}"
    )
    if args.json_out:
        args.json_out.write_text(
            json.dumps({"summary": summary, "cases": [asdict(r) for r in reports]}, indent=2)
        )
    failed = summary["escapes_failed"] or summary["benign_failed"]
    return 1 if failed and kernel else 0


if __name__ == "__main__":
    sys.exit(main())
