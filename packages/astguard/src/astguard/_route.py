"""Routing of ``.format``/``.format_map`` calls through a runner's safe formatter.

``str.format`` walks the fields of its template (``{0.attr}``, ``{0[key]}``) in C, where no
run-time attribute guard sees them, so a template that is not a literal cannot be checked
statically. A runner that provides a safe formatter (one that refuses dunder, private and
refused field names, as pysandbox's child does) compiles the checked code after
:func:`route_format_calls`, and sets ``Policy.runtime_format_guard`` so that the checker
accepts such calls (AG402 then applies only to other spellings: a bound ``t.format`` used as
a value, ``getattr(t, "format")``).
"""

from __future__ import annotations

import ast

__all__ = ["FORMAT_METHODS", "FORMAT_ROUTER", "route_format_calls"]

#: The builtin name the routed calls use; user code cannot name it (a refused dunder, AG207).
FORMAT_ROUTER = "__astguard_format__"
#: The method names routed.
FORMAT_METHODS = frozenset({"format", "format_map"})


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
