"""A tool is a module-level ``async`` function with one declarative decorator, :func:`tool`.

The decorator carries what every tool call goes through, declared once beside the function
instead of written around its body:

* **metrics**: the call is timed, counted and traced under its metric name
  (:meth:`ServerState.instrument`; a :class:`~mcp_secure_sandbox.concurrency.Busy` becomes
  the tool error "busy, retry: ..."). The function reports its outcome with :func:`note`.
* **admission**: an :class:`Admission` names the kind of slot, the workspace gate mode
  (shared for a run, exclusive for a snapshot operation or a write; a function of the
  arguments when it depends on them), the wait and its bound, the queue progress, and whether
  an inconsistent workspace refuses the call once admitted. It is held around the function's
  body, or, with ``admit_around=False``, where the body enters it (:func:`admitted`) when the
  body checks its arguments before it waits or shapes its answer after it leaves.
* **after**: shaping the body's result once the admission is released (a restore's report
  cut to the response budget off the event loop, say).
* **registration**: the description is the docstring with each ``{name}`` filled from the
  live settings (``fill``), parameters get bounds known only from the settings (``params``),
  and a typed result becomes a budgeted :class:`~mcp.types.CallToolResult`
  (:mod:`mcp_secure_sandbox.tools._register`).

The function gets the server's :class:`ServerState` from the lifespan context
(:func:`state_of`): the server's lifespan yields it, so the module-level function serves any
server it is registered on. Called directly (``await create_state_snapshot(ctx, ...)``, with a
context whose lifespan context is a state) it does everything a call through MCP does but
the argument validation, and returns the ``CallToolResult``.

:func:`register_tools` registers a list of them on a server with its live settings.

The fullest use is ``run_sandbox_code`` (:mod:`mcp_secure_sandbox.tools.sandbox`): a run's
admission (its wait from the time-out), the answer shaped in ``after`` once the slot is released.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, ParamSpec, TypeVar, get_args, get_origin

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import TypeAdapter

from mcp_secure_sandbox import budget
from mcp_secure_sandbox.settings import Settings
from mcp_secure_sandbox.state import ServerState
from mcp_secure_sandbox.tools._register import publish

__all__ = [
    "Admission",
    "ToolSpec",
    "admitted",
    "note",
    "register_tools",
    "spec_of",
    "state_of",
    "tool",
]

P = ParamSpec("P")
R = TypeVar("R")

WorkspaceMode = Literal["shared", "exclusive"] | None
"""How a call holds the workspace gate: shared (a run), alone, or not at all."""


@dataclass(frozen=True)
class Admission:
    """How a call waits for its turn (:meth:`AdmissionQueue.admit`), declared once.

    Attributes:
        kind: The kind of slot (``"run"``, ``"validation"``, ``"snapshot"``, ``"export"``),
            or ``None`` for the workspace only.
        workspace: ``"shared"``, ``"exclusive"`` or ``None``; or a function of the call's
            arguments (by name) giving one (a diff of two snapshots reads no workspace).
        wait: The longest wait in seconds, from the state and the arguments (a run's is its
            time-out plus a grace; it may raise ``ToolError`` for a bad argument, before any
            wait); ``None`` for the server's ``--admission-wait``.
        bound: What the wait is, as a busy answer names it, from the state; ``None`` for
            :attr:`ServerState.wait_bound`.
        consistent: Once admitted, refuse the call while the workspace is marked
            inconsistent (a failed restore): runs, snapshots, writes.
        what: The call as busy answers name it; ``None`` for the tool's name.
    """

    kind: str | None
    workspace: WorkspaceMode | Callable[[Mapping[str, Any]], WorkspaceMode] = None
    wait: Callable[[ServerState, Mapping[str, Any]], float] | None = None
    bound: Callable[[ServerState], str] | None = None
    consistent: bool = False
    what: str | None = None

    @asynccontextmanager
    async def enter(
        self, state: ServerState, ctx: Context | None, what: str, arguments: Mapping[str, Any]
    ) -> AsyncIterator[None]:
        """Hold the admission for the block.

        Args:
            state: The server's state (its admission queue and settings).
            ctx: The call's context, for queue progress (``None``: no progress).
            what: The call, as busy answers and the refusal of an inconsistent workspace
                name it (:attr:`what` wins when set).
            arguments: The call's arguments by name, for :attr:`workspace` and :attr:`wait`.

        Raises:
            Busy: The queue is full, or the wait bound passed.
            ToolError: :attr:`wait` refused an argument; or :attr:`consistent` and the
                workspace is inconsistent.
        """
        name = self.what or what
        mode = self.workspace(arguments) if callable(self.workspace) else self.workspace
        wait_s = (
            self.wait(state, arguments)
            if self.wait is not None
            else state.settings.admission_wait_s
        )
        async with state.admission.admit(
            self.kind,
            name,
            wait_s,
            workspace=mode,
            progress=state.queue_progress(ctx) if ctx is not None else None,
            bound=self.bound(state) if self.bound is not None else state.wait_bound,
        ):
            if self.consistent:
                # Checked holding the gate: a restore in progress is not a failed one.
                state.refuse_if_inconsistent(name)
            yield


@dataclass(frozen=True)
class ToolSpec:
    """What :func:`tool` declared for one function (read by :func:`register_tools`).

    Attributes:
        name: The tool's name (the function's).
        body: The function as written.
        metric: The name its calls are counted and traced under.
        admit: Its admission, or ``None``.
        admit_around: Whether the admission is held around the whole body (else the body
            enters it with :func:`admitted`).
        after: Shapes the body's result once the admission is released, or ``None``.
        output: The structured result's type (the published output schema).
        annotations: The MCP tool annotations.
        params: Annotations replacing those of named parameters, from the live settings.
        fill: Text for the docstring's ``{name}`` placeholders, from the live settings.
        context: The name of the body's :class:`Context` parameter.
    """

    name: str
    body: Callable[..., Awaitable[Any]]
    metric: str
    admit: Admission | None
    admit_around: bool
    after: Callable[[ServerState, Any, Mapping[str, Any]], Awaitable[Any]] | None
    output: Any
    annotations: ToolAnnotations
    params: Callable[[Settings], Mapping[str, Any]] | None
    fill: Callable[[Settings], Mapping[str, str]] | None
    context: str
    adapter: TypeAdapter[Any] = field(repr=False)


@dataclass
class _Call:
    """The call in progress (one per task): its outcome for the trace, its admission."""

    state: ServerState
    ctx: Context
    spec: ToolSpec
    arguments: Mapping[str, Any]
    outcome: dict[str, str]


_CALL: ContextVar[_Call] = ContextVar("mcp_secure_sandbox_tool_call")


def state_of(ctx: Context) -> ServerState:
    """The :class:`ServerState` of the server serving ``ctx``'s request (its lifespan context).

    Raises:
        RuntimeError: The server's lifespan did not yield a state (a server not built by
            :func:`mcp_secure_sandbox.server.create_server`).
    """
    state = ctx.request_context.lifespan_context
    if not isinstance(state, ServerState):
        raise RuntimeError(
            "the server's lifespan context is not a ServerState: build the server with "
            "mcp_secure_sandbox.server.create_server"
        )
    return state


def note(*, status: str | None = None, message: str | None = None) -> None:
    """Set the outcome of the tool call in progress: its trace's status and message.

    Args:
        status: ``"ok"`` by default; ``"valid"``, ``"invalid"``, a run's status...
        message: The trace's message (default: ``"<tool> <status>"``).

    Raises:
        RuntimeError: Called outside a tool call.
    """
    call = _CALL.get(None)
    if call is None:
        raise RuntimeError("note() is called from a tool declared with @tool only")
    if status is not None:
        call.outcome["status"] = status
    if message is not None:
        call.outcome["message"] = message


@asynccontextmanager
async def admitted() -> AsyncIterator[None]:
    """Hold the admission declared for the tool call in progress (``admit_around=False``).

    Raises:
        RuntimeError: Called outside a tool call, or for a tool declared without admission.
        Busy, ToolError: As :meth:`Admission.enter`.
    """
    call = _CALL.get(None)
    if call is None or call.spec.admit is None:
        raise RuntimeError("admitted() is for a tool declared with @tool(admit=...)")
    async with call.spec.admit.enter(call.state, call.ctx, call.spec.name, call.arguments):
        yield


def tool(
    *,
    annotations: ToolAnnotations,
    admit: Admission | None = None,
    admit_around: bool = True,
    after: Callable[[ServerState, Any, Mapping[str, Any]], Awaitable[Any]] | None = None,
    output: Any = None,
    params: Callable[[Settings], Mapping[str, Any]] | None = None,
    fill: Callable[[Settings], Mapping[str, str]] | None = None,
    metric: str | None = None,
) -> Callable[[Callable[P, Awaitable[Any]]], Callable[P, Awaitable[CallToolResult]]]:
    """Declare a module-level ``async`` function a tool of the server.

    Args:
        annotations: The MCP tool annotations (title, hints).
        admit: How its calls wait for their turn; ``None`` for no admission.
        admit_around: Hold ``admit`` around the whole body (``True``) or where the body
            enters it with :func:`admitted`.
        after: ``after(state, result, arguments)``: shapes the body's result into the tool's
            (a typed result or a ``CallToolResult``) once the admission is released.
        output: The structured result's type; ``None`` for the body's return annotation
            (``Annotated[CallToolResult, T]`` means ``T``: the body builds its answer).
        params: From the live settings, annotations replacing those of named parameters
            (bounds and texts known only at registration).
        fill: From the live settings, text for the docstring's ``{name}`` placeholders.
        metric: The name calls are counted under in ``get_sandbox_metrics``; the
            function's name by default.

    Returns:
        A decorator returning the tool function: awaited with the body's arguments (its
        context among them) it makes the whole call (metrics, admission, body, ``after``,
        the budgeted result) and returns the ``CallToolResult``.

    Raises:
        TypeError: The function is not ``async`` or has no :class:`Context` parameter.
    """

    def decorator(body: Callable[P, Awaitable[Any]]) -> Callable[P, Awaitable[CallToolResult]]:
        if not inspect.iscoroutinefunction(body):
            raise TypeError(f"tool {body.__name__}: a tool function is async")
        sig = inspect.signature(body, eval_str=True)
        context = next(
            (
                p.name
                for p in sig.parameters.values()
                if inspect.isclass(p.annotation) and issubclass(p.annotation, Context)
            ),
            None,
        )
        if context is None:
            raise TypeError(
                f"tool {body.__name__}: add a `ctx: Context` parameter (the state comes from it)"
            )
        out_type = output if output is not None else sig.return_annotation
        if get_origin(out_type) is Annotated and get_args(out_type)[0] is CallToolResult:
            out_type = get_args(out_type)[1]
        spec = ToolSpec(
            name=body.__name__,
            body=body,
            metric=metric or body.__name__,
            admit=admit,
            admit_around=admit_around,
            after=after,
            output=out_type,
            annotations=annotations,
            params=params,
            fill=fill,
            context=context,
            adapter=TypeAdapter(out_type),
        )

        @functools.wraps(body)
        async def call(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = bound.arguments
            ctx: Context = arguments[context]
            state = state_of(ctx)
            async with state.instrument(spec.metric) as outcome:
                token = _CALL.set(_Call(state, ctx, spec, arguments, outcome))
                try:
                    if admit is not None and admit_around:
                        async with admit.enter(state, ctx, spec.name, arguments):
                            result = await body(*args, **kwargs)
                    else:
                        result = await body(*args, **kwargs)
                    if after is not None:
                        result = await after(state, result, arguments)
                finally:
                    _CALL.reset(token)
            if isinstance(result, CallToolResult):
                return result
            # Shaped outside the metrics, as the budgeted answer of every typed result.
            return budget.tool_result(spec.adapter.dump_python(result, mode="json", by_alias=True))

        call.__mcp_tool__ = spec  # type: ignore[attr-defined]
        return call

    return decorator


def spec_of(fn: Callable[..., Any]) -> ToolSpec:
    """What :func:`tool` declared for ``fn``.

    Raises:
        TypeError: ``fn`` was not declared with :func:`tool`.
    """
    spec = getattr(fn, "__mcp_tool__", None)
    if not isinstance(spec, ToolSpec):
        raise TypeError(f"{getattr(fn, '__name__', fn)!r} is not declared with @tool")
    return spec


def register_tools(
    app: MCPServer[Any], settings: Settings, tools: Sequence[Callable[..., Any]]
) -> None:
    """Register the declared ``tools`` on ``app``, with the live ``settings``.

    Each is listed with its docstring as the description (``fill`` applied), its input schema
    from its signature (``params`` applied) and its output schema from its result type, both
    compacted (:func:`mcp_secure_sandbox.tools._register.compact_schema`).

    Args:
        app: The server; its lifespan must yield the :class:`ServerState` (:func:`state_of`).
        settings: The live settings the descriptions and bounds come from.
        tools: Functions declared with :func:`tool`.

    Raises:
        TypeError: One of ``tools`` was not declared with :func:`tool`.
    """
    for fn in tools:
        spec = spec_of(fn)
        publish(
            app,
            fn,
            name=spec.name,
            doc=spec.body.__doc__,
            out_type=spec.output,
            params=spec.params(settings) if spec.params is not None else None,
            fill=spec.fill(settings) if spec.fill is not None else None,
            annotations=spec.annotations,
        )
