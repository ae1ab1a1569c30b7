"""The one bootstrap of every confined interpreter: a spawn-mode child and the warm zygote.

Both are started as ``python -I -S -X utf8 -c STUB <payload fd> [<control fd>]`` (no site, no
environment, so pysandbox itself is not importable there). The payload on the descriptor is an
8-byte little-endian length, a ``marshal`` dump of ``(schemas, ((module name, (code, ...)),
...))`` and a ``marshal`` dump of the configuration; ``schemas`` are the run-time schemas of the
messages of :mod:`pysandbox._wire` (:func:`pysandbox._wire.schemas`), with which the child checks
each message it reads. :data:`STUB` executes each module's codes, in order, in one fresh
namespace named after the module (a module may be built from several files: the check of
messages, :mod:`pysandbox._wire_check`, the kernel part of the child,
:mod:`pysandbox._child_kernel`, the guards of library getters and SQLite,
:mod:`pysandbox._library_getters` and :mod:`pysandbox._sqlite_guard`, the table of global random
generators, :mod:`pysandbox._generators`, and the rest, :mod:`pysandbox._child`, share one
namespace), and exits with what the last module's
``entry`` returns for ``(namespaces, configuration, schemas)``:

- spawn: :data:`CHILD` = ``pysandbox._child``; its ``entry`` applies every layer and runs the
  code (:func:`pysandbox._child.run_config`);
- warm: :data:`ZYGOTE` = ``pysandbox._child`` then ``pysandbox._zygote``; its ``entry`` serves
  fork requests on the control descriptor, each forked child running the same ``run_config``.

The code objects are compiled here once per process from the modules' files (their frames keep
the file names), so no child pays for compiling them.
"""

from __future__ import annotations
import __future__

import marshal
import pathlib
import sys
from types import CodeType

from pysandbox import _wire

__all__ = ["CHILD", "STUB", "ZYGOTE", "argv", "module_code", "payload"]

#: What the parent passes with ``-c`` (see the module's docstring).
STUB = (
    "import marshal,os,sys\n"
    "f=int(sys.argv[1]);d=[]\n"
    "while 1:\n"
    " c=os.read(f,1048576)\n"
    " if not c:break\n"
    " d.append(c)\n"
    "d=b''.join(d);os.close(f);n=int.from_bytes(d[:8],'little')\n"
    "w,m=marshal.loads(d[8:8+n]);c=marshal.loads(d[8+n:]);del d,f,n\n"
    "s=[]\n"
    "for k,b in m:\n"
    " g={'__name__':k,'__file__':b[-1].co_filename,'__builtins__':__builtins__}\n"
    " for x in b:exec(x,g)\n"
    " s.append(g)\n"
    "del m,k,b,g,x\n"
    "sys.exit(s[-1]['entry'](s,c,w))\n"
)

#: The files that make up each module the bootstrap executes (one namespace per module).
_MODULES: dict[str, tuple[str, ...]] = {
    "_child": (
        "_wire_check",
        "_child_kernel",
        "_library_getters",
        "_sqlite_guard",
        "_generators",
        "_child",
    ),
    "_zygote": ("_zygote",),
}
#: The modules a spawn-mode child executes.
CHILD: tuple[str, ...] = ("_child",)
#: The modules the zygote executes.
ZYGOTE: tuple[str, ...] = ("_child", "_zygote")

_HERE = pathlib.Path(__file__).resolve().parent
_codes: dict[str, CodeType] = {}
_packed: dict[tuple[str, ...], bytes] = {}


def module_code(name: str) -> CodeType:
    """The compiled code of ``pysandbox.<name>``, compiled once per process.

    The ``from __future__ import annotations`` line is compiled as a flag instead (one import
    less per child); a blank line keeps the line numbers.

    Args:
        name: A module of this package (``"_child"``, ``"_zygote"``).

    Returns:
        The module's code object, with its real file name.
    """
    if name not in _codes:
        path = str(_HERE / f"{name}.py")
        source = pathlib.Path(path).read_text(encoding="utf-8")
        source = source.replace("from __future__ import annotations\n", "\n", 1)
        flags = __future__.annotations.compiler_flag
        _codes[name] = compile(source, path, "exec", flags, dont_inherit=True)
    return _codes[name]


def payload(modules: tuple[str, ...], config: _wire.ChildConfig | _wire.ZygoteConfig) -> bytes:
    """What :data:`STUB` reads: length, the schemas and the modules' code, the configuration.

    Args:
        modules: :data:`CHILD` or :data:`ZYGOTE`.
        config: The configuration: a :class:`pysandbox._wire.ChildConfig` for :data:`CHILD`, a
            :class:`pysandbox._wire.ZygoteConfig` for :data:`ZYGOTE`.

    Returns:
        The bytes to put on the payload descriptor.
    """
    if modules not in _packed:
        code = marshal.dumps(
            (
                _wire.schemas(),
                tuple(
                    (f"pysandbox.{m}", tuple(module_code(f) for f in _MODULES[m])) for m in modules
                ),
            )
        )
        _packed[modules] = len(code).to_bytes(8, "little") + code
    return _packed[modules] + marshal.dumps(dict(config))


def argv(*fds: int) -> list[str]:
    """The command line of a bootstrapped interpreter reading its payload from ``fds[0]``."""
    return [sys.executable, "-I", "-S", "-X", "utf8", "-c", STUB, *map(str, fds)]
