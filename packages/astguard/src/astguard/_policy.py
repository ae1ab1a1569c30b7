"""The policy: allow-lists, deny-lists and limits, and the helpers the run-time guards share.

Every list here is a module-level ``frozenset`` reviewed like code; the lists are private to
astguard. Other packages ask through :class:`Policy` and the module-level functions
(:func:`is_module_allowed`, :func:`is_forbidden_attribute`, :func:`is_dunder_allowed`,
:func:`forbidden_attributes`, :func:`module_forbidden_attributes`, :func:`reaches_system`,
:data:`DEFAULT_MAX_SOURCE_BYTES`), so that each rule has one home. ``Policy()`` is the safe
default; the ``with_*``/``without_*`` helpers return modified copies.
"""

from __future__ import annotations

import dataclasses
import sys
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ALLOWED_DUNDER_ATTRIBUTES",
    "ALLOWED_DUNDER_NAMES",
    "DEFAULT_ALLOWED_MODULES",
    "DEFAULT_DENIED_MODULES",
    "DEFAULT_MAX_SOURCE_BYTES",
    "DEFINABLE_DUNDERS",
    "DENIED_BUILTINS",
    "DENIED_MODULE_ATTRIBUTES",
    "DYNAMIC_DENIED_ATTRIBUTES",
    "FORBIDDEN_ATTRIBUTES",
    "FORBIDDEN_NAMES",
    "FUTURE_FEATURES",
    "MODULE_NAME_ATTRIBUTES",
    "PUBLIC_UNDERSCORE_ATTRIBUTES",
    "REFLECTION_BUILTINS",
    "SAME_NAME_NON_MODULES",
    "SPAWN_ATTRIBUTES",
    "SPAWN_MODULE_ATTRIBUTES",
    "STDLIB_MODULE_NAMES",
    "SYSTEM_MODULES",
    "WRITE_DENIED_ATTRIBUTES",
    "Policy",
    "forbidden_attributes",
    "is_dunder_allowed",
    "is_forbidden_attribute",
    "is_module_allowed",
    "module_forbidden_attributes",
    "reaches_system",
]

DEFAULT_ALLOWED_MODULES: frozenset[str] = frozenset(
    {
        "__future__",  # compiler directives only (`from __future__ import annotations`)
        "abc",  # ABC / abstractmethod for class hierarchies
        "argparse",  # command-line parsing of a given list (FileType and @files go through the
        # guarded open(); a module is never a namespace, AG307)
        "array",  # typed numeric arrays, no I/O of its own beyond file objects it is given
        "asyncio",  # async code; process/network APIs refused by AG305, submodules denied below
        "base64",  # pure encoding functions
        "binascii",  # pure encoding functions
        "bisect",  # sorted-list algorithms
        "bz2",  # compression of bytes; bz2.open names go through the guarded open()
        "calendar",  # date arithmetic and text calendars
        "cmath",  # complex math
        "configparser",  # INI files: read_string/read_file, read() through the guarded open()
        "collections",  # Counter, defaultdict, deque, namedtuple, collections.abc
        "colorsys",  # pure colour conversions
        "contextlib",  # contextmanager, suppress, ExitStack (contextlib.chdir refused)
        "copy",  # copy / deepcopy of the user's own data
        "csv",  # CSV reading and writing on files opened through the guarded open()
        "dataclasses",  # dataclass, field, asdict, replace
        "datetime",  # dates, times, timedeltas
        "decimal",  # exact decimal arithmetic
        "difflib",  # sequence diffs
        "email",  # parsing and building messages (make_msgid's host name look-up is refused
        # by the audit hook)
        "enum",  # Enum, IntEnum, Flag, auto
        "fnmatch",  # filename pattern matching on strings
        "fractions",  # rational numbers
        "functools",  # partial, reduce, lru_cache, wraps (string annotations checked)
        "getopt",  # command-line option parsing of a given list
        "glob",  # workspace file listing (the kernel layers confine what can be listed)
        "graphlib",  # topological sorting
        "gzip",  # compression of bytes; gzip.open names go through the guarded open()
        "hashlib",  # digests of workspace data
        "heapq",  # heap algorithms
        "hmac",  # keyed digests
        "html",  # html.escape / unescape, html.parser
        "ipaddress",  # IPv4/IPv6 address and network arithmetic
        "io",  # StringIO, BytesIO, TextIOWrapper (io.FileIO and io.open_code refused)
        "itertools",  # iterator algebra
        "json",  # JSON encode/decode (json.tool denied)
        "logging",  # logging to stderr (logging.config and logging.handlers denied)
        "lzma",  # compression of bytes; lzma.open names go through the guarded open()
        "math",  # math functions
        "numbers",  # numeric ABCs
        "operator",  # operator functions (attrgetter/methodcaller names checked, AG205)
        "pathlib",  # workspace paths; the run-time open guard and Landlock confine I/O
        "plistlib",  # property lists (its XML parser refuses entity declarations)
        "pprint",  # pretty printing
        "random",  # pseudo-random numbers (random._os and other privates refused)
        "re",  # regular expressions (time limits contain catastrophic patterns)
        "reprlib",  # bounded repr
        "secrets",  # tokens from os.urandom
        "statistics",  # mean, median, stdev
        "string",  # constants and Template (string.Formatter refused, AG403)
        "struct",  # binary packing
        "textwrap",  # text wrapping
        "time",  # time, perf_counter, sleep
        "tomllib",  # TOML parsing (Python 3.11 and later; absent on 3.10)
        "traceback",  # print_exc / format_exc in error handlers (stack walkers refused)
        "typing",  # annotations (get_type_hints and ForwardRef refused, AG206)
        "unicodedata",  # Unicode database
        "urllib.parse",  # URL parsing only; urllib.request is not allowed
        "uuid",  # uuid4 (uuid1/getnode, which may start helper processes, refused)
        "warnings",  # warnings.warn
        "wave",  # WAV files on file objects or through the guarded open()
        "xml.etree",  # ElementTree parsing and building (expat: no external entities fetched,
        # entity expansion bounded by expat and the memory limit); xml.dom/xml.sax are not allowed
        "zlib",  # compression (memory limits contain decompression bombs)
        "zoneinfo",  # IANA time zones, read from the system tz database
        "shlex",  # shell-like splitting and quoting of strings (shlex.os refused, AG304)
        "sqlite3",  # in-memory or workspace databases (the audit hook confines the path;
        # load_extension refused; a run-time authorizer confines ATTACH/VACUUM INTO)
        "unittest",  # test suites of the script (string-driven test selection refused, AG205;
        # unittest.mock denied below)
    }
)
"""Modules (top-level or dotted) the default policy allows, with their submodules.

Everything else is refused; notably os, sys, subprocess, socket, shutil, tempfile, importlib,
builtins, types, inspect, gc, ctypes, pickle/marshal/shelve/copyreg, threading,
multiprocessing, concurrent, signal, code/codeop, timeit, profile/cProfile, pdb,
tarfile/zipfile, urllib.request, platform and sysconfig (the README's table gives the
reason for each standard module).
"""

DEFAULT_DENIED_MODULES: frozenset[str] = frozenset(
    {
        "asyncio.base_subprocess",  # process spawning
        "asyncio.subprocess",  # process spawning
        "asyncio.streams",  # open_connection / start_server (network)
        "asyncio.unix_events",  # subprocess transports, unix sockets
        "asyncio.windows_events",
        "asyncio.windows_utils",  # Popen wrapper
        "json.tool",  # command-line tool that opens files by name
        "logging.config",  # dictConfig imports dotted names; listen() opens a socket
        "logging.handlers",  # socket, SMTP, HTTP and syslog handlers
        "unittest.mock",  # patch() imports and replaces attributes named by strings
    }
)
"""Submodules of allowed packages that stay refused (most specific entry wins)."""

_REMOVED_STDLIB_MODULES = frozenset(
    {
        # Removed in 3.12 / 3.13 but present in older interpreters the child may run.
        "asynchat",
        "asyncore",
        "distutils",
        "imp",
        "smtpd",
        "aifc",
        "audioop",
        "cgi",
        "cgitb",
        "chunk",
        "crypt",
        "imghdr",
        "mailcap",
        "msilib",
        "nis",
        "nntplib",
        "ossaudiodev",
        "pipes",
        "sndhdr",
        "spwd",
        "sunau",
        "telnetlib",
        "uu",
        "xdrlib",
        "lib2to3",
        "sre_compile",
        "sre_constants",
        "sre_parse",
    }
)

STDLIB_MODULE_NAMES: frozenset[str] = frozenset(sys.stdlib_module_names) | _REMOVED_STDLIB_MODULES
"""Top-level standard-library module names (this interpreter's, plus recently removed ones).

An attribute of an imported module whose name is one of these, and which is not allowed,
is refused: ``pathlib.os``, ``random._os``, ``asyncio.events.os``.
"""

_KNOWN_SUBMODULES = frozenset(
    {
        "collections.abc",
        "html.entities",
        "html.parser",
        "json.decoder",
        "json.encoder",
        "json.scanner",
        "json.tool",
        "logging.config",
        "logging.handlers",
        "urllib.error",
        "urllib.parse",
        "urllib.request",
        "urllib.response",
        "urllib.robotparser",
        "concurrent.futures",
        "importlib.util",
        "importlib.machinery",
        "importlib.abc",
        "importlib.resources",
        "importlib.metadata",
        "xml.etree",
        "xml.dom",
        "xml.sax",
        "email.parser",
        "os.path",
        "unittest.mock",
    }
    | {
        f"asyncio.{sub}"
        for sub in [
            "base_events",
            "base_futures",
            "base_subprocess",
            "base_tasks",
            "constants",
            "coroutines",
            "events",
            "exceptions",
            "format_helpers",
            "futures",
            "graph",
            "locks",
            "log",
            "mixins",
            "proactor_events",
            "protocols",
            "queues",
            "runners",
            "selector_events",
            "sslproto",
            "staggered",
            "streams",
            "subprocess",
            "taskgroups",
            "tasks",
            "threads",
            "timeouts",
            "transports",
            "trsock",
            "unix_events",
            "windows_events",
            "windows_utils",
        ]
    }
)
"""Dotted submodules of standard packages, so that ``from asyncio import events`` and
``asyncio.events`` are known to be module objects."""

DENIED_MODULE_ATTRIBUTES: frozenset[str] = frozenset(
    {
        "contextlib.chdir",  # changes the process working directory
        "gzip.main",  # the command-line tool: reads the process's argv and stdin
        "enum.global_enum",  # writes members into sys.modules[cls.__module__], named by data
        "copy.dispatch_table",  # reducers whose state copy.copy applies with setattr()
        "zoneinfo.reset_tzpath",  # points zone look-ups at arbitrary directories
        "io.FileIO",  # raw file access that bypasses the guarded open()
        "io.open_code",  # opens files for execution, bypassing the guarded open()
        "logging.currentframe",  # returns a frame object
        "logging.StrFormatStyle",  # `{`-style templates walk attributes in C
        "string.Formatter",  # vformat/get_field walk attributes from strings
        "typing.ForwardRef",  # evaluates its string
        "typing.get_type_hints",  # evaluates string annotations
        "typing.evaluate_forward_ref",
        "traceback.walk_stack",  # yields the runner's frames
        "traceback.walk_tb",  # yields frames
        "traceback.extract_stack",  # describes the runner's frames
        "traceback.format_stack",
        "traceback.print_stack",
        "traceback.clear_frames",
        "traceback.StackSummary",  # StackSummary.extract walks frames
        "uuid.getnode",  # may run ifconfig/ip as a helper process
        "uuid.uuid1",  # calls getnode()
    }
)
"""Attributes of allowed modules that are refused (``module.name``), also in ``from m import``."""

SAME_NAME_NON_MODULES: frozenset[str] = frozenset(
    {
        "array.array",
        "bisect.bisect",
        "calendar.calendar",
        "copy.copy",
        "datetime.datetime",
        "datetime.time",
        "fnmatch.fnmatch",
        "getopt.getopt",
        "glob.glob",
        "pprint.pprint",
        "random.random",
        "shlex.shlex",
        "time.time",
    }
)
"""Attributes named like a standard module that are classes or functions, not modules."""

DENIED_BUILTINS: frozenset[str] = frozenset(
    {
        "__build_class__",
        "__import__",
        "breakpoint",
        "compile",
        "copyright",
        "credits",
        "eval",
        "exec",
        "exit",
        "globals",
        "help",
        "input",
        "license",
        "locals",
        "memoryview",
        "open_code",
        "quit",
        "vars",
    }
)
"""Builtins refused in every use (AG201): they reach code objects, frames, namespaces, the
interpreter (``help`` starts a pager, ``input`` reads the server's stdin, ``exit``/``quit``
are site helpers), or raw memory."""

REFLECTION_BUILTINS: frozenset[str] = frozenset({"delattr", "getattr", "hasattr", "setattr"})
"""Builtins allowed only with a safe literal name, or with a computed name when the policy
says a run-time attribute guard is installed (AG202-AG204)."""

FORBIDDEN_NAMES: frozenset[str] = frozenset(
    {
        "__builtins__",
        "__build_class__",
        "__cached__",
        "__import__",
        "__loader__",
        "__package__",
        "__path__",
        "__spec__",
    }
)
"""Names refused in every position, including when the code binds them (AG207)."""

ALLOWED_DUNDER_NAMES: frozenset[str] = frozenset(
    {"__all__", "__debug__", "__doc__", "__file__", "__name__", "__slots__", "__version__"}
)
"""Dunder *names* (not attributes) ordinary code reads or assigns: ``if __name__ == ...``,
``__slots__``/``__all__`` in bodies. Dunder method names (``__rmul__ = __mul__``) are also
accepted when they are allowed dunder attributes."""

_OPERATOR_DUNDERS = frozenset(
    f"__{prefix}{op}__"
    for op in [
        "add",
        "sub",
        "mul",
        "matmul",
        "truediv",
        "floordiv",
        "mod",
        "divmod",
        "pow",
        "lshift",
        "rshift",
        "and",
        "xor",
        "or",
    ]
    for prefix in ("", "r", "i")
)

ALLOWED_DUNDER_ATTRIBUTES: frozenset[str] = _OPERATOR_DUNDERS | frozenset(
    {
        # object identity and text, used in __repr__ and error messages
        "__class__",
        "__doc__",
        "__module__",
        "__name__",
        "__qualname__",
        "__version__",
        "__all__",
        "__slots__",
        "__match_args__",
        "__members__",  # Enum.__members__
        # construction, cooperative super() calls
        "__init__",
        "__new__",
        "__post_init__",
        "__init_subclass__",
        "__set_name__",
        # exception chaining
        "__cause__",
        "__context__",
        "__suppress_context__",
        "__notes__",
        # protocols a user class implements and may call on super() or self
        "__repr__",
        "__str__",
        "__format__",
        "__bytes__",
        "__hash__",
        "__bool__",
        "__eq__",
        "__ne__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
        "__len__",
        "__length_hint__",
        "__iter__",
        "__next__",
        "__reversed__",
        "__contains__",
        "__getitem__",
        "__setitem__",
        "__delitem__",
        "__missing__",
        "__enter__",
        "__exit__",
        "__aenter__",
        "__aexit__",
        "__aiter__",
        "__anext__",
        "__await__",
        "__call__",
        "__neg__",
        "__pos__",
        "__abs__",
        "__invert__",
        "__complex__",
        "__int__",
        "__float__",
        "__index__",
        "__round__",
        "__trunc__",
        "__floor__",
        "__ceil__",
        "__copy__",
        "__deepcopy__",
    }
)
"""Dunder attributes ordinary code uses; every other dunder is refused (AG301).

Notably refused: ``__globals__``, ``__code__``, ``__closure__``, ``__builtins__``, ``__dict__``,
``__base__``/``__bases__``/``__mro__``/``__subclasses__``, ``__self__``, ``__func__``,
``__wrapped__``, ``__getattribute__``/``__getattr__``/``__setattr__``/``__delattr__``,
``__reduce__``/``__reduce_ex__``, ``__annotations__``, ``__traceback__``, ``__loader__``,
``__spec__``, ``__defaults__``/``__kwdefaults__``, ``__objclass__``."""

FORBIDDEN_ATTRIBUTES: frozenset[str] = frozenset(
    {
        # frames
        "f_back",
        "f_builtins",
        "f_code",
        "f_generator",
        "f_globals",
        "f_lasti",
        "f_lineno",
        "f_locals",
        "f_trace",
        "f_trace_lines",
        "f_trace_opcodes",
        "clear_frames",
        # code objects
        "co_argcount",
        "co_cellvars",
        "co_code",
        "co_consts",
        "co_exceptiontable",
        "co_filename",
        "co_firstlineno",
        "co_flags",
        "co_freevars",
        "co_kwonlyargcount",
        "co_linetable",
        "co_lines",
        "co_lnotab",
        "co_name",
        "co_names",
        "co_nlocals",
        "co_positions",
        "co_posonlyargcount",
        "co_qualname",
        "co_stacksize",
        "co_varnames",
        # generators, coroutines, async generators
        "gi_code",
        "gi_frame",
        "gi_running",
        "gi_suspended",
        "gi_yieldfrom",
        "cr_await",
        "cr_code",
        "cr_frame",
        "cr_origin",
        "cr_running",
        "cr_suspended",
        "ag_await",
        "ag_code",
        "ag_frame",
        "ag_running",
        "ag_suspended",
        # tracebacks
        "tb_frame",
        "tb_lasti",
        "tb_lineno",
        "tb_next",
        # cells, frame getters and stack walkers
        "cell_contents",
        "_getframe",
        "_current_frames",
        "currentframe",
        "get_stack",
        "func_globals",
        "func_code",
        # private attributes of library objects that hold modules or the unpatched open()
        "_flavour",
        "_accessor",
        "_builtin_open",
        # private evaluators reachable from public objects (typing.get_args(...)[0]._evaluate)
        "_evaluate",
        "_eval_type",
        # library helpers that write into a module named by a string (Enum._convert_)
        "_convert_",
        "_convert",
        # sqlite3: the sandbox's authorizer (ATTACH beneath the workspace only) must stay
        "set_authorizer",
        # unittest loaders that import modules and walk attributes named by strings
        "loadTestsFromName",
        "loadTestsFromNames",
        # string-formatter internals (AG403 reports these)
        "vformat",
        "get_field",
        "_vformat",
        "convert_field",
        "format_field",
        "parse_fields",
    }
)
"""Non-dunder attributes that expose frames, code, generator/coroutine/traceback internals or
field-walking formatter methods; refused on every object (AG302, AG403)."""

SPAWN_ATTRIBUTES: frozenset[str] = frozenset(
    {
        "create_subprocess_exec",
        "create_subprocess_shell",
        "subprocess_exec",
        "subprocess_shell",
        "open_connection",
        "open_unix_connection",
        "start_server",
        "start_unix_server",
        "create_connection",
        "create_server",
        "create_unix_connection",
        "create_unix_server",
        "create_datagram_endpoint",
        "connect_accepted_socket",
        "connect_read_pipe",
        "connect_write_pipe",
        "sock_connect",
        "sock_accept",
        "sock_sendto",
        "sock_sendall",
        "sock_sendfile",
        "sendfile",
        "getaddrinfo",
        "getnameinfo",
        # private process and socket factories of event loops
        "_make_subprocess_transport",
        "_make_socket_transport",
        "_make_ssl_transport",
        "_make_datagram_transport",
        "_make_read_pipe_transport",
        "_make_write_pipe_transport",
        "_make_unix_socket_transport",
        "_ssock",
        "_csock",
        "_sock_connect",
    }
)
"""Process-spawning and network-opening methods refused on every object (AG305)."""

DYNAMIC_DENIED_ATTRIBUTES: frozenset[str] = frozenset(
    {
        "attrgetter",
        "methodcaller",
        "format",
        "format_map",
        "get_type_hints",
        "ForwardRef",
        "Formatter",
    }
)
"""Names refused when computed at run time (``getattr(obj, name)`` in a guarded builtin):
statically these are allowed only in checkable forms (a literal template, literal names)."""

DEFINABLE_DUNDERS: frozenset[str] = frozenset(
    {
        "__class_getitem__",
        "__del__",
        "__delattr__",
        "__delete__",
        "__dir__",
        "__fspath__",
        "__get__",
        "__getattr__",
        "__getattribute__",
        "__getnewargs__",
        "__getnewargs_ex__",
        "__getstate__",
        "__instancecheck__",
        "__replace__",
        "__set__",
        "__setattr__",
        "__setstate__",
        "__sizeof__",
        "__subclasscheck__",
        "__subclasshook__",
    }
)
"""Protocol hooks a class (or module, for ``__getattr__``/``__dir__``) may *define* although
code may not read them as attributes. Defining any other dunder outside
``ALLOWED_DUNDER_ATTRIBUTES`` is refused (AG301): ``def __annotations__`` would feed strings to
``typing.get_type_hints`` through ``functools.singledispatch``, and ``__reduce__`` /
``__reduce_ex__`` let ``copy.copy`` call ``setattr`` on any object with names from data."""

PUBLIC_UNDERSCORE_ATTRIBUTES: frozenset[str] = frozenset(
    {
        # collections.namedtuple / typing.NamedTuple: public API with a leading underscore so
        # that it cannot clash with a field name
        "_asdict",
        "_field_defaults",
        "_fields",
        "_make",
        "_replace",
        # IPython's display protocol, which pandas and matplotlib implement (rich output)
        "_repr_html_",
        "_repr_javascript_",
        "_repr_jpeg_",
        "_repr_json_",
        "_repr_latex_",
        "_repr_markdown_",
        "_repr_mimebundle_",
        "_repr_pdf_",
        "_repr_png_",
        "_repr_svg_",
    }
)
"""Underscore attributes that are documented public API, accepted on any object under
``Policy.refuse_private_attributes`` (AG309). pandas' other documented underscore names
(``_metadata``, ``_constructor``, ``ExtensionArray._from_sequence``, ...) are for subclass and
extension authors, who define them in their own class and reach them through ``self``/``cls``;
``ExtensionArray._reduce(name)`` and ``_accumulate(name)`` dispatch on a string and are left
out on purpose."""

WRITE_DENIED_ATTRIBUTES: frozenset[str] = frozenset({"__class__", "__match_args__"})
"""Allowed dunders that may be read but not assigned or deleted."""

FUTURE_FEATURES: frozenset[str] = frozenset(
    {
        "absolute_import",
        "annotations",
        "division",
        "generator_stop",
        "generators",
        "nested_scopes",
        "print_function",
        "unicode_literals",
        "with_statement",
    }
)
"""``from __future__ import`` features accepted (``barry_as_FLUFL`` changes the grammar and is
refused)."""

MODULE_NAME_ATTRIBUTES: frozenset[str] = frozenset(
    {
        "_thread",
        "builtins",
        "ctypes",
        "gc",
        "genericpath",
        "importlib",
        "marshal",
        "multiprocessing",
        "nt",
        "ntpath",
        "os",
        "pickle",
        "posix",
        "posixpath",
        "pty",
        "runpy",
        "shutil",
        "socket",
        "subprocess",
        "sys",
        "sysconfig",
        "_builtins",
        "_imp",
        "_io",
        "_os",
        "_posix",
        "_socket",
        "_subprocess",
        "_sys",
    }
)
"""Attribute names refused on *every* object (AG304): library objects can hold these modules
(on 3.12 ``pathlib.Path('.')._flavour`` is ``posixpath``, whose ``os`` is the os module).
A user attribute with one of these names has to be renamed. The underscore forms (``_os``,
``_sys``, ...) are included: library objects keep modules under private names too."""

SPAWN_MODULE_ATTRIBUTES: frozenset[str] = frozenset(
    {
        "system",
        "popen",
        "Popen",
        "fork",
        "forkpty",
        "spawn",
        "spawnl",
        "spawnle",
        "spawnlp",
        "spawnlpe",
        "spawnv",
        "spawnve",
        "spawnvp",
        "spawnvpe",
        "posix_spawn",
        "posix_spawnp",
        "execl",
        "execle",
        "execlp",
        "execlpe",
        "execv",
        "execve",
        "execvp",
        "execvpe",
        "startfile",
        "kill",
        "killpg",
    }
)
"""Process APIs refused as attributes of imported modules (AG305); user objects may have
methods with these names."""

SYSTEM_MODULES: frozenset[str] = frozenset(
    {
        # the operating-system interface and the path modules that hold it (`posixpath.os`)
        "os",
        "posix",
        "nt",
        "posixpath",
        "ntpath",
        "genericpath",
        "shutil",
        # the interpreter itself: its state, import machinery, code and object graph
        "sys",
        "sysconfig",
        "builtins",
        "gc",
        "inspect",
        "importlib",
        "_imp",
        "runpy",
        "marshal",
        "pickle",
        "_io",
        # raw memory and file descriptors
        "ctypes",
        "_ctypes",
        "mmap",
        "fcntl",
        # processes, threads and signals
        "subprocess",
        "_posixsubprocess",
        "pty",
        "multiprocessing",
        "threading",
        "_thread",
        "signal",
        # the network
        "socket",
        "_socket",
    }
)
"""Modules whose point is to reach the operating system or the interpreter: allowing one (or a
module below one) leaves only the kernel layers to confine it, which is worth a warning. A name
also reaches the system when a policy denies it (see :meth:`Policy.reaches_system`). Every
module named in ``MODULE_NAME_ATTRIBUTES`` is here."""

DEFAULT_MAX_SOURCE_BYTES: int = 200_000
"""The one source-size limit, in bytes of UTF-8: the default of ``Policy.max_source_bytes``
(AG902), which a runner applies too. The parsed AST costs about 1 KB per node, so this is also
the checker's memory bound (roughly 100 MB and half a second in the worst case)."""

_EVERY_OBJECT_ATTRIBUTES: frozenset[str] = (
    FORBIDDEN_ATTRIBUTES | SPAWN_ATTRIBUTES | MODULE_NAME_ATTRIBUTES
)
"""Non-dunder attribute names refused on every object (AG302, AG304, AG305)."""

_EVERY_OBJECT_DYNAMIC_ATTRIBUTES: frozenset[str] = (
    _EVERY_OBJECT_ATTRIBUTES | DYNAMIC_DENIED_ATTRIBUTES
)
"""The same, plus the names refused when computed at run time."""

_MODULE_ATTRIBUTES: frozenset[str] = SPAWN_MODULE_ATTRIBUTES
"""Non-dunder names refused on module objects only, on top of the every-object names."""


def _normalize(name: str) -> str:
    """NFKC-normalize an identifier the way the parser does, so look-alikes compare equal."""
    if name.isascii():
        return name
    return unicodedata.normalize("NFKC", name)


def is_dunder(name: str) -> bool:
    """Return whether ``name`` has the ``__x__`` form.

    Args:
        name: An attribute or variable name.

    Returns:
        True for names that start and end with two underscores and have something between.
    """
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


@dataclass(frozen=True)
class Policy:
    """What the checker allows. ``Policy()`` is the safe default.

    Attributes:
        allowed_modules: Module names (top-level or dotted) that may be imported; a name
            allows its submodules unless a more specific entry of ``denied_modules`` covers
            them. Private components (``_x``) are refused unless listed exactly.
        denied_modules: Dotted names refused even below an allowed package (most specific
            entry wins).
        denied_builtins: Builtin names refused in every use (AG201).
        allowed_dunder_attributes: Dunder attributes that may be read (AG301).
        denied_module_attributes: ``module.attribute`` names refused (AG304).
        runtime_attribute_guard: True when the runner installs guarded ``getattr``/
            ``setattr``/``delattr``/``hasattr`` builtins (pysandbox does); then computed
            names are accepted statically (AG203/AG204) and checked at run time.
        runtime_format_guard: True when the runner compiles the code after
            :func:`astguard.route_format_calls` and provides the safe formatter it calls
            (pysandbox does): then ``t.format(...)``/``t.format_map(...)`` calls with a
            template that is not a literal are accepted (AG402 only for other spellings).
        max_source_bytes: Largest accepted source, in bytes of UTF-8 (AG902); default
            :data:`DEFAULT_MAX_SOURCE_BYTES` (200,000). Checked before parsing; the parsed AST
            costs about 1 KB per node, so this is also the memory bound. A runner applies the
            same number to the code it is asked to run.
        max_nodes: Largest accepted number of AST nodes (AG903).
        max_depth: Deepest accepted AST nesting, in nodes from the module (AG904).
        max_folded_bytes: Most bytes of constants the interpreter's constant folding may
            create while compiling the module, intermediates included (AG907); an upper bound
            from the syntax tree (:mod:`astguard._folding`). Default 1 MiB: ``"=" * 80`` is 80
            bytes, and 13 KB of ``'a' * 4096 + 'b' * 4096 + ...`` made a compiling process
            allocate 1 GB.
    """

    allowed_modules: frozenset[str] = DEFAULT_ALLOWED_MODULES
    denied_modules: frozenset[str] = DEFAULT_DENIED_MODULES
    denied_builtins: frozenset[str] = DENIED_BUILTINS
    allowed_dunder_attributes: frozenset[str] = ALLOWED_DUNDER_ATTRIBUTES
    denied_module_attributes: frozenset[str] = DENIED_MODULE_ATTRIBUTES
    runtime_attribute_guard: bool = False
    runtime_format_guard: bool = False
    refuse_private_attributes: bool = False
    max_source_bytes: int = DEFAULT_MAX_SOURCE_BYTES
    max_nodes: int = 100_000
    max_depth: int = 120
    max_folded_bytes: int = 1 << 20
    _cache: dict[str, bool] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        for name in (
            "allowed_modules",
            "denied_modules",
            "denied_builtins",
            "allowed_dunder_attributes",
            "denied_module_attributes",
        ):
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, Iterable):
                raise TypeError(f"Policy.{name} must be a collection of names, not {value!r}")
            names = frozenset(value)
            bad = sorted(repr(n) for n in names if not _is_str(n) or not _valid_module_name(n))
            if bad:
                raise ValueError(f"Policy.{name} holds invalid names: {', '.join(bad[:5])}")
            object.__setattr__(self, name, names)
        for name in ("max_source_bytes", "max_nodes", "max_depth", "max_folded_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Policy.{name} must be a positive int, not {value!r}")
        for flag in (
            "runtime_attribute_guard",
            "runtime_format_guard",
            "refuse_private_attributes",
        ):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"Policy.{flag} must be a bool")

    def with_modules(self, *names: str) -> Policy:
        """Return a copy that also allows ``names`` (and their submodules).

        Args:
            *names: Module names, top-level or dotted (``"numpy"``, ``"logging.handlers"``).

        Returns:
            A new policy; the exact names are also removed from ``denied_modules``.

        Raises:
            ValueError: If a name is not a dotted sequence of identifiers.
        """
        checked = _check_module_names(names)
        return dataclasses.replace(
            self,
            allowed_modules=self.allowed_modules | checked,
            denied_modules=self.denied_modules - checked,
        )

    def without_modules(self, *names: str) -> Policy:
        """Return a copy that refuses ``names`` and everything below them.

        Args:
            *names: Module names, top-level or dotted (``"asyncio"``, ``"collections.abc"``).

        Returns:
            A new policy: the names and their allowed submodules are removed from
            ``allowed_modules``; a name still covered by an allowed parent is added to
            ``denied_modules``.

        Raises:
            ValueError: If a name is not a dotted sequence of identifiers.
        """
        checked = _check_module_names(names)
        allowed = frozenset(
            m for m in self.allowed_modules if not any(_is_under(m, n) for n in checked)
        )
        denied = self.denied_modules | frozenset(
            n for n in checked if any(_is_under(n, a) for a in allowed)
        )
        return dataclasses.replace(self, allowed_modules=allowed, denied_modules=denied)

    def with_runtime_attribute_guard(self, *, installed: bool = True) -> Policy:
        """Return a copy saying whether a run-time attribute guard is installed.

        Args:
            installed: True when the runner replaces getattr/setattr/delattr/hasattr with
                guarded versions that call :func:`is_forbidden_attribute`.

        Returns:
            A new policy.
        """
        return dataclasses.replace(self, runtime_attribute_guard=bool(installed))

    def with_runtime_format_guard(self, *, installed: bool = True) -> Policy:
        """Return a copy that says whether the runner routes non-literal format templates.

        Args:
            installed: True when the runner compiles the code after
                :func:`astguard.route_format_calls` and binds the safe formatter it names.

        Returns:
            A new policy.
        """
        return dataclasses.replace(self, runtime_format_guard=bool(installed))

    def with_private_attribute_rule(self, *, refuse: bool = True) -> Policy:
        """Return a copy that switches the private-attribute rule (AG309) on or off.

        Args:
            refuse: True to refuse ``x._name`` on objects other than a method's own
                ``self``/``cls`` (see :attr:`refuse_private_attributes`).

        Returns:
            A new policy.
        """
        return dataclasses.replace(self, refuse_private_attributes=bool(refuse))

    def with_limits(
        self,
        *,
        max_source_bytes: int | None = None,
        max_nodes: int | None = None,
        max_depth: int | None = None,
        max_folded_bytes: int | None = None,
    ) -> Policy:
        """Return a copy with other size limits.

        Args:
            max_source_bytes: Largest source in bytes of UTF-8, or None to keep.
            max_nodes: Largest number of AST nodes, or None to keep.
            max_depth: Deepest AST nesting, or None to keep.
            max_folded_bytes: Most bytes constant folding may create, or None to keep.

        Returns:
            A new policy.

        Raises:
            ValueError: If a limit is not a positive int.
        """
        changes: dict[str, Any] = {}
        if max_source_bytes is not None:
            changes["max_source_bytes"] = max_source_bytes
        if max_nodes is not None:
            changes["max_nodes"] = max_nodes
        if max_depth is not None:
            changes["max_depth"] = max_depth
        if max_folded_bytes is not None:
            changes["max_folded_bytes"] = max_folded_bytes
        return dataclasses.replace(self, **changes)

    def is_dunder_allowed(self, name: str, *, write: bool = False) -> bool:
        """Return whether the dunder attribute ``name`` may be read (or written).

        The rule of AG301 for ``obj.__x__``, and the dunder rule of a run-time guarded
        ``getattr`` family: a dunder is allowed only when it is in ``allowed_dunder_attributes``;
        ``__class__`` and ``__match_args__`` may be read but never written.

        Args:
            name: An attribute name (NFKC look-alikes are normalized first, as the parser does).
            write: True for assignment or deletion (``setattr``/``delattr``).

        Returns:
            True only for a dunder (``__x__``) this policy allows; False for every other name,
            including non-dunders (ask :meth:`forbidden_attributes` or
            :func:`is_forbidden_attribute` about those) and non-str values.
        """
        if not _is_str(name):
            return False
        name = _normalize(name)
        if not is_dunder(name) or name not in self.allowed_dunder_attributes:
            return False
        return not (write and name in WRITE_DENIED_ATTRIBUTES)

    def forbidden_attributes(self, *, dynamic: bool = False) -> frozenset[str]:
        """Return the non-dunder attribute names refused on every object.

        These are frame, code, generator, coroutine and traceback internals and field-walking
        formatter methods (AG302, AG403), process-spawning and network-opening methods (AG305),
        and names of modules that reach the system (``os``, ``sys``, ``_os``, ..., AG304), which
        library objects can hold. Dunders are decided by :meth:`is_dunder_allowed` instead.
        For a non-dunder ``name`` and no ``module``, ``name in forbidden_attributes(dynamic=d)``
        equals ``is_forbidden_attribute(name, policy, dynamic=d)``.

        Args:
            dynamic: True for names computed at run time (a guarded ``getattr``): then
                ``format``, ``format_map``, ``attrgetter``, ``methodcaller``, ``ForwardRef``,
                ... are included, since the checker accepts them only in checkable forms.

        Returns:
            A frozenset of attribute names (the same object on every call).
        """
        return _EVERY_OBJECT_DYNAMIC_ATTRIBUTES if dynamic else _EVERY_OBJECT_ATTRIBUTES

    @property
    def module_forbidden_attributes(self) -> frozenset[str]:
        """The non-dunder names refused as attributes of module objects only (AG305).

        Process APIs such as ``system``, ``popen``, ``fork``, ``execv``, ``kill``; user
        objects may have methods with these names. On a module, a guard also refuses private
        names, the ``module.name`` pairs of ``denied_module_attributes`` and module values off
        the allow-list, and every name of :meth:`forbidden_attributes`.
        """
        return _MODULE_ATTRIBUTES

    def reaches_system(self, name: str) -> bool:
        """Return whether allowing the module ``name`` would reach the system.

        For an operator's warning when the allow-list is extended: such a module is then
        confined only by the kernel layers.

        Args:
            name: An absolute dotted module name (``"os"``, ``"os.path"``, ``"json"``).

        Returns:
            True when ``name`` or a package above it is in :data:`SYSTEM_MODULES` (``os``,
            ``sys``, ``subprocess``, ``socket``, ``ctypes``, ``pickle``, ...) or in this
            policy's ``denied_modules`` (``logging.handlers``, ``asyncio.subprocess``, ...).
            Malformed names (empty, relative, non-identifiers, non-str) count as reaching the
            system (fail closed). False for modules such as ``json`` or ``math``.
        """
        if not _is_str(name):
            return True
        name = _normalize(name)
        if not _valid_module_name(name):
            return True
        parts = name.split(".")
        for end in range(1, len(parts) + 1):
            prefix = ".".join(parts[:end])
            if prefix in SYSTEM_MODULES or prefix in self.denied_modules:
                return True
        return False

    def to_dict(self) -> dict[str, Any]:
        """Return the policy as JSON-compatible data (sorted lists for the sets).

        Returns:
            A dict with one key per field.
        """
        return {
            "allowed_modules": sorted(self.allowed_modules),
            "denied_modules": sorted(self.denied_modules),
            "denied_builtins": sorted(self.denied_builtins),
            "allowed_dunder_attributes": sorted(self.allowed_dunder_attributes),
            "denied_module_attributes": sorted(self.denied_module_attributes),
            "runtime_attribute_guard": self.runtime_attribute_guard,
            "runtime_format_guard": self.runtime_format_guard,
            "refuse_private_attributes": self.refuse_private_attributes,
            "max_source_bytes": self.max_source_bytes,
            "max_nodes": self.max_nodes,
            "max_depth": self.max_depth,
            "max_folded_bytes": self.max_folded_bytes,
        }


def _is_str(value: object) -> bool:
    """Runtime type check for values typed ``str`` that may come from untyped callers."""
    return isinstance(value, str)


def _is_under(name: str, parent: str) -> bool:
    return name == parent or name.startswith(parent + ".")


def _valid_module_name(name: str) -> bool:
    return bool(name) and all(part.isidentifier() for part in name.split("."))


def _check_module_names(names: Iterable[str]) -> frozenset[str]:
    out = set()
    for name in names:
        if not _is_str(name) or not _valid_module_name(name):
            raise ValueError(f"not a module name: {name!r}")
        out.add(_normalize(name))
    return frozenset(out)


_DEFAULT_POLICY = Policy()


def is_module_allowed(name: str, policy: Policy | None = None) -> bool:
    """Return whether ``policy`` allows importing the module ``name``.

    The most specific entry wins: ``name`` is allowed when its longest prefix in
    ``allowed_modules`` is longer than its longest prefix in ``denied_modules``. A private
    component (``_x``, ``__main__``) is refused unless the prefix ending there is listed exactly
    in ``allowed_modules`` (as ``__future__`` is). The run-time import guard calls this for each
    module the user's code imports (for ``from p import m`` it should ask about ``p`` and, when
    ``p.m`` is a submodule, about ``p.m``).

    Args:
        name: An absolute dotted module name (``"collections.abc"``). NFKC look-alikes are
            normalized first, as the parser does.
        policy: The policy; None means ``Policy()``.

    Returns:
        True when the import is allowed. Malformed names (empty, relative, non-identifiers,
        non-str) are never allowed.
    """
    policy = _DEFAULT_POLICY if policy is None else policy
    if not _is_str(name):
        return False
    cached = policy._cache.get(name)
    if cached is not None:
        return cached
    result = _module_allowed_uncached(_normalize(name), policy)
    if len(policy._cache) < 4096:
        policy._cache[name] = result
    return result


def _module_allowed_uncached(name: str, policy: Policy) -> bool:
    if not _valid_module_name(name):
        return False
    parts = name.split(".")
    best_allowed = 0
    best_denied = 0
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        if prefix in policy.allowed_modules:
            best_allowed = i
        elif parts[i - 1].startswith("_"):
            return False
        if prefix in policy.denied_modules:
            best_denied = i
    return best_allowed > best_denied


def is_known_module(dotted: str, policy: Policy) -> bool:
    """Return whether ``dotted`` names a module (as far as astguard knows without importing).

    Args:
        dotted: A dotted name.
        policy: The policy whose lists also count as known modules.

    Returns:
        True for listed, denied or known submodules and for standard-library top-level names.
    """
    return (
        dotted in STDLIB_MODULE_NAMES
        or dotted in _KNOWN_SUBMODULES
        or dotted in policy.allowed_modules
        or dotted in policy.denied_modules
    )


def is_forbidden_attribute(
    name: str,
    policy: Policy | None = None,
    *,
    module: str | None = None,
    dynamic: bool = False,
    write: bool = False,
) -> bool:
    """Return whether reading or writing the attribute ``name`` is refused.

    This is the rule the static checker applies to ``obj.name`` and to literal names in
    ``getattr``-family calls, exported so that a run-time guarded ``getattr`` can apply the same
    rule to computed names.

    Args:
        name: The attribute name (NFKC look-alikes are normalized first).
        policy: The policy; None means ``Policy()``.
        module: When the object is a module, its ``__name__``: private names, modules off the
            allow-list, process APIs and ``denied_module_attributes`` are then refused too.
        dynamic: True when the name was computed at run time (a guarded ``getattr``); then
            ``format``, ``format_map``, ``attrgetter``, ``methodcaller``, ... are refused too,
            since the checker only accepts them in checkable forms.
        write: True for ``setattr``/``delattr``: ``__class__`` and ``__match_args__`` may be
            read but never written.

    Returns:
        True for dunders :meth:`Policy.is_dunder_allowed` refuses, for the names of
        :meth:`Policy.forbidden_attributes` (frame/code/generator/traceback internals,
        process/network APIs, module names such as ``os``), and, on modules, the module rules
        above. Non-str names are refused.
    """
    policy = _DEFAULT_POLICY if policy is None else policy
    if not _is_str(name) or not name:
        return True
    name = _normalize(name)
    if is_dunder(name):
        return not policy.is_dunder_allowed(name, write=write)
    if name in (_EVERY_OBJECT_DYNAMIC_ATTRIBUTES if dynamic else _EVERY_OBJECT_ATTRIBUTES):
        return True
    if module is None:
        return False
    return module_attribute_problem(module, name, policy) is not None


def is_dunder_allowed(name: str, policy: Policy | None = None, *, write: bool = False) -> bool:
    """Return whether ``policy`` lets code read (or write) the dunder attribute ``name``.

    Bound to the default policy when ``policy`` is None; see :meth:`Policy.is_dunder_allowed`.

    Args:
        name: An attribute name such as ``"__init__"`` or ``"__globals__"``.
        policy: The policy; None means ``Policy()``.
        write: True for ``setattr``/``delattr``.

    Returns:
        True only for an allowed dunder (``__init__``, ``__name__``, ``__class__`` for reading,
        operator methods, ...); False for ``__globals__``, ``__dict__``, ``__subclasses__``,
        for every non-dunder name and for non-str values.
    """
    policy = _DEFAULT_POLICY if policy is None else policy
    return policy.is_dunder_allowed(name, write=write)


def forbidden_attributes(policy: Policy | None = None, *, dynamic: bool = False) -> frozenset[str]:
    """Return the non-dunder attribute names refused on every object.

    What a run-time guard that cannot import astguard needs as data (pysandbox passes it to its
    child); see :meth:`Policy.forbidden_attributes`.

    Args:
        policy: The policy; None means ``Policy()``.
        dynamic: True for names computed at run time (adds ``format``, ``attrgetter``, ...).

    Returns:
        A frozenset of names (``f_globals``, ``gi_frame``, ``create_subprocess_exec``, ``os``,
        ...).
    """
    policy = _DEFAULT_POLICY if policy is None else policy
    return policy.forbidden_attributes(dynamic=dynamic)


def module_forbidden_attributes(policy: Policy | None = None) -> frozenset[str]:
    """Return the names refused as attributes of module objects only (process APIs, AG305).

    Args:
        policy: The policy; None means ``Policy()``.

    Returns:
        A frozenset of names (``system``, ``popen``, ``fork``, ``execv``, ``kill``, ...); see
        :attr:`Policy.module_forbidden_attributes`.
    """
    policy = _DEFAULT_POLICY if policy is None else policy
    return policy.module_forbidden_attributes


def reaches_system(name: str, policy: Policy | None = None) -> bool:
    """Return whether allowing the module ``name`` would reach the system.

    Bound to the default policy when ``policy`` is None; see :meth:`Policy.reaches_system`.

    Args:
        name: An absolute dotted module name.
        policy: The policy whose ``denied_modules`` count too; None means ``Policy()``.

    Returns:
        True for ``os``, ``os.path``, ``sys``, ``subprocess``, ``socket``, ``ctypes``, ``pickle``,
        ``logging.handlers``, ... and for malformed names; False for ``json``, ``math``, ...
    """
    policy = _DEFAULT_POLICY if policy is None else policy
    return policy.reaches_system(name)


def module_attribute_problem(module: str, name: str, policy: Policy) -> str | None:
    """Return why ``module.name`` is refused, or None when it is fine.

    Args:
        module: The dotted module path the attribute is read from.
        name: The (normalized) attribute name; dunders are the caller's business.
        policy: The policy.

    Returns:
        A rule id (``AG303``, ``AG304`` or ``AG305``) or None.
    """
    if is_dunder(name):
        return None
    if name.startswith("_"):
        return "AG303"
    dotted = f"{module}.{name}"
    if dotted in policy.denied_module_attributes:
        return "AG304"
    if name in _MODULE_ATTRIBUTES or name in SPAWN_ATTRIBUTES:
        return "AG305"
    if is_known_module(dotted, policy):
        return None if is_module_allowed(dotted, policy) else "AG304"
    if (
        name in STDLIB_MODULE_NAMES
        and dotted not in SAME_NAME_NON_MODULES
        and not is_module_allowed(name, policy)
    ):
        return "AG304"
    return None
