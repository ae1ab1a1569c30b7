"""matplotlib's configuration and font cache for children: built once, read-only for them.

matplotlib writes its font cache (``fontlist-v*.json``, seconds to build) into its
configuration directory on first use. A child must neither build it on every run nor write it
into the workspace (``HOME`` there), so the sandbox's process builds it once, in a subprocess,
into a directory of its own (``MPLCONFIGDIR`` of every run, warm and spawn) that children may
only read. The cache lists only fonts under matplotlib's own data directory (DejaVu and the
other bundled fonts), which the distribution's read grant covers: a font file the child cannot
read would make matplotlib rebuild the cache, that is, write.
"""

from __future__ import annotations

import atexit
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading

__all__ = ["CONFIG_ENV", "config_dir"]

#: The environment of every run of a sandbox that allows matplotlib (plus ``MPLCONFIGDIR``):
#: the non-interactive Agg backend, so nothing probes for a display.
CONFIG_ENV = {"MPLBACKEND": "Agg"}

_BUILD = """
import os, matplotlib, matplotlib.font_manager as fm
data = os.path.realpath(matplotlib.get_data_path()) + os.sep
manager = fm.FontManager()
manager.ttflist = [f for f in manager.ttflist if os.path.realpath(f.fname).startswith(data)]
manager.afmlist = [f for f in manager.afmlist if os.path.realpath(f.fname).startswith(data)]
path = os.path.join(matplotlib.get_cachedir(), f"fontlist-v{fm.FontManager.__version__}.json")
fm.json_dump(manager, path)
print(path)
"""

_lock = threading.Lock()
_built: list[str] = []


def config_dir(timeout_s: float = 120.0) -> str:
    """The directory holding matplotlib's prebuilt font cache, built on the first call.

    One per process (removed at exit), mode 0755, outside every workspace.

    Args:
        timeout_s: How long the build may take, in seconds.

    Returns:
        The directory's real path.

    Raises:
        RuntimeError: The build failed (its output says why).
    """
    with _lock:
        if _built:
            return _built[0]
        path = os.path.realpath(tempfile.mkdtemp(prefix="pysandbox-matplotlib-"))
        pathlib.Path(path).chmod(0o755)
        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "MPLCONFIGDIR": path,
            "HOME": path,
            **CONFIG_ENV,
        }
        done = subprocess.run(
            [sys.executable, "-I", "-c", _BUILD],
            env=env,
            cwd=path,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if done.returncode != 0:
            shutil.rmtree(path, ignore_errors=True)
            raise RuntimeError(f"building matplotlib's font cache failed: {done.stderr[-2000:]}")
        for entry in pathlib.Path(path).rglob("*"):
            entry.chmod(0o755 if entry.is_dir() else 0o644)
        atexit.register(shutil.rmtree, path, True)
        _built.append(path)
        return path
