"""The process boundary: every message host, warm zygote and child exchange, declared once.

Standard library only. Each message is a :class:`~typing.TypedDict` imported by its writer (the
host: :mod:`pysandbox._config`, :mod:`pysandbox._launch`, :mod:`pysandbox._pool`, the server side
of :mod:`pysandbox.child._zygote`) and by its reader (the child: :mod:`pysandbox.child._main`,
the zygote side of :mod:`pysandbox.child._zygote`), so mypy checks both ends against the same
declaration.

TypedDicts check nothing at run time, so the reader checks every message it receives against a
*schema derived from this declaration* (:func:`schema`, through :func:`typing.get_type_hints`
and each TypedDict's required and optional keys; there is no second list of keys): the exact key
set and every value's type. The child checks with
:func:`pysandbox.child._wire_check.check_message`, which needs no :mod:`typing` (importing it
costs a confined interpreter about as much as the rest of its
start-up): the host derives the schemas once per process (:func:`schemas`) and ships them with the
child's code (:mod:`pysandbox._bootstrap`). A mismatch is refused as a setup failure naming the
key: ``child configuration: unknown key 'x'``, ``missing key 'y'``, ``key 'z': expected int, got
str``.

The messages:

- :class:`ChildConfig`: one run's whole configuration as :func:`pysandbox.child._main.run_config`
  reads it. Spawn mode sends it on the payload descriptor; the zygote builds it from its
  :class:`ZygoteConfig` and a :class:`RunRequest`.
- :class:`ZygoteConfig`: the zygote's start configuration (the shared part of every run's
  configuration, :class:`ChildFixed`, plus the zygote's own keys).
- :class:`RunRequest`: the body of one fork request (code, limits, the run marker).
- :class:`ReadyCode`: what a ready child reads from its code pipe (:mod:`pysandbox._pool`).
- :class:`SessionCall`: one call a session child reads from its code pipe
  (:mod:`pysandbox._session`, :mod:`pysandbox.child._session`).

The byte replies on the zygote's sockets (``R``, ``E<reason>``, ``P<pid>``, ``X``, ``!``) and on
the setup channel are fixed tags, not messages; they are documented in
:mod:`pysandbox.child._zygote` and :mod:`pysandbox.child._kernel`.

Room for later commands (sessions): a command is one more TypedDict here, with a
``op: Literal["..."]`` key, added to :data:`MESSAGES`; the schema handles ``Literal`` and unions of
such TypedDicts, so its reader checks it the same way.

Types the schema understands: ``int``, ``str``, ``bool``, ``float``, ``bytes``, ``None``,
:class:`types.CodeType`, ``Any``, ``list[X]``, ``tuple[X, ...]``, ``tuple[X, Y]``,
``dict[K, V]``, ``Literal[...]``, unions (``X | None``), nested TypedDicts, ``Required`` and
``NotRequired``. ``bool`` is not an ``int`` here (types match exactly).
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Any, Literal, TypedDict, Union

__all__ = [
    "MESSAGES",
    "SESSION_KEY_BYTES",
    "ChildAbi",
    "ChildConfig",
    "ChildFixed",
    "LandlockWire",
    "ReadyCode",
    "RunPart",
    "RunRequest",
    "Schema",
    "SessionCall",
    "ZygoteConfig",
    "schema",
    "schemas",
]


class ChildAbi(TypedDict):
    """:func:`pysandbox._abi.child_abi`: the machine's numbers the child's kernel layers use."""

    nr: dict[str, int]
    prctl: dict[str, int]
    landlock: dict[str, int]
    seccomp: dict[str, int]
    capset_version: int


class LandlockWire(TypedDict):
    """:meth:`pysandbox._landlock.LandlockPlan.to_wire`: the Landlock plan."""

    abi: int
    fs: int
    net: int
    scoped: int
    rules: list[tuple[str, int]]


class ChildFixed(TypedDict):
    """The part of a run's configuration every run of one sandbox shares.

    See :class:`pysandbox._config.ChildConfig` for what each key means.
    """

    workspace: str
    read_roots: list[str]
    list_roots: list[str]
    sys_path: list[str]
    landlock: LandlockWire | None
    seccomp: list[bytes] | None
    pid_placeholder: int
    pgid_placeholder: int
    seccomp_names: dict[int, str] | None
    allowed_modules: list[str]
    denied_modules: list[str]
    allowed_dunders: list[str]
    forbidden_attributes: list[str]
    static_forbidden_attributes: list[str]
    module_forbidden: list[str]
    denied_module_attributes: list[str]
    format_router: str
    receiver_router: str
    receiver_bases: list[str]
    python_guards: bool
    native_extensions: bool
    preload: list[str]
    figure_caps: list[int]
    abi: ChildAbi


class _RunPartRequired(TypedDict):
    code: str
    code_object: types.CodeType | None
    rlimits: list[tuple[int, int, int]]


class RunPart(_RunPartRequired, total=False):
    """The part of a run's configuration that differs between runs.

    ``code`` is empty and ``code_object`` ``None`` for a ready child, which reads both from its
    code pipe (:class:`ReadyCode`). ``no_create``: shrink-only (nothing may be created).
    """

    no_create: bool


class _ChildConfigRequired(ChildFixed, RunPart):
    setup_fd: int
    figure_fd: int


class ChildConfig(_ChildConfigRequired, total=False):
    """One run's whole configuration, as :func:`pysandbox.child._main.run_config` reads it.

    ``setup_fd`` and ``figure_fd``: write ends of the setup and figure channels (-1: none).
    Optional: ``enter_workspace`` (spawn mode: started in ``/``), ``code_fd`` and
    ``max_code_bytes`` (a ready child's code pipe and its limit, bytes), ``bounding_set_dropped``
    (the zygote dropped the capability bounding set already), ``result_fd`` and ``session_key``
    (a session child's result pipe, and the random key that opens every call's header on its code
    pipe, :mod:`pysandbox.child._session`).
    """

    enter_workspace: bool
    code_fd: int
    max_code_bytes: int
    bounding_set_dropped: bool
    result_fd: int
    session_key: bytes


class ZygoteConfig(ChildFixed):
    """The zygote's start configuration: the shared part plus the zygote's own keys.

    ``env``: the base environment of every child (without the run marker); ``preimport``:
    standard-library modules imported once; ``server_pid``: the pid of the server that started
    it (a zygote whose parent is another process exits).
    """

    env: dict[str, str]
    preimport: list[str]
    server_pid: int


class _RunRequestRequired(RunPart):
    env: dict[str, str]


class RunRequest(_RunRequestRequired, total=False):
    """The body of one fork request: the run's part, its marker (``env``), a ready child's limit.

    ``session_child``: the child is a session (:mod:`pysandbox.child._session`): it serves
    calls from its code pipe until the pipe ends, and the request carries its result pipe too;
    ``session_key``: the session's random key (:data:`SESSION_KEY_BYTES`), which begins the
    header of every call the parent writes (bytes of the user's own source, misread as a header
    after an interrupted read, cannot carry it).
    """

    max_code_bytes: int
    session_child: bool
    session_key: bytes


#: Bytes of a session's key (:class:`RunRequest` ``session_key``): 128 random bits.
SESSION_KEY_BYTES = 16


class ReadyCode(TypedDict):
    """What a ready child reads from its code pipe, after an 8-byte little-endian length."""

    code: str
    code_object: types.CodeType | None


class SessionCall(TypedDict):
    """One call a session child reads from its code pipe, after an 8-byte little-endian length.

    ``seq``: the call's number, echoed in its result frame (:mod:`pysandbox.child._session`).
    """

    code: str
    code_object: types.CodeType | None
    seq: int


#: Every message, by the name its reader uses, with the words a refusal starts with.
MESSAGES: dict[str, tuple[type[Any], str]] = {
    "ChildConfig": (ChildConfig, "child configuration"),
    "ZygoteConfig": (ZygoteConfig, "zygote configuration"),
    "RunRequest": (RunRequest, "run request"),
    "ReadyCode": (ReadyCode, "ready code"),
    "SessionCall": (SessionCall, "session call"),
}

#: A derived schema node (``marshal``-compatible): ``(kind, description, *arguments)``.
Schema = tuple[Any, ...]

_SCALARS: dict[Any, str] = {
    int: "int",
    str: "str",
    bool: "bool",
    float: "float",
    bytes: "bytes",
    type(None): "None",
    types.CodeType: "code",
}
_WRAPPERS = {name for name in ("Required", "NotRequired", "ReadOnly") if hasattr(typing, name)}


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def schema(tp: Any) -> Schema:
    """Derive the run-time schema of a declared type (a TypedDict of this module, or a field).

    Args:
        tp: A type as declared here.

    Returns:
        Nested tuples of plain data that :func:`pysandbox.child._wire_check.check_message` walks:
        ``("any", d)``, ``("is", d, name)``, ``("list", d, item)``, ``("tuple", d, items)``,
        ``("tuplev", d, item)``, ``("dict", d, key, value)``, ``("lit", d, values)``,
        ``("union", d, alternatives)``, ``("td", d, required, fields)`` (``fields`` maps every
        key to its schema, ``required`` is the sorted tuple of required keys); ``d`` is how a
        refusal names the expected type.

    Raises:
        TypeError: A type the schema cannot check (add it here rather than work around it).
    """
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is not None and getattr(origin, "_name", None) in _WRAPPERS:
        return schema(args[0])  # Required[X] / NotRequired[X]: the key sets say which
    if tp is Any:
        return ("any", "any value")
    if tp in _SCALARS:
        return ("is", _SCALARS[tp], _SCALARS[tp])
    if _is_typeddict(tp):
        hints = typing.get_type_hints(tp)
        fields = {key: schema(hints[key]) for key in sorted(hints)}
        return ("td", tp.__name__, tuple(sorted(tp.__required_keys__)), fields)
    if origin is list:
        item = schema(args[0])
        return ("list", f"list[{item[1]}]", item)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = schema(args[0])
            return ("tuplev", f"tuple[{item[1]}, ...]", item)
        items = tuple(schema(a) for a in args)
        return ("tuple", f"tuple[{', '.join(i[1] for i in items)}]", items)
    if origin is dict:
        key, value = schema(args[0]), schema(args[1])
        return ("dict", f"dict[{key[1]}, {value[1]}]", key, value)
    if origin is Literal:
        return ("lit", f"Literal[{', '.join(map(repr, args))}]", tuple(args))
    if origin is Union or origin is types.UnionType:
        alternatives = tuple(schema(a) for a in args)
        return ("union", " | ".join(a[1] for a in alternatives), alternatives)
    raise TypeError(f"pysandbox._wire: no run-time check for {tp!r}")


@functools.cache
def schemas() -> dict[str, tuple[Schema, str]]:
    """The schema of every message of :data:`MESSAGES`, derived once per process.

    Returns:
        ``{name: (schema, what)}``: ``what`` starts each refusal (``"child configuration"``).
    """
    return {name: (schema(tp), what) for name, (tp, what) in MESSAGES.items()}
