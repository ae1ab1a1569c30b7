"""The one bootstrap of every confined interpreter: a spawn-mode child and the warm zygote.

Both are started as ``python -I -S -X utf8 -c STUB <payload fd> [<control fd>]`` (no site, no
environment, so pysandbox itself is not importable there). The payload on the descriptor is an
8-byte little-endian length, a ``marshal`` dump of ``(schemas, entry module, {module name:
(is package, code)})`` and a ``marshal`` dump of the configuration. ``schemas`` are the run-time
schemas of the messages of :mod:`pysandbox._wire` (:func:`pysandbox._wire.schemas`), with which
the child checks each message it reads; the modules are those of the child's package,
:mod:`pysandbox.child` (standard library only, explicit imports), and an empty ``pysandbox``
package above it.

:data:`STUB` puts a loader for exactly those modules first on :data:`sys.meta_path`, imports
the entry module (which imports the others), then removes the loader from ``sys.meta_path``,
takes every ``pysandbox`` module out of :data:`sys.modules` (their functions keep their
globals) and clears their ``__loader__`` and ``__spec__``, before it calls the entry module's
``entry(configuration, schemas)`` and exits with what it returns. Nothing is imported from a
path: the ``pysandbox`` of a ``sys.path`` entry user code could reach is never loaded, and user
code can import neither the child's package nor reach the loader.

- spawn: :data:`CHILD`, entry :mod:`pysandbox.child._main`; its ``entry`` applies every layer
  and runs the code (:func:`pysandbox.child._main.run_config`);
- warm: :data:`ZYGOTE`, entry :mod:`pysandbox.child._zygote`; its ``entry`` serves fork
  requests on the control descriptor, each forked child running the same ``run_config``.

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
    "w,e,m=marshal.loads(d[8:8+n]);c=marshal.loads(d[8+n:]);del d,f,n\n"
    "class L:\n"
    " def find_spec(s,n,p=None,t=None):\n"
    "  if n in m:return type(sys.__spec__)(n,s,is_package=m[n][0])\n"
    " def create_module(s,p):pass\n"
    " def exec_module(s,o):\n"
    "  k=m.pop(o.__name__)[1];o.__file__=k.co_filename;exec(k,o.__dict__)\n"
    "l=L();sys.meta_path.insert(0,l)\n"
    "try:x=__import__(e,fromlist=['entry']).entry\n"
    "finally:\n"
    " sys.meta_path.remove(l)\n"
    " for k in [k for k in sys.modules if k.partition('.')[0]=='pysandbox']:\n"
    "  o=sys.modules.pop(k);o.__loader__=o.__spec__=None\n"
    " del L,l,m,e,k,o\n"
    "sys.exit(x(c,w))\n"
)

#: The modules of :mod:`pysandbox.child` a spawn-mode child loads; the last is the entry.
CHILD: tuple[str, ...] = (
    "_wire_check",
    "_kernel",
    "_library_getters",
    "_sqlite_guard",
    "_generators",
    "_values",
    "_main",
)
#: The modules the zygote loads; the last is the entry.
ZYGOTE: tuple[str, ...] = (*CHILD, "_session", "_zygote")

_CHILD_DIR = pathlib.Path(__file__).resolve().parent / "child"
_codes: dict[str, CodeType] = {}
_packed: dict[tuple[str, ...], bytes] = {}


def module_code(name: str) -> CodeType:
    """The compiled code of ``pysandbox.child.<name>``, compiled once per process.

    The ``from __future__ import annotations`` line is compiled as a flag instead (one import
    less per child); a blank line keeps the line numbers.

    Args:
        name: A module of :mod:`pysandbox.child` (``"_main"``, ``"_zygote"``), or
            ``"__init__"`` for the package itself.

    Returns:
        The module's code object, with its real file name.
    """
    if name not in _codes:
        path = str(_CHILD_DIR / f"{name}.py")
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
        code: dict[str, tuple[bool, CodeType]] = {
            "pysandbox": (True, compile("", "<pysandbox>", "exec", dont_inherit=True)),
            "pysandbox.child": (True, module_code("__init__")),
        }
        code.update((f"pysandbox.child.{m}", (False, module_code(m))) for m in modules)
        blob = marshal.dumps((_wire.schemas(), f"pysandbox.child.{modules[-1]}", code))
        _packed[modules] = len(blob).to_bytes(8, "little") + blob
    return _packed[modules] + marshal.dumps(dict(config))


def argv(*fds: int) -> list[str]:
    """The command line of a bootstrapped interpreter reading its payload from ``fds[0]``."""
    return [sys.executable, "-I", "-S", "-X", "utf8", "-c", STUB, *map(str, fds)]
