"""The kernel part of the child's bootstrap: setup channel, rlimits, Landlock, seccomp.

Standard library only, like :mod:`pysandbox.child._main`, which imports it explicitly; in every
confined interpreter (spawn child, warm zygote) the bootstrap stub (:mod:`pysandbox._bootstrap`)
loads the package :mod:`pysandbox.child` from marshalled code through its own loader.
The parent imports it normally: :mod:`pysandbox.child._main` re-exports it, and
:mod:`pysandbox._worker_confinement` confines the server's worker processes with the same
functions. Every system call is made by name from :func:`pysandbox._abi.child_abi`'s data.
"""

from __future__ import annotations

import os
import sys

# The bootstrap avoids importing ``typing`` (start-up cost); mypy treats this name as True.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pysandbox._wire import ChildAbi, LandlockWire

__all__ = [
    "EXIT_SETUP_FAILED",
    "SETUP_FAILED",
    "SETUP_READY",
    "Libc",
    "apply_landlock",
    "apply_rlimits",
    "build_landlock_ruleset",
    "drop_bounding_set",
    "drop_capabilities",
    "forbid_creation",
    "install_sigsys_reporter",
    "load_seccomp",
    "open_setup_channel",
    "patch_self_pid",
    "report_setup",
    "restrict_landlock",
    "set_no_new_privs",
]

#: Exit status of a child whose setup failed. Informative only: the parent decides from the
#: setup channel, since the user's code can exit with any status.
EXIT_SETUP_FAILED = 121
#: What the setup channel carries: ready (every layer applied), or failed and the reason.
SETUP_READY = b"R"
SETUP_FAILED = b"E"

#: The setup channel's descriptor while it is open (a list, so no ``global`` statement).
_setup_channel = [-1]


def open_setup_channel(fd: int) -> None:
    """Remember ``fd`` (the setup channel's write end, or -1 for none) for this process."""
    _setup_channel[0] = fd


def report_setup(message: bytes) -> None:
    """Write ``message`` to the setup channel and close it; nothing when it is closed already.

    Called once: with :data:`SETUP_READY` just before the user's code, or with
    :data:`SETUP_FAILED` and the reason. Without a channel (a test calling the bootstrap
    directly) a failure goes to stderr instead.
    """
    fd, _setup_channel[0] = _setup_channel[0], -1
    if fd < 0:
        if message[:1] == SETUP_FAILED:
            try:  # noqa: SIM105 - contextlib would cost an import on every run
                os.write(2, b"pysandbox: isolation setup failed: " + message[1:] + b"\n")
            except OSError:
                pass
        return
    try:
        view = memoryview(message[:4096])
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        pass
    finally:
        os.close(fd)


def _fail(message: str) -> None:
    try:
        report_setup(SETUP_FAILED + message.encode("utf-8", "backslashreplace"))
    finally:
        os._exit(EXIT_SETUP_FAILED)


# --------------------------------------------------------------------------------------------
# Layer 3: resource limits
# --------------------------------------------------------------------------------------------
def apply_rlimits(limits: list[tuple[int, int, int]], libc: Libc | None = None) -> None:
    """Apply ``(resource, soft, hard)`` triples.

    With ``libc`` (the kernel layers are loaded anyway) through ``prlimit64`` on this
    process, which saves importing ``resource``; otherwise with ``resource.setrlimit``.
    """
    if libc is not None:
        for which, soft, hard in limits:
            if libc.call("prlimit64", 0, which, _u(soft, 8) + _u(hard, 8), None) != 0:
                _fail(f"prlimit64({which}): {libc.error()}")
        return
    import resource

    for which, soft, hard in limits:
        resource.setrlimit(which, (soft, hard))


# --------------------------------------------------------------------------------------------
# Layer 5: Landlock and seccomp (ctypes, raw system calls)
# --------------------------------------------------------------------------------------------
class Libc:
    """Just enough libc for the kernel layers: ``syscall`` and ``prctl`` with errno.

    ``abi`` is :func:`pysandbox._abi.child_abi`'s data (from the configuration): system calls
    are made by name (:meth:`call`) and constants read from it, so no number lives here.

    Built on ``_ctypes`` directly (the same primitives ``ctypes/__init__.py`` uses), which
    costs about a millisecond less per run than importing ``ctypes``; falls back to ``ctypes``
    if those primitives ever change. Integer arguments are passed as C ``long``; ``bytes`` as
    pointers to their (read-only) contents; ``None`` as NULL.
    """

    def __init__(self, abi: ChildAbi) -> None:
        self.nr: dict[str, int] = abi["nr"]
        self.prctl_opt: dict[str, int] = abi["prctl"]
        self.landlock: dict[str, int] = abi["landlock"]
        self.seccomp: dict[str, int] = abi["seccomp"]
        self.capset_version: int = abi["capset_version"]
        self._long: Any = None
        self._char: Any = None
        self._syscall: Any = None
        self._prctl: Any = None
        self.errno: Any = None
        self._addressof: Any = None
        try:
            self._init_ctypes_core()
        except (ImportError, AttributeError, TypeError):  # pragma: no cover - safety net
            self._init_ctypes()

    def _init_ctypes_core(self) -> None:
        import _ctypes

        class CLong(_ctypes._SimpleCData):  # type: ignore[type-arg]
            _type_ = "l"

        class CChar(_ctypes._SimpleCData):  # type: ignore[type-arg]
            _type_ = "c"

        class Func(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = CLong

        class Lib:
            _handle = _ctypes.dlopen(None, 0)  # type: ignore[arg-type]

        self._long = CLong
        self._char = CChar
        self._syscall = Func(("syscall", Lib))  # type: ignore[arg-type]
        self._prctl = Func(("prctl", Lib))  # type: ignore[arg-type]
        self.errno = _ctypes.get_errno
        self._addressof = _ctypes.addressof

    def _init_ctypes(self) -> None:  # pragma: no cover - only if _ctypes changes
        import ctypes

        lib = ctypes.CDLL(None, use_errno=True)
        lib.syscall.restype = ctypes.c_long
        lib.prctl.restype = ctypes.c_long
        self._long = ctypes.c_long
        self._char = ctypes.c_char
        self._syscall = lib.syscall
        self._prctl = lib.prctl
        self.errno = ctypes.get_errno
        self._addressof = ctypes.addressof

    def _args(self, args: tuple[Any, ...]) -> list[Any]:
        return [self._long(a) if isinstance(a, int) else a for a in args]

    def syscall(self, *args: Any) -> int:
        """``syscall(2)``; returns the raw result (negative on error, see :meth:`errno`)."""
        return int(self._syscall(*self._args(args)))

    def call(self, name: str, *args: Any) -> int:
        """``syscall(2)`` of the system call called ``name`` on this architecture."""
        return int(self._syscall(*self._args((self.nr[name], *args))))

    def prctl(self, *args: Any) -> int:
        """``prctl(2)`` with five arguments."""
        return int(self._prctl(*self._args(args)))

    def buffer(self, data: bytes) -> tuple[Any, int]:
        """Copy ``data`` into C memory; return the owner (keep it alive) and its address."""
        owner = (self._char * len(data)).from_buffer_copy(data)
        return owner, int(self._addressof(owner))

    def error(self) -> str:
        """The current errno as text."""
        err = int(self.errno())
        return f"{os.strerror(err)} (errno {err})"


def _u(value: int, size: int) -> bytes:
    return int(value).to_bytes(size, sys.byteorder)


def apply_landlock(libc: Libc, plan: LandlockWire) -> None:
    """Create the ruleset, add every path rule and restrict this thread (and its future ones)."""
    restrict_landlock(libc, build_landlock_ruleset(libc, plan))


def restrict_landlock(libc: Libc, ruleset: int) -> None:
    """``PR_SET_NO_NEW_PRIVS``, ``landlock_restrict_self(ruleset)``, then close ``ruleset``."""
    set_no_new_privs(libc)
    if libc.call("landlock_restrict_self", ruleset, 0) < 0:
        _fail(f"landlock_restrict_self: {libc.error()}")
    os.close(ruleset)


def forbid_creation(libc: Libc) -> None:
    """Stack a Landlock ruleset that handles every ``MAKE_*`` right and grants none.

    Landlock rulesets intersect, so after this nothing can be created anywhere (files,
    directories, links, renames into new names), while everything the first ruleset allows
    otherwise (reading, deleting, truncating) still works. Used for shrink-only runs.
    """
    ll = libc.landlock
    make_any = 0  # every LANDLOCK_ACCESS_FS_MAKE_* right (ABI 1)
    for kind in ("CHAR", "DIR", "REG", "SOCK", "FIFO", "BLOCK", "SYM"):
        make_any |= ll["ACCESS_FS_MAKE_" + kind]
    ruleset = libc.call("landlock_create_ruleset", _u(make_any, 8), 8, 0)
    if ruleset < 0:
        _fail(f"landlock_create_ruleset (no creation): {libc.error()}")
    restrict_landlock(libc, ruleset)


def build_landlock_ruleset(libc: Libc, plan: LandlockWire) -> int:
    """Create the ruleset and add every path rule; return the ruleset descriptor."""
    abi = int(plan["abi"])
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    attr = (_u(plan["fs"], 8) + _u(plan["net"], 8) + _u(plan["scoped"], 8))[:size]
    ruleset = libc.call("landlock_create_ruleset", attr, size, 0)
    if ruleset < 0:
        _fail(f"landlock_create_ruleset: {libc.error()}")
    ll = libc.landlock
    file_only = 0
    for right in ("EXECUTE", "WRITE_FILE", "READ_FILE", "TRUNCATE", "IOCTL_DEV"):
        file_only |= ll["ACCESS_FS_" + right]
    path_beneath = ll["RULE_PATH_BENEATH"]
    for path, rights in plan["rules"]:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # vanished since planning: nothing to grant
        try:
            # os.path, not pathlib: importing pathlib would cost every run ~2 ms.
            mask = rights if os.path.isdir(path) else rights & file_only  # noqa: PTH112
            if not mask:
                continue
            # struct landlock_path_beneath_attr (packed): __u64 allowed_access; __s32 parent_fd
            rule = _u(mask, 8) + _u(fd, 4)
            if libc.call("landlock_add_rule", ruleset, path_beneath, rule, 0) < 0:
                _fail(f"landlock_add_rule({path!r}): {libc.error()}")
        finally:
            os.close(fd)
    return int(ruleset)


def set_no_new_privs(libc: Libc) -> None:
    """``prctl(PR_SET_NO_NEW_PRIVS, 1)``: required for unprivileged Landlock and seccomp."""
    if libc.prctl(libc.prctl_opt["PR_SET_NO_NEW_PRIVS"], 1, 0, 0, 0) != 0:
        _fail(f"prctl(PR_SET_NO_NEW_PRIVS): {libc.error()}")


def drop_bounding_set(libc: Libc) -> None:
    """Empty the capability bounding set and the ambient set of this process.

    Inherited across ``fork``: the warm zygote does this once, and its children skip it.
    Unprivileged callers have nothing to drop; errors are ignored.
    """
    opt = libc.prctl_opt
    for cap in range(64):
        if libc.prctl(opt["PR_CAPBSET_DROP"], cap, 0, 0, 0) != 0 and libc.errno() == 22:  # EINVAL
            break
    libc.prctl(opt["PR_CAP_AMBIENT"], opt["PR_CAP_AMBIENT_CLEAR_ALL"], 0, 0, 0)


def drop_capabilities(libc: Libc, *, bounding: bool = True) -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable capability sets.

    For a child started by root this removes what Landlock and seccomp do not look at
    (``CAP_DAC_OVERRIDE`` for files Landlock allows read-only, ``CAP_SYS_RESOURCE``, ...).
    ``bounding=False`` skips the bounding and ambient sets (already empty: a warm child).
    A failing ``capset`` ends the process with ``EXIT_SETUP_FAILED``.
    """
    if bounding:
        drop_bounding_set(libc)
    header = _u(libc.capset_version, 4) + _u(0, 4)  # _LINUX_CAPABILITY_VERSION_3, this process
    if libc.call("capset", header, bytes(24)) != 0:  # all sets empty
        _fail(f"capset: {libc.error()}")


def patch_self_pid(code: bytes, placeholder: int, pid: int, jeq_k: int) -> bytes:
    """Replace the pid placeholder in ``JEQ k`` (opcode ``jeq_k``) instructions with ``pid``."""
    out = bytearray(code)
    needle = _u(placeholder, 4)
    replacement = _u(pid, 4)
    at = out.find(needle)
    while at >= 0:  # only a handful of matches: cheaper than walking every instruction
        # ``k`` is the last 4 bytes of an 8-byte instruction whose opcode is BPF_JMP|JEQ|K.
        if at % 8 == 4 and int.from_bytes(out[at - 4 : at - 2], sys.byteorder) == jeq_k:
            out[at : at + 4] = replacement
        at = out.find(needle, at + 1)
    return bytes(out)


def load_seccomp(
    libc: Libc, filters: list[bytes], placeholder: int, pgid_placeholder: int | None = None
) -> None:
    """Load the classic-BPF filters with ``prctl(PR_SET_SECCOMP, MODE_FILTER)``.

    The pid placeholders are patched first: ``placeholder`` becomes this process's pid and
    ``pgid_placeholder`` minus its process-group id (as 32 bits, for ``kill(-pgid, sig)``).
    """
    set_no_new_privs(libc)
    pid = os.getpid()
    neg_pgid = -os.getpgrp() & 0xFFFFFFFF
    jeq_k = libc.seccomp["BPF_JMP_JEQ_K"]
    for code in filters:
        patched = patch_self_pid(code, placeholder, pid, jeq_k)
        if pgid_placeholder is not None:
            patched = patch_self_pid(patched, pgid_placeholder, neg_pgid, jeq_k)
        program, address = libc.buffer(patched)
        # struct sock_fprog { unsigned short len; (6 bytes padding) struct sock_filter *filter; }
        fprog, fprog_address = libc.buffer(_u(len(code) // 8, 2) + bytes(6) + _u(address, 8))
        mode = libc.seccomp["MODE_FILTER"]
        if libc.prctl(libc.prctl_opt["PR_SET_SECCOMP"], mode, fprog_address, 0, 0) != 0:
            _fail(f"prctl(PR_SET_SECCOMP): {libc.error()}")
        del program, fprog


_SIGSYS_REPORTER: list[Any] = []  # keeps the debug handler's C callback alive


def install_sigsys_reporter(names: dict[int, str], offset: int) -> None:
    """Debug mode: name a trapped system call on stderr, then die by ``SIGSYS``.

    The filter's default action is ``SECCOMP_RET_TRAP`` in debug mode; this ``SA_SIGINFO``
    handler reads ``si_syscall`` (at ``offset`` in ``siginfo_t``), writes
    ``pysandbox: system call NAME is not allowed in the sandbox`` to descriptor 2 and sends
    itself ``SIGSYS`` again (``SA_RESETHAND``: the default action, delivered as the handler
    returns), so the trapped call never returns. Installed before Landlock and seccomp (the
    callback needs executable memory from libffi). For tests and diagnosis only: the handler
    runs Python code inside a signal handler.
    """
    import ctypes
    import signal

    # siginfo_t arrives as an int pointer and is indexed: ``c_int.from_address`` would raise the
    # ``ctypes.cdata`` audit event, which the Python guards refuse (the name would be lost).
    index = offset // ctypes.sizeof(ctypes.c_int)

    def handler(signo: int, info: Any, _context: int) -> None:
        number = int(info[index])
        name = names.get(number, f"number {number}")
        message = f"\npysandbox: system call {name} is not allowed in the sandbox\n"
        try:
            os.write(2, message.encode())
        finally:
            os.kill(os.getpid(), signo)

    siginfo = ctypes.POINTER(ctypes.c_int)
    callback = ctypes.CFUNCTYPE(None, ctypes.c_int, siginfo, ctypes.c_void_p)(handler)
    # glibc's struct sigaction: handler, sa_mask (128 bytes), int sa_flags (+4), sa_restorer.
    action = (ctypes.c_char * 152)()
    address = ctypes.cast(callback, ctypes.c_void_p).value
    ctypes.memmove(action, ctypes.byref(ctypes.c_void_p(address)), 8)
    sa_siginfo, sa_resethand = 4, 0x80000000
    ctypes.memmove(ctypes.addressof(action) + 136, _u(sa_siginfo | sa_resethand, 4), 4)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.sigaction(int(signal.SIGSYS), action, None) != 0:
        _fail(f"sigaction(SIGSYS): errno {ctypes.get_errno()}")
    _SIGSYS_REPORTER[:] = [callback, action]
