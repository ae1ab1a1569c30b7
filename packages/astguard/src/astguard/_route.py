"""Routing of ``.format``/``.format_map`` calls through a runner's safe formatter.

``str.format`` walks the fields of its template (``{0.attr}``, ``{0[key]}``) in C, where no
run-time attribute guard sees them, so a template that is not a literal cannot be checked
statically. A runner that provides a safe formatter (one that refuses dunder, private and
refused field names, as pysandbox's child does) compiles the checked code after
:func:`route_format_calls`, and sets ``Policy.runtime_format_guard`` so that the checker
accepts such calls (AG402 then applies only to other spellings: a bound ``t.format`` used as
a value, ``getattr(t, "format")``).

The private-attribute rule (AG309) exempts ``self._x``/``cls._x`` in the methods of the
script's own classes because of where they are written, not what the receiver holds when the
method runs (``C.m(df)``). A runner whose profile switches AG309 on compiles the checked code
after :func:`route_private_receivers` too, and binds :data:`RECEIVER_ROUTER` to a guard that
refuses a receiver whose class (or, for a class, whose MRO) is not the script's own or one of
the bases AG309 accepts (:data:`RECEIVER_BASES`).
"""

from __future__ import annotations

import ast

from astguard._checker import RECEIVER_BASES
from astguard._policy import PUBLIC_UNDERSCORE_ATTRIBUTES, _normalize, is_dunder

__all__ = [
    "FORMAT_METHODS",
    "FORMAT_ROUTER",
    "RECEIVER_BASES",
    "RECEIVER_ROUTER",
    "route_format_calls",
    "route_private_receivers",
]

#: The builtin name the routed calls use; user code cannot name it (a refused dunder, AG207).
FORMAT_ROUTER = "__astguard_format__"
#: The method names routed.
FORMAT_METHODS = frozenset({"format", "format_map"})
#: The builtin name routed private-attribute receivers use (a refused dunder, AG207).
RECEIVER_ROUTER = "__astguard_receiver__"


class _Router(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr in FORMAT_METHODS):
            return node
        receiver = func.value
        if isinstance(receiver, ast.Constant):
            return node  # a literal template: checked statically (AG401)
        router = ast.Name(id=FORMAT_ROUTER, ctx=ast.Load())
        routed = ast.Call(
            func=router,
            args=[receiver, ast.Constant(value=func.attr), *node.args],
            keywords=node.keywords,
        )
        return ast.copy_location(routed, node)


def route_format_calls(tree: ast.Module) -> ast.Module:
    """Rewrite ``x.format(...)``/``x.format_map(...)`` (``x`` not a literal) in place.

    Each becomes ``__astguard_format__(x, "format", ...)``: the runner's safe formatter formats
    a ``str`` (or, for ``str.format(t, ...)``, the template ``t``) and calls the real method of
    any other object.

    Args:
        tree: A module parsed from source that :func:`astguard.check` accepted with
            ``Policy.runtime_format_guard`` set.

    Returns:
        The same tree, rewritten, ready for ``compile``.
    """
    result = _Router().visit(tree)
    if not isinstance(result, ast.Module):  # pragma: no cover - visit_Call returns calls only
        raise TypeError("route_format_calls needs an ast.Module")
    return ast.fix_missing_locations(result)


class _ReceiverRouter(ast.NodeTransformer):
    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        name = _normalize(node.attr)
        if (
            not isinstance(node.value, ast.Name)
            or not name.startswith("_")
            or is_dunder(name)
            or name in PUBLIC_UNDERSCORE_ATTRIBUTES
        ):
            return node
        router = ast.Name(id=RECEIVER_ROUTER, ctx=ast.Load())
        receiver = ast.Call(
            func=router,
            args=[ast.Name(id=node.value.id, ctx=ast.Load()), ast.Constant(value=name)],
            keywords=[],
        )
        ast.copy_location(receiver, node.value)
        return ast.copy_location(ast.Attribute(value=receiver, attr=name, ctx=node.ctx), node)


def route_private_receivers(tree: ast.Module) -> ast.Module:
    """Rewrite every ``name._x`` (a private, non-dunder attribute of a plain name) in place.

    Each becomes ``__astguard_receiver__(name, "_x")._x`` in the same context (load, store,
    delete, augmented assignment: the receiver is evaluated once, as before): the runner's
    guard returns the receiver when its class is the script's own and refuses it otherwise.
    With AG309 on, the checker accepts such a name only as a method's own ``self``/``cls``;
    names AG309 leaves alone (dunders, ``PUBLIC_UNDERSCORE_ATTRIBUTES``) are not routed.

    Args:
        tree: A module parsed from source that :func:`astguard.check` accepted with
            ``Policy.refuse_private_attributes`` set.

    Returns:
        The same tree, rewritten, ready for ``compile``.
    """
    result = _ReceiverRouter().visit(tree)
    if not isinstance(result, ast.Module):  # pragma: no cover - attributes stay expressions
        raise TypeError("route_private_receivers needs an ast.Module")
    return ast.fix_missing_locations(result)
