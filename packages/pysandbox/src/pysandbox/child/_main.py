"""Bootstrap of the sandboxed child interpreter (standard library only).

Executed by the one bootstrap stub (:mod:`pysandbox._bootstrap`) in a spawn-mode child, and in
the warm zygote whose forked children use the same :func:`run_config`. The configuration
(:class:`pysandbox._config.ChildConfig`, as plain data) says which layers to apply, in order:

1. resource limits (``setrlimit``);
2. Landlock (``landlock_create_ruleset``/``add_rule``/``restrict_self`` via ``ctypes``);
3. ``PR_SET_NO_NEW_PRIVS`` and the stacked seccomp filters the parent assembled;
4. Python-level guards: the closure-based ``open()`` (also bound to ``io.open``), an audit hook
   whose state is immutable, the import guard for the user's own imports and guarded
   ``getattr``/``setattr``/``delattr``/``hasattr``;

and then runs the user's code as ``__main__``.

The setup channel: the configuration's ``setup_fd`` is the write end of a pipe whose read end
only the parent holds. Once every layer is in place the child writes :data:`SETUP_READY` to
it and closes it, before the user's code (or its compilation) starts; a layer that was asked
for and cannot be applied writes :data:`SETUP_FAILED` and the reason instead and ends the
process with :data:`EXIT_SETUP_FAILED`. The parent believes only this channel about setup:
no exit status, signal or output of the user's code can claim a setup failure.

When imported (by the parent, or tests) this module only defines constants and functions.
"""

from __future__ import annotations

import builtins
import io
import os
import sys

from pysandbox.child._kernel import (
    EXIT_SETUP_FAILED,
    SETUP_FAILED,
    SETUP_READY,
    Libc,
    _fail,
    _setup_channel,
    apply_landlock,
    apply_rlimits,
    build_landlock_ruleset,
    drop_bounding_set,
    drop_capabilities,
    forbid_creation,
    install_sigsys_reporter,
    load_seccomp,
    open_setup_channel,
    report_setup,
    restrict_landlock,
)
from pysandbox.child._library_getters import guard_imports
from pysandbox.child._sqlite_guard import make_sqlite_authorizer, make_sqlite_guard
from pysandbox.child._values import RESULT_NAME, send_value
from pysandbox.child._wire_check import WireError, check_message

# The bootstrap avoids importing ``typing`` (start-up cost); mypy treats this name as True.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from types import MappingProxyType
    from typing import Any

    from pysandbox._wire import ChildConfig, ReadyCode

__all__ = [
    "EXIT_SETUP_FAILED",
    "SETUP_FAILED",
    "SETUP_READY",
    "build_landlock_ruleset",
    "drop_bounding_set",
    "entry",
    "finalize",
    "forbid_creation",
    "restrict_landlock",
    "run_config",
]

USER_FILENAME = "<sandbox>"
#: The run-time schemas of the messages of :mod:`pysandbox._wire`, as the bootstrap shipped them
#: (set by :func:`entry`, or by the zygote); empty: every message is refused (fail closed).
WIRE_SCHEMAS: dict[str, Any] = {}
_BOOT_FILE = __file__

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class SandboxDenied(PermissionError, ValueError):
    """Raised by the in-child guards. A ``ValueError`` too, so stdlib fallbacks still work.

    ``typing``, ``collections.namedtuple``, ``enum`` and ``logging`` catch ``ValueError`` around
    ``sys._getframe`` (for interpreters without it), so denying frame access stays harmless.
    """


# --------------------------------------------------------------------------------------------
# Layer 4: Python-level guards
# --------------------------------------------------------------------------------------------
def _within(path: str, roots: tuple[str, ...]) -> bool:
    for root in roots:
        if path == root or path.startswith(root if root.endswith("/") else root + "/"):
            return True
    return False


def exact_path(file: Any) -> str:
    """Convert a path argument once to an exact ``str`` (``bytes`` decoded as ``os.fsdecode``).

    Raises:
        TypeError: ``file`` is not a str, bytes or os.PathLike.
    """
    raw = os.fspath(file)
    if isinstance(raw, str):
        return str.__str__(raw)  # an exact copy even for a subclass
    return bytes.decode(raw, "utf-8", "surrogateescape")


def make_open(
    real_open: Callable[..., Any],
    realpath: Callable[[str], str],
    workspace: str,
    read_roots: tuple[str, ...],
) -> Callable[..., Any]:
    """The seed's closure factory: an ``open()`` confined to the workspace.

    Writes are allowed beneath ``workspace`` only; reads beneath ``workspace`` or a read-only
    root. Paths are resolved with ``realpath`` (symlinks included) before the check. File
    descriptors (``int``) pass: the only ones open are stdio and the figure channel's write
    end, whose frames the parent treats as hostile (SECURITY.md, "Forged frames are harmless").
    """
    ws_roots = (workspace,)

    def open(file: Any, mode: Any = "r", *args: Any, **kwargs: Any) -> Any:
        if type(mode) is not str:
            raise TypeError(f"open() mode must be a str, not {type(mode).__name__}")
        if isinstance(file, int):
            return real_open(int(file), mode, *args, **kwargs)
        # Exactly one conversion: a PathLike may answer differently each time it is asked,
        # and a str subclass may lie about its contents; only an exact str is checked and
        # then opened.
        text = exact_path(file)
        resolved = realpath(text)
        writing = any(c in mode for c in "wax+")
        if not (_within(resolved, ws_roots) or (not writing and _within(resolved, read_roots))):
            raise PermissionError(
                13, "sandbox: access outside the workspace is not permitted", text
            )
        return real_open(text, mode, *args, **kwargs)

    return open


_BLOCKED_EVENTS = frozenset(
    {
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "os.killpg",
        "os.chown",
        "os.chflags",
        "os.setxattr",
        "os.removexattr",
        "subprocess.Popen",
        "pty.spawn",
        "sys._getframe",
        "sys._current_frames",
        "sys._current_exceptions",
        "sys.settrace",
        "sys.setprofile",
        "sys.addaudithook",
        "sys.monitoring.register_callback",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "function.__new__",
        "resource.setrlimit",
        "resource.prlimit",
        "socket.bind",
        "socket.connect",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.gethostname",
        "socket.sethostname",
        "http.client.connect",
        "urllib.Request",
        "webbrowser.open",
        "sqlite3.enable_load_extension",
        "sqlite3.load_extension",
        "shutil.chown",
        "os.add_dll_directory",
        "cpython.remote_debugger_script",
        # a new interpreter has no audit hook and the real builtins (F02)
        "cpython.PyInterpreterState_New",
    }
)
# ``os.putenv``/``os.unsetenv`` are not refused: they change this process's own (scrubbed)
# environment, read again only by processes it starts, which it cannot (numpy's import sets
# thread variables with os.putenv). Judged by the operation, never by the calling frame.
#: Events allowed when native extension modules are (``cfg["native_extensions"]``): such code
#: reads and writes memory anyway, so the Python layers are no barrier and the kernel layers
#: are required; libraries call these in ordinary work (pandas' warnings and pyparsing look at
#: the calling frames).
NATIVE_ALLOWED_EVENTS = frozenset({"sys._getframe"})
#: Modules no ordinary code imports and that reach a fresh interpreter or raw memory: the
#: interpreter modules and every test or example extension module (checked by prefix too).
_REFUSED_MODULES = frozenset({"_interpreters", "_interpchannels", "_interpqueues", "_ctypes_test"})
_REFUSED_MODULE_PREFIXES = ("_test", "_xx", "xx")


def refused_module(name: str) -> bool:
    """Whether ``name`` (a dotted module name) is one no run may load, whoever imports it.

    The interpreter modules (``_xxsubinterpreters``, ``_interpreters``, ...) create an
    interpreter without the audit hook; the test and example extension modules
    (``_testcapi``, ``_testinternalcapi``, ``xxlimited``, ...) reach raw memory and fresh
    interpreters too. No standard module imports them.
    """
    top = name.partition(".")[0]
    return top in _REFUSED_MODULES or top.startswith(_REFUSED_MODULE_PREFIXES)


#: The refusal of a mode change (``os.chmod``, ``Path.chmod``, ``os.fchmod``, ``shutil.copymode``)
#: where the seccomp filter refuses the system calls.
CHMOD_REFUSED = (
    "sandbox: file modes cannot be changed (os.chmod, Path.chmod, shutil.copymode and "
    "copy2 are refused, in the workspace too); files the code creates are readable and "
    "writable already: copy with shutil.copyfile, which copies no mode"
)
# Events whose first argument(s) are paths that will be modified.
_WRITE_PATH_EVENTS = frozenset(
    {
        "os.chmod",
        "os.mkdir",
        "os.remove",
        "os.rmdir",
        "os.utime",
        "os.truncate",
        "shutil.rmtree",
        "shutil.make_archive",
        "shutil.unpack_archive",
    }
)
_TWO_PATH_EVENTS = frozenset({"os.rename", "os.link", "shutil.copyfile", "shutil.copytree"})
#: Positions of ``dir_fd`` arguments: a path relative to a directory descriptor would be
#: resolved by the hook against the working directory instead, so such calls are refused.
_DIR_FD_ARGS: MappingProxyType[str, tuple[int, ...]] = type(type.__dict__)(  # no `types` import
    {
        "os.remove": (1,),
        "os.rmdir": (1,),
        "os.mkdir": (2,),
        "os.chmod": (2,),
        "os.utime": (3,),
        "os.symlink": (2,),
        "os.rename": (2, 3),
        "os.link": (2, 3),
        "os.listdir": (),
    }
)
_READ_PATH_EVENTS = frozenset({"os.listdir", "os.scandir", "os.chdir", "os.listxattr"})


def _path_text(path: Any) -> str:
    """The text of a path argument seen by the audit hook, without calling user code.

    Only exact ``str``/``bytes``, ``os.DirEntry`` and the standard library's own
    ``pathlib`` classes are accepted: anything else could answer ``__fspath__`` (or ``str``
    methods) differently for the hook than it did for the system call.

    Raises:
        SandboxDenied: Any other type.
    """
    kind = type(path)
    if kind is str:
        return path  # type: ignore[no-any-return]
    if kind is bytes:
        return bytes.decode(path, "utf-8", "surrogateescape")
    if kind is os.DirEntry:
        return os.fsdecode(path.path)
    module = sys.modules.get(kind.__module__)
    if kind.__module__.startswith("pathlib") and getattr(module, kind.__name__, None) is kind:
        return str.__str__(os.fspath(path))
    raise SandboxDenied(1, f"sandbox: path arguments of type {kind.__name__} are not accepted")


# Names generated code may never read: with a library's globals they are the real builtins.
_GENERATED_DENIED_NAMES = frozenset(
    {
        "__build_class__",
        "__builtins__",
        "__import__",
        "__loader__",
        "__spec__",
        "breakpoint",
        "compile",
        "delattr",
        "eval",
        "exec",
        "getattr",
        "globals",
        "hasattr",
        "help",
        "input",
        "locals",
        "memoryview",
        "open",
        "setattr",
        "vars",
    }
)
#: The file name the generated-code check parses with: this very object (no other str is
#: identical to it) tells the audit hook that the ``compile`` event is the check's own.
_GENERATED_FILENAME = "".join(["<generated code ", str(id(_WRITE_FLAGS)), ">"])
# Syntax the standard library's code generators emit (dataclasses, namedtuple, typing's
# forward references), the displays ast.literal_eval parses (numpy's .npy header is a dict
# display) and try/finally (six's raise_from, which dateutil and so pandas on 3.10 import);
# anything else in code compiled during a run is refused. A node adds syntax, not reach: the
# names and attributes are checked whatever the node.
_GENERATED_NODES = frozenset(
    {
        "Module", "Expression", "FunctionDef", "Lambda", "arguments", "arg", "Return",
        "Assign", "Expr", "If", "Raise", "Try", "Pass", "Call", "keyword", "Attribute", "Name",
        "Constant", "JoinedStr", "FormattedValue", "BinOp", "BoolOp", "Compare", "UnaryOp",
        "IfExp", "Tuple", "List", "Set", "Dict", "Subscript", "Starred", "Load", "Store", "Add",
        "BitOr", "And", "Or", "Not", "Is", "IsNot", "Eq", "NotEq", "Lt", "LtE", "Gt", "GtE",
        "In", "NotIn",
    }
)  # fmt: skip
# Dunders the generators read or call besides the user-readable ones: object.__setattr__ in
# frozen dataclasses.
_GENERATED_DUNDERS = frozenset({"__setattr__", "__delattr__"})
#: Syntax added where native extension modules are allowed (the Python layers are no barrier
#: there, SECURITY.md "Native extension modules"): the arithmetic, bitwise and unary operators
#: and slices of pandas ``eval``/``query`` expressions (``and``/``or``/``not`` arrive as ``&``,
#: ``|``, ``~``). Operators add syntax, not reach: names and attributes are checked as before.
EXPRESSION_NODES = frozenset(
    {
        "Sub", "Mult", "Div", "FloorDiv", "Mod", "Pow", "BitAnd", "BitXor", "LShift", "RShift",
        "Invert", "USub", "UAdd", "Slice",
    }
)  # fmt: skip
#: The prefix pandas gives a local name of an expression (``@x`` is parsed as
#: ``__pd_eval_local_x``).
PANDAS_LOCAL_PREFIX = "__pd_eval_local_"
#: What every refusal of generated code says.
GENERATED_ADVICE = "field names must be identifiers and annotations types, not strings of code"
#: What a refusal adds where pandas expressions are allowed.
PANDAS_ADVICE = (
    "a pandas eval()/query() expression may use column names, numbers, strings, arithmetic, "
    "comparisons, boolean operators, subscripts, public attributes and @names of values that "
    "are not modules; compute anything else in Python: df.assign(b=df['a'] * 2) adds a "
    "column, df[df['a'] > 1] selects rows with a boolean mask"
)


def make_generated_code_check(
    allowed_dunders: frozenset[str],
    forbidden: frozenset[str],
    allowed: frozenset[str],
    denied: frozenset[str],
    *,
    expressions: bool = False,
) -> Callable[[Any], str | None]:
    """The check of source compiled while the user's code runs; returns a reason or ``None``.

    Libraries turn user data into code: ``dataclasses`` compiles text built from field names
    (the keys of ``__annotations__``, any string when the class comes from ``type()``), and
    ``typing`` compiles and evaluates string annotations, both with the library's (real)
    builtins. The audit hook sees the source (the ``compile`` event) but not the globals the
    code will run with, so the source must be harmless in any globals: only the syntax those
    generators emit, no name that is a refused builtin, a module off the allow-list or a
    system module, no dunder outside the user's allow-list except the generators' own
    (``__dataclass_*``, ``__create_fn__``, ``object.__setattr__``), no dunder string and no
    assignment to a dunder attribute. A field name that is not an identifier makes the text
    unparsable or adds syntax outside the list: refused.

    With ``expressions`` (the profiles that allow native extension modules) pandas
    ``eval``/``query`` expressions pass too: the operators of :data:`EXPRESSION_NODES` and
    ``@`` names (:data:`PANDAS_LOCAL_PREFIX`) whose own name passes; a private ``@`` name, and a
    private or dunder attribute of anything but a name the code defines itself (a generator's
    ``self``), are refused. That an ``@`` name is bound to a module is known only when pandas
    resolves it: :func:`make_pandas_guard` refuses it then.

    Args:
        allowed_dunders: Dunder names user code may read.
        forbidden: Attribute names refused on every object.
        allowed: The import allow-list.
        denied: The import deny-list.
        expressions: Allow pandas expressions (see above).

    Returns:
        ``check(source)``: the reason the source is refused, or ``None``.
    """
    stdlib = frozenset(getattr(sys, "stdlib_module_names", ()))
    readable = allowed_dunders | _GENERATED_DUNDERS
    syntax = _GENERATED_NODES | EXPRESSION_NODES if expressions else _GENERATED_NODES
    local_prefix = PANDAS_LOCAL_PREFIX if expressions else None
    # Imported now: importing it inside the hook could meet a partly initialised module.
    import ast

    parse, walk, iter_children = ast.parse, ast.walk, ast.iter_child_nodes

    def bad_name(name: str) -> str | None:
        if local_prefix is not None and name.startswith(local_prefix):
            local = name[len(local_prefix) :]
            if not local or local.startswith("_"):
                return f"the private name {'@' + local!r}"
            problem = bad_name(local)
            return None if problem is None else f"{problem} (as @{local})"
        if name in _GENERATED_DENIED_NAMES or name in forbidden:
            return f"the name {name!r}"
        if name.startswith("__") and not (
            name.startswith("__dataclass") or name == "__create_fn__" or name in allowed_dunders
        ):
            return f"the name {name!r}"
        if name in stdlib and not module_allowed(name, allowed, denied):
            return f"the module {name!r}"
        return None

    def check(source: Any) -> str | None:
        mode = "exec"
        text = source.decode("utf-8", "replace") if type(source) is bytes else source
        if type(text) is not str:
            return f"source of type {type(source).__name__}"
        try:
            tree = parse(text, _GENERATED_FILENAME, mode)
        except SyntaxError:
            try:
                tree = parse(text, _GENERATED_FILENAME, "eval")
            except SyntaxError:
                return "source that does not parse"
        nodes: list[Any] = list(walk(tree))
        bound = _bound_names(tree, nodes, iter_children)

        def own(attribute: Any) -> bool:  # an attribute of a name the code defines (self)
            root = attribute.value
            while type(root).__name__ == "Attribute":
                root = root.value
            return type(root).__name__ == "Name" and root.id in bound[id(root)]

        for node in nodes:
            kind = type(node).__name__
            if kind not in syntax:
                return f"the syntax {kind}"
            problem: str | None = None
            if kind == "Name" and node.id not in bound[id(node)]:
                problem = bad_name(node.id)
            elif kind == "Attribute":
                attr = node.attr
                if attr.startswith("__") and attr.endswith("__"):
                    if (
                        attr not in readable
                        or type(node.ctx).__name__ != "Load"
                        or (expressions and attr not in _GENERATED_DUNDERS and not own(node))
                    ):
                        problem = f"the attribute {attr!r}"
                elif attr in forbidden:
                    problem = f"the attribute {attr!r}"
                elif attr.startswith("_"):
                    root = node.value
                    while type(root).__name__ == "Attribute":
                        root = root.value
                    if type(root).__name__ == "Name" and root.id in stdlib:
                        problem = f"the private attribute {attr!r} of a module"
                    elif expressions and not own(node):
                        problem = f"the private attribute {attr!r}"
            elif kind == "Constant" and type(node.value) is str:
                value = node.value
                if (
                    value.startswith("__")
                    and value.endswith("__")
                    and (value not in allowed_dunders or value == "__class__")
                ):
                    problem = f"the string {value!r}"
            if problem is not None:
                return problem
        return None

    return check


def _bound_names(
    tree: Any, nodes: list[Any], iter_children: Callable[[Any], Any]
) -> dict[int, frozenset[str]]:
    """For each node of ``tree`` (by ``id``), the names the code itself binds where it stands.

    A generator returns the functions it defined (``return __setattr__``: a ``def``'s name
    counts everywhere) and its parameters are local names (a namedtuple field called
    ``opcode``, a dataclass's ``self``), but only inside the body of their ``def`` or
    ``lambda``: a parameter named like an ``@`` name (``lambda __pd_eval_local_df: 0``) does
    not make ``@df._mgr`` beside it the code's own. Iterative: the tree may be deep.
    """
    functions = frozenset(n.name for n in nodes if type(n).__name__ == "FunctionDef")
    bound: dict[int, frozenset[str]] = {}
    stack: list[tuple[Any, frozenset[str]]] = [(tree, functions)]
    while stack:
        node, names = stack.pop()
        bound[id(node)] = names
        kind = type(node).__name__
        inner = names
        body: list[Any] = []
        if kind in ("FunctionDef", "Lambda"):
            arguments = node.args
            params = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            params += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
            inner = names | frozenset(a.arg for a in params)
            body = node.body if kind == "FunctionDef" else [node.body]
        inside = {id(b) for b in body}
        for child in iter_children(node):
            stack.append((child, inner if id(child) in inside else names))
    return bound


def is_library_source(
    source: Any,
    filename: str,
    read_roots: tuple[str, ...],
    workspace: str,
    realpath: Callable[[str], str],
) -> bool:
    """Whether ``source`` is exactly the file ``filename`` under a read-only root.

    What the import system compiles when a module has no cached bytecode; such source is the
    library's, not generated from user data.
    """
    resolved = realpath(filename)
    if _within(resolved, (workspace,)) or not _within(resolved, read_roots):
        return False
    if type(source) is str:
        source = source.encode("utf-8", "surrogateescape")
    if type(source) is not bytes:
        return False
    try:
        fd = os.open(resolved, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks) == source


def make_exec_namespace_guard(user_builtins: Mapping[str, Any]) -> Callable[[], None]:
    """``force()``, called by the audit hook's ``exec`` event: give exec'd code the user's builtins.

    ``exec(code, ns)``/``eval(code, ns)`` store ``ns['__builtins__']`` when ``ns`` has none,
    taking the builtins of the calling frame: in a library's function the real ones (real
    ``getattr``, ``__import__``, ``exec``, ``open``). A function that runs a string in a dict
    its caller passes hands that dict back filled (red team 2026-12-03 N1:
    ``numpy.testing.runstring(code, d)``; the same class: ``numpy.f2py.crackfortran.myeval(e,
    d)``). CPython stores the entry before it raises the ``exec`` event and reads it only when
    the code starts, so the hook replaces it: in every ``dict`` among the local variables of the
    frame that called ``exec``/``eval`` whose ``__builtins__`` is the real builtins (module or
    dict), unless the dict is a loaded module's namespace (imports, a library's own module),
    ``__builtins__`` becomes the user's builtins. Nothing is refused. The source itself was
    checked at its ``compile`` event (:func:`make_generated_code_check`).

    Only where the hook permits ``sys._getframe`` (the profiles with native extension
    modules, :data:`NATIVE_ALLOWED_EVENTS`): the default profile's allowed modules have no such
    function that user code can reach (astguard refuses ``typing.get_type_hints``, AG206).

    Args:
        user_builtins: The builtins of the user's namespace.

    Returns:
        ``force()``; it inspects the frame two above its own (``force`` <- hook <- caller).
    """
    getframe = sys._getframe
    real_module, real_dict = builtins, builtins.__dict__
    modules = sys.modules
    dict_get, dict_set, dict_type = dict.get, dict.__setitem__, dict

    def force() -> None:
        try:
            frame = getframe(2)
        except ValueError:  # no Python frame called exec (C code at the top of the stack)
            return
        if frame.f_code.co_filename == "<frozen importlib._bootstrap>":
            return  # an import: the module's own namespace (kept by the check below anyway)
        for value in list(frame.f_locals.values()):
            # issubclass of the type: isinstance would read a user object's __class__
            if not issubclass(type(value), dict_type):
                continue
            current = dict_get(value, "__builtins__")
            if current is not real_module and current is not real_dict:
                continue
            name = dict_get(value, "__name__")
            module = modules.get(name) if type(name) is str else None
            if module is not None and getattr(module, "__dict__", None) is value:
                continue
            dict_set(value, "__builtins__", user_builtins)

    return force


def make_audit_hook(
    workspace: str,
    read_roots: tuple[str, ...],
    realpath: Callable[[str], str],
    own_pid: int,
    list_roots: tuple[str, ...] = (),
    *,
    blocked: frozenset[str] = _BLOCKED_EVENTS,
    generated_check: Callable[[Any], str | None] | None = None,
    generated_advice: str = GENERATED_ADVICE,
    sqlite_handle: Callable[[Any], str | None] | None = None,
    no_chmod: bool = False,
    exec_namespaces: Callable[[], None] | None = None,
) -> Callable[[str, tuple[Any, ...]], None]:
    """Build the audit hook. All state is bound as immutable default arguments.

    The hook applies the same file rule as Landlock (reads of the interpreter's files stay
    allowed), and refuses process creation, sockets other than AF_UNIX ``socketpair``,
    ``ctypes``, frame access, the ``gc`` object walkers, tracing, code construction, new
    interpreters and the modules of :func:`refused_module`. With ``generated_check`` (see
    :func:`make_generated_code_check`), source compiled during the run is checked too, except
    a module's unchanged source file under a read-only root (an import without a cache); a
    refusal says ``generated_advice``.
    With ``sqlite_handle`` (see :mod:`pysandbox.child._sqlite_guard`), a sqlite3 connection it
    does not expect (one not opened by the guarded ``sqlite3.connect``) is refused. With
    ``no_chmod`` (the seccomp layer is on: its filter answers the ``chmod`` family ``EPERM``,
    Landlock having no right for modes), ``os.chmod``/``os.fchmod``/``os.lchmod`` are refused
    here first, with the same errno and a message saying why (:data:`CHMOD_REFUSED`), and
    this hook answers ``os.listxattr``/``os.getxattr`` ``ENOTSUP`` (the filter would say
    ``EPERM``). With ``exec_namespaces`` (:func:`make_exec_namespace_guard`), every ``exec``
    event calls it first.
    """

    def hook(
        event: str,
        args: tuple[Any, ...],
        _blocked: frozenset[str] = blocked,
        _write: frozenset[str] = _WRITE_PATH_EVENTS,
        _two: frozenset[str] = _TWO_PATH_EVENTS,
        _read: frozenset[str] = _READ_PATH_EVENTS,
        _dirfd: MappingProxyType[str, tuple[int, ...]] = _DIR_FD_ARGS,
        _ws: tuple[str, ...] = (workspace,),
        _ro: tuple[str, ...] = read_roots,
        _lists: tuple[str, ...] = list_roots,
        _realpath: Callable[[str], str] = realpath,
        _within: Callable[[str, tuple[str, ...]], bool] = _within,
        _denied: type[SandboxDenied] = SandboxDenied,
        _pid: int = own_pid,
        _flags: int = _WRITE_FLAGS,
        _isinstance: Callable[[object, Any], bool] = isinstance,
        _str: type[str] = str,
        _int: type[int] = int,
        _fsdecode: Callable[[Any], str] = _path_text,
        _lexists: Callable[[str], bool] = os.path.lexists,
        _exists: type[FileExistsError] = FileExistsError,
        _generated: Callable[[Any], str | None] | None = generated_check,
        _advice: str = generated_advice,
        _library_source: Callable[..., bool] = is_library_source,
        _refused_module: Callable[[str], bool] = refused_module,
        _sqlite_handle: Callable[[Any], str | None] | None = sqlite_handle,
        _no_chmod: bool = no_chmod,
        _exec_namespaces: Callable[[], None] | None = exec_namespaces,
    ) -> None:
        if event == "exec":
            if _exec_namespaces is not None:
                _exec_namespaces()
            return
        if event == "compile":
            source, filename = args[0], args[1]
            if (
                _generated is None
                or filename is _GENERATED_FILENAME  # the check's own parse
                or (
                    type(filename) is _str
                    and filename.endswith(".py")
                    and _library_source(source, filename, _ro, _ws[0], _realpath)
                )
            ):
                return
            problem = _generated(source)
            if problem is not None:
                raise _denied(1, f"sandbox: code generated at run time uses {problem}; {_advice}")
            return
        if event == "sqlite3.connect":
            # sqlite opens its files in C (no open event): in memory or in the workspace only.
            text = _fsdecode(args[0])
            if text in ("", ":memory:"):
                return
            if text.startswith("file:"):
                raise _denied(1, "sandbox: sqlite3 URI file names are not permitted")
            if not _within(_realpath(text), _ws):
                raise _denied(13, "sandbox: databases outside the workspace are not permitted")
            return
        if event == "sqlite3.connect/handle":
            problem = None if _sqlite_handle is None else _sqlite_handle(args[0])
            if problem is not None:
                raise _denied(1, f"sandbox: {problem}")
            return
        if event == "import":
            if _isinstance(args[0], _str) and _refused_module(args[0]):
                raise _denied(1, f"sandbox: the module {args[0]!r} may not be loaded")
            return
        if event == "open":
            path, mode, flags = args
            if path is None or _isinstance(path, _int):
                return
            text = _fsdecode(path)
            resolved = _realpath(text)
            writing = (_isinstance(mode, _str) and any(c in mode for c in "wax+")) or bool(
                _isinstance(flags, _int) and flags & _flags
            )
            if _within(resolved, _ws) or (not writing and _within(resolved, _ro)):
                return
            raise _denied(13, "sandbox: access outside the workspace is not permitted", text)
        if event == "ctypes.dlopen" and args[0] is None:
            # dlopen(NULL): a handle on the program itself, loading nothing (ctypes' own import
            # does it for pythonapi; numpy imports ctypes). Looking symbols up stays refused.
            return
        if event in _blocked or event.startswith("ctypes."):
            raise _denied(1, f"sandbox: {event} is not permitted")
        if event == "socket.__new__":
            if args[1] != 1:  # only AF_UNIX (socketpair)
                raise _denied(1, "sandbox: sockets are not permitted")
            return
        if _no_chmod and event in ("os.chmod", "os.listxattr", "os.getxattr"):
            if event == "os.chmod":
                raise _denied(1, CHMOD_REFUSED)
            # ENOTSUP, which shutil.copystat takes as "no attributes": copy2 then reaches chmod
            raise _denied(95, "sandbox: extended file attributes are not supported")
        if event == "os.kill":
            if args[0] not in (0, _pid):
                raise _denied(1, "sandbox: signals to other processes are not permitted")
            return
        for position in _dirfd.get(event, ()):
            if len(args) > position and args[position] not in (None, -1, -100):  # unset, AT_FDCWD
                raise _denied(1, f"sandbox: {event} relative to a directory descriptor")
        paths: tuple[Any, ...] = ()
        if event in _write:
            paths = (args[0],)
        elif event in _two or event == "os.symlink":
            paths = (args[1],) if event == "os.symlink" else (args[0], args[1])
        elif event in _read:
            path = args[0]
            if path is None or _isinstance(path, _int):
                return
            resolved = _realpath(_fsdecode(path))
            if _within(resolved, _ws) or _within(resolved, _ro) or resolved in _lists:
                return
            raise _denied(13, f"sandbox: {event} outside the workspace is not permitted")
        for path in paths:
            if path is None or _isinstance(path, _int):
                continue
            resolved = _realpath(_fsdecode(path))
            if not _within(resolved, _ws):
                if event == "os.mkdir" and _lexists(resolved):
                    # What the system call answers, with no effect ("mkdir -p" of a directory
                    # that exists: matplotlib's read-only configuration directory).
                    raise _exists(17, "File exists", _fsdecode(path))
                raise _denied(13, f"sandbox: {event} outside the workspace is not permitted")

    return hook


def module_allowed(name: str, allowed: frozenset[str], denied: frozenset[str]) -> bool:
    """Whether user code may import ``name`` (astguard's rule, mirrored).

    The longest listed prefix wins between ``allowed`` and ``denied``; a private component
    (``_x``) is refused unless the prefix ending there is listed exactly in ``allowed``.
    """
    parts = name.split(".")
    best_allowed = best_denied = 0
    for end in range(1, len(parts) + 1):
        part = parts[end - 1]
        if not part.isidentifier():
            return False
        prefix = ".".join(parts[:end])
        if prefix in allowed:
            best_allowed = end
        elif part.startswith("_"):
            return False
        if prefix in denied:
            best_denied = end
    return best_allowed > best_denied


def make_guarded_operator(refused_name: Callable[[str], bool], real: Any = None) -> Any:
    """A copy of the ``operator`` module whose ``attrgetter``/``methodcaller`` check names.

    The real ones look attributes up in C with names given as strings, and their classes are
    reachable from any instance (``type(operator.attrgetter("x"))("__globals__")``). The
    copies refuse private, dunder and refused names on every call and return plain functions,
    whose class cannot build another getter. The user's imports of ``operator`` get the copy.

    Args:
        refused_name: The attribute guard's rule for one name.
        real: The module to copy (default: the real ``operator``).

    Returns:
        The copied module.
    """
    if real is None:
        import operator as real
    copy = type(sys)("operator", real.__doc__)
    copy.__dict__.update(
        {k: v for k, v in real.__dict__.items() if not (k.startswith("__") and k.endswith("__"))}
    )
    real_attrgetter, real_methodcaller = real.attrgetter, real.methodcaller

    def check(name: Any, what: str) -> None:
        if type(name) is not str:
            raise TypeError(f"{what} names must be exact str objects")
        for part in name.split("."):
            if part.startswith("_") or refused_name(part):
                raise AttributeError(f"sandbox: {what}({name!r}) is not permitted")

    def attrgetter(attr: str, /, *attrs: str) -> Callable[[Any], Any]:
        for name in (attr, *attrs):
            check(name, "attrgetter")
        getter = real_attrgetter(attr, *attrs)

        def get(obj: Any, /) -> Any:
            return getter(obj)

        return get

    def methodcaller(name: str, /, *args: Any, **kwargs: Any) -> Callable[[Any], Any]:
        check(name, "methodcaller")
        if "." in name:
            raise AttributeError(f"sandbox: methodcaller({name!r}) is not permitted")
        caller = real_methodcaller(name, *args, **kwargs)

        def call(obj: Any, /) -> Any:
            return caller(obj)

        return call

    attrgetter.__doc__ = real_attrgetter.__doc__
    methodcaller.__doc__ = real_methodcaller.__doc__
    copy.attrgetter = attrgetter  # type: ignore[attr-defined]
    copy.methodcaller = methodcaller  # type: ignore[attr-defined]
    return copy


def user_may_import(name: object, allowed: frozenset[str], denied: frozenset[str]) -> bool:
    """Whether user code may import the module ``name`` (an exact str), by any means.

    :func:`module_allowed` and not :func:`refused_module`: what a library's import-by-name
    helper may hand to user code.
    """
    return type(name) is str and not refused_module(name) and module_allowed(name, allowed, denied)


def import_refusal(name: str) -> str:
    """What a run-time refusal of importing the module ``name`` says (every guard that does)."""
    return f"sandbox: import of {name!r} is not permitted (not on the allow-list)"


def make_import(
    real_import: Callable[..., Any],
    allowed: frozenset[str],
    denied: frozenset[str],
    replacements: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """The import guard bound into the user's builtins only (stdlib imports are unaffected).

    ``replacements`` maps top-level module names to the guarded copies the user gets instead
    (``operator``, see :func:`make_guarded_operator`).
    """
    module_type = type(sys)
    swaps = dict(replacements or {})
    stdlib_names = frozenset(getattr(sys, "stdlib_module_names", ())) | {"_strptime"}

    def __import__(
        name: Any,
        globals: Any = None,
        locals: Any = None,
        fromlist: Any = (),
        level: int = 0,
    ) -> Any:
        if type(name) is not str:
            raise ModuleNotFoundError("sandbox: module names must be exact str objects")
        if type(level) is not int or level != 0:
            raise ImportError("sandbox: relative imports are not permitted", name=name)
        top = name.partition(".")[0]
        if type(fromlist) is list and not fromlist and (top in stdlib_names or top in allowed):
            # C code's PyImport_Import (e.g. datetime.strptime -> _strptime, numpy's sum ->
            # numpy._core._methods) resolves __import__ from the current frame's builtins and
            # always passes an empty list; import statements pass None or a tuple. A module of
            # an allowed package's own tree is what that package's code may import anyway.
            return real_import(name, globals, locals, fromlist, level)
        if fromlist is not None:
            fromlist = tuple(fromlist)  # one iteration; the import sees the same items
            if any(type(item) is not str for item in fromlist):
                raise ImportError("sandbox: from-import names must be exact str objects")
        if not module_allowed(name, allowed, denied):
            raise ModuleNotFoundError(import_refusal(name), name=str(name))
        module = real_import(name, globals, locals, fromlist, level)
        if name in swaps:
            return swaps[name]
        for item in fromlist or ():
            value = getattr(module, item, None)
            if isinstance(value, module_type) and not module_allowed(
                value.__name__, allowed, denied
            ):
                raise ImportError(
                    f"sandbox: {name}.{item} is a module that is not on the allow-list",
                    name=name,
                )
        return module

    return __import__


_INTROSPECTION = frozenset(
    {
        "f_back",
        "f_builtins",
        "f_code",
        "f_globals",
        "f_locals",
        "f_trace",
        "f_lineno",
        "gi_frame",
        "gi_code",
        "gi_yieldfrom",
        "gi_running",
        "cr_frame",
        "cr_code",
        "cr_await",
        "cr_origin",
        "ag_frame",
        "ag_code",
        "ag_await",
        "tb_frame",
        "tb_next",
        "tb_lasti",
        "co_code",
        "co_consts",
        "co_names",
        "func_globals",
        "func_code",
        "mro",
    }
)


#: Why a private name given as a string is refused (the guarded ``getattr`` family, pandas'
#: string dispatch): the string reaches a library's own helpers and internals.
PRIVATE_NAME_RULE = (
    "names that start with '_' are private and are not looked up from strings on any object "
    "(getattr, setattr, delattr, hasattr, a pandas method named by a string), except the "
    "dunders ordinary code needs such as '__name__' and '__class__'; use the public API, "
    "and plain attribute syntax (self._x) for your own objects"
)


def private_name_refused(name: str, allowed_dunders: frozenset[str]) -> bool:
    """Whether ``name``, looked up from a string, is a private name the sandbox refuses.

    The one rule of the run-time guards for names given as data: a name starting with ``_``
    (single-underscore privates and dunders alike) is refused on every object unless it is
    one of ``allowed_dunders`` (astguard's allow-list of harmless dunders).

    Args:
        name: The attribute name (an exact ``str``; the caller checks the type).
        allowed_dunders: The dunders user code may read.

    Returns:
        True when the name is refused.
    """
    return name.startswith("_") and name not in allowed_dunders


def make_attr_guards(
    allowed_dunders: frozenset[str],
    allowed: frozenset[str],
    denied: frozenset[str],
    *,
    forbidden: frozenset[str] = frozenset(),
    module_forbidden: frozenset[str] = frozenset(),
    module_pairs: frozenset[str] = frozenset(),
    module_swaps: dict[Any, Any] | None = None,
) -> tuple[Callable[..., Any], Callable[..., None], Callable[..., None], Callable[..., bool]]:
    """Guarded ``getattr``/``setattr``/``delattr``/``hasattr`` for the user's builtins.

    Refused at run time: private names (``_x``) on every object, dunders among them, except
    the dunders of ``allowed_dunders`` (:func:`private_name_refused`; on a module every ``_``
    name), frame/code/generator internals, module values that are off the import allow-list,
    and any attribute assignment on a module. A private name handed to a library's own
    helper was a route to its internals (red team 2026-12-03 D1:
    ``getattr(Apply, '_apply_str')(None, f, '__globals__')`` answered a function's globals);
    plain attribute syntax (``self._x``) is the static checker's and unaffected. A module
    with a guarded copy (``module_swaps``, real module to copy) is answered with the copy.

    Args:
        allowed_dunders: The dunder names user code may read (astguard's
            ``Policy.allowed_dunder_attributes``, the one home of that list).
        allowed: The import allow-list.
        denied: The import deny-list.
        forbidden: Non-dunder names refused on every object.
        module_forbidden: Names refused on modules only (process APIs).
        module_pairs: ``module.name`` pairs refused.
        module_swaps: Real module to the guarded copy handed out instead.

    Returns:
        ``(getattr, setattr, delattr, hasattr)`` for the user's builtins; a refused name raises
        ``AttributeError`` (``hasattr`` answers ``False``), a name that is not an exact ``str``
        ``TypeError``.
    """
    swaps = dict(module_swaps or {})
    real_getattr, real_setattr, real_delattr = getattr, setattr, delattr
    module_type = type(sys)
    missing = object()

    def refused(obj: object, name: object) -> bool:
        if type(name) is not str:
            # A str subclass could answer startswith()/== falsely and still name a dunder.
            raise TypeError(f"sandbox: attribute names must be exact str, not {type(name)}")
        if isinstance(obj, module_type):
            module_name = real_getattr(obj, "__name__", "")
            return (
                name.startswith("_")
                or name in module_forbidden
                or f"{module_name}.{name}" in module_pairs
                or name in _INTROSPECTION
                or name in forbidden
            )
        return (
            private_name_refused(name, allowed_dunders)
            or name in _INTROSPECTION
            or name in forbidden
        )

    def check_value(name: str, value: Any) -> Any:
        if isinstance(value, module_type) and not module_allowed(
            real_getattr(value, "__name__", ""), allowed, denied
        ):
            raise AttributeError(f"sandbox: attribute {name!r} is a module off the allow-list")
        if isinstance(value, module_type) and value in swaps:
            return swaps[value]
        return value

    def refusal(name: str) -> str:
        if private_name_refused(name, allowed_dunders):
            return f"sandbox: attribute {name!r} is not accessible: {PRIVATE_NAME_RULE}"
        return f"sandbox: attribute {name!r} is not accessible"

    def guarded_getattr(obj: object, name: str, default: Any = missing, /) -> Any:
        if refused(obj, name):
            raise AttributeError(refusal(name))
        if default is missing:
            return check_value(name, real_getattr(obj, name))
        return check_value(name, real_getattr(obj, name, default))

    def guarded_hasattr(obj: object, name: str, /) -> bool:
        if refused(obj, name):
            return False
        try:
            guarded_getattr(obj, name)
        except AttributeError:
            return False
        return True

    def dunder(name: object) -> bool:
        return isinstance(name, str) and name.startswith("__") and name.endswith("__")

    def guarded_setattr(obj: object, name: str, value: Any, /) -> None:
        if refused(obj, name) or dunder(name) or isinstance(obj, module_type):
            raise AttributeError(f"sandbox: setting attribute {name!r} is not permitted")
        real_setattr(obj, name, value)

    def guarded_delattr(obj: object, name: str, /) -> None:
        if refused(obj, name) or dunder(name) or isinstance(obj, module_type):
            raise AttributeError(f"sandbox: deleting attribute {name!r} is not permitted")
        real_delattr(obj, name)

    guarded_getattr.__name__ = "getattr"
    guarded_hasattr.__name__ = "hasattr"
    guarded_setattr.__name__ = "setattr"
    guarded_delattr.__name__ = "delattr"
    return guarded_getattr, guarded_setattr, guarded_delattr, guarded_hasattr


def make_unittest_guard() -> Callable[[Any], None]:
    """``patch(modules)``: unittest loads no test named by a string, however it is reached.

    ``TestLoader.loadTestsFromName(s)`` imports modules and walks attributes named by strings
    with unittest's own (real) ``__import__``, and ``TestProgram(module="name")`` imports the
    named module: astguard refuses the written-out spellings (AG205), this refuses the ones
    reached dynamically (``getattr(unittest, "ma" + "in")(argv=[..., "os.getcwd"])``).
    ``unittest.main()`` with the script's own tests is unchanged. Idempotent.
    """
    patched: list[Any] = []
    reason = (
        "sandbox: unittest does not load tests named by strings (that imports modules by "
        "name); call unittest.main() to run the test cases of the script"
    )

    def refuse(*_: Any, **__: Any) -> Any:
        raise SandboxDenied(1, reason)

    def patch(modules: Any) -> None:
        loader, main = modules.get("unittest.loader"), modules.get("unittest.main")
        if loader is None or main is None or loader in patched:
            return
        program = main.TestProgram
        real_init = program.__init__

        def __init__(self: Any, module: Any = "__main__", *args: Any, **kwargs: Any) -> None:
            if type(module) is str and module != "__main__":
                raise SandboxDenied(1, reason)
            real_init(self, module, *args, **kwargs)

        program.__init__ = __init__
        loader.TestLoader.loadTestsFromName = refuse
        loader.TestLoader.loadTestsFromNames = refuse
        patched.append(loader)

    return patch


#: What a pandas file format without its engine says (parquet and feather need pyarrow).
PANDAS_STORE_ADVICE = (
    "store DataFrames with df.to_csv(path), df.to_json(path) or df.to_pickle(path) and read "
    "them back with pd.read_csv, pd.read_json or pd.read_pickle"
)
PARQUET_MISSING = (
    "sandbox: parquet files need pyarrow (or fastparquet), which this sandbox does not "
    f"provide, and packages cannot be installed here; {PANDAS_STORE_ADVICE}"
)


#: pandas' methods that take a function or the *name* of one (``df.agg('sum')``), by module:
#: a name is looked up with the real ``getattr`` on the frame, the group or numpy (red team
#: 2026-12-03 D1: ``df.groupby('a').agg('__reduce_ex__', 4)``). The methods defined in these
#: modules' classes under these names check a ``str`` first argument (``func``); pandas itself
#: comes back through them for each item of a list or dict of names.
PANDAS_DISPATCH_METHODS: Mapping[str, tuple[str, ...]] = type(type.__dict__)(
    {
        "pandas.core.frame": ("aggregate", "agg", "apply", "transform"),
        "pandas.core.series": ("aggregate", "agg", "apply", "transform"),
        "pandas.core.groupby.groupby": ("aggregate", "agg", "apply", "transform", "filter"),
        "pandas.core.groupby.generic": ("aggregate", "agg", "apply", "transform", "filter"),
        "pandas.core.resample": ("aggregate", "agg", "apply", "transform", "_apply"),
        "pandas.core.window.rolling": ("aggregate", "agg"),
        "pandas.core.window.expanding": ("aggregate", "agg"),
        "pandas.core.window.ewm": ("aggregate", "agg"),
    }
)
#: pandas' own helpers that look a name up (reachable with attribute syntax on a class held
#: in a list, which the static checker cannot follow), by module, class and method, with the
#: position of the name among the arguments after ``self`` (``None``: ``self.func``).
PANDAS_DISPATCH_HELPERS: tuple[tuple[str, str, str, int | None], ...] = (
    ("pandas.core.apply", "Apply", "_apply_str", 1),
    ("pandas.core.apply", "Apply", "apply_str", None),
    ("pandas.core.apply", "Apply", "transform_str_or_callable", 0),
    ("pandas.core.groupby.generic", "DataFrameGroupBy", "_define_paths", 0),
)


#: Marks a method :func:`guard_pandas_dispatch` has wrapped (in the wrapper's ``__dict__``).
_DISPATCH_MARK = "_pysandbox_dispatch_checked"


def make_dispatch_check(allowed_dunders: frozenset[str]) -> Callable[[object], None]:
    """``check(func)``: refuse a private name pandas would look up from a string.

    Args:
        allowed_dunders: The dunders user code may read (:func:`private_name_refused`).

    Returns:
        ``check(func)``: does nothing unless ``func`` is a ``str`` (a subclass is read as its
        exact text, which is what ``getattr`` looks up).

    Raises:
        SandboxDenied: From ``check``, for a private name (:data:`PRIVATE_NAME_RULE`).
    """
    text_of = str.__str__  # an exact str of a subclass's text, whatever its methods say

    def check(func: object) -> None:
        # The types getattr takes a name of (isinstance would read a user object's __class__).
        if issubclass(type(func), str):
            name = text_of(func)
            if private_name_refused(name, allowed_dunders):
                raise SandboxDenied(
                    1, f"sandbox: pandas may not look up {name!r} by name: {PRIVATE_NAME_RULE}"
                )

    return check


def guard_pandas_dispatch(module_name: str, module: Any, check: Callable[[object], None]) -> None:
    """Wrap ``module``'s string-dispatching methods and helpers with ``check`` (once).

    The methods of :data:`PANDAS_DISPATCH_METHODS` defined by the module's own classes check
    their first argument (positional, or ``func=``/``f=``/``arg=``); the helpers of
    :data:`PANDAS_DISPATCH_HELPERS` their name argument.

    Args:
        module_name: The module's ``__name__``.
        module: The loaded module.
        check: The check (:func:`make_dispatch_check`).
    """
    import functools

    function_type = type(guard_pandas_dispatch)

    def wrap(method: Any, position: int | None) -> Any:
        @functools.wraps(method)
        def dispatch(self: Any, *args: Any, **kwargs: Any) -> Any:
            if position is None:
                check(self.__dict__.get("func"))
            elif len(args) > position:
                check(args[position])
            elif position == 0:
                for keyword in ("func", "f", "arg"):  # pandas' names for it
                    check(kwargs.get(keyword))
            return method(self, *args, **kwargs)

        dispatch.__dict__[_DISPATCH_MARK] = True
        return dispatch

    def own(method: Any) -> bool:  # defined in this module (pandas 3 renames __module__ of
        # its classes, pandas.api.typing), and not wrapped yet
        return (
            type(method) is function_type
            and method.__module__ == module_name
            and _DISPATCH_MARK not in method.__dict__
        )

    names = PANDAS_DISPATCH_METHODS.get(module_name, ())
    for cls in list(vars(module).values()):
        if not isinstance(cls, type):
            continue
        for name in names:
            method = cls.__dict__.get(name)
            if own(method):
                setattr(cls, name, wrap(method, 0))
    for owner, class_name, name, position in PANDAS_DISPATCH_HELPERS:
        cls = vars(module).get(class_name) if owner == module_name else None
        method = None if cls is None else cls.__dict__.get(name)
        if own(method):
            setattr(cls, name, wrap(method, position))


#: What registering a pandas accessor under a private name answers.
ACCESSOR_NAME_RULE = (
    "an accessor name must be a public identifier (no leading '_'): the registration sets it "
    "on pandas' own DataFrame, Series or Index class, where a private or dunder name would "
    "replace pandas' internals; choose a public name such as 'geo'"
)


def guard_accessor_registration(module: Any) -> None:
    """Refuse a private or dunder name in ``pandas.core.accessor._register_accessor`` (once).

    ``pandas.api.extensions.register_dataframe_accessor(name)`` (and the ``_series_`` and
    ``_index_`` ones) call the module's ``_register_accessor``, whose decorator runs
    ``setattr(cls, name, ...)`` on pandas' class with the real ``setattr``: the one place user
    code names an attribute of a pandas class (a store on one is refused statically, AG306).

    Args:
        module: The loaded ``pandas.core.accessor``.

    Raises:
        SandboxDenied: From the guarded function, for a name that is not an exact ``str``
            identifier or that starts with ``_`` (:data:`ACCESSOR_NAME_RULE`).
    """
    real = module.__dict__.get("_register_accessor")
    if real is None or _DISPATCH_MARK in getattr(real, "__dict__", {}):
        return

    def _register_accessor(name: Any, cls: Any) -> Any:
        if type(name) is not str or not name.isidentifier() or name.startswith("_"):
            raise SandboxDenied(
                1,
                f"sandbox: pandas may not register an accessor named {name!r}: "
                f"{ACCESSOR_NAME_RULE}",
            )
        return real(name, cls)

    _register_accessor.__doc__ = real.__doc__
    _register_accessor.__dict__[_DISPATCH_MARK] = True
    module._register_accessor = _register_accessor


def make_pandas_guard(
    allowed: frozenset[str] = frozenset(),
    denied: frozenset[str] = frozenset(),
    user_builtins: Mapping[str, Any] | None = None,
    *,
    allowed_dunders: frozenset[str] = frozenset(),
) -> Callable[[Any], None]:
    """``patch(modules)``: pandas' expressions and optional dependencies, once pandas is loaded.

    Expressions: pandas looks the names of an ``eval``/``query`` expression up itself (columns,
    ``@`` names from the caller's frame, and every attribute's value, kept as a temporary) and
    reads attributes with the real ``getattr`` in its own frames. The check of generated code
    refuses dunder and private attributes by name; this (``Scope``) refuses:

    - a scope read from any frame but the user's code (``<sandbox>``) or pandas' own:
      ``level=N`` (and a negative one) walks up to the sandbox's frames, whose locals and
      globals are its internals; and a ``Scope`` as ``local_dict`` (pandas would read the
      locals of every frame up to its ``level``);
    - a private plain name (``_x``, as ``@_x`` already is), except pandas' own temporaries;
    - values pandas would hand out unguarded: modules, code, frames, tracebacks, generators and
      coroutines, functions and classes of the sandbox's own code, and the real builtins the
      user's builtins replace or leave out (``exec``, the unguarded ``getattr``).

    Optional dependencies: pandas answers a missing one (pyarrow for parquet) with "use pip or
    conda to install"; here nothing can be installed, so ``import_optional_dependency`` (in
    every pandas module that bound it) and parquet's engine look-up say so and name what
    works instead (:data:`PARQUET_MISSING`). A module user code may not import
    (:func:`module_allowed`, :func:`refused_module`) is refused with the import guard's
    message (:func:`import_refusal`), or ``None`` where pandas asked for no error (as if it
    were not installed): the helper hands back ``sys.modules`` entries, ``os`` among them.

    String dispatch: a method given the name of a function (``df.agg('sum')``,
    ``df.groupby('a').agg('max')``, ``Apply._apply_str``) refuses a private name
    (:func:`guard_pandas_dispatch`, :func:`private_name_refused`). Accessor registration
    (``pandas.api.extensions.register_dataframe_accessor(name)``, ``_series_``, ``_index_``)
    refuses a private or dunder name (:func:`guard_accessor_registration`).

    Args:
        allowed: The import allow-list.
        denied: The import deny-list.
        user_builtins: The builtins of the user's namespace (filled in later is fine).
        allowed_dunders: The dunders user code may read (astguard's list); the string
            dispatch refuses every other name starting with ``_``.

    Returns:
        ``patch(modules)``; idempotent, a module not loaded yet is patched by a later call.
    """
    import types

    dispatch_check = make_dispatch_check(allowed_dunders)
    dispatch_modules = frozenset(PANDAS_DISPATCH_METHODS) | {h[0] for h in PANDAS_DISPATCH_HELPERS}

    module_type = type(sys)
    done: set[str] = set()
    real_optional: list[Any] = []
    real_tester: list[Any] = []  # pandas.test, refused (refuse_test_suite) where it is bound
    own_dir = _BOOT_FILE.rpartition(os.sep)[0] + os.sep  # as code objects name their files
    pandas_dirs: list[str] = []
    opaque = (
        types.CodeType, types.FrameType, types.TracebackType, types.GeneratorType,
        types.CoroutineType, types.AsyncGeneratorType,
    )  # fmt: skip
    real_builtins = builtins.__dict__

    def denied_scope(what: str) -> SandboxDenied:
        return SandboxDenied(1, f"sandbox: a pandas expression may not {what}; {PANDAS_ADVICE}")

    def internal_file(filename: object) -> bool:
        return type(filename) is str and (filename == _BOOT_FILE or filename.startswith(own_dir))

    def internal(value: Any) -> str | None:
        """What ``value`` is if pandas may not hand it out, else ``None``."""
        if isinstance(value, opaque):
            return f"a {type(value).__name__} object"
        if isinstance(value, (types.MethodType, staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, types.FunctionType):
            if internal_file(value.__code__.co_filename):
                return "a function of the sandbox's own code"
            return None
        if isinstance(value, type):
            module = real_builtins["getattr"](value, "__module__", "")
            if type(module) is str and module.partition(".")[0] == "pysandbox":
                return "a class of the sandbox's own code"
            return None
        if isinstance(value, types.BuiltinFunctionType) and value.__self__ is builtins:
            name = value.__name__
            if real_builtins.get(name) is value and (
                user_builtins is None or user_builtins.get(name) is not value
            ):
                return f"the unguarded builtin {name!r}"
        return None

    def readable_frame(frame: Any) -> bool:
        filename = frame.f_code.co_filename
        return filename == USER_FILENAME or any(filename.startswith(d) for d in pandas_dirs)

    def scope_frames_readable(scope: Any) -> bool:
        # pandas passes its own Scope as local_dict (a subscript in pandas 2.x); pandas then reads
        # every frame up to that Scope's level above the caller: all of them must be readable.
        depth = getattr(scope, "level", None)
        if type(depth) is not int or depth < 0:
            return False
        # Frames below the code's own (the guards' wrappers it called) may lie between pandas';
        # none above it may be read: the sandbox's frames start there.
        seen_user = False
        frame: Any = None
        try:
            for i in range(2, depth + 3):
                frame = sys._getframe(i)
                if frame.f_code.co_filename == USER_FILENAME:
                    seen_user = True
                elif seen_user and not readable_frame(frame):
                    return False
        except ValueError:
            return False
        finally:
            frame = None
        return True

    def guard_scope(cls: Any) -> None:
        real_init, real_resolve = cls.__init__, cls.resolve

        def __init__(  # noqa: PLR0917 - pandas' own signature, called positionally
            self: Any,
            level: int,
            global_dict: Any = None,
            local_dict: Any = None,
            resolvers: Any = (),
            target: Any = None,
        ) -> None:
            if type(level) is not int or level < 0:
                raise denied_scope("use a level= that is not a whole number of 0 or more")
            if isinstance(local_dict, cls) and not scope_frames_readable(local_dict):
                raise denied_scope("take a Scope as local_dict (pass a dict of names)")
            frame = sys._getframe(level + 1)  # the frame pandas reads: `level` above the caller
            try:
                if not readable_frame(frame):
                    raise denied_scope(
                        "read names from a frame outside the code (leave level= out: the "
                        "default reads the names of the code that calls eval()/query())"
                    )
            finally:
                del frame
            real_init(self, level + 1, global_dict, local_dict, resolvers, target)
            self.level = level + 1  # as pandas stores it (this frame is one more)

        def resolve(self: Any, key: str, is_local: bool) -> Any:
            name = f"@{key}" if is_local else "an attribute" if "_" in key else key
            if type(key) is str and key.startswith("_") and key not in self.temps:
                raise denied_scope(f"use the private name {key!r}")
            value = real_resolve(self, key, is_local)
            if isinstance(value, module_type):
                raise SandboxDenied(
                    1,
                    f"sandbox: a pandas expression may not use modules ({name} is the module "
                    f"{getattr(value, '__name__', '?')!r}: pandas would read its attributes "
                    f"unguarded); {PANDAS_ADVICE}",
                )
            what = internal(value)
            if what is not None:
                raise denied_scope(f"use {what} ({name})")
            return value

        __init__.__doc__ = real_init.__doc__
        resolve.__doc__ = real_resolve.__doc__
        cls.__init__ = __init__
        cls.resolve = resolve

    def import_optional_dependency(name: str, *args: Any, **kwargs: Any) -> Any:
        # The signature differs between pandas versions: passed on as given.
        parquet = name in ("pyarrow", "fastparquet")
        if not user_may_import(name, allowed, denied):
            if kwargs.get("errors", args[1] if len(args) > 1 else "raise") in ("ignore", "warn"):
                return None  # what pandas gets for a dependency that is not installed
            if parquet:  # the advice that helps more: what works instead
                raise ImportError(PARQUET_MISSING)
            raise ModuleNotFoundError(import_refusal(str(name)), name=str(name))
        try:
            return real_optional[0](name, *args, **kwargs)
        except ImportError:
            pass
        extra = kwargs.get("extra", args[0] if args else "")
        if parquet:
            raise ImportError(PARQUET_MISSING) from None
        raise ImportError(
            f"sandbox: the optional dependency {name!r} of pandas is not available in this "
            f"sandbox and packages cannot be installed here{'; ' + extra if extra else ''}"
        ) from None

    def wrap_engine(parquet: Any) -> None:
        real_engine = parquet.get_engine

        def get_engine(engine: str) -> Any:
            try:
                return real_engine(engine)
            except ImportError as exc:
                if str(exc).startswith("sandbox:"):
                    raise
                raise ImportError(PARQUET_MISSING) from None

        get_engine.__doc__ = real_engine.__doc__
        parquet.get_engine = get_engine

    def wrap_plot_backend(core: Any) -> None:
        real_load = core._load_backend

        def _load_backend(backend: str) -> Any:
            if backend != "matplotlib" and not user_may_import(backend, allowed, denied):
                raise ModuleNotFoundError(
                    f"{import_refusal(str(backend))}; pandas' plotting.backend may name only "
                    "modules the code may import ('matplotlib' is the one here)",
                    name=str(backend),
                )
            return real_load(backend)

        _load_backend.__doc__ = real_load.__doc__
        core._load_backend = _load_backend

    def patch(modules: Any) -> None:
        if "pandas.compat._optional" not in modules:
            return
        if not real_optional:
            real_optional.append(modules["pandas.compat._optional"].import_optional_dependency)
        real = real_optional[0]
        tester = modules.get("pandas.util._tester")
        if tester is not None and not real_tester:
            real_tester.append(tester.test)
        for name, module in list(modules.items()):
            if name in done or not name.startswith("pandas") or module is None:
                continue
            done.add(name)
            namespace = getattr(module, "__dict__", {})
            if namespace.get("import_optional_dependency") is real:
                module.import_optional_dependency = import_optional_dependency
            if name == "pandas":
                pandas_dirs.append(str(module.__file__).rpartition(os.sep)[0] + os.sep)
            if name == "pandas.core.computation.scope":
                guard_scope(module.Scope)
            elif name == "pandas.io.parquet":
                wrap_engine(module)
            elif name == "pandas.plotting._core":
                wrap_plot_backend(module)
            elif name == "pandas.core.accessor":
                guard_accessor_registration(module)
            if name in dispatch_modules:
                guard_pandas_dispatch(name, module, dispatch_check)
            if real_tester and namespace.get("test") is real_tester[0]:
                module.test = refuse_test_suite

    return patch


#: What ``np.test()``/``pd.test()`` (a library's own test suite, run by pytest) answer.
TEST_SUITE_REFUSED = (
    "sandbox: running a library's own test suite (np.test(), pd.test()) is not permitted: "
    "pytest would import its plugins and test modules unguarded; write your own checks with "
    "assert, or numpy.testing / pandas.testing"
)


def refuse_test_suite(*args: Any, **kwargs: Any) -> Any:
    """Stand in for numpy's and pandas' ``test()``: refuse (:data:`TEST_SUITE_REFUSED`).

    Raises:
        SandboxDenied: Always.
    """
    raise SandboxDenied(1, TEST_SUITE_REFUSED)


#: What ``numpy.testing``'s code runners answer: they ``exec`` a string into a namespace that gets
#: numpy's own (real) builtins, or into their caller's frame.
CODE_RUNNER_REFUSED = (
    "sandbox: numpy.testing.runstring, measure and rundocs are not permitted: they run a string "
    "of code with numpy's own builtins, outside the sandbox's checks; run the code itself "
    "(time it with time.perf_counter())"
)
#: numpy.testing's functions that run a string or file of code (:data:`CODE_RUNNER_REFUSED`).
NUMPY_CODE_RUNNERS = ("runstring", "measure", "rundocs")


def refuse_code_runner(*args: Any, **kwargs: Any) -> Any:
    """Stand in for ``numpy.testing.runstring``/``measure``/``rundocs``: refuse.

    Raises:
        SandboxDenied: Always (:data:`CODE_RUNNER_REFUSED`).
    """
    raise SandboxDenied(1, CODE_RUNNER_REFUSED)


#: What numpy's matrix builder strings (``np.bmat('A,B')``, ``np.r_['A,B']``) answer when the
#: frame whose names they would read is not the user's code.
FRAME_NAMES_REFUSED = (
    "sandbox: np.bmat('names')/np.r_['names'] may read names only in the code that calls "
    "them directly (not from a callback or method the sandbox or a library calls); pass "
    "the arrays themselves (np.bmat([[a, b]])) or ldict=/gdict= dicts"
)


def make_numpy_guard() -> Callable[[Any], None]:
    """``patch(modules)``: numpy's frame-reading helpers and test runner, once numpy is loaded.

    ``np.bmat(str)`` and ``AxisConcatenator.__getitem__(str)`` (``np.r_``, ``np.c_``) look the
    names of the string up in their caller's frame (``sys._getframe().f_back``), globals
    included, and hand the values back in an object matrix. Called as a method the sandbox's
    own code calls (``__getattr__ = np.bmat`` on a ``str`` subclass, reached through the
    guarded ``getattr``), that frame is the sandbox's: its module globals (``os``, ``sys``)
    and locals. Both read a frame only if it is the user's code (``<sandbox>``); explicit
    ``ldict``/``gdict`` work as before. ``PytestTester.__call__`` (``np.test()`` and every
    subpackage's ``test``) is refused (:func:`refuse_test_suite`), and so are
    ``numpy.testing``'s code runners (:data:`NUMPY_CODE_RUNNERS`, :func:`refuse_code_runner`):
    ``runstring(code, {})`` fills the dict with numpy's real builtins.

    Returns:
        ``patch(modules)``; idempotent, a module not loaded yet is patched by a later call.
    """
    patched: set[str] = set()

    def user_frame(frame: Any) -> Any:
        if frame is None or frame.f_code.co_filename != USER_FILENAME:
            raise SandboxDenied(1, FRAME_NAMES_REFUSED)
        return frame

    def guard_bmat(module: Any) -> None:
        real_bmat = module.bmat

        def bmat(obj: Any, ldict: Any = None, gdict: Any = None) -> Any:
            if isinstance(obj, str) and gdict is None:
                frame = user_frame(sys._getframe(1))
                try:
                    return real_bmat(obj, frame.f_locals, frame.f_globals)
                finally:
                    del frame
            return real_bmat(obj, ldict, gdict)

        bmat.__doc__ = real_bmat.__doc__
        bmat.__module__ = real_bmat.__module__
        module.bmat = bmat
        for name in ("numpy", "numpy.matrixlib"):
            namespace = modules_seen[0].get(name)
            if namespace is not None and getattr(namespace, "bmat", None) is real_bmat:
                namespace.bmat = bmat

    def guard_concatenator(module: Any, matrixlib: Any) -> None:
        cls = module.AxisConcatenator
        real_getitem = cls.__getitem__

        def __getitem__(self: Any, key: Any) -> Any:
            if isinstance(key, str):
                frame = user_frame(sys._getframe(1))
                try:  # numpy's own call: globals as ldict, locals as gdict
                    return matrixlib.bmat(key, frame.f_globals, frame.f_locals)
                finally:
                    del frame
            return real_getitem(self, key)

        __getitem__.__doc__ = real_getitem.__doc__
        cls.__getitem__ = __getitem__

    modules_seen: list[Any] = [{}]

    def patch(modules: Any) -> None:
        modules_seen[0] = modules
        defmatrix = modules.get("numpy.matrixlib.defmatrix")
        if defmatrix is not None and "bmat" not in patched:
            patched.add("bmat")
            guard_bmat(defmatrix)
        tricks = modules.get("numpy.lib._index_tricks_impl")
        if tricks is not None and defmatrix is not None and "r_" not in patched:
            patched.add("r_")
            guard_concatenator(tricks, defmatrix)
        utils = modules.get("numpy.testing._private.utils")
        if utils is not None and "runners" not in patched:
            patched.add("runners")
            public = modules.get("numpy.testing")
            for name in NUMPY_CODE_RUNNERS:
                real = getattr(utils, name, None)
                if real is None:
                    continue
                setattr(utils, name, refuse_code_runner)
                if public is not None and getattr(public, name, None) is real:
                    setattr(public, name, refuse_code_runner)
        tester = modules.get("numpy._pytesttester")
        if tester is not None and "test" not in patched:
            patched.add("test")
            tester.PytestTester.__call__ = refuse_test_suite

    return patch


def make_matplotlib_guard(
    allowed: frozenset[str],
    denied: frozenset[str],
    user_builtins: Mapping[str, Any] | None = None,
) -> Callable[[Any], None]:
    """``patch(modules)``: matplotlib's backend loader and figure hooks import as user code may.

    ``backend_registry.load_backend_module("module://NAME")`` imports any module by name and
    returns it (``os``, ``ctypes``); ``matplotlib.use`` and ``pyplot.switch_backend`` go
    through it. A module user code may not import (:func:`module_allowed`,
    :func:`refused_module`) is refused before the import, with the import guard's message
    (:func:`import_refusal`); matplotlib's own backends (``matplotlib.backends.*``) load.

    ``rcParams['figure.hooks']`` (``"module:dotted.name"`` entries, however they were set:
    ``rcParams[...] =``, ``rc()``, ``update``, ``rc_context``, a style file) makes
    ``pyplot.figure()`` import each module and call the object at the dotted name with the
    figure. The look-up is guarded where pyplot makes it, when the figure is made (a check
    of the setting before could be undone by a ``FigureClass`` that sets it): the module by
    :func:`user_may_import`, every attribute by the user's own ``getattr``
    (``matplotlib:os.system`` fails as ``matplotlib.os`` does in user code).

    Args:
        allowed: The import allow-list.
        denied: The import deny-list.
        user_builtins: The builtins of the user's namespace (filled in later is fine); its
            ``getattr`` walks the hooks' dotted names (none given: the real one).

    Returns:
        ``patch(modules)``; idempotent, a module not loaded yet is patched by a later call.
    """
    import contextlib
    import importlib
    import types

    patched: list[Any] = []
    real_import_module = importlib.import_module

    def user_getattr(obj: Any, name: str) -> Any:
        getter = (user_builtins or {}).get("getattr", getattr)
        return getter(obj, name)

    class HookTarget:
        """What pyplot's hook look-up walks: each attribute read as user code reads it."""

        __slots__ = ("target",)

        def __init__(self, target: Any) -> None:
            object.__setattr__(self, "target", target)

        def __getattribute__(self, name: str) -> Any:
            return HookTarget(user_getattr(object.__getattribute__(self, "target"), name))

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return object.__getattribute__(self, "target")(*args, **kwargs)

    def import_module(name: str, package: str | None = None) -> Any:
        if package is not None or not user_may_import(name, allowed, denied):
            shown = str(name) if package is None else f"{package}:{name}"
            raise ModuleNotFoundError(
                f"{import_refusal(shown)}; rcParams['figure.hooks'] may name only modules "
                "the code may import",
                name=shown,
            )
        return HookTarget(real_import_module(name))

    hooks_importlib = types.SimpleNamespace(import_module=import_module)

    def patch(modules: Any) -> None:
        if "matplotlib" in modules and "matplotlib.pyplot" not in modules:
            # pyplot imported later by a library (pandas' df.plot()) would skip this patch;
            # if it cannot be imported, no figure() runs hooks either.
            with contextlib.suppress(ImportError):
                real_import_module("matplotlib.pyplot")
        pyplot = modules.get("matplotlib.pyplot")
        if pyplot is not None and getattr(pyplot, "importlib", None) is importlib:
            pyplot.importlib = hooks_importlib  # only figure() uses pyplot's global importlib
        registry = modules.get("matplotlib.backends.registry")
        if registry is None or registry in patched:
            return
        cls = registry.BackendRegistry
        real_load = cls.load_backend_module

        def load_backend_module(self: Any, backend: str) -> Any:
            name = self._backend_module_name(backend) if type(backend) is str else backend
            if not user_may_import(name, allowed, denied):
                raise ModuleNotFoundError(import_refusal(str(name)), name=str(name))
            return real_load(self, backend)

        load_backend_module.__doc__ = real_load.__doc__
        cls.load_backend_module = load_backend_module
        patched.append(registry)

    return patch


def make_safe_format(refused_name: Callable[[str], bool]) -> Callable[..., Any]:
    """The formatter that ``x.format(...)``/``x.format_map(...)`` calls are routed through.

    ``str.format`` walks ``{0.attr}``/``{0[key]}`` fields in C, unseen by any guard; the
    parent compiles the code with such calls (when the template is not a literal) rewritten
    to call this (astguard's ``route_format_calls``). A ``str`` template (also the first
    argument of ``str.format``/``str.format_map`` and of a str subclass's) is formatted by a
    ``string.Formatter`` whose field look-ups refuse private, dunder and refused names and
    dunder item keys; any other object's own ``format``/``format_map`` method is called.

    Args:
        refused_name: The attribute guard's rule for one name.

    Returns:
        ``route(obj, method, *args, **kwargs)``.
    """
    real_getattr = getattr
    made: list[Any] = []  # the formatter, built on first use (string imports re)

    def formatter() -> Any:
        if not made:
            made.append(_safe_formatter_class(refused_name, real_getattr)())
        return made[0]

    def route(obj: Any, method: str, /, *args: Any, **kwargs: Any) -> Any:
        if method not in ("format", "format_map"):
            raise AttributeError(f"sandbox: {method!r} is not a format method")
        if isinstance(obj, type) and issubclass(obj, str):  # str.format(template, ...)
            if not args or not isinstance(args[0], str):
                raise TypeError(f"descriptor '{method}' for 'str' objects needs a str")
            obj, args = args[0], args[1:]
        if not isinstance(obj, str):
            return real_getattr(obj, method)(*args, **kwargs)
        if method == "format":
            return formatter().vformat(str.__str__(obj), args, kwargs)
        if len(args) != 1 or kwargs:
            raise TypeError("format_map() takes exactly one argument")
        return formatter().vformat(str.__str__(obj), (), args[0])

    route.__name__ = "format"
    return route


#: What the receiver guard answers (AG309's rule, checked at run time).
RECEIVER_RULE = (
    "self._x and cls._x are accepted only when the method runs on an object of this script's "
    "own classes (a class statement in your code, with builtin or abc/enum/typing bases); a "
    "library object's internals can reach code no guard sees, so use its public API"
)


def make_receiver_guard(
    safe_bases: Iterable[str], real_build_class: Callable[..., Any]
) -> tuple[Callable[[Any, str], Any], Callable[..., Any]]:
    """The guard that ``self._x``/``cls._x`` receivers are routed through, and its class record.

    astguard's AG309 exempts ``self._x`` in the methods of the script's own classes because of
    where it is written; the method can still run on another object (``C.m(df)``,
    ``type(c).m(df)``, a subclass with a library base). The parent compiles the code with each
    ``name._x`` rewritten to ``__astguard_receiver__(name, "_x")._x`` (astguard's
    ``route_private_receivers``). The guard returns the receiver when every class in
    ``type(receiver).__mro__`` (and, for a class, in its own ``__mro__``) is one the user's
    class statements created, a builtin class, or in the MRO (or metaclass MRO) of a base
    AG309 accepts; anything else is refused. Types and MROs are read with the real ``type``'s
    descriptors and compared by identity (no ``__class__``, ``__eq__`` or ``__hash__`` of the
    code's choosing is consulted).

    A class counts as the user's only when the user's ``__build_class__`` returns it from a
    class statement without ``metaclass=`` whose bases are classes with a metaclass of that
    set (so the class is new, not one a metaclass or ``__mro_entries__`` handed back).

    Args:
        safe_bases: ``module.name`` of the accepted library bases (astguard's
            ``RECEIVER_BASES``); their modules are imported here, before user code.
        real_build_class: The real ``builtins.__build_class__``.

    Returns:
        ``(guard, build_class)``: ``guard(receiver, name)`` returns ``receiver`` or raises
        :class:`SandboxDenied` naming AG309; ``build_class`` replaces the user's
        ``__build_class__`` and records the classes it creates.
    """
    import builtins as real_builtins
    import types
    import typing
    import weakref

    real_type = type
    # subscripted generics (Generic[T], list[int]): their __mro_entries__ is typing's / C's
    generic: Any = typing.Generic
    alias_types = frozenset(
        id(k)
        for k in (types.GenericAlias, real_type(generic[typing.TypeVar("T")]))
        if real_type(k) is type
    )
    mro_of = type.__dict__["__mro__"].__get__
    name_of = type.__dict__["__qualname__"].__get__
    keep: list[Any] = [object, type]  # holds the accepted classes (ids stay theirs)
    # builtin classes, but not super: a super object looks names up in another object's MRO
    keep.extend(v for v in vars(real_builtins).values() if real_type(v) is type and v is not super)
    metas: list[Any] = [type]
    for dotted in sorted(safe_bases):
        module_name, _, attr = dotted.rpartition(".")
        try:
            base: Any = vars(__import__(module_name))[attr]
        except (ImportError, KeyError, ValueError):
            continue
        found = (base,) if isinstance(base, type) else ()
        if not found and hasattr(base, "__mro_entries__"):  # typing.NamedTuple, a function
            found = tuple(base.__mro_entries__((base,)))
        for entry in found:
            if isinstance(entry, type):
                keep.extend(mro_of(entry))
                metas.extend(mro_of(real_type(entry)))
    keep.extend(metas)
    accepted = frozenset(id(c) for c in keep)
    meta_ids = frozenset(id(c) for c in metas)
    made: dict[int, Any] = {}  # id -> weakref of the classes user class statements created

    def ours(cls: Any) -> bool:
        if id(cls) in accepted:
            return True
        ref = made.get(id(cls))
        return ref is not None and ref() is cls

    def is_class(value: Any) -> bool:
        return any(k is type for k in mro_of(real_type(value)))

    def guard(receiver: Any, name: str, /) -> Any:
        kind = real_type(receiver)
        classes = list(mro_of(kind))
        if is_class(receiver):
            classes.extend(mro_of(receiver))
        for cls in classes:
            if not ours(cls):
                what = name_of(kind) if not is_class(receiver) else f"class {name_of(receiver)}"
                raise SandboxDenied(
                    1,
                    f"sandbox: AG309: the private attribute {name!r} of a {what} object is "
                    f"refused (its class {name_of(cls)!r} is not this script's own): "
                    f"{RECEIVER_RULE}",
                )
        return receiver

    def entries(base: Any, bases: tuple[Any, ...]) -> tuple[Any, ...]:
        """The classes a base stands for, or () when the class statement is not vouched for."""
        if is_class(base):
            return (base,)
        if base is typing.NamedTuple or id(real_type(base)) in alias_types:
            return tuple(base.__mro_entries__(bases))  # the standard library's own method
        return ()

    def build_class(func: Any, name: Any, /, *bases: Any, **kwargs: Any) -> Any:
        cls = real_build_class(func, name, *bases, **kwargs)
        if "metaclass" in kwargs or not is_class(cls) or id(real_type(cls)) not in meta_ids:
            return cls
        for base in bases:
            resolved = entries(base, bases)
            if not resolved or not all(
                is_class(entry) and id(real_type(entry)) in meta_ids for entry in resolved
            ):
                return cls  # a metaclass not vouched for could have handed back any class
        key = id(cls)

        def forget(_ref: Any, key: int = key) -> None:
            made.pop(key, None)

        made[key] = weakref.ref(cls, forget)
        return cls

    build_class.__name__ = "__build_class__"
    return guard, build_class


def _safe_formatter_class(refused_name: Callable[[str], bool], real_getattr: Any) -> Any:
    import _string  # type: ignore[import-not-found]  # the parser string.Formatter uses
    import string

    split = _string.formatter_field_name_split

    class SafeFormatter(string.Formatter):
        def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
            first, rest = split(field_name)
            obj = self.get_value(first, args, kwargs)
            for is_attr, key in rest:
                if is_attr:
                    if key.startswith("_") or refused_name(key):
                        raise AttributeError(
                            f"sandbox: the format field {field_name!r} reads the attribute "
                            f"{key!r}, which is not accessible"
                        )
                    obj = real_getattr(obj, key)
                else:
                    if type(key) is str and key.startswith("__"):
                        raise KeyError(f"sandbox: the format field key {key!r} is refused")
                    obj = obj[key]
            return obj, first

    return SafeFormatter


_REMOVED_BUILTINS = (
    "exec",
    "eval",
    "compile",
    "breakpoint",
    "help",
    "globals",
    "locals",
    "vars",
    "memoryview",
    "copyright",
    "credits",
    "license",
    "exit",
    "quit",
)


# --------------------------------------------------------------------------------------------
# Running the user's code
# --------------------------------------------------------------------------------------------
def _strip(te: Any) -> None:
    """Remove this bootstrap's frames from a TracebackException and its chain, in place."""
    import traceback

    seen: set[int] = set()
    stack = [te]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        # Positions are dropped: carets would be computed by parsing each line with
        # ast.parse, a compile event the generated-code check refuses for library lines.
        current.stack = traceback.StackSummary.from_list(
            [
                traceback.FrameSummary(
                    frame.filename, frame.lineno, frame.name, lookup_line=False, line=frame.line
                )
                for frame in current.stack
                if frame.filename != _BOOT_FILE
            ]
        )
        stack.extend([current.__cause__, current.__context__])
        stack.extend(getattr(current, "exceptions", None) or ())


def _print_exception(exc: BaseException) -> None:
    try:
        import linecache
        import traceback

        # No source lines: the caller has the code, and echoing it would copy whatever the
        # code contains into stderr (the red-team markers, for one).
        linecache.cache.pop(USER_FILENAME, None)

        te = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
        _strip(te)
        sys.stderr.write("".join(te.format()))
    except BaseException:
        try:
            message = str(exc)
        except BaseException:
            message = ""
        line = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
        try:  # noqa: SIM105 - contextlib would cost an import on every run
            os.write(2, f"(traceback unavailable)\n{line}\n".encode("utf-8", "backslashreplace"))
        except OSError:
            pass


def _run_user_code(code_obj: Any, user_ns: dict[str, object]) -> int:
    try:
        exec(code_obj, user_ns)  # noqa: S102 - the point of the sandbox
    except SystemExit as exc:
        status = exc.code
        if status is None:
            return 0
        if isinstance(status, int):  # bools too, as CPython: unittest.main() exits False/True
            return int(status) & 0xFF  # any status: the parent gives none a meaning of its own
        try:  # noqa: SIM105
            sys.stderr.write(f"{status}\n")
        except Exception:  # noqa: S110
            pass
        return 1
    except BaseException as exc:
        _print_exception(exc)
        return 1
    return 0


def _send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def show_figures(fd: int, caps: Any) -> None:
    """Render the matplotlib figures still open to PNG and send them on the figure channel.

    Runs after the user's code, under every layer, as user code: only when the code imported
    ``matplotlib.pyplot``; a figure that fails to render gets one line on stderr, and nothing
    here changes the exit status. Frames and caps: :mod:`pysandbox._figures`; a figure over
    the count or the bytes left is announced (``b"O"`` and its size), not sent.

    Args:
        fd: The channel's write end, or -1 (no channel: nothing is rendered).
        caps: ``(figures, bytes)`` the channel carries at most.
    """
    if fd < 0:
        return
    try:
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return
        count, room = int(caps[0]), int(caps[1])
        numbers = list(pyplot.get_fignums())
    except BaseException:
        return
    for number in numbers:
        try:
            if count <= 0:
                _send(fd, b"O" + (0).to_bytes(4, "big"))
                continue
            buffer = io.BytesIO()
            pyplot.figure(number).savefig(buffer, format="png")
            data = buffer.getvalue()
            if len(data) > room:
                _send(fd, b"O" + min(len(data), 0xFFFFFFFF).to_bytes(4, "big"))
                continue
            _send(fd, b"F" + len(data).to_bytes(4, "big") + data)
            count -= 1
            room -= len(data)
        except BrokenPipeError:
            return
        except BaseException as exc:
            try:  # noqa: SIM105 - contextlib would cost an import on every run
                sys.stderr.write(f"pysandbox: figure {number} was not shown: {exc!r}\n")
            except BaseException:  # noqa: S110 - the run's status stands
                pass


def install_python_guards(
    cfg: ChildConfig, workspace: str, read_roots: tuple[str, ...]
) -> dict[str, Any]:
    """Install the Python-level layer; return the builtins dict for the user's namespace."""
    allowed = frozenset(cfg["allowed_modules"])
    denied = frozenset(cfg["denied_modules"])
    realpath = os.path.realpath
    # A staticmethod (callable since 3.10) so that class bodies doing ``open = io.open``
    # (3.10's pathlib accessor) do not turn the guard into a bound method.
    guarded_open = staticmethod(make_open(io.open, realpath, workspace, read_roots))
    dunders = frozenset(cfg["allowed_dunders"])
    forbidden = _INTROSPECTION | frozenset(cfg.get("forbidden_attributes", ()))

    def refused_name(name: str) -> bool:
        if name.startswith("__") and name.endswith("__"):
            return name not in dunders
        return name in forbidden

    import operator

    guarded_operator = make_guarded_operator(refused_name, operator)
    sqlite_patch, sqlite_handle = make_sqlite_guard(
        make_sqlite_authorizer(workspace, realpath, _within)
    )
    unittest_patch = make_unittest_guard()
    user_builtins = dict(builtins.__dict__)  # completed below, before any user code runs
    pandas_patch = make_pandas_guard(allowed, denied, user_builtins, allowed_dunders=dunders)
    matplotlib_patch = make_matplotlib_guard(allowed, denied, user_builtins)
    numpy_patch = make_numpy_guard()

    def on_load(modules: Any) -> None:  # modules patched once they are loaded
        sqlite_patch(modules)
        unittest_patch(modules)
        pandas_patch(modules)
        matplotlib_patch(modules)
        numpy_patch(modules)

    g_get, g_set, g_del, g_has = make_attr_guards(
        frozenset(cfg["allowed_dunders"]),
        allowed,
        denied,
        forbidden=_INTROSPECTION | frozenset(cfg.get("forbidden_attributes", ())),
        module_forbidden=frozenset(cfg.get("module_forbidden", ())),
        module_pairs=frozenset(cfg.get("denied_module_attributes", ())),
        module_swaps={operator: guarded_operator},
    )
    for name in _REMOVED_BUILTINS:
        user_builtins.pop(name, None)
    user_builtins.update(
        {
            "open": guarded_open,
            "__import__": guard_imports(  # library-created getters too (_library_getters)
                make_import(builtins.__import__, allowed, denied, {"operator": guarded_operator}),
                on_load=on_load,
            ),
            "getattr": g_get,
            "setattr": g_set,
            "delattr": g_del,
            "hasattr": g_has,
        }
    )
    router = cfg.get("format_router")
    if router:
        user_builtins[router] = make_safe_format(refused_name)
    receiver_router = cfg.get("receiver_router")
    if receiver_router:  # AG309's profile: its exempt self._x checked at run time
        receiver_guard, build_class = make_receiver_guard(
            cfg.get("receiver_bases", ()), builtins.__build_class__
        )
        user_builtins[receiver_router] = receiver_guard
        user_builtins["__build_class__"] = build_class
    builtins.open = guarded_open
    io.open = guarded_open
    list_roots = tuple(cfg.get("list_roots", ()))
    blocked = _BLOCKED_EVENTS
    if cfg.get("native_extensions"):
        blocked = blocked - NATIVE_ALLOWED_EVENTS
    native = bool(cfg.get("native_extensions"))
    generated_check = make_generated_code_check(
        frozenset(cfg["allowed_dunders"]),
        _INTROSPECTION | frozenset(cfg.get("static_forbidden_attributes", ())),
        allowed,
        denied,
        expressions=native,
    )
    sys.addaudithook(
        make_audit_hook(
            workspace,
            read_roots,
            realpath,
            os.getpid(),
            list_roots,
            blocked=blocked,
            generated_check=generated_check,
            generated_advice=f"{GENERATED_ADVICE}; {PANDAS_ADVICE}" if native else GENERATED_ADVICE,
            sqlite_handle=sqlite_handle,
            no_chmod=cfg["seccomp"] is not None,
            exec_namespaces=make_exec_namespace_guard(user_builtins) if native else None,
        )
    )
    return user_builtins


def finalize() -> None:
    """Do what interpreter shutdown does, while the guards are still installed.

    Every child (spawn and warm) then ends with ``os._exit``: at a normal interpreter exit
    the audit hooks are cleared before the last finalizers run.

    Joins non-daemon threads, runs ``atexit`` callbacks, then drops the user's namespace and
    collects garbage, so that files the code left open are flushed and closed (their buffered
    data would otherwise be lost) and other finalizers run, as at interpreter shutdown.
    """
    try:
        import gc

        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()
        import atexit

        atexit._run_exitfuncs()
        main = sys.modules.get("__main__")
        if main is not None:
            namespace = main.__dict__
            # Everything but ``__builtins__``: without it, code run by a finalizer (an
            # ``exec`` into these globals, as ``dataclasses`` does) would get the real builtins.
            for name in [key for key in namespace if key != "__builtins__"]:
                del namespace[name]
        gc.collect()
    except BaseException:  # noqa: S110 - the user's code already ran; its status stands
        pass


def entry(cfg: ChildConfig, schemas: dict[str, Any]) -> int:
    """What :data:`pysandbox._bootstrap.STUB` calls in a spawn-mode child.

    Keeps the shipped ``schemas`` (:data:`WIRE_SCHEMAS`), then :func:`run_config`,
    :func:`finalize`, flush, then ``os._exit`` with the status: no finalizer runs after
    interpreter shutdown has removed the audit hooks.
    """
    status = EXIT_SETUP_FAILED
    try:
        WIRE_SCHEMAS.update(schemas)
        status = run_config(cfg)
        finalize()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)


def run_config(
    cfg: ChildConfig, libc: Libc | None = None, ruleset: int = -1, *, checked: bool = False
) -> int:
    """Apply the layers of ``cfg`` in order, then run its code; return the exit status.

    Unless ``checked``, ``cfg`` is first checked against its declaration
    (:class:`pysandbox._wire.ChildConfig`, through :data:`WIRE_SCHEMAS`): an unknown or missing
    key or a value of another type is a setup failure naming the key (``child configuration:
    missing key 'workspace'``). A warm child passes ``checked``: the zygote checked its start
    configuration and the child its run request, and the zygote's typed code built ``cfg``.

    The warm (fork-server) mode passes the zygote's ``libc`` and its prebuilt Landlock
    ``ruleset`` descriptor; spawn mode builds both here. An exception while the layers are
    applied is a setup failure (reported on the setup channel; the process ends).

    A spawn-mode child (``cfg["enter_workspace"]``) starts in ``/``: it imports the
    configuration's preload (:func:`import_preloads`) and then moves into the workspace, before
    any layer, as the warm zygote imports it in ``/`` before forking.

    A ready child (``cfg["code_fd"]``, see :mod:`pysandbox._pool`) has no code yet: once
    every layer is in place it reads the code from that descriptor (at most
    ``cfg["max_code_bytes"]``; more, or less than announced, ends the process with
    :data:`EXIT_CODE_REFUSED` before anything of it runs), closes it, moves from ``/`` into
    the workspace, then runs it.
    """
    if _setup_channel[0] < 0:
        setup_fd = cfg.get("setup_fd", -1) if type(cfg) is dict else -1
        open_setup_channel(setup_fd if type(setup_fd) is int else -1)
    if not checked:
        try:
            check_message(WIRE_SCHEMAS, "ChildConfig", cfg)
        except WireError as exc:
            _fail(str(exc))
    try:
        if cfg.get("enter_workspace"):  # spawn mode: started in "/"
            import_preloads(cfg)
            os.chdir(cfg["workspace"])
        user_ns = _set_up(cfg, libc, ruleset)
    except BaseException as exc:
        _fail(f"{type(exc).__name__}: {exc}")
        raise  # pragma: no cover - _fail does not return
    # Every layer is in place: say so on the setup channel and close it. From here on,
    # nothing the process does can report a setup failure.
    report_setup(SETUP_READY)
    code_fd = cfg.get("code_fd", -1)
    if code_fd >= 0:
        received = receive_code(code_fd, cfg["max_code_bytes"])
        if received is None:
            return EXIT_CODE_REFUSED
        cfg["code"], cfg["code_object"] = received["code"], received["code_object"]
        os.chdir(cfg["workspace"])  # idle, it held nothing in the workspace
    code_obj, compile_error = _prepare_code(cfg)
    if compile_error is not None:
        _print_exception(compile_error)
        return 1
    status = _run_user_code(code_obj, user_ns)
    value = user_ns.pop(RESULT_NAME, None)  # the final expression's (pysandbox._gate)
    show_figures(cfg.get("figure_fd", -1), cfg.get("figure_caps") or (0, 0))
    if status == 0:
        send_value(cfg.get("figure_fd", -1), value)
    del value
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: S110 - the parent may have closed the pipes
        pass
    return status


def import_preloads(cfg: ChildConfig) -> list[str]:
    """Import ``cfg["preload"]`` (after adding ``cfg["sys_path"]``), outside the workspace.

    A module that fails to import is skipped: the user's own import reports it, under every
    layer.

    Returns:
        The modules imported.
    """
    sys.path.extend(p for p in cfg["sys_path"] if p not in sys.path)
    done = []
    for name in cfg.get("preload", ()):
        try:
            __import__(name)
        except Exception:  # noqa: S112 - reported by the user's import, if it has one
            continue
        done.append(name)
    return done


#: Exit status of a ready child whose code was refused (too large, or cut short): nothing ran.
EXIT_CODE_REFUSED = 124


def receive_code(fd: int, limit: int) -> ReadyCode | None:
    """Read a ready child's code from its code pipe ``fd``, then close the pipe.

    The message is an 8-byte little-endian length and a ``marshal`` dump of ``{"code": str,
    "code_object": code or None}`` written by the server (only it holds the write end).

    Args:
        fd: Read end of the code pipe.
        limit: Largest accepted length, bytes.

    Returns:
        The decoded :class:`pysandbox._wire.ReadyCode`, or ``None`` (a line on stderr says
        why) when the announced length is over ``limit``, the pipe ends early or the message
        differs from its declaration: the caller runs nothing.
    """
    import marshal

    try:
        data = b""
        while len(data) < 8:
            chunk = os.read(fd, 8 - len(data))
            if not chunk:
                break
            data += chunk
        size = int.from_bytes(data, "little") if len(data) == 8 else -1
        if size < 0 or size > limit:
            reason = "cut short" if size < 0 else f"{size} bytes, over the limit of {limit}"
            os.write(2, f"pysandbox: the code was refused ({reason}); nothing ran\n".encode())
            return None
        parts = []
        while size > 0:
            chunk = os.read(fd, min(size, 1 << 20))
            if not chunk:
                os.write(2, b"pysandbox: the code was refused (cut short); nothing ran\n")
                return None
            parts.append(chunk)
            size -= len(chunk)
    finally:
        os.close(fd)
    received = marshal.loads(b"".join(parts))  # noqa: S302 - written by the server
    try:
        check_message(WIRE_SCHEMAS, "ReadyCode", received)
    except WireError as exc:
        os.write(2, f"pysandbox: the code was refused ({exc}); nothing ran\n".encode())
        return None
    code: ReadyCode = received
    return code


def _prepare_code(cfg: ChildConfig) -> tuple[Any, BaseException | None]:
    """The code object to run and its compile error (the user's, reported as such)."""
    # The parent compiles the checked source (its parser is warm; a child's first compile()
    # costs milliseconds); the source is compiled here only if the parent could not.
    code_obj = cfg.get("code_object")
    compile_error: BaseException | None = None
    if code_obj is None:
        try:
            code_obj = compile(cfg["code"], USER_FILENAME, "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            compile_error = exc
        else:
            if cfg["python_guards"] and "format" in cfg["code"]:
                # The parent routes `.format` calls through the safe formatter when it compiles;
                # without its code object they would run unrouted (fail closed).
                code_obj = None
                compile_error = RuntimeError(
                    "pysandbox: the code could not be prepared for running; try again"
                )
    return code_obj, compile_error


def _set_up(cfg: ChildConfig, libc: Libc | None, ruleset: int) -> dict[str, Any]:
    """Apply every layer; return the user namespace."""
    workspace: str = cfg["workspace"]
    read_roots = tuple(cfg["read_roots"])
    sys.path.extend(p for p in cfg["sys_path"] if p not in sys.path)  # the zygote's has them

    if cfg["landlock"] is not None or cfg["seccomp"] is not None:
        names = cfg["seccomp_names"]
        if names and cfg["seccomp"] is not None:
            install_sigsys_reporter(names, cfg["abi"]["seccomp"]["SIGINFO_SYSCALL_OFFSET"])
        if libc is None:
            libc = Libc(cfg["abi"])
        apply_rlimits(cfg["rlimits"], libc)  # before seccomp, which refuses setting limits
        if cfg["landlock"] is not None:
            if ruleset >= 0:
                restrict_landlock(libc, ruleset)
            else:
                apply_landlock(libc, cfg["landlock"])
            if cfg.get("no_create"):
                forbid_creation(libc)
        drop_capabilities(libc, bounding=not cfg.get("bounding_set_dropped", False))
        if cfg["seccomp"] is not None:
            load_seccomp(libc, cfg["seccomp"], cfg["pid_placeholder"], cfg.get("pgid_placeholder"))
        del libc
    else:
        apply_rlimits(cfg["rlimits"])

    sys.argv[:] = [USER_FILENAME]  # not the bootstrap's descriptors (unittest.main reads it)
    main_module = type(sys)("__main__")
    user_ns = main_module.__dict__
    sys.modules["__main__"] = main_module
    if cfg["python_guards"]:
        user_ns["__builtins__"] = install_python_guards(cfg, workspace, read_roots)
    else:  # only for the test-suite's per-layer tests; the Sandbox always sets it
        user_ns["__builtins__"] = builtins
    return user_ns
