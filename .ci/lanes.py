"""Run the sessions ``nox`` selects by default in parallel lanes, then report each one's time.

``nox`` runs its sessions one after another; most of them wait on processes (sandboxed children,
servers, interpreters starting), so on a 2-core machine two lanes finish the same sessions in
much less time. This script is CI's test command (the README's "Development" section names it):

    python3 .ci/lanes.py [--lanes N] [--report FILE] [--timeout-min M] [SESSION ...]

It lists the default sessions with ``nox -l --json`` (or takes the names given), runs each as
``nox -s NAME --report <its own file>`` in the first free lane, longest first by the times in
``.ci/durations.json`` (a session not listed there counts as :data:`UNKNOWN_S`), and writes one
report in ``nox --report``'s format, each entry with its ``duration_s``, then prints the table of
sessions by time. A session's output is printed whole when it ends, under a header, so the log
reads session by session. Sessions that share a tag of :data:`EXCLUSIVE_TAGS` never overlap
(``unprivileged``: the red team and the smoke test create and remove the same system user).

Exit status: 0 when every session succeeded, 1 otherwise, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

HERE = pathlib.Path(__file__).resolve().parent
#: Expected seconds per session (measured on the 2-core CI machine), for the order of the queue.
DURATIONS_FILE = HERE / "durations.json"
#: Seconds assumed for a session with no recorded time.
UNKNOWN_S = 120.0
#: Tags whose sessions must not run at the same time as another session with the same tag.
EXCLUSIVE_TAGS = frozenset({"unprivileged"})


@dataclass
class Job:
    """One nox session to run and, once run, its outcome."""

    name: str
    tags: frozenset[str]
    expected_s: float
    result: str = "not run"
    duration_s: float = 0.0
    entries: list[dict[str, object]] = field(default_factory=list)


def list_sessions(nox: list[str]) -> list[dict[str, object]]:
    """The sessions ``nox`` selects by default, as ``nox -l --json`` describes them."""
    out = subprocess.run([*nox, "-l", "--json"], capture_output=True, text=True, check=True)
    listed = json.loads(out.stdout)
    if not isinstance(listed, list):
        raise SystemExit("lanes: nox -l --json did not print a list")
    return [s for s in listed if isinstance(s, dict)]


def run_job(nox: list[str], job: Job, scratch: pathlib.Path, timeout_s: float) -> str:
    """Run one session; return its whole output. Sets the job's result, time and entries."""
    report = scratch / f"{abs(hash(job.name))}.json"
    began = time.monotonic()
    # A session of its own: past the time-out the whole group goes (pytest, its workers, the
    # sandboxes and servers they started), not nox alone.
    proc = subprocess.Popen(
        [*nox, "-s", job.name, "--report", str(report)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout_s)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 30)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        output, _ = proc.communicate()
        output += f"\nlanes: {job.name} killed after {timeout_s / 60:g} minutes\n"
        code = -1
    job.duration_s = time.monotonic() - began
    try:
        entries = json.loads(report.read_text(encoding="utf-8")).get("sessions", [])
    except (OSError, ValueError):
        entries = []
    job.entries = [e for e in entries if isinstance(e, dict)]
    for entry in job.entries:
        entry["duration_s"] = round(job.duration_s, 1)
    if not job.entries:
        job.entries = [
            {
                "name": job.name,
                "signatures": [job.name],
                "result": "failed",
                "result_code": code,
                "args": {},
                "duration_s": round(job.duration_s, 1),
            }
        ]
    job.result = "success" if code == 0 else "failed"
    return output


def main(argv: list[str]) -> int:
    """Parse ``argv``, run the sessions in lanes, write the report; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("sessions", nargs="*", help="session names (default: nox's default set)")
    parser.add_argument("--lanes", type=int, default=2, help="sessions at a time (default 2)")
    parser.add_argument("--report", type=pathlib.Path, default=pathlib.Path(".nox-report.json"))
    parser.add_argument(
        "--timeout-min", type=float, default=30.0, help="a session's own limit (default 30)"
    )
    parser.add_argument("--nox", default="nox", help="the nox command (default: nox on PATH)")
    args = parser.parse_args(argv)
    if args.lanes < 1:
        parser.error("--lanes must be at least 1")
    nox = [args.nox]
    expected: dict[str, float] = {}
    if DURATIONS_FILE.is_file():
        expected = {str(k): float(v) for k, v in json.loads(DURATIONS_FILE.read_text()).items()}
    listed = {str(s["session"]): s for s in list_sessions(nox)}
    names = args.sessions or list(listed)
    unknown = [n for n in names if n not in listed]
    if unknown:
        parser.error(f"not a default session of nox: {', '.join(unknown)}")
    jobs = [
        Job(
            name=n,
            tags=frozenset(str(t) for t in listed[n].get("tags", []) or []),  # type: ignore[union-attr]
            expected_s=expected.get(n, UNKNOWN_S),
        )
        for n in names
    ]
    queue = sorted(jobs, key=lambda j: -j.expected_s)
    lock = threading.Condition()
    held: set[str] = set()  # exclusive tags in use
    began = time.monotonic()

    def take() -> Job | None:
        with lock:
            while queue:
                for job in queue:
                    if not (job.tags & EXCLUSIVE_TAGS & held):
                        queue.remove(job)
                        held.update(job.tags & EXCLUSIVE_TAGS)
                        return job
                lock.wait()
            return None

    def lane(number: int, scratch: pathlib.Path) -> None:
        while (job := take()) is not None:
            try:
                output = run_job(nox, job, scratch, args.timeout_min * 60)
            except Exception as exc:  # the job fails, the lane goes on
                job.result, output = "failed", f"lanes: {job.name} could not run: {exc!r}\n"
            finally:
                with lock:  # released whatever happened: a lane waiting for the tag goes on
                    held.difference_update(job.tags & EXCLUSIVE_TAGS)
                    lock.notify_all()
            with lock:
                print(f"\n==== lane {number}: {job.name}: {job.result} in {job.duration_s:.0f} s")
                print(output, end="" if output.endswith("\n") else "\n", flush=True)

    print(f"lanes: {len(jobs)} sessions in {args.lanes} lanes: {', '.join(j.name for j in queue)}")
    sys.stdout.flush()
    with tempfile.TemporaryDirectory(prefix="nox-lanes-") as tmp:
        threads = [
            threading.Thread(target=lane, args=(i + 1, pathlib.Path(tmp)), daemon=True)
            for i in range(args.lanes)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    wall = time.monotonic() - began
    entries = [e for j in jobs for e in j.entries]
    passed = all(j.result == "success" for j in jobs)
    # nox's own report format: "result" is 1 when every session succeeded.
    report = {"result": int(passed), "sessions": entries}
    args.report.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\n== sessions by time ({args.lanes} lanes, {wall / 60:.1f} min wall)")
    print(f"{'session':40} {'result':8} {'seconds':>8}")
    for job in sorted(jobs, key=lambda j: -j.duration_s):
        print(f"{job.name:40} {job.result:8} {job.duration_s:8.0f}")
    total = sum(j.duration_s for j in jobs)
    print(f"{'sum of sessions':40} {'':8} {total:8.0f}")
    print(f"{'wall':40} {'':8} {wall:8.0f}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
