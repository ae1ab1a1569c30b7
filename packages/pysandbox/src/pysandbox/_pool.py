"""Ready children: a few children forked by the warm zygote and confined before a run asks.

A ready child is forked for the sandbox's default child configuration and applies every
layer (session, descriptors, rlimits, Landlock, capabilities, seccomp, Python-level guards)
at once; it then blocks reading its *code pipe*. A run that claims it writes the code there;
the child reads at most ``max_code_bytes``, closes the pipe, and runs the code. Rules:

- one run per child, never reused (a claimed child leaves the pool for good);
- the pool is for one configuration and one zygote: a run with another configuration (a
  shrink-only run, any other limits) never claims, and entries of another zygote or
  configuration are discarded; :meth:`ReadyPool.drain` empties it (restore, settings change,
  close);
- a child idle longer than ``max_idle_s`` is discarded and replaced: the pool's ager thread
  wakes at the oldest child's deadline (and a claim skips one past its age);
- every descriptor of the run is created per child before its fork (the stdout, stderr and
  setup pipes and the code pipe): nothing is passed to a child after its seccomp filter,
  which refuses ``sendmsg``/``recvmsg`` descriptor passing, is loaded;
- each child carries its own run marker (the process sweep's environment variable).

Discarding closes the server's end of the child's run socket: the zygote then kills the
child's process group and reaps it.
"""

from __future__ import annotations

import marshal
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from pysandbox import _wire
from pysandbox._config import ChildConfig
from pysandbox._launch import ChildHandle, RunSpec, WarmHandle
from pysandbox.child import _zygote

__all__ = [
    "READY_CHILDREN",
    "READY_MAX_IDLE_S",
    "READY_MIN_IDLE_S",
    "ReadyChild",
    "ReadyLauncher",
    "ReadyPool",
    "ZygoteUnresponsive",
    "max_code_bytes",
    "max_compiled_bytes",
]

#: Ready children a warm sandbox keeps by default (``Sandbox(ready_children=...)``).
READY_CHILDREN = 2
#: Seconds a ready child waits by default before it is replaced.
READY_MAX_IDLE_S = 60.0
#: Shortest accepted idle age, seconds: below it the ager would replace children as fast as
#: the zygote forks them.
READY_MIN_IDLE_S = 0.1

#: The code's wire form is bounded by this many bytes per byte of the largest accepted source
#: (the marshalled code object and the source), plus a fixed allowance.
_CODE_BYTES_PER_SOURCE_BYTE = 16
_CODE_BYTES_FIXED = 1 << 20


class ZygoteUnresponsive(_zygote.ZygoteError):
    """A claimed ready child's zygote did not answer in time: the caller replaces the zygote.

    The child never got its code (the zygote, which reports its exit and reaps it, must be
    answering before it does), so the run can fork afresh on another zygote.
    """


def max_code_bytes(max_source_bytes: int) -> int:
    """The largest code message a ready child accepts, bytes, for a source limit in bytes."""
    return _CODE_BYTES_PER_SOURCE_BYTE * max_source_bytes + _CODE_BYTES_FIXED


def max_compiled_bytes(max_source_bytes: int) -> int:
    """The largest marshalled code object a run may compile to, bytes.

    Half of :func:`max_code_bytes`: the source (at most the source limit, in UTF-8 bytes) fits
    in the other half, so a code message never exceeds a ready child's limit. Constant folding
    makes ``'ab' * 2000`` a 4 KB constant: 192 KB of source compiled to 65 MB, which the parent
    held and sent to the zygote; such a run is refused before it starts.
    """
    return max_code_bytes(max_source_bytes) // 2


@dataclass
class ReadyChild:
    """One ready child, as the server holds it.

    Attributes:
        zygote: The zygote that forked it.
        config: The configuration it was confined for.
        marker: Its run marker's value.
        born: ``time.monotonic()`` when it was requested, seconds.
        sock: The server's end of its run socket (the fork report unread until resolved).
        out_r: Read end of its stdout pipe.
        err_r: Read end of its stderr pipe.
        setup_r: Read end of its setup channel.
        figure_r: Read end of its figure channel (:mod:`pysandbox._figures`).
        code_w: Write end of its code pipe.
        child: The zygote's handle once the fork report was read, else ``None``.
        launched: The child was handed its code: its run's handle owns it now.
    """

    zygote: _zygote.Zygote
    config: ChildConfig
    marker: str
    born: float
    sock: Any
    out_r: int
    err_r: int
    setup_r: int
    figure_r: int
    code_w: int
    child: _zygote.WarmChild | None = field(default=None)
    launched: bool = field(default=False)

    def resolve(self) -> _zygote.WarmChild:
        """Read the fork report once; return the zygote's handle on the child.

        Raises:
            pysandbox.child._zygote.ZygoteError: The zygote died or did not fork it.
        """
        if self.child is None:
            self.child = self.zygote.forked(self.sock)
        return self.child

    def alive(self) -> bool:
        """Whether the child was forked and has not exited (the zygote reports an exit)."""
        try:
            child = self.resolve()
        except _zygote.ZygoteError:
            return False
        try:
            message = child.sock.recv(64)  # non-blocking: only "X" (exited) can be waiting
        except BlockingIOError:
            return True
        except OSError:
            return False
        del message  # "X": it exited; empty: the zygote died
        return False

    def ping(self) -> bool:
        """Ask the zygote, on this child's run socket, whether it still answers (``?``).

        Returns:
            Whether the question was sent (the answer is read by :meth:`answered`).
        """
        try:
            return self.resolve().sock.send(b"?") == 1
        except OSError:  # ZygoteError included: not forked, or the zygote is gone
            return False

    def answered(self, timeout_s: float) -> bool:
        """Wait for the zygote's answer to :meth:`ping`.

        Args:
            timeout_s: How long to wait, seconds.

        Returns:
            ``True`` on the answer; ``False`` if the child exited meanwhile or the zygote died.

        Raises:
            ZygoteUnresponsive: No answer within ``timeout_s`` (the zygote is stuck).
        """
        import select

        sock = self.resolve().sock
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                message = sock.recv(64)
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([sock], [], [], left)[0]:
                    raise ZygoteUnresponsive(
                        f"the zygote did not answer a ready child's claim within {timeout_s} s"
                    ) from None
                continue
            except OSError:
                return False
            return message == b"!"  # else b"X": the child exited; b"": the zygote died

    def discard(self) -> None:
        """Kill the child (the zygote reaps it when its run socket closes); close our ends.

        Idempotent; a claimed child handed to a run belongs to the run's handle instead.
        """
        if self.launched:
            return
        if self.child is not None:
            self.child.abandon()
        else:
            self.sock.close()
        for fd in (self.out_r, self.err_r, self.setup_r, self.figure_r, self.code_w):
            if fd >= 0:
                os.close(fd)
        self.out_r = self.err_r = self.setup_r = self.figure_r = self.code_w = -1


class ReadyPool:
    """At most ``size`` ready children of one zygote and one configuration (thread-safe).

    Args:
        size: Most ready children kept (0: the pool is off).
        max_idle_s: Most seconds a child waits before it is discarded and replaced.
        max_code_bytes: Largest code message the children accept, bytes.
    """

    def __init__(self, size: int, max_idle_s: float, max_code_bytes: int) -> None:
        self.size = size
        self.max_idle_s = max_idle_s
        self.max_code_bytes = max_code_bytes
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._ready: list[ReadyChild] = []
        #: What the ager refills for: the zygote and configuration of the last fill.
        self._source: tuple[_zygote.Zygote, ChildConfig] | None = None
        self._ager: threading.Thread | None = None
        self._closed = False
        #: Counts drains: a child requested before one is never added after it.
        self._generation = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._ready)

    def claim(self, zygote: _zygote.Zygote, config: ChildConfig) -> ReadyChild | None:
        """Take a ready child for a run of ``config`` on ``zygote``, or ``None`` (fork one).

        Children of another zygote or configuration, and those idle past ``max_idle_s``, are
        discarded on the way.
        """
        stale: list[ReadyChild] = []
        found: ReadyChild | None = None
        now = time.monotonic()
        with self._lock:
            keep: list[ReadyChild] = []
            for ready in self._ready:
                if (
                    ready.zygote is not zygote
                    or ready.config is not config
                    or now - ready.born > self.max_idle_s
                ):
                    stale.append(ready)
                elif found is not None:
                    keep.append(ready)
                elif ready.alive() and ready.ping():
                    found = ready
                else:
                    stale.append(ready)  # it died while waiting (killed from outside)
            self._ready = keep
        for ready in stale:
            ready.discard()
        return found

    def fill(self, zygote: _zygote.Zygote, config: ChildConfig) -> None:
        """Request children until ``size`` are ready (the forks proceed in the zygote).

        Raises:
            pysandbox.child._zygote.ZygoteError: The zygote did not take a request.
        """
        while True:
            with self._lock:
                if self._closed or len(self._ready) >= self.size:
                    return
                self._source = (zygote, config)
                generation = self._generation
                if self._ager is None:
                    self._ager = threading.Thread(
                        target=self._age, name="pysandbox-ready-ager", daemon=True
                    )
                    self._ager.start()
            ready = self._request(zygote, config)
            with self._lock:
                # A drain or a close since the request bumped the generation.
                if generation == self._generation and len(self._ready) < self.size:
                    self._ready.append(ready)
                    self._changed.notify_all()
                    continue
            ready.discard()  # filled by another thread meanwhile, or drained, or closed
            return

    def _age(self) -> None:
        """The ager thread: at the oldest child's deadline, replace the children past it."""
        while True:
            with self._lock:
                if self._closed:
                    return
                if not self._ready:
                    self._changed.wait()
                    continue
                now = time.monotonic()
                due = min(ready.born for ready in self._ready) + self.max_idle_s
                if due > now:
                    self._changed.wait(due - now)
                    continue
                stale = [r for r in self._ready if now - r.born >= self.max_idle_s]
                self._ready = [r for r in self._ready if now - r.born < self.max_idle_s]
                source = self._source
            for ready in stale:
                ready.discard()
            if source is not None:
                try:
                    self.fill(*source)
                except _zygote.ZygoteError:
                    with self._lock:
                        self._source = None  # the next run's fill replaces the zygote

    def close(self) -> None:
        """Discard every ready child and stop the ager; the pool stays empty (idempotent)."""
        with self._lock:
            self._closed = True
        self.drain()  # bumps the generation and wakes the ager

    def drain(self) -> None:
        """Discard every ready child; the next fill (a run's end) makes new ones."""
        with self._lock:
            stale, self._ready = self._ready, []
            self._source = None
            self._generation += 1
            self._changed.notify_all()
        for ready in stale:
            ready.discard()

    def pids(self) -> list[int]:
        """The ready children's pids (reads their fork reports; for tests and diagnosis)."""
        with self._lock:
            ready = list(self._ready)
        pids = []
        for entry in ready:
            try:
                pids.append(entry.resolve().pid)
            except _zygote.ZygoteError:
                continue
        return pids

    def _request(self, zygote: _zygote.Zygote, config: ChildConfig) -> ReadyChild:
        marker = secrets.token_hex(16)
        request = config.run_request("", None, marker)  # the code comes on the code pipe
        request["max_code_bytes"] = self.max_code_bytes
        ends = [os.pipe2(os.O_CLOEXEC) for _ in range(5)]  # stdout, stderr, setup, figure, code
        (out_r, out_w), (err_r, err_w), (setup_r, setup_w), (fig_r, fig_w), (code_r, code_w) = ends
        try:
            fds = (out_w, err_w, setup_w, fig_w, code_r)
            sock = zygote.request(marshal.dumps(dict(request)), fds)
        except BaseException:
            for fd in (out_r, err_r, setup_r, fig_r, code_w):
                os.close(fd)
            raise
        finally:
            for fd in (out_w, err_w, setup_w, fig_w, code_r):
                os.close(fd)
        return ReadyChild(
            zygote, config, marker, time.monotonic(), sock, out_r, err_r, setup_r, fig_r, code_w
        )


class ReadyLauncher:
    """Hands one claimed ready child its code (a launcher good for exactly one run).

    Args:
        ready: The claimed child.
        pool: The pool it came from (its code limit: a larger message is not sent).
    """

    def __init__(self, ready: ReadyChild, pool: ReadyPool) -> None:
        self.ready = ready
        self.max_code_bytes = pool.max_code_bytes

    def launch(self, spec: RunSpec) -> ChildHandle:
        """Write the code to the child's code pipe and close it; return the run's handle.

        Raises:
            pysandbox.child._zygote.ZygoteError: The child or its zygote is gone, or the code is
                over the limit (the child is discarded; the caller forks a fresh one).
        """
        ready = self.ready
        try:
            code: _wire.ReadyCode = {"code": spec.code, "code_object": spec.code_object}
            payload = marshal.dumps(dict(code))
            if len(payload) > self.max_code_bytes:
                raise _zygote.ZygoteError("the code is over a ready child's limit")
            child = ready.resolve()
            # The question was sent by the claim; the answer comes while the code was compiled.
            if not ready.answered(_zygote.Zygote.LAUNCH_TIMEOUT_S):
                raise _zygote.ZygoteError("the ready child exited, or its zygote died")
            view = memoryview(len(payload).to_bytes(8, "little") + payload)
            while view:
                view = view[os.write(ready.code_w, view) :]
        except (OSError, ValueError) as exc:
            ready.discard()
            if isinstance(exc, _zygote.ZygoteError):
                raise
            raise _zygote.ZygoteError(f"the ready child is gone: {exc}") from exc
        os.close(ready.code_w)
        ready.code_w = -1
        handle = WarmHandle(child, ready.out_r, ready.err_r, ready.setup_r, ready.figure_r)
        ready.out_r = ready.err_r = ready.setup_r = ready.figure_r = -1
        ready.launched = True
        return handle
