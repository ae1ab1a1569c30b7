"""Python-level layers (kernel layers off): confined open(), audit hook, import and
attribute guards. The kernel layers are what hold; these give early, friendly errors."""

from __future__ import annotations

import pathlib
import types

import pytest

from pysandbox import RunStatus, Sandbox
from pysandbox.child._main import make_audit_hook, make_generated_code_check, module_allowed
from sandbox_helpers import KERNEL, raw_run


@pytest.fixture
def outside(workspace: pathlib.Path) -> pathlib.Path:
    (workspace.parent / "CANARY.txt").write_text("token-xyz")
    return workspace.parent


def guards_only(sb: Sandbox, code: str, *extra: str) -> list[str]:
    result = raw_run(
        sb, code, landlock=False, seccomp=False, python_guards=True, extra_allowed=extra
    )
    assert result.status is RunStatus.OK, result.stderr
    assert "audit_hook" in result.layers
    return result.stdout.splitlines()


ATTEMPT = """
def attempt(name, fn):
    try:
        fn()
        print(name, 'ok')
    except Exception as exc:
        print(name, type(exc).__name__)
"""


def test_open_guard(python_only: Sandbox, outside: pathlib.Path) -> None:
    code = ATTEMPT + (
        "import pathlib\n"
        "attempt('read_parent', lambda: open('../CANARY.txt').read())\n"
        "attempt('read_bytes_path', lambda: open(b'../CANARY.txt').read())\n"
        "attempt('read_abs', lambda: open('/etc/hostname').read())\n"
        "attempt('write_tmp', lambda: open('/tmp/PWNED-guard', 'w'))\n"
        "attempt('sibling_prefix', lambda: open(str(pathlib.Path.cwd()) + '_PWNED', 'w'))\n"
        "attempt('proc_environ', lambda: open('/proc/self/environ', 'rb').read())\n"
        "attempt('pathlib_read', lambda: pathlib.Path('..', 'CANARY.txt').read_text())\n"
        "attempt('pathlib_write', lambda: pathlib.Path('/tmp/PWNED-guard').write_text('x'))\n"
        "pathlib.Path('up').symlink_to('..')\n"
        "attempt('symlink_escape', lambda: open('up/CANARY.txt').read())\n"
        "attempt('own_file', lambda: open('mine.txt', 'w').write('x'))\n"
        "attempt('read_own', lambda: open('mine.txt').read())\n"
        "attempt('stdin_fd', lambda: open(0, 'rb', closefd=False).read())\n"
    )
    result = python_only.run(code)
    assert result.status is RunStatus.OK, result.stderr
    assert result.stdout.splitlines() == [
        "read_parent PermissionError",
        "read_bytes_path PermissionError",
        "read_abs PermissionError",
        "write_tmp PermissionError",
        "sibling_prefix PermissionError",
        "proc_environ PermissionError",
        "pathlib_read PermissionError",
        "pathlib_write PermissionError",
        "symlink_escape PermissionError",
        "own_file ok",
        "read_own ok",
        "stdin_fd ok",
    ]
    assert "token-xyz" not in result.stdout
    assert not pathlib.Path("/tmp/PWNED-guard").exists()


def test_open_guard_message_is_friendly(python_only: Sandbox, outside: pathlib.Path) -> None:
    result = python_only.run("open('../CANARY.txt')")
    assert result.status is RunStatus.ERROR
    assert "PermissionError: [Errno 13] sandbox: access outside the workspace" in result.stderr


def test_audit_hook_blocks(python_only: Sandbox, outside: pathlib.Path) -> None:
    code = ATTEMPT + (
        "import os, socket, subprocess, sys, gc\n"
        "attempt('socket_inet', lambda: socket.socket(socket.AF_INET))\n"
        "attempt('socketpair', lambda: socket.socketpair())\n"
        "attempt('subprocess', lambda: subprocess.run(['/bin/true']))\n"
        "attempt('os_system', lambda: os.system('true'))\n"
        "attempt('os_fork', lambda: os.fork())\n"
        "attempt('os_exec', lambda: os.execv('/bin/true', ['true']))\n"
        "attempt('posix_spawn', lambda: os.posix_spawn('/bin/true', ['true'], {}))\n"
        "attempt('ctypes_dlopen', lambda: __import__('ctypes').CDLL('libc.so.6'))\n"
        "attempt('ctypes_dlsym', lambda: __import__('ctypes').pythonapi.Py_GetVersion)\n"
        "attempt('getframe', lambda: sys._getframe())\n"
        "attempt('gc_objects', lambda: gc.get_objects())\n"
        "attempt('gc_referrers', lambda: gc.get_referrers(os))\n"
        "attempt('settrace', lambda: sys.settrace(None))\n"
        "sys.addaudithook(lambda e, a: print('EXTRA HOOK', e) if e == 'os.listdir' else None)\n"
        "attempt('os_open_outside', lambda: os.open('../CANARY.txt', os.O_RDONLY))\n"
        "attempt('listdir_outside', lambda: os.listdir('/'))\n"
        "attempt('remove_outside', lambda: os.remove('../CANARY.txt'))\n"
        "attempt('rename_outside', lambda: os.rename('../CANARY.txt', 'stolen'))\n"
        "attempt('kill_parent', lambda: os.kill(os.getppid(), 0))\n"
        "attempt('putenv', lambda: os.putenv('X', '1'))\n"
        "attempt('mkdir_outside_new', lambda: os.mkdir('../newdir'))\n"
        "attempt('mkdir_outside_existing', lambda: os.mkdir('/usr'))\n"
        "attempt('listdir_ws', lambda: os.listdir('.'))\n"
    )
    lines = guards_only(python_only, code, "os", "socket", "subprocess", "sys", "gc", "ctypes")
    result = dict(line.split(" ", 1) for line in lines)
    assert result.pop("socketpair") == "ok"
    assert result.pop("listdir_ws") == "ok"
    # Operation-based: the own (scrubbed) environment may change; mkdir of an existing
    # directory answers what the system call would, with no effect.
    assert result.pop("putenv") == "ok"
    assert result.pop("mkdir_outside_existing") == "FileExistsError"
    assert not (outside / "newdir").exists()
    assert {k: v for k, v in result.items() if v != "SandboxDenied"} == {}
    assert (outside / "CANARY.txt").exists()


def test_frame_denial_keeps_stdlib_working(python_only: Sandbox) -> None:
    code = (
        "import typing, collections, enum, dataclasses, logging\n"
        "T = typing.TypeVar('T')\n"
        "P = collections.namedtuple('P', 'x y')\n"
        "class Color(enum.Enum):\n"
        "    RED = 1\n"
        "@dataclasses.dataclass\n"
        "class D:\n"
        "    a: int\n"
        "logging.basicConfig(format='%(levelname)s %(message)s')\n"
        "logging.warning('warned')\n"
        "print(P(1, 2), Color.RED, D(3), T)\n"
    )
    result = python_only.run(code)
    assert result.status is RunStatus.OK, result.stderr
    assert result.stdout == "P(x=1, y=2) Color.RED D(a=3) ~T\n"
    assert result.stderr == "WARNING warned\n"


def test_import_guard(python_only: Sandbox) -> None:
    code = ATTEMPT + (
        "attempt('os', lambda: __import__('os'))\n"
        "attempt('ctypes', lambda: __import__('ctypes'))\n"
        "attempt('logging_handlers', lambda: __import__('logging.handlers'))\n"
        "attempt('private', lambda: __import__('_socket'))\n"
        "attempt('json', lambda: __import__('json'))\n"
        "attempt('json_decoder', lambda: __import__('json.decoder'))\n"
        "attempt('relative', lambda: __import__('x', globals(), None, (), 1))\n"
        "import asyncio\n"
        "async def main():\n"
        "    await asyncio.sleep(0)\n"
        "    return 'asyncio ok'\n"
        "print(asyncio.run(main()))\n"
    )
    result = raw_run(python_only, code, landlock=False, seccomp=False, python_guards=True)
    assert result.stdout.splitlines() == [
        "os ModuleNotFoundError",
        "ctypes ModuleNotFoundError",
        "logging_handlers ModuleNotFoundError",
        "private ModuleNotFoundError",
        "json ok",
        "json_decoder ok",
        "relative NameError",
        "asyncio ok",
    ], result.stderr


def test_import_guard_from_submodule(python_only: Sandbox) -> None:
    code = (
        ATTEMPT
        + "attempt('from_logging', lambda: __import__('logging', None, None, ['handlers']))\n"
    )
    result = raw_run(python_only, code, landlock=False, seccomp=False, python_guards=True)
    assert result.stdout == "from_logging ImportError\n"


def test_workspace_modules_never_shadow(python_only: Sandbox, workspace: pathlib.Path) -> None:
    (workspace / "statistics.py").write_text("print('ESCAPED')\n")
    result = python_only.run("import statistics\nprint(statistics.mean([1, 2, 3]))")
    assert result.stdout == "2\n"


def test_attribute_guards(python_only: Sandbox) -> None:
    code = ATTEMPT + (
        "import random, json\n"
        "class A:\n"
        "    def __init__(self):\n"
        "        self._items = [1]\n"
        "    def do_x(self):\n"
        "        return 'dispatched'\n"
        "a = A()\n"
        "name = '_' + '_class' + '_' * 2\n"
        "attempt('dunder_get', lambda: getattr(a, '__dict' + '__'))\n"
        "attempt('subclasses', lambda: getattr(object, '__subcl' + 'asses__'))\n"
        "attempt('module_private', lambda: getattr(random, '_o' + 's'))\n"
        "attempt('frame', lambda: getattr((x for x in ()), 'gi_fr' + 'ame'))\n"
        "attempt('set_module', lambda: setattr(json, 'loads', print))\n"
        "attempt('set_dunder', lambda: setattr(a, '__cla' + 'ss__', int))\n"
        "attempt('del_module', lambda: delattr(json, 'dumps'))\n"
        "print('hasattr_private_module', hasattr(random, '_o' + 's'))\n"
        "attempt('own_private', lambda: getattr(a, '_items'))\n"  # D1: on every object
        "print('own_private_syntax', a._items)\n"
        "print('dispatch', getattr(a, 'do_' + 'x')())\n"
        "print('default', getattr(a, 'missing', 42))\n"
        "print('hasattr_ok', hasattr(a, 'do_x'))\n"
        "setattr(a, 'y', 5); print('set_own', a.y)\n"
    )
    result = raw_run(python_only, code, landlock=False, seccomp=False, python_guards=True)
    assert result.status is RunStatus.OK, result.stderr
    assert result.stdout.splitlines() == [
        "dunder_get AttributeError",
        "subclasses AttributeError",
        "module_private AttributeError",
        "frame AttributeError",
        "set_module AttributeError",
        "set_dunder AttributeError",
        "del_module AttributeError",
        "hasattr_private_module False",
        "own_private AttributeError",
        "own_private_syntax [1]",
        "dispatch dispatched",
        "default 42",
        "hasattr_ok True",
        "set_own 5",
    ]


def test_removed_builtins(python_only: Sandbox) -> None:
    code = ATTEMPT + "".join(
        f"attempt({name!r}, lambda: {name})\n"
        for name in ("exec", "eval", "compile", "globals", "vars", "breakpoint")
    )
    result = raw_run(python_only, code, landlock=False, seccomp=False, python_guards=True)
    assert {line.split()[1] for line in result.stdout.splitlines()} == {"NameError"}


def test_main_module_is_the_users(python_only: Sandbox) -> None:
    code = "import sys\nprint(sys.modules['__main__'].__dict__ is globals())\nprint(__name__)"
    result = raw_run(python_only, code, landlock=False, seccomp=False, python_guards=False)
    assert result.stdout == "True\n__main__\n"


def test_audit_hook_state_is_immutable(workspace: pathlib.Path) -> None:
    check = make_generated_code_check(
        frozenset({"__init__"}), frozenset({"f_globals"}), frozenset({"json"}), frozenset()
    )
    hook = make_audit_hook(str(workspace), ("/usr/lib",), lambda p: p, 1, (), generated_check=check)
    assert hook.__closure__ is None
    immutable = (
        frozenset,
        tuple,
        str,
        int,
        type,
        type(None),
        types.FunctionType,
        types.BuiltinFunctionType,
        types.MappingProxyType,
    )
    seen: set[int] = set()

    def check_function(function: types.FunctionType) -> None:
        # Closures (the generated-code check's) hold immutable values and functions only.
        if id(function) in seen:
            return
        seen.add(id(function))
        for cell in function.__closure__ or ():
            value = cell.cell_contents
            assert isinstance(value, immutable), type(value)
            if isinstance(value, types.FunctionType):
                check_function(value)

    defaults = hook.__defaults__ or ()
    assert check in defaults
    for value in defaults:
        assert isinstance(value, immutable), type(value)
        if isinstance(value, types.FunctionType):
            check_function(value)


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("json", True),
        ("json.decoder", True),
        ("json.tool", False),
        ("os", False),
        ("_json", False),
        ("json._private", False),
        ("__future__", True),
        ("", False),
        ("json..x", False),
    ],
)
def test_module_allowed(name: str, allowed: bool) -> None:
    rules = (frozenset({"json", "__future__"}), frozenset({"json.tool"}))
    assert module_allowed(name, *rules) is allowed


LYING_TYPES = """
import pathlib

class Flip:
    calls = 0
    def __fspath__(self):
        Flip.calls += 1
        return 'ok.txt' if Flip.calls % 2 else '../CANARY.txt'

class Sneaky(str):
    def startswith(self, *a):
        return False
    def endswith(self, *a):
        return False
    def __contains__(self, item):
        return False
    def split(self, *a):
        return ['json']
    def partition(self, *a):
        return ('json', '', '')

class FlipPath(type(pathlib.Path())):
    calls = 0
    def __fspath__(self):
        FlipPath.calls += 1
        return 'ok.txt' if FlipPath.calls % 2 else '../CANARY.txt'
"""


def test_lying_path_and_name_objects(python_only: Sandbox, outside: pathlib.Path) -> None:
    code = (
        ATTEMPT
        + LYING_TYPES
        + (
            "open('ok.txt', 'w').close()\n"
            "attempt('flip_open', lambda: open(Flip()).read())\n"
            "attempt('flip_open_again', lambda: open(Flip()).read())\n"
            "attempt('sneaky_mode', lambda: open('/usr/lib/PWNED', Sneaky('w')))\n"
            "attempt('sneaky_getattr', lambda: getattr(print, Sneaky('__self__')))\n"
            "attempt('sneaky_hasattr', lambda: hasattr(print, Sneaky('__self__')))\n"
            "attempt('sneaky_import', lambda: __import__(Sneaky('os')))\n"
            "attempt('sneaky_fromlist', lambda: __import__('json', None, None, (Sneaky('x'),)))\n"
            "attempt('flip_path_unlink', lambda: FlipPath('x').unlink())\n"
            "attempt('flip_path_unlink2', lambda: FlipPath('x').unlink())\n"
        )
    )
    result = raw_run(python_only, code, landlock=False, seccomp=False, python_guards=True)
    assert result.status is RunStatus.OK, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert lines["flip_open"] in {"PermissionError", "ok"}
    assert lines["flip_open_again"] in {"PermissionError", "ok"}
    assert "token-xyz" not in result.stdout
    assert lines["sneaky_mode"] == "TypeError"
    assert lines["sneaky_getattr"] == "TypeError"
    assert lines["sneaky_hasattr"] == "TypeError"
    assert lines["sneaky_import"] == "ModuleNotFoundError"
    assert lines["sneaky_fromlist"] == "ImportError"
    # os.* functions convert once and audit the converted value: consistent either way.
    assert lines["flip_path_unlink"] == "ok"
    assert lines["flip_path_unlink2"] == "SandboxDenied"
    assert (outside / "CANARY.txt").exists()


def test_dir_fd_relative_calls_refused(python_only: Sandbox) -> None:
    code = ATTEMPT + (
        "import os\n"
        "os.mkdir('d')\n"
        "fd = os.open('d', os.O_RDONLY)\n"
        "attempt('mkdir_dirfd', lambda: os.mkdir('x', dir_fd=fd))\n"
        "attempt('remove_dirfd', lambda: os.remove('x', dir_fd=fd))\n"
        "attempt('mkdir_plain', lambda: os.mkdir('y'))\n"
    )
    result = raw_run(
        python_only, code, landlock=False, seccomp=False, python_guards=True, extra_allowed=("os",)
    )
    assert result.stdout.splitlines() == [
        "mkdir_dirfd SandboxDenied",
        "remove_dirfd SandboxDenied",
        "mkdir_plain ok",
    ], result.stderr


def test_attribute_guard_mirrors_astguard_lists(python_only: Sandbox) -> None:
    code = ATTEMPT + (
        "import io, logging, asyncio, operator\n"
        "loop = asyncio.new_event_loop()\n"
        "attempt('io_fileio', lambda: getattr(io, 'File' + 'IO'))\n"
        "attempt('logging_frame', lambda: getattr(logging, 'current' + 'frame'))\n"
        "attempt('loop_shell', lambda: getattr(loop, 'subprocess_' + 'shell'))\n"
        "attempt('attrgetter', lambda: getattr(operator, 'attr' + 'getter'))\n"
        "attempt('tb_lineno', lambda: getattr(1, 'tb_' + 'lineno'))\n"
        "attempt('plain', lambda: getattr(io, 'String' + 'IO'))\n"
        "loop.close()\n"
    )
    result = raw_run(python_only, code, landlock=False, seccomp=False, python_guards=True)
    assert result.stdout.splitlines() == [
        "io_fileio AttributeError",
        "logging_frame AttributeError",
        "loop_shell AttributeError",
        "attrgetter AttributeError",
        "tb_lineno AttributeError",
        "plain ok",
    ], result.stderr


def test_attribute_guard_agrees_with_astguard_on_computed_names(python_only: Sandbox) -> None:
    # The child's rules come from astguard: what the static checker refuses for a literal name
    # is refused at run time for a computed one.
    code = ATTEMPT + (
        "import dataclasses\n"
        "@dataclasses.dataclass\n"
        "class P:\n"
        "    x: int = 1\n"
        "class Holder:\n"
        "    pass\n"
        "h = Holder()\n"
        "attempt('annotations', lambda: getattr(P, '__annot' + 'ations__'))\n"
        "attempt('dataclass_fields', lambda: getattr(P, '__dataclass_' + 'fields__'))\n"
        "attempt('module_name', lambda: setattr(h, 'o' + 's', 1))\n"
        "attempt('private_module_name', lambda: getattr(h, '_s' + 'ys'))\n"
        "attempt('init', lambda: getattr(P, '__in' + 'it__'))\n"
        "attempt('own_attr', lambda: setattr(h, 'na' + 'me', 1))\n"
        "print('fields', [f.name for f in dataclasses.fields(P)])\n"
    )
    result = python_only.run(code)
    assert result.status is RunStatus.OK, result.stderr
    assert result.stdout.splitlines() == [
        "annotations AttributeError",
        "dataclass_fields AttributeError",
        "module_name AttributeError",
        "private_module_name AttributeError",
        "init ok",
        "own_attr ok",
        "fields ['x']",
    ]


@pytest.mark.parametrize(
    ("event", "args", "errno", "part"),
    [
        ("os.chmod", ("f", 0o755, None), 1, "file modes cannot be changed"),
        ("os.chmod", (3, 0o644, None), 1, "file modes cannot be changed"),  # os.fchmod
        ("os.listxattr", ("f",), 95, "extended file attributes are not supported"),
        ("os.getxattr", ("f", "user.x"), 95, "extended file attributes are not supported"),
    ],
)
def test_mode_changes_are_refused_with_a_message_where_seccomp_refuses_them(
    workspace: pathlib.Path, event: str, args: tuple[object, ...], errno: int, part: str
) -> None:
    ws = str(workspace)
    refusing = make_audit_hook(ws, ("/usr/lib",), lambda p: p, 1, (), no_chmod=True)
    with pytest.raises(PermissionError) as info:
        refusing(event, (f"{ws}/f", *args[1:]) if isinstance(args[0], str) else args)
    assert info.value.errno == errno
    assert str(info.value).startswith(f"[Errno {errno}] sandbox: {part}")
    # Without the seccomp layer the system calls work in the workspace: nothing is refused.
    plain = make_audit_hook(ws, ("/usr/lib",), lambda p: p, 1, ())
    assert plain(event, (f"{ws}/f", *args[1:]) if isinstance(args[0], str) else args) is None


@pytest.mark.parametrize("execution", ["warm", "spawn"])
def test_chmod_in_the_workspace_gets_a_sandbox_message(
    workspace: pathlib.Path, execution: str
) -> None:
    require = ("landlock", "seccomp") if KERNEL.landlock_abi and KERNEL.seccomp else ()
    code = (
        "import os, pathlib, shutil\n"
        "pathlib.Path('f').write_text('x')\n"
        "for name, call in [('os.chmod', lambda: os.chmod('f', 0o600)),\n"
        "                   ('Path.chmod', lambda: pathlib.Path('f').chmod(0o600)),\n"
        "                   ('copy2', lambda: shutil.copy2('f', 'g')),\n"
        "                   ('copyfile', lambda: shutil.copyfile('f', 'h'))]:\n"
        "    try:\n"
        "        call()\n"
        "        print(name, 'ok')\n"
        "    except PermissionError as exc:\n"
        "        print(name, exc.errno, str(exc).split(';')[0])\n"
    )
    with Sandbox(
        workspace, require=require, execution=execution, extra_modules=("os", "shutil")
    ) as sb:
        result = sb.run(code)
    assert result.status is RunStatus.OK, result.stderr
    if not KERNEL.seccomp:
        assert result.stdout.split() == ["os.chmod", "ok", "Path.chmod", "ok", "copy2", "ok",
                                         "copyfile", "ok"]  # fmt: skip
        return
    refused = (
        "1 [Errno 1] sandbox: file modes cannot be changed (os.chmod, Path.chmod, "
        "shutil.copymode and copy2 are refused, in the workspace too)"
    )
    assert result.stdout.splitlines() == [
        f"os.chmod {refused}",
        f"Path.chmod {refused}",
        f"copy2 {refused}",
        "copyfile ok",
    ]
