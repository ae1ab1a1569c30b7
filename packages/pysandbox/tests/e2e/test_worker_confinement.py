"""confine_worker: a server's helper process confined for good, with the kernel layers of a run."""

from __future__ import annotations

import inspect
import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

from sandbox_helpers import needs_landlock, needs_seccomp

PROBE = textwrap.dedent(
    """
    import json, os, socket, sys
    from pysandbox import confine_worker
    readable, writable, outside = sys.argv[1:4]
    applied = confine_worker(
        memory_bytes=256 << 20, cpu_time_s=20, read_only=(readable,), writable=(writable,)
    )
    out = {"abi": applied.landlock_abi, "seccomp": applied.seccomp}

    def attempt(name, fn):
        try:
            fn()
            out[name] = "allowed"
        except MemoryError:
            out[name] = "MemoryError"
        except OSError as exc:
            out[name] = type(exc).__name__

    attempt("read_granted", lambda: open(os.path.join(readable, "r.txt")).read())
    attempt("write_granted", lambda: open(os.path.join(writable, "w.txt"), "w").write("x"))
    attempt("write_readonly", lambda: open(os.path.join(readable, "n.txt"), "w").write("x"))
    attempt("read_outside", lambda: open(outside).read())
    attempt("exec", lambda: os.execv("/bin/true", ["true"]))
    attempt("fork", lambda: os.waitpid(os.fork(), 0) if os.fork() else os._exit(0))
    attempt("socket_inet", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    attempt("socket_unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
    attempt("memory", lambda: bytearray(512 << 20))
    print(json.dumps(out))
    """
)


@needs_landlock
@needs_seccomp
def test_confined_worker_reads_granted_paths_writes_only_where_asked(
    tmp_path: pathlib.Path,
) -> None:
    readable, writable, other = (tmp_path / n for n in ("ro", "rw", "other"))
    for d in (readable, writable, other):
        d.mkdir()
    (readable / "r.txt").write_text("r")
    (other / "secret").write_text("s")
    done = subprocess.run(
        [sys.executable, "-I", "-c", PROBE, str(readable), str(writable), str(other / "secret")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["abi"] >= 1
    assert result["seccomp"] is True
    assert result["read_granted"] == "allowed"
    assert result["write_granted"] == "allowed"
    assert (writable / "w.txt").read_text() == "x"
    assert result["write_readonly"] == "PermissionError"
    assert result["read_outside"] == "PermissionError"
    assert result["exec"] == "PermissionError"
    assert result["fork"] == "PermissionError"
    assert result["socket_inet"] == "PermissionError"
    assert result["socket_unix"] == "PermissionError"
    assert result["memory"] == "MemoryError"
    assert not (readable / "n.txt").exists()


def test_confinement_cannot_be_asked_for_without_the_kernel_layers_silently() -> None:
    from pysandbox import WorkerConfinement, confine_worker

    assert WorkerConfinement.__dataclass_fields__.keys() == {
        "landlock_abi",
        "seccomp",
        "read_only",
        "writable",
    }
    parameter = inspect.signature(confine_worker).parameters["require_kernel_layers"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
    assert parameter.default is True
    with pytest.raises(TypeError):
        confine_worker(64 << 20, 10)  # type: ignore[call-arg]  # keyword-only: no silent mix-up
