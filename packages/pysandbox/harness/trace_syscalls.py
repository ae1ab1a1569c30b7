"""Trace the system calls sandboxed code makes, per interpreter: the input of the allow-list.

``strace -f -qq -e trace=all`` follows a worker that runs the benign corpus
(``redteam/benign.jsonl``) and a set of ordinary scripts (:data:`ORDINARY`) through
``Sandbox.run`` exactly as the sandbox runs code (AST gate, Python guards, rlimits, Landlock,
spawn and warm execution), except that the seccomp filter is replaced by one that allows
everything, so every call is seen. The child loads that filter where it would load the real
one, so its ``prctl(PR_SET_SECCOMP, ...)`` of a one-instruction filter marks the bootstrap
point in the trace (the capability report's self-test loads the real, longer filters in a
process of its own, which is not counted): the calls a
child (and its threads) makes after it are the calls the real filter must decide.

Driver (default; needs ``strace`` and ``uv``)::

    python packages/pysandbox/harness/trace_syscalls.py [--out FILE] [--python EXE ...]

builds one virtual environment per interpreter (pyenv 3.10-3.13 under ``~/.pyenv/versions``
and Debian's ``/usr/bin/python3`` by default) with astguard and pysandbox from this checkout,
runs the worker in each under strace, and writes the sorted set of system-call names per
interpreter and execution mode, their union, and each case's status to ``--out``
(``harness/traced-syscalls.json`` by default; ``nox -s trace-syscalls`` runs this).

The data-science stack (:data:`pysandbox.DATASCIENCE`'s modules, numpy, pandas, matplotlib,
from pysandbox's ``[datascience]`` extra) is installed into each environment as well, and where
it installs, the public data-science corpus (``redteam/benign-datascience.jsonl``) is traced
the same way with the stack allowed and preloaded (warm, and spawn, where it is imported after
the filter). Its calls
are kept apart, in ``--datascience-out`` (``harness/traced-syscalls-datascience.json``), with
``beyond_standard_library``: what the stack makes that the standard-library runs did not.
``--no-datascience`` skips the stack; ``--datascience-only`` traces only the stack and compares
with the standard-library report already at ``--out``.

Worker (run by the driver, under the interpreter traced)::

    python trace_syscalls.py worker --corpus FILE --execution spawn|warm --status-out FILE
        [--datascience]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any

from pysandbox import DATASCIENCE, KERNEL_LAYERS, ExecutionMode

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE = HERE.parent
ROOT = PACKAGE.parent.parent
DEFAULT_OUT = HERE / "traced-syscalls.json"
DEFAULT_DATASCIENCE_OUT = HERE / "traced-syscalls-datascience.json"
DEFAULT_CORPUS = ROOT / "redteam" / "benign.jsonl"
DATASCIENCE_CORPUS = ROOT / "redteam" / "benign-datascience.jsonl"
#: The stack as tests/e2e/test_datascience.py runs it: the data-science profile's modules, allowed,
#: and its preload, preloaded by the warm zygote.
STACK = DATASCIENCE.extra_modules
PRELOAD = DATASCIENCE.preload
PYENV_VERSIONS = ("3.10", "3.11", "3.12", "3.13")
SYSTEM_PYTHON = "/usr/bin/python3"

#: Ordinary scripts beyond the benign corpus: runtime paths the corpus may not reach.
ORDINARY: dict[str, str] = {
    "threads": (  # threading itself is refused by the gate; asyncio's executor uses threads
        "import asyncio\n"
        "def work(n):\n    return n * n\n"
        "async def main():\n    loop = asyncio.get_running_loop()\n"
        "    done = await asyncio.gather("
        "*(loop.run_in_executor(None, work, n) for n in range(50)))\n"
        "    more = await asyncio.to_thread(work, 7)\n    return sum(done) + more\n"
        "print(asyncio.run(main()))\n"
    ),
    "time-and-sleep": (
        "import time, datetime\nstart = time.monotonic()\ntime.sleep(0.02)\n"
        "print(time.monotonic() - start >= 0.02, datetime.datetime.now().year > 2000)\n"
        "print(time.process_time() >= 0, time.perf_counter() > 0, time.time() > 0)\n"
    ),
    "randomness": (
        "import random, secrets, uuid, hashlib\nprint(len(secrets.token_hex(16)))\n"
        "print(uuid.uuid4().version, random.SystemRandom().random() < 1)\n"
        "print(hashlib.sha256(b'x').hexdigest()[:8])\n"
    ),
    "large-allocation": (
        "big = bytearray(64 * 1024 * 1024)\nbig[-1] = 1\nprint(len(big))\ndel big\n"
        "chunks = [bytes(1024 * 1024) for _ in range(32)]\nprint(len(chunks))\n"
    ),
    "memory-limit": (
        "try:\n    hog = bytearray(1 << 40)\nexcept MemoryError:\n    print('MemoryError')\n"
    ),
    "workspace-files": (
        "from pathlib import Path\np = Path('d/e')\np.mkdir(parents=True)\n"
        "(p / 'a.txt').write_text('hello')\n(p / 'b.txt').write_bytes((p / 'a.txt').read_bytes())\n"
        "(p / 'b.txt').rename(p / 'c.txt')\nprint(sorted(x.name for x in p.iterdir()))\n"
        "print((p / 'c.txt').stat().st_size, (p / 'c.txt').exists())\n(p / 'c.txt').unlink()\n"
        "with open(p / 'a.txt', 'a') as f:\n    f.write('!')\n    f.flush()\n"
        "print(open(p / 'a.txt').read())\n(p / 'a.txt').unlink()\np.rmdir()\n"
        "print(Path('d').exists(), list(Path('.').glob('*')))\n"
    ),
    "stdlib-extensions": (
        "import decimal, fractions, statistics, json, re, zlib, math, array, struct, bisect\n"
        "import heapq, itertools, functools, collections, datetime, csv, io, string, textwrap\n"
        "import unicodedata, base64, binascii, hashlib, operator, copy, pprint, enum, typing\n"
        "print(decimal.Decimal('1.1') + 1, fractions.Fraction(1, 3), statistics.mean([1, 2]))\n"
        "print(zlib.crc32(b'x'), unicodedata.name('a'), math.tau > 6)\n"
    ),
    "exceptions-and-exit": (
        "import traceback\ntry:\n    1 / 0\nexcept ZeroDivisionError:\n"
        "    print(traceback.format_exc().splitlines()[-1])\n"
        "def deep(n):\n    return deep(n + 1)\ntry:\n    deep(0)\nexcept RecursionError:\n"
        "    print('RecursionError')\nraise SystemExit(3)\n"
    ),
    "much-output": "for i in range(20000):\n    print(i, 'x' * 20)\n",
    "asyncio": (
        "import asyncio\nasync def main():\n    await asyncio.sleep(0.01)\n    return 7\n"
        "print(asyncio.run(main()))\n"
    ),
}


# ---- worker (runs under the traced interpreter) ---------------------------------------------
def _cases(
    corpus: pathlib.Path, *, ordinary: bool = True, prefix: str = "benign"
) -> list[tuple[str, str, dict[str, str]]]:
    cases: list[tuple[str, str, dict[str, str]]] = []
    if ordinary:
        cases += [(f"ordinary/{name}", code, {}) for name, code in ORDINARY.items()]
    for line in corpus.read_text(encoding="utf-8").splitlines():
        if line.strip():
            case = json.loads(line)
            cases.append((f"{prefix}/{case['id']}", case["code"], case.get("files", {})))
    return cases


def worker(
    corpus: pathlib.Path, execution: str, status_out: pathlib.Path, *, datascience: bool = False
) -> int:
    """Run every case through a sandbox whose seccomp filter allows everything.

    With ``datascience`` the corpus alone runs (no ordinary scripts), with :data:`STACK`
    allowed and :data:`PRELOAD` preloaded, both kernel layers required, as the suite runs it.
    """
    from pysandbox import Limits, Sandbox, _seccomp

    allow_all = (0x06).to_bytes(2, sys.byteorder) + bytes(2)  # BPF_RET | BPF_K
    allow_all += _seccomp.RET_ALLOW.to_bytes(4, sys.byteorder)

    class TracingSandbox(Sandbox):
        """The sandbox as it is, with one seccomp filter that allows every call."""

        def _seccomp_filters(self) -> tuple[_seccomp.SeccompProgram, ...]:
            real = super()._seccomp_filters()
            return (dataclasses.replace(real[0], name="trace-allow-all", code=allow_all),)

    statuses: dict[str, str] = {}
    memory = DATASCIENCE.memory_bytes if datascience else Limits().memory_bytes
    limits = Limits(timeout_s=30.0 if datascience else 20.0, memory_bytes=memory)
    options: dict[str, Any] = {"require": ()}
    if datascience:
        options = {"require": KERNEL_LAYERS, "extra_modules": STACK, "preload": PRELOAD}
    prefix = "datascience" if datascience else "benign"
    cases = _cases(corpus, ordinary=not datascience, prefix=prefix)
    for case_id, code, files in cases:
        with tempfile.TemporaryDirectory(prefix="trace-ws-") as workspace:
            for name, text in files.items():
                path = pathlib.Path(workspace, name)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            sandbox = TracingSandbox(workspace, limits=limits, execution=execution, **options)
            with sandbox:
                result = sandbox.run(code)
            statuses[case_id] = result.status.value
            layers = ",".join(sorted(result.layers))
            print(f"{execution} {case_id}: {result.status.value} [{layers}]", flush=True)
    status_out.write_text(json.dumps(statuses, indent=1, sort_keys=True), encoding="utf-8")
    return 0


# ---- reading strace's output ------------------------------------------------------------------
_LINE = re.compile(r"^(\d+)\s+(?:<\.\.\. (\w+) resumed>|(\w+)\()")
_RESULT = re.compile(r"\)\s+=\s+(-?\d+)")
#: The tracing filter is one instruction long; the capability report's self-test loads the real
#: filters (longer) in a process of its own, which must not count.
_MARKER = "prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, {len=1, "
_SPAWNING = {"clone", "clone3", "fork", "vfork"}


def calls_after_marker(trace: str, numbers: dict[int, str]) -> set[str]:
    """The system calls of traced processes after each one loaded the one-instruction filter.

    A process is followed from its marker (``PR_SET_SECCOMP`` with ``len=1``) on, together with
    the threads and processes it creates after it. ``syscall_0x1c3`` (a call strace does not
    know by name) is named from ``numbers``.
    """
    marked: set[int] = set()
    names: set[str] = set()
    for line in trace.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        pid = int(match.group(1))
        name = match.group(2) or match.group(3)
        if pid not in marked:
            if _MARKER in line:
                marked.add(pid)
            continue
        if name.startswith("syscall_0x"):
            name = numbers.get(int(name.removeprefix("syscall_"), 16), name)
        if not line.startswith(f"{pid} <... "):  # a resumed call was counted when it started
            names.add(name)
        if name in _SPAWNING:
            result = _RESULT.search(line)
            if result is not None and int(result.group(1)) > 0:
                marked.add(int(result.group(1)))
    return names


# ---- driver -----------------------------------------------------------------------------------
def _interpreters() -> list[str]:
    root = pathlib.Path(os.environ.get("PYENV_ROOT", pathlib.Path.home() / ".pyenv"))
    found: list[str] = []
    for version in PYENV_VERSIONS:
        candidates = sorted((root / "versions").glob(f"{version}.*/bin/python{version}"))
        if candidates:
            found.append(str(candidates[-1]))
    if pathlib.Path(SYSTEM_PYTHON).exists():
        found.append(SYSTEM_PYTHON)
    return found


def _label(python: str) -> tuple[str, str]:
    version = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    origin = "debian" if python == SYSTEM_PYTHON else "pyenv"
    return f"{origin}-{version}", version


def _run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, text=True, **kwargs)


def _trace_modes(
    label: str,
    vpython: str,
    corpus: pathlib.Path,
    scratch: pathlib.Path,
    numbers: dict[int, str],
    *,
    datascience: bool = False,
) -> dict[str, Any]:
    """Run the worker under strace once per execution mode; the calls and statuses per mode."""
    modes: dict[str, Any] = {}
    for execution in (ExecutionMode.SPAWN, ExecutionMode.WARM):
        stem = f"{label}-{'ds-' if datascience else ''}{execution}"
        trace_file = scratch / f"{stem}.strace"
        status_file = scratch / f"{stem}.json"
        cmd = ["strace", "-f", "-qq", "-e", "trace=all", "-o", str(trace_file)]
        cmd += [vpython, str(pathlib.Path(__file__).resolve()), "worker"]
        cmd += ["--corpus", str(corpus), "--execution", str(execution)]
        cmd += ["--status-out", str(status_file)]
        cmd += ["--datascience"] if datascience else []
        _run(cmd, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        trace = trace_file.read_text(encoding="utf-8", errors="replace")
        statuses = json.loads(status_file.read_text(encoding="utf-8"))
        markers = trace.count(_MARKER)
        if markers < len(statuses):
            raise SystemExit(f"{label} {execution}: {markers} markers for {len(statuses)} runs")
        counts: dict[str, int] = {}
        for status in statuses.values():
            counts[status] = counts.get(status, 0) + 1
        modes[str(execution)] = {
            "runs": len(statuses),
            "statuses": dict(sorted(counts.items())),
            "not_ok": {case: s for case, s in sorted(statuses.items()) if s != "ok"},
            "syscalls": sorted(calls_after_marker(trace, numbers)),
        }
        trace_file.unlink()
    return modes


def _union(modes: dict[str, Any]) -> list[str]:
    return sorted(set().union(*(set(m["syscalls"]) for m in modes.values())))


#: Imports the stack in a sandbox as the data-science worker configures it (real filter, spawn).
_SMOKE = """
import sys
from pysandbox import DATASCIENCE, KERNEL_LAYERS, ExecutionMode, Limits, Sandbox
limits = Limits(timeout_s=60.0, memory_bytes=DATASCIENCE.memory_bytes)
options = dict(require=KERNEL_LAYERS, extra_modules=%r, execution=ExecutionMode.SPAWN)
with Sandbox(sys.argv[1], limits=limits, **options) as sandbox:
    result = sandbox.run("import %s")
status, last = result.status.value, (result.stderr.strip().splitlines() or [""])[-1]
print("" if status == "ok" else f"{status}: {last}")
"""


def _stack_failure(vpython: str, scratch: pathlib.Path) -> str:
    """Empty when the stack imports in a sandbox; else the run's status and last error line."""
    workspace = scratch / "smoke-ws"
    workspace.mkdir(exist_ok=True)
    code = _SMOKE % (STACK, ", ".join(PRELOAD))
    done = subprocess.run(
        [vpython, "-c", code, str(workspace)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["the smoke check failed"])[-1]
    return done.stdout.strip()


def trace_interpreter(
    python: str,
    corpus: pathlib.Path,
    scratch: pathlib.Path,
    numbers: dict[int, str],
    *,
    standard_library: bool = True,
    datascience: bool = True,
) -> tuple[dict[str, Any] | None, dict[str, Any] | str | None]:
    """Build a venv for ``python``, run the worker under strace per mode, read the traces.

    Returns:
        ``(standard-library entry, data-science entry)``: each ``None`` when not asked for; the
        data-science entry is the reason (a string) when the stack did not install.
    """
    label, version = _label(python)
    venv = scratch / label
    _run(["uv", "venv", "--quiet", "-p", python, str(venv)])
    vpython = str(venv / "bin" / "python")
    packages = [str(ROOT / "packages" / name) for name in ("astguard", "pysandbox")]
    _run(["uv", "pip", "install", "--quiet", "-p", vpython, *packages])
    entry: dict[str, Any] | None = None
    if standard_library:
        modes = _trace_modes(label, vpython, corpus, scratch, numbers)
        entry = {"executable": python, "version": version, "modes": modes}
        entry["syscalls"] = _union(modes)
    if not datascience:
        return entry, None
    # pysandbox's [datascience] extra (the pins' one home), from this checkout.
    stack = f"{PACKAGE}[{DATASCIENCE.extra}]"
    install = ["uv", "pip", "install", "--quiet", "-p", vpython, packages[0], stack]
    print("+", " ".join(install), flush=True)
    installed = subprocess.run(install, text=True, capture_output=True, check=False)
    if installed.returncode != 0:
        print(f"{label}: the data-science stack did not install; not traced", flush=True)
        return entry, " ".join(installed.stderr.split())[-300:] or "uv pip install failed"
    script = (
        "import importlib.metadata as m, json, sys\n"
        "print(json.dumps([m.version(n) for n in sys.argv[1:]]))"
    )
    versions = subprocess.run(
        [vpython, "-c", script, *STACK], capture_output=True, text=True, check=True
    ).stdout
    failure = _stack_failure(vpython, scratch)
    if failure:
        print(f"{label}: the stack does not import in the sandbox; not traced", flush=True)
        return entry, f"the stack does not import in the sandbox: {failure}"
    ds_modes = _trace_modes(label, vpython, DATASCIENCE_CORPUS, scratch, numbers, datascience=True)
    ds_entry = {
        "executable": python,
        "version": version,
        "stack": dict(zip(STACK, json.loads(versions), strict=True)),
        "modes": ds_modes,
        "syscalls": _union(ds_modes),
    }
    return entry, ds_entry


def _header(abi: Any) -> dict[str, Any]:
    """Where the trace was taken: machine, kernel, strace and date."""
    machine = abi.canonical_machine() or platform.machine()
    strace = subprocess.run(["strace", "-V"], capture_output=True, text=True, check=True)
    return {
        "machine": machine,
        "kernel": platform.release(),
        "strace": strace.stdout.splitlines()[0],
        "date": datetime.date.today().isoformat(),
    }


def _relative(path: pathlib.Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def driver(
    out: pathlib.Path,
    pythons: list[str],
    corpus: pathlib.Path,
    *,
    datascience_out: pathlib.Path = DEFAULT_DATASCIENCE_OUT,
    standard_library: bool = True,
    datascience: bool = True,
) -> int:
    """Trace every interpreter; write the reports to ``out`` and ``datascience_out``.

    The stack's ``beyond_standard_library`` is computed against the report at ``out`` (read
    back, so that ``standard_library=False`` compares with the committed one).
    """
    for tool in ("strace", "uv"):
        if shutil.which(tool) is None:
            print(f"{tool} is required (apt-get install strace; pip install uv)", file=sys.stderr)
            return 2
    from pysandbox import _abi  # the session running the driver installs pysandbox

    numbers = {nr: name for name, nr in _abi.syscall_table().items()}
    header = _header(_abi)
    report: dict[str, Any] = {
        "about": (
            "System calls made after the seccomp point by sandboxed runs of the benign corpus "
            "and harness/trace_syscalls.py's ordinary scripts, per interpreter and execution "
            "mode, traced with strace -f with an allow-everything filter in place of the real "
            "one. Regenerate with `nox -s trace-syscalls`."
        ),
        **header,
        "corpus": _relative(corpus),
        "ordinary_scripts": sorted(ORDINARY),
        "interpreters": {},
    }
    ds_report: dict[str, Any] = {
        "about": (
            "System calls made after the seccomp point by sandboxed runs of the data-science "
            "corpus with the stack allowed and preloaded (warm: imported by the zygote before "
            "the filter; spawn: imported after it), per interpreter where the stack installs, "
            "traced as traced-syscalls.json is. beyond_standard_library: the calls "
            "traced-syscalls.json's union does not have. Regenerate with `nox -s trace-syscalls`."
        ),
        **header,
        "corpus": _relative(DATASCIENCE_CORPUS),
        "stack": list(STACK),
        "preload": list(PRELOAD),
        "standard_library_trace": _relative(out),
        "interpreters": {},
        "not_traced": {},
    }
    with tempfile.TemporaryDirectory(prefix="trace-syscalls-") as tmp:
        for python in pythons:
            label, _ = _label(python)
            entry, ds_entry = trace_interpreter(
                python,
                corpus,
                pathlib.Path(tmp),
                numbers,
                standard_library=standard_library,
                datascience=datascience,
            )
            if entry is not None:
                report["interpreters"][label] = entry
                print(f"{label}: {len(entry['syscalls'])} distinct system calls", flush=True)
            if isinstance(ds_entry, str):
                ds_report["not_traced"][label] = ds_entry
            elif ds_entry is not None:
                ds_report["interpreters"][label] = ds_entry
                print(f"{label}: {len(ds_entry['syscalls'])} with the stack", flush=True)
    if standard_library:
        every = [set(e["syscalls"]) for e in report["interpreters"].values()]
        report["union"] = sorted(set().union(*every))
        report["intersection"] = sorted(set.intersection(*every)) if every else []
        out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {out}: {len(report['union'])} distinct system calls in all")
    if datascience:
        stdlib = json.loads(out.read_text(encoding="utf-8"))
        for label, ds_entry in ds_report["interpreters"].items():
            same = stdlib["interpreters"].get(label, {}).get("syscalls", stdlib["union"])
            ds_entry["beyond_standard_library"] = sorted(set(ds_entry["syscalls"]) - set(same))
        ds_every = [set(e["syscalls"]) for e in ds_report["interpreters"].values()]
        ds_report["union"] = sorted(set().union(*ds_every))
        ds_report["beyond_standard_library"] = sorted(
            set(ds_report["union"]) - set(stdlib["union"])
        )
        datascience_out.write_text(json.dumps(ds_report, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {datascience_out}: {len(ds_report['union'])} distinct system calls")
    return 0


def main() -> int:
    """Parse the command line; run the driver or the worker."""
    # No abbreviations: the worker's --datascience would be ambiguous with the driver's options.
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    sub = parser.add_subparsers(dest="command")
    work = sub.add_parser("worker", help="run the cases (under strace, started by the driver)")
    work.add_argument("--corpus", type=pathlib.Path, required=True)
    work.add_argument("--execution", choices=[str(m) for m in ExecutionMode], required=True)
    work.add_argument("--status-out", type=pathlib.Path, required=True)
    work.add_argument("--datascience", dest="ds_worker", action="store_true", help="the stack")
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    parser.add_argument("--datascience-out", type=pathlib.Path, default=DEFAULT_DATASCIENCE_OUT)
    parser.add_argument("--corpus", type=pathlib.Path, default=DEFAULT_CORPUS)
    parser.add_argument("--python", action="append", help="interpreter to trace (repeatable)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--no-datascience",
        dest="datascience",
        action="store_false",
        help="do not install and trace the data-science stack",
    )
    which.add_argument(
        "--datascience-only",
        dest="standard_library",
        action="store_false",
        help="trace the stack only; compare with the standard-library report already at --out",
    )
    args = parser.parse_args()
    if args.command == "worker":
        return worker(args.corpus, args.execution, args.status_out, datascience=args.ds_worker)
    return driver(
        args.out,
        args.python or _interpreters(),
        args.corpus,
        datascience_out=args.datascience_out,
        standard_library=args.standard_library,
        datascience=args.datascience,
    )


if __name__ == "__main__":
    raise SystemExit(main())
