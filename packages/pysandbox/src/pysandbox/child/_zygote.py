"""Warm execution: a fork server ("zygote") that forks one fully confined child per run.

The zygote is its own process, started like a spawn-mode child (the same bootstrap stub,
:mod:`pysandbox._bootstrap`, with this package's code; clean environment, new
session, stdin/stdout/stderr on ``/dev/null``), never a fork of the (threaded) server. It
stays single-threaded, pre-imports the allowed standard-library modules, loads the child
bootstrap (:mod:`pysandbox.child._main`) and builds the Landlock ruleset once. The isolation layers
are fixed by its start configuration.

Control channel: a ``socketpair`` inherited at start (never a path socket). For each run the
server sends, over it, one message with five descriptors attached (``SCM_RIGHTS``): its end
of a fresh ``SOCK_SEQPACKET`` pair for that run, the write ends of the run's stdout and
stderr pipes, the write end of its setup channel (see :mod:`pysandbox.child._main`) and that of
its figure channel (:mod:`pysandbox._figures`); the message body carries the code and the
limits only. The zygote forks; the child sets ``PR_SET_PDEATHSIG``, starts a new session,
puts the pipes on descriptors 1 and 2, closes every other descriptor (the control and run
sockets included) except the prebuilt Landlock ruleset, the setup channel and the figure
channel, reseeds every global random generator it inherited (``random``, numpy's legacy
``RandomState``: :mod:`pysandbox.child._generators`), and then applies every layer through the same
:func:`pysandbox.child._main.run_config` as spawn mode before the user's code runs.

A ready child's request carries a sixth descriptor, the read end of its code pipe; a session
child's (``session_child`` in the request, :mod:`pysandbox.child._session`) a seventh, the
write end of its result pipe: it serves calls from the code pipe until that pipe ends.

The server's :class:`~pysandbox._supervisor.Supervisor` drains and caps the pipes, enforces the
deadline and the workspace limits exactly as in spawn mode. On the run's socket the zygote
reports ``P<pid>`` after the fork and ``X`` when the child has exited (seen on a pidfd, not
reaped), and answers ``?`` with ``!`` (a run that claims a ready child first checks that the
zygote, which will report its exit and reap it, still answers: see :mod:`pysandbox._pool`).
The server kills through a pidfd and ``killpg`` itself (the child stays unreaped until the
server sends ``R``, so its pid and process group cannot have been reused); on ``R`` the
zygote kills the group, reaps the child with ``wait4`` and returns its wait status, CPU seconds
and peak RSS. If the server's end closes, the zygote kills and reaps the child. Several runs
proceed at once; the zygote only forks and reaps and never waits on a run.

When imported this module only defines functions and classes (standard library only: the zygote
runs this file's code with ``-I -S``, loaded by the bootstrap).
"""

from __future__ import annotations

import marshal
import os
import socket
import sys

from pysandbox.child import _generators, _kernel, _library_getters, _main, _session, _wire_check

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from typing import Any

    from pysandbox._wire import ChildConfig, RunRequest, ZygoteConfig

__all__ = ["WarmChild", "Zygote", "ZygoteError", "entry", "serve"]

_HEADER = 9  # b"N" + 8-byte little-endian body length
_RUN_FDS = 5  # run socket, stdout and stderr write ends, setup and figure channel write ends
#: A ready child's request also carries the read end of its code pipe (see :mod:`pysandbox._pool`).
_READY_FDS = 6
#: A session child's request also carries the write end of its result pipe
#: (see :mod:`pysandbox.child._session`).
_SESSION_FDS = 7
_SIGKILL = 9


class ZygoteError(OSError):
    """The zygote could not start, or died: the caller falls back to spawn mode or reports."""


# --------------------------------------------------------------------------------------------
# Zygote side (runs in the zygote process; standard library only)
# --------------------------------------------------------------------------------------------
def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size > 0:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def entry(cfg: ZygoteConfig, schemas: dict[str, Any]) -> int:
    """What :data:`pysandbox._bootstrap.STUB` calls in the zygote: :func:`serve`."""
    return serve(cfg, int(sys.argv[2]), schemas)


def serve(cfg: ZygoteConfig, ctl_fd: int, schemas: dict[str, Any]) -> int:
    """The zygote's main loop: prepare once, then fork one child per request.

    Args:
        cfg: Fixed configuration (:class:`pysandbox._wire.ZygoteConfig`): checked against its
            declaration first; a mismatch is the zygote's start failure, naming the key.
        ctl_fd: Descriptor of the inherited control ``socketpair`` end.
        schemas: The run-time schemas of :mod:`pysandbox._wire`'s messages, as shipped.

    Returns:
        Exit status of the zygote (0 when the server closed the channel).
    """
    import gc
    import select
    import signal

    ctl = socket.socket(fileno=ctl_fd)
    _main.WIRE_SCHEMAS.update(schemas)
    try:
        _wire_check.check_message(schemas, "ZygoteConfig", cfg)
    except _wire_check.WireError as exc:
        ctl.sendall(b"E" + str(exc).encode()[:1000])
        return 1
    # The zygote's own keys (declared in ZygoteConfig, not in ChildConfig) stay out of each
    # run's configuration; the shared part goes into every one.
    own = set(schemas["ZygoteConfig"][0][3]) - set(schemas["ChildConfig"][0][3])
    fixed = {key: value for key, value in cfg.items() if key not in own}
    libc = _kernel.Libc(cfg["abi"])
    # No PR_SET_PDEATHSIG here: it follows the server *thread* that started the zygote, and
    # that thread may end long before the server. The server's death closes the control
    # channel instead (only the server holds its end), and the loop below then kills and
    # reaps every child and exits.
    if os.getppid() != cfg["server_pid"]:
        return 1  # the server died while the zygote started
    ruleset = -1
    bounding_set_dropped = False
    try:
        for name in cfg["preimport"]:
            try:
                __import__(name)
            except Exception:  # noqa: S112 - a module this interpreter lacks is imported later
                continue
        sys.path.extend(p for p in cfg["sys_path"] if p not in sys.path)
        for name in cfg.get("preload", ()):
            __import__(name)  # a failure is reported below: the sandbox falls back to spawn
        threads = len(os.listdir(f"/proc/{os.getpid()}/task"))  # noqa: PTH208 - no pathlib here
        if threads != 1:  # fork() copies one thread: locks held by the others stay locked
            raise OSError(f"the zygote has {threads} threads after its preload, not 1")
        # Modules the zygote itself used but spawn mode never loads stay out of user reach
        # through the import guard; these are needed by the fork path and the guards
        # (ast: the check of code generated at run time; operator: its guarded copy).
        import ast  # noqa: F401
        import atexit  # noqa: F401
        import operator  # noqa: F401
        import random  # noqa: F401

        # Library-created getters replaced once here rather than in every child (the scan
        # of everything loaded, preload included, is the child's largest fixed cost).
        _library_getters.clean_loaded_modules()

        if cfg["landlock"] is not None:
            ruleset = _kernel.build_landlock_ruleset(libc, cfg["landlock"])
        if cfg["seccomp"] is not None or cfg["landlock"] is not None:
            # Inherited by every child, which then only empties its own sets (capset).
            _kernel.drop_bounding_set(libc)
            bounding_set_dropped = True
        if not hasattr(os, "pidfd_open"):
            raise OSError("os.pidfd_open is unavailable (Linux >= 5.3, Python >= 3.9)")
        os.close(os.pidfd_open(os.getpid()))
    except BaseException as exc:
        ctl.sendall(b"E" + f"{type(exc).__name__}: {exc}".encode()[:1000])
        return 1
    gc.collect()
    gc.freeze()  # the children share these pages instead of copying them on the next collect
    ctl.sendall(b"R")

    poller = select.poll()
    poller.register(ctl_fd, select.POLLIN)
    by_sock: dict[int, list[Any]] = {}  # run socket fd -> [pid, pidfd, sock, reaped]
    by_pidfd: dict[int, list[Any]] = {}
    me = os.getpid()

    def finish(run: list[Any], reply: bool) -> None:
        pid, pidfd, sock = run[0], run[1], run[2]
        try:  # noqa: SIM105
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            _, status, usage = os.wait4(pid, 0)
            result = (status, usage.ru_utime + usage.ru_stime, int(usage.ru_maxrss) * 1024)
        except ChildProcessError:  # pragma: no cover - nothing else reaps in the zygote
            result = (signal.SIGKILL, 0.0, 0)
        if reply:
            try:  # noqa: SIM105
                sock.send(b"S" + marshal.dumps(result))
            except OSError:
                pass
        for table, key in ((by_sock, sock.fileno()), (by_pidfd, pidfd)):
            if key in table:
                table.pop(key)
                try:  # noqa: SIM105
                    poller.unregister(key)
                except KeyError:
                    pass
        sock.close()
        os.close(pidfd)

    while True:
        for fd, _event in poller.poll():
            if fd == ctl_fd:
                try:
                    header = ctl.recvmsg(_HEADER, socket.CMSG_SPACE(_SESSION_FDS * 4))
                    data, ancillary = header[0], header[1]
                    fds: list[int] = []
                    for level, kind, payload in ancillary:
                        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                            usable = len(payload) - len(payload) % 4
                            fds += [
                                int.from_bytes(payload[i : i + 4], sys.byteorder)
                                for i in range(0, usable, 4)
                            ]
                    if not data:
                        raise EOFError
                    data += _recv_exact(ctl, _HEADER - len(data))
                    body = _recv_exact(ctl, int.from_bytes(data[1:], "little"))
                except (EOFError, OSError):
                    for run in list(by_sock.values()):
                        finish(run, reply=False)
                    return 0
                if len(fds) not in (_RUN_FDS, _READY_FDS, _SESSION_FDS):
                    for extra in fds:
                        os.close(extra)
                    continue
                run_sock = socket.socket(fileno=fds[0])
                pid = os.fork()
                if pid == 0:  # pragma: no cover - the child ends with os._exit
                    socks = [ctl, run_sock] + [r[2] for r in by_sock.values()]
                    _child_main(
                        cfg=cfg,
                        fixed=fixed,
                        bounding_set_dropped=bounding_set_dropped,
                        libc=libc,
                        ruleset=ruleset,
                        body=body,
                        socks=socks,
                        out_w=fds[1],
                        err_w=fds[2],
                        setup_w=fds[3],
                        figure_w=fds[4],
                        code_r=fds[5] if len(fds) >= _READY_FDS else -1,
                        result_w=fds[6] if len(fds) == _SESSION_FDS else -1,
                        zygote_pid=me,
                    )
                for passed in fds[1:]:
                    os.close(passed)
                pidfd = os.pidfd_open(pid)
                run = [pid, pidfd, run_sock]
                by_sock[run_sock.fileno()] = run
                by_pidfd[pidfd] = run
                poller.register(run_sock.fileno(), select.POLLIN)
                poller.register(pidfd, select.POLLIN)
                try:
                    run_sock.send(b"P" + pid.to_bytes(8, "little"))
                except OSError:
                    finish(run, reply=False)
            elif fd in by_pidfd:
                run = by_pidfd.pop(fd)
                poller.unregister(fd)
                try:  # noqa: SIM105
                    run[2].send(b"X")
                except OSError:
                    pass
            elif fd in by_sock:
                run = by_sock[fd]
                try:
                    command = run[2].recv(16)
                except OSError:
                    command = b""
                if command == b"?":  # a ready child's claim: is the zygote answering?
                    try:
                        run[2].send(b"!")
                        continue
                    except OSError:
                        command = b""
                finish(run, reply=command == b"R")  # b"R", or the server's end closed


def _child_main(
    *,
    cfg: ZygoteConfig,
    fixed: dict[str, Any],
    bounding_set_dropped: bool,
    libc: Any,
    ruleset: int,
    body: bytes,
    socks: list[socket.socket],
    out_w: int,
    err_w: int,
    setup_w: int,
    zygote_pid: int,
    figure_w: int = -1,
    code_r: int = -1,
    result_w: int = -1,
) -> None:  # pragma: no cover - runs in the forked child (covered through the tests' runs)
    """The forked child: detach from the zygote, apply every layer, run the code, exit.

    With ``code_r`` (a ready child) the request carries no code: the child applies every layer,
    then reads its code from ``code_r`` (see :func:`pysandbox.child._main.run_config`). With
    ``result_w`` too and ``session_child`` in the request, the child is a session: it serves calls
    from ``code_r`` (:func:`pysandbox.child._session.serve`).

    The request (:class:`pysandbox._wire.RunRequest`) is checked against its declaration; the
    run's configuration is ``fixed`` (the shared part of the zygote's) with the request's part
    and this run's descriptors (both parts checked already: ``run_config`` does not again).
    """
    status = int(_kernel.EXIT_SETUP_FAILED)
    _kernel.open_setup_channel(setup_w)
    try:
        libc.prctl(libc.prctl_opt["PR_SET_PDEATHSIG"], _SIGKILL, 0, 0, 0)
        if os.getppid() != zygote_pid:
            os._exit(status)
        os.setsid()
        for sock in socks:
            sock.detach()  # the descriptors are closed below, the objects must not reuse them
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        low = 3
        for keep in sorted(fd for fd in (ruleset, setup_w, figure_w, code_r, result_w) if fd >= 3):
            os.closerange(low, keep)
            low = keep + 1
        os.closerange(low, 1 << 20)
        if code_r < 0:  # a ready child stays in "/" until its code arrives
            os.chdir(cfg["workspace"])
        request: RunRequest = marshal.loads(body)  # noqa: S302 - from the server
        try:
            _wire_check.check_message(_main.WIRE_SCHEMAS, "RunRequest", request)
        except _wire_check.WireError as exc:
            _kernel._fail(str(exc))
        run_env = request["env"]
        wanted = {**cfg["env"], **run_env}
        if os.environ.keys() == wanted.keys():
            os.environ.update(run_env)  # the zygote's environment is the base one already
        else:  # pragma: no cover - only if the zygote's environment was changed
            os.environ.clear()
            os.environ.update(wanted)
        # Each run gets fresh generators, not the zygote's state at the fork (_generators).
        _generators.reseed_global_generators()
        run_cfg: ChildConfig = {
            **fixed,  # type: ignore[typeddict-item]  # the ChildFixed part of cfg
            "code": request["code"],
            "code_object": request["code_object"],
            "rlimits": request["rlimits"],
            "setup_fd": setup_w,
            "figure_fd": figure_w,
        }
        if "no_create" in request:
            run_cfg["no_create"] = request["no_create"]
        if "max_code_bytes" in request:
            run_cfg["max_code_bytes"] = request["max_code_bytes"]
        if code_r >= 0:
            run_cfg["code_fd"] = code_r
        if bounding_set_dropped:
            run_cfg["bounding_set_dropped"] = True
        if request.get("session_child"):
            if code_r < 0 or result_w < 0:
                _kernel._fail("a session request needs its code and result pipes")
            run_cfg["result_fd"] = result_w
            run_cfg["session_key"] = request.get("session_key", b"")
            status = _session.serve(run_cfg, libc, ruleset)
        else:
            status = _main.run_config(run_cfg, libc, ruleset, checked=True)
        _main.finalize()
    except BaseException as exc:
        # Before the user's code the setup channel is open and takes the reason; after it,
        # the channel is closed and this writes nothing (the user's status stands).
        try:
            if _kernel._setup_channel[0] >= 0:
                _kernel.report_setup(
                    _kernel.SETUP_FAILED + f"warm child setup failed: {exc!r}".encode()[:2000]
                )
        except BaseException:  # noqa: S110 - the status below ends the process either way
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)


# --------------------------------------------------------------------------------------------
# Server side
# --------------------------------------------------------------------------------------------
class WarmChild:
    """The server's handle on one forked child: its pid and its run socket.

    Args:
        sock: The server's end of the run's ``SOCK_SEQPACKET`` pair.
        pid: The child's pid (its session and process-group id).
        zygote_alive: Callable telling whether the zygote still runs.
        reap_timeout_s: How long :meth:`reap` waits for the zygote's answer, seconds.
    """

    def __init__(
        self,
        sock: socket.socket,
        pid: int,
        zygote_alive: Any = None,
        reap_timeout_s: float = 30.0,
    ) -> None:
        self.sock = sock
        self._reap_timeout_s = reap_timeout_s
        self.pid = pid
        self.exited = False
        self.zygote_died = False
        self._zygote_alive = zygote_alive
        # The zygote reaps only when told to (``R``), so this pid is still the child's.
        try:
            self._pidfd = os.pidfd_open(pid)
        except OSError:
            self._pidfd = -1

    def exit_fd(self) -> int:
        """Descriptor that becomes readable when the child has exited (or the zygote died)."""
        return self.sock.fileno()

    def on_readable(self) -> bool:
        """Consume a message; return whether the child has exited (or the zygote died)."""
        try:
            message = self.sock.recv(64)
        except BlockingIOError:
            return self.exited
        except OSError:
            message = b""
        if not message:
            self.zygote_died = True
        self.exited = True
        return True

    def kill_group(self) -> None:
        """SIGKILL the child (through its pidfd) and its process group, synchronously.

        The zygote holds the child unreaped until :meth:`reap`, so neither its pid nor its
        process-group id can have been reused. If the zygote died, the child was killed by
        ``PR_SET_PDEATHSIG`` and possibly reaped by init: only the pidfd is used then.
        """
        import signal

        if self._pidfd >= 0:
            try:  # noqa: SIM105
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except OSError:
                pass
        if self.zygote_died or (self._zygote_alive is not None and not self._zygote_alive()):
            return
        try:  # noqa: SIM105
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass

    def send_signal(self, sig: int) -> bool:
        """Send ``sig`` to the child through its pidfd; return whether it was sent.

        The zygote holds the child unreaped until :meth:`reap`, so the pidfd names this child.
        """
        import signal

        if self._pidfd < 0:
            return False
        try:
            signal.pidfd_send_signal(self._pidfd, sig)
        except OSError:
            return False
        return True

    def abandon(self) -> None:
        """Kill the child and close the handle without reaping (a ready child never claimed).

        The zygote reaps it when it sees the run socket closed.
        """
        self.kill_group()
        self.sock.close()
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1

    def reap(self) -> tuple[int, float, int] | None:
        """Have the zygote kill the group and ``wait4`` the child.

        Returns:
            ``(wait status, CPU seconds, peak RSS bytes)``, or ``None`` if the zygote died or
            did not answer within ``reap_timeout_s``.
        """
        try:
            # A zygote that stopped answering counts as dead (the child was killed already).
            self.sock.settimeout(self._reap_timeout_s)
            self.sock.send(b"R")
            while True:
                message = self.sock.recv(256)
                if not message:
                    return None
                if message[:1] == b"S":
                    status, cpu, rss = marshal.loads(message[1:])  # noqa: S302 - our zygote
                    return int(status), float(cpu), int(rss)
        except OSError:
            return None
        finally:
            self.sock.close()
            if self._pidfd >= 0:
                os.close(self._pidfd)
                self._pidfd = -1


class Zygote:
    """Server-side owner of one zygote process (start, launch runs, stop).

    Args:
        config: Fixed configuration (:class:`pysandbox._wire.ZygoteConfig`; its
            ``server_pid`` is replaced by this process's pid).
        cwd: Working directory of the zygote (the workspace).
        env: The zygote's complete environment.
    """

    def __init__(self, config: ZygoteConfig, cwd: str, env: dict[str, str]) -> None:
        import threading

        self._config: ZygoteConfig = {**config, "server_pid": os.getpid()}
        self._cwd = cwd
        self._env = env
        self._send_lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctl: socket.socket | None = None

    @property
    def pid(self) -> int | None:
        """The zygote's pid while it runs."""
        return None if self._proc is None else self._proc.pid

    def alive(self) -> bool:
        """Whether the zygote process is running."""
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout_s: float = 30.0) -> None:
        """Start the zygote and wait until it is ready.

        Raises:
            ZygoteError: It could not start (the message says why).
        """
        import subprocess

        from pysandbox import _bootstrap  # server side only: the zygote never starts one

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        cfg_r, cfg_w = os.pipe()
        try:
            self._proc = subprocess.Popen(
                _bootstrap.argv(cfg_r, theirs.fileno()),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=self._cwd,
                env=self._env,
                close_fds=True,
                pass_fds=(cfg_r, theirs.fileno()),
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            raise ZygoteError(f"cannot start the zygote: {exc}") from exc
        finally:
            theirs.close()
            os.close(cfg_r)
        try:
            payload = _bootstrap.payload(_bootstrap.ZYGOTE, self._config)
            with os.fdopen(cfg_w, "wb") as fh:
                cfg_w = -1
                fh.write(payload)
        except OSError:
            pass  # it died at once; reported below
        finally:
            if cfg_w >= 0:
                os.close(cfg_w)
        ours.settimeout(timeout_s)
        try:
            answer = ours.recv(1024)
        except OSError as exc:
            answer = f"E{exc}".encode()
        if answer != b"R":
            ours.close()
            self._stop_process()
            status = self._proc.returncode
            detail = answer[1:].decode("utf-8", "replace") or f"exit status {status}"
            raise ZygoteError(f"the zygote could not start: {detail}")
        ours.settimeout(None)
        self._ctl = ours

    #: How long :meth:`launch` waits for the fork to be reported by default, seconds.
    LAUNCH_TIMEOUT_S = 30.0

    def launch(
        self,
        body: bytes,
        out_w: int,
        err_w: int,
        setup_w: int,
        figure_w: int,
        *,
        timeout_s: float | None = None,
    ) -> WarmChild:
        """Send one run to the zygote; return the handle once the child was forked.

        Args:
            body: ``marshal`` dump of the run's code, limits and marker.
            out_w: Write end of the stdout pipe (the caller closes its copy).
            err_w: Write end of the stderr pipe (the caller closes its copy).
            setup_w: Write end of the setup channel (the caller closes its copy).
            figure_w: Write end of the figure channel (the caller closes its copy).
            timeout_s: How long to wait for the fork to be reported, seconds
                (:attr:`LAUNCH_TIMEOUT_S` when ``None``).

        Raises:
            ZygoteError: The zygote is gone or did not answer.
        """
        sock = self.request(body, (out_w, err_w, setup_w, figure_w), timeout_s)
        return self.forked(sock, timeout_s)

    def request(
        self, body: bytes, fds: tuple[int, ...], timeout_s: float | None = None
    ) -> socket.socket:
        """Send one fork request without waiting for the fork; return the run's socket.

        Args:
            body: ``marshal`` dump of the request.
            fds: The stdout, stderr, setup-channel and figure-channel write ends, and for a
                ready child the read end of its code pipe (the caller closes its copies).
            timeout_s: How long a send may block, seconds (:attr:`LAUNCH_TIMEOUT_S` when
                ``None``).

        Returns:
            The server's end of the run's socket: :meth:`forked` reads the fork's report.

        Raises:
            ZygoteError: The zygote is gone or did not take the request.
        """
        ctl = self._ctl
        if ctl is None or not self.alive():
            raise ZygoteError("the zygote is not running")
        wait = self.LAUNCH_TIMEOUT_S if timeout_s is None else timeout_s
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            header = b"N" + len(body).to_bytes(8, "little")
            rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, _fd_array(theirs.fileno(), *fds))]
            with self._send_lock:
                # A zygote that stops reading must not hold this lock (and every run) forever;
                # after a time-out the stream is out of step and the caller replaces it.
                ctl.settimeout(wait)
                ctl.sendmsg([header], rights)
                ctl.sendall(body)
        except OSError as exc:
            ours.close()
            raise ZygoteError(f"the zygote did not take the run: {exc}") from exc
        finally:
            theirs.close()
        return ours

    def forked(self, sock: socket.socket, timeout_s: float | None = None) -> WarmChild:
        """Wait for the fork requested on ``sock`` (see :meth:`request`); return its handle.

        Raises:
            ZygoteError: The zygote died or did not answer in time (``sock`` is closed then).
        """
        wait = self.LAUNCH_TIMEOUT_S if timeout_s is None else timeout_s
        try:
            sock.settimeout(wait)
            answer = sock.recv(64)
        except OSError as exc:
            sock.close()
            raise ZygoteError(f"the zygote did not take the run: {exc}") from exc
        if answer[:1] != b"P" or len(answer) != 9:
            sock.close()
            raise ZygoteError("the zygote died before forking the run")
        sock.setblocking(False)
        return WarmChild(sock, int.from_bytes(answer[1:], "little"), self.alive, wait)

    def close(self) -> None:
        """Stop the zygote; its children die with it (``PR_SET_PDEATHSIG``)."""
        if self._ctl is not None:
            self._ctl.close()
            self._ctl = None
        self._stop_process()

    def kill(self) -> None:
        """SIGKILL the zygote (tests use this to simulate a crash)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()

    def _stop_process(self) -> None:
        import subprocess

        proc = self._proc
        if proc is None:
            return
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _fd_array(*fds: int) -> bytes:
    return b"".join(int(fd).to_bytes(4, sys.byteorder, signed=True) for fd in fds)
