"""Red-team harness: run the escape and benign corpora through ``Sandbox.run`` and judge them.

Run with the package installed::

    python packages/pysandbox/harness/harness.py [--corpus-dir DIR] [--no-kernel-layers]
                                                 [--kernel-only] [--json-out FILE] [--only ID ...]

Each case gets a fresh scratch directory holding the workspace, ``CANARY.txt`` (a random
token), ``VICTIM/keep.txt`` and the environment canaries of ``redteam/README.md``; an optional
TCP listener on 127.0.0.1:8765 records connections. Cases run one at a time. The harness has
its own outer fence that does not rely on the code under test: a cgroup (v1 ``pids`` and
``memory``, nested under the harness's own) when running as root, otherwise ``setrlimit`` on
itself (inherited by every child), plus a size-limited tmpfs scratch directory when root.

``--kernel-only`` runs the escape corpus in pysandbox's testing mode (``_testing_kernel_only``:
no AST gate, no Python guards; Landlock, seccomp and the limits stay) and judges each case by its
EFFECT, not by its ``expect`` label (see ``run_escape_effects``): no file outside the workspace
written or created, no canary read, no connection to the listener, no signal delivered to a
sentinel process (or to the harness), no process of the run left. The benign corpus is not run.

Exit status: 0 when every case passed (or with ``--no-kernel-layers``, which only reports),
1 when a case failed (with ``--kernel-only``: violated an invariant), 2 on a usage or setup error.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import pathlib
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import psutil

from pysandbox import (
    KERNEL_LAYERS,
    PROFILES,
    ExecutionMode,
    Layer,
    Limits,
    RunResult,
    RunStatus,
    Sandbox,
)
from pysandbox.runner import TESTING_KERNEL_ONLY_ENV

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
    """Records connections to 127.0.0.1:``port``.

    The port is 8765 by default, 0 picks a free one; when the port is taken nothing is bound and
    ``active`` is false.
    """

    def __init__(self, port: int = LISTEN_PORT) -> None:
        self.connections = 0
        self.port = port
        self._sock: socket.socket | None = None
        sock = socket.socket()
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
            self.port = sock.getsockname()[1]
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


#: The shared temporary directory a case's ``*PWNED*`` entries are looked for in (new ones
#: only). The harness's own tests point it elsewhere for their deliberately unsandboxed
#: controls, so the control's entry is seen by no other judge running beside it.
TMP_DIR = pathlib.Path("/tmp")  # noqa: S108


def tmp_entries() -> set[str]:
    """Names in :data:`TMP_DIR`."""
    return {p.name for p in TMP_DIR.iterdir()}


def pwned_outside(fx: Fixture, tmp_before: set[str]) -> list[str]:
    """``*PWNED*`` paths outside the workspace (beside it and new ones in /tmp)."""
    found = [str(p) for p in fx.root.glob("*PWNED*")]
    found += [str(p) for p in fx.root.glob("*/*PWNED*") if fx.workspace not in p.parents]
    new_in_tmp = tmp_entries() - tmp_before
    found += [str(TMP_DIR / n) for n in new_in_tmp if "PWNED" in n]
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
        ("SandboxDenied", str(Layer.AUDIT_HOOK)),
        ("sandbox: import of", str(Layer.IMPORT_GUARD)),
        ("sandbox: attribute", str(Layer.ATTRIBUTE_GUARD)),
        ("sandbox: setting attribute", str(Layer.ATTRIBUTE_GUARD)),
        ("sandbox: access outside the workspace", str(Layer.OPEN_GUARD)),
        ("[Errno 13] Permission denied", str(Layer.LANDLOCK)),
        ("[Errno 1] Operation not permitted", str(Layer.SECCOMP)),
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
# Kernel-only mode: judging by effect
# --------------------------------------------------------------------------------------------
#: Signals the sentinel and the harness count (SIGKILL and SIGSTOP show as death or a stop).
COUNTED_SIGNALS = (
    signal.SIGHUP,
    signal.SIGINT,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGTERM,
    signal.SIGALRM,
    signal.SIGXCPU,
    signal.SIGXFSZ,
    signal.SIGCONT,
)
#: The harness counts these on itself (not SIGINT, so that Ctrl-C still stops it).
HARNESS_COUNTED = tuple(s for s in COUNTED_SIGNALS if s not in (signal.SIGINT, signal.SIGCONT))
SENTINEL_CODE = """
import json, signal, sys
counts = {}
def note(signum, frame):
    counts[signum] = counts.get(signum, 0) + 1
for s in %r:
    signal.signal(s, note)
print('ready', flush=True)
for line in sys.stdin:
    print(json.dumps(counts), flush=True)
"""


class Sentinel:
    """A process outside the run (own session) that counts the signals it receives.

    ``counts()`` asks it over a pipe; a signal sent before the question is handled before the
    answer (its blocking read is interrupted, the handler runs, the read resumes), so the answer
    is exact. SIGKILL shows as the process gone, SIGSTOP as the question left unanswered.
    """

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SENTINEL_CODE % ([int(s) for s in COUNTED_SIGNALS],)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.proc.stdout is not None  # noqa: S101
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the signal sentinel did not start")

    def counts(self) -> dict[str, int] | str:
        """Signals received so far by name, or a string saying why the sentinel cannot answer."""
        if self.proc.poll() is not None:
            return f"the sentinel died (status {self.proc.returncode})"
        try:
            if psutil.Process(self.proc.pid).status() == psutil.STATUS_STOPPED:
                return "the sentinel was stopped"
        except psutil.Error:
            return "the sentinel is gone"
        assert self.proc.stdin is not None and self.proc.stdout is not None  # noqa: S101
        try:
            self.proc.stdin.write("?\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except OSError:
            line = ""
        if not line:  # killed while being asked
            return f"the sentinel died (status {self.proc.wait()})"
        raw = json.loads(line)
        return {signal.Signals(int(k)).name: v for k, v in raw.items()}

    def close(self) -> None:
        """Stop the sentinel."""
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


@contextlib.contextmanager
def counting_own_signals() -> Iterator[dict[str, int]]:
    """Count the signals of ``HARNESS_COUNTED`` this process receives (handlers restored after)."""
    counts: dict[str, int] = {}

    def note(signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        counts[name] = counts.get(name, 0) + 1

    saved = {s: signal.signal(s, note) for s in HARNESS_COUNTED}
    try:
        yield counts
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def outside_snapshot(scratch: pathlib.Path) -> dict[str, tuple[Any, ...]]:
    """Every entry of the scratch directory outside the workspaces (``<case>/ws``), by path.

    Each entry maps to its type, mode, inode, owner, size and modification time, and for regular
    files up to 1 MiB a SHA-256 of the content. Symbolic links are not followed.
    """
    found: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(scratch):
        here = pathlib.Path(dirpath)
        if here.parent == scratch:
            dirnames[:] = [d for d in dirnames if d != "ws"]
        for name in dirnames + filenames:
            path = here / name
            try:
                st = path.lstat()
            except OSError as exc:
                found[str(path)] = ("unreadable", exc.errno)
                continue
            digest = ""
            if path.is_file() and not path.is_symlink() and st.st_size <= MiB:
                try:
                    digest = hashlib.sha256(path.read_bytes()).hexdigest()
                except OSError as exc:
                    digest = f"unreadable:{exc.errno}"
            found[str(path)] = (
                st.st_mode,
                st.st_ino,
                st.st_uid,
                st.st_size,
                st.st_mtime_ns,
                digest,
            )
    return found


def snapshot_changes(
    before: dict[str, tuple[Any, ...]], after: dict[str, tuple[Any, ...]]
) -> list[str]:
    """Paths created, removed or changed between two ``outside_snapshot`` results."""
    created = [f"created {p}" for p in sorted(after.keys() - before.keys())]
    removed = [f"removed {p}" for p in sorted(before.keys() - after.keys())]
    changed = [
        f"changed {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]
    ]
    return created + removed + changed


def workspace_holds(workspace: pathlib.Path, needles: list[bytes]) -> list[str]:
    """Workspace files (regular, not followed through links) whose content holds a needle."""
    hits = []
    for dirpath, _dirnames, filenames in os.walk(workspace):
        for name in filenames:
            path = pathlib.Path(dirpath) / name
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as fh:
                data = fh.read(128 * MiB)
            if any(n in data for n in needles):
                hits.append(str(path.relative_to(workspace)))
    return hits


#: Error text in a run's output that shows a kernel layer or a limit refused a step.
KERNEL_REFUSALS = (
    ("[Errno 1] Operation not permitted", "kernel:EPERM"),
    ("[Errno 13] Permission denied", "kernel:EACCES"),
    ("[Errno 38] Function not implemented", "kernel:ENOSYS"),
    ("File too large", "rlimit:fsize"),
    ("[Errno 11] Resource temporarily unavailable", "rlimit:nproc"),
)


def kernel_stop(result: RunResult) -> str:
    """Which kernel layer or limit stopped a run, or ``-`` when its output shows none did.

    ``-`` covers runs that finished and runs whose refusal left no text (``os.system`` returns
    127 when the kernel refuses its ``clone``): the effect judge alone says they did no harm.
    """
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
    for needle, layer in KERNEL_REFUSALS:
        if needle in text:
            return layer
    return "-"


def run_escape_effects(
    sb_factory: Any,
    case: dict[str, Any],
    scratch: pathlib.Path,
    *,
    listener: Listener,
    secrets_env: dict[str, str],
    sentinel: Sentinel,
    own_signals: dict[str, int],
) -> CaseReport:
    """Run one escape case (in kernel-only mode) and judge it by effect, not by ``expect``.

    Invariants (a breach is a problem, the case fails): no entry of ``scratch`` outside the
    workspaces created, removed or changed (``CANARY.txt``, ``VICTIM/``, the workspace's
    siblings, earlier cases), no new ``*PWNED*`` in /tmp; the canary token and the secret
    environment values in neither the result nor a workspace file; no connection to the
    listener; no signal to the sentinel or the harness; no process with its working directory
    in the case's directory after the run. Everything else (``ESCAPED`` printed, the time taken,
    the follow-up run) is a note. ``got`` is ``stopped`` (``layer`` says by what) or
    ``no effect``.
    """
    fx = make_fixture(scratch, case["id"], {})
    code = case["code"]
    if listener.port != LISTEN_PORT:  # 8765 was taken: the case is told the listener's port
        code = code.replace(str(LISTEN_PORT), str(listener.port))
    tmp_before = tmp_entries()
    outside_before = outside_snapshot(scratch)
    connections_before = listener.connections
    signals_before = sentinel.counts()
    own_before = dict(own_signals)
    sb: Sandbox = sb_factory(fx.workspace)
    started = time.monotonic()
    result = sb.run(code)
    elapsed = time.monotonic() - started
    stop = kernel_stop(result)
    report = CaseReport(
        id=case["id"],
        kind="escape-effect",
        expected="no effect",
        got="no effect" if stop == "-" else "stopped",
        status=result.status.value,
        layer=stop,
        passed=True,
        duration_ms=round(elapsed * 1000, 1),
    )
    tail = (result.stderr.strip().splitlines() or [""])[-1][:120]
    if tail:
        report.notes.append(f"last stderr line: {tail}")
    blob = json.dumps(result.to_dict())
    needles = [fx.token, *secrets_env.values()]
    if any(n in blob for n in needles):
        report.problems.append("canary or secret in the result")
    leaked = workspace_holds(fx.workspace, [n.encode() for n in needles])
    if leaked:
        report.problems.append(f"canary or secret in workspace files: {leaked}")
    if listener.connections > connections_before:
        report.problems.append(f"a connection reached the listener on 127.0.0.1:{listener.port}")
    if not listener.active:
        report.problems.append("no listener: connections cannot be observed")
    signals_after = sentinel.counts()
    if signals_after != signals_before:
        report.problems.append(f"signals reached the sentinel: {signals_before} -> {signals_after}")
    if own_signals != own_before:
        report.problems.append(f"signals reached the harness: {own_before} -> {own_signals}")
    if "ESCAPED" in blob:
        report.notes.append("ESCAPED printed (the step returned; its effect is judged above)")
    if elapsed > LIMITS.timeout_s + GRACE_S:
        report.notes.append(f"the call took {elapsed:.1f} s")
    follow = sb.run("print(1 + 1)")
    if follow.stdout != "2\n":
        report.notes.append(f"follow-up run failed: {follow.status.value}")
    sb.close()
    left = leftover_processes(fx)
    if left:
        report.problems.append(f"processes of the run remained: {left}")
    # the snapshots hold the case's own fixture (taken after it was made), not its workspace
    changes = snapshot_changes(outside_before, outside_snapshot(scratch))
    pwned_tmp = sorted(n for n in tmp_entries() - tmp_before if "PWNED" in n)
    changes += [f"created {TMP_DIR / n}" for n in pwned_tmp]
    if changes:
        report.problems.append(f"files outside the workspace: {sorted(set(changes))[:8]}")
    report.passed = not report.problems
    return report


def summarize_effects(reports: list[CaseReport]) -> dict[str, Any]:
    """Count kernel-only cases: violations, and which the kernel stopped vs ran harmlessly."""
    cases = [r for r in reports if r.kind == "escape-effect"]
    return {
        "mode": "kernel-only (testing mode), judged by effect",
        "escapes_total": len(cases),
        "violations": [r.id for r in cases if not r.passed],
        "stopped": {r.id: r.layer for r in cases if r.got == "stopped"},
        "no_effect": [r.id for r in cases if r.got == "no effect"],
    }


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


def kernel_only_factory(execution: str) -> Any:
    """A factory of kernel-only sandboxes.

    Sets ``PYSANDBOX_TESTING_KERNEL_ONLY=1`` in this process's environment, which the testing
    mode needs at each construction.
    """
    os.environ[TESTING_KERNEL_ONLY_ENV] = "1"

    def factory(ws: pathlib.Path) -> Sandbox:
        return Sandbox(
            ws,
            limits=LIMITS,
            require=KERNEL_LAYERS,
            execution=execution,  # type: ignore[arg-type]
            _testing_kernel_only=True,
        )

    return factory


def run_kernel_only(
    escapes: list[dict[str, Any]], execution: str, scratch: pathlib.Path
) -> list[CaseReport]:
    """Run the escape corpus in kernel-only mode and judge each case by effect.

    After a grace period it looks again for processes that outlived their run: a ``LATE`` file,
    a process with its working directory in the case's directory, a signal that arrived late.
    """
    factory = kernel_only_factory(execution)
    reports: list[CaseReport] = []
    listener = Listener()
    if not listener.active:  # 8765 is taken (another run?): a free port, written into the cases
        listener = Listener(0)
    sentinel = Sentinel()
    try:
        with canary_environment() as secret_env, counting_own_signals() as own:
            for case in escapes:
                reports.append(
                    run_escape_effects(
                        factory,
                        case,
                        scratch,
                        listener=listener,
                        secrets_env=secret_env,
                        sentinel=sentinel,
                        own_signals=own,
                    )
                )
            signals_before_grace = (sentinel.counts(), dict(own))
            time.sleep(GRACE_S)
            for r in reports:
                root = scratch / r.id
                late = []
                if (root / "ws" / "LATE").exists():
                    late.append("LATE file appeared after the run")
                left = [p.pid for p in psutil.process_iter() if _cwd_under(p, root)]
                if left:
                    late.append(f"processes remained after the grace period: {left}")
                r.problems += late
                r.passed = not r.problems
            signals_after_grace = (sentinel.counts(), dict(own))
            if reports and signals_after_grace != signals_before_grace:
                # a process of some earlier case, still alive: the last report carries it
                reports[-1].problems.append(
                    f"signals arrived during the grace period: {signals_after_grace}"
                )
                reports[-1].passed = False
    finally:
        listener.close()
        sentinel.close()
    return reports


def _cwd_under(proc: psutil.Process, root: pathlib.Path) -> bool:
    try:
        return proc.cwd().startswith(str(root))
    except (psutil.Error, OSError):
        return False


def main_kernel_only(
    escapes: list[dict[str, Any]],
    execution: str,
    only: list[str] | None,
    json_out: pathlib.Path | None,
) -> int:
    """``--kernel-only``: the escape corpus in the testing mode, judged by effect."""
    chosen = [c for c in escapes if not only or c["id"] in only]
    with Fence() as fence:
        caps = kernel_only_factory(execution)(_mkdir(fence.scratch / "_probe")).capabilities()
        print(
            f"mode: KERNEL-ONLY (testing), judged by effect; uid {os.geteuid()}; "
            f"python {sys.version.split()[0]} ({sys.executable}); execution {execution}"
        )
        print(f"active layers: {', '.join(caps.active_layers)}")
        print(f"fence: {'; '.join(fence.description)}")
        reports = run_kernel_only(chosen, execution, fence.scratch)
    print()
    print_table(reports)
    summary = summarize_effects(reports)
    print()
    print(
        f"SUMMARY [{summary['mode']}, {execution}]: {summary['escapes_total']} cases, "
        f"{len(summary['violations'])} violated an invariant "
        f"({summary['violations'] or 'none'}); stopped by a kernel layer or limit: "
        f"{len(summary['stopped'])}; ran and did nothing harmful: {len(summary['no_effect'])}"
    )
    if json_out:
        json_out.write_text(
            json.dumps({"summary": summary, "cases": [asdict(r) for r in reports]}, indent=2)
        )
    return 1 if summary["violations"] else 0


def _mkdir(path: pathlib.Path) -> pathlib.Path:
    path.mkdir()
    return path


def _profile(name: str) -> dict[str, Any]:
    """The Sandbox arguments of a profile: modules, preload, policy (and ``LIMITS``' memory).

    The profiles' one home is :data:`pysandbox.PROFILES`; this harness only reads it.
    """
    global LIMITS  # noqa: PLW0603 - the cases read the module's limits
    if not name:
        return {}
    if name not in PROFILES:
        raise SystemExit(f"harness: unknown profile {name!r}; known: {', '.join(PROFILES)}")
    profile = PROFILES[name]
    LIMITS = replace(
        LIMITS, memory_bytes=profile.memory_bytes, timeout_s=max(LIMITS.timeout_s, 20.0)
    )
    return {
        "extra_modules": profile.extra_modules,
        "preload": profile.preload,
        "policy": profile.policy_for(),  # its checker rules (the data-science profile's AG309)
    }


def main(argv: list[str] | None = None) -> int:
    """Run the corpora; see the module docstring for the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--corpus-dir", type=pathlib.Path, default=None)
    parser.add_argument("--no-kernel-layers", action="store_true")
    parser.add_argument(
        "--kernel-only",
        action="store_true",
        help="testing mode (no AST gate, no Python guards); escapes judged by effect",
    )
    parser.add_argument("--json-out", type=pathlib.Path, default=None)
    parser.add_argument("--only", nargs="*", default=None, help="case ids to run")
    parser.add_argument(
        "--profile",
        default="",
        help="a profile of pysandbox.PROFILES (datascience): its corpora (escapes-NAME.jsonl, "
        "benign-NAME.jsonl), extra modules, preload and memory limit",
    )
    parser.add_argument(
        "--execution",
        choices=[str(mode) for mode in ExecutionMode],
        default=str(ExecutionMode.WARM),
        help="Sandbox execution mode (default: warm, the library's default)",
    )
    args = parser.parse_args(argv)
    try:
        corpus = args.corpus_dir or default_corpus()
        suffix = f"-{args.profile}" if args.profile else ""
        escapes = load(corpus / f"escapes{suffix}.jsonl")
        benign = load(corpus / f"benign{suffix}.jsonl")
    except OSError as exc:
        print(f"harness: cannot read the corpus: {exc}", file=sys.stderr)
        return 2
    profile_args = _profile(args.profile)
    kernel = not args.no_kernel_layers
    if args.kernel_only and not kernel:
        print("harness: --kernel-only keeps the kernel layers on", file=sys.stderr)
        return 2
    if args.kernel_only:
        return main_kernel_only(escapes, args.execution, args.only, args.json_out)
    require = KERNEL_LAYERS if kernel else ()

    def factory(ws: pathlib.Path) -> Sandbox:
        return Sandbox(
            ws,
            limits=LIMITS,
            require=require,
            kernel_layers=kernel,
            execution=args.execution,
            **profile_args,
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
