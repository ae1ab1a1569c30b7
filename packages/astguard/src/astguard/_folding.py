"""How many bytes CPython's constant folding creates while it compiles a module (AG907).

CPython 3.10-3.13 folds constant expressions in its AST optimiser: ``'ab' * 2048`` becomes a
4 KB string, and ``'a' * 4096 + 'b' * 4096 + ...`` becomes a new, longer string at every
``+``, each kept in the compiler's arena until the module is compiled. A few kilobytes of
source can make the compiling process allocate gigabytes (red team 2026-12-01: 13 KB, 1 GB,
in the server, before any limit of the run applied). This module bounds that amount from the
syntax tree, before anything is compiled.

The model follows ``Python/ast_opt.c`` of 3.10-3.13, rounded up where it is unsure:

- a ``str``, ``bytes``, number, ``None``, ``...`` or a tuple of such is a constant; its size is
  its length times its widest character (1, 2 or 4 bytes) for text, its length for bytes,
  16 bytes for a number and 8 bytes per tuple item plus the items;
- ``str``/``bytes``/tuple ``*`` int folds when the result has at most 4,096 characters or
  bytes (256 tuple items); ``+`` of two constants of one kind always folds; a number op folds
  (CPython caps integer results at 128 bits: counted as a number); ``%`` of text does not fold;
- every folded result counts, intermediates included: they all stay until the end.
"""

from __future__ import annotations

import ast

__all__ = ["MAX_FOLDED_STR", "MAX_FOLDED_TUPLE", "folded_bytes"]

#: Longest ``str``/``bytes`` product CPython folds (``MAX_STR_SIZE`` in ``ast_opt.c``).
MAX_FOLDED_STR = 4096
#: Most items of a tuple product CPython folds (``MAX_COLLECTION_SIZE``).
MAX_FOLDED_TUPLE = 256
_NUMBER = 16
_ITEM = 8

# A folded value as the model sees it: (kind, length, width or size in bytes).
#   kind "str": length in characters, width 1/2/4; "bytes": length; "tuple": items and bytes;
#   "num": a number (its size is _NUMBER): length is the value of an int literal, -1 when
#   unknown (the result of an operation).
_Value = tuple[str, int, int]


def _size(value: _Value) -> int:
    kind, length, extra = value
    if kind == "str":
        return length * extra
    if kind == "bytes":
        return length
    if kind == "tuple":
        return extra
    return _NUMBER


def _constant(value: object) -> _Value | None:
    if isinstance(value, str):
        top = max(map(ord, value), default=0)
        return ("str", len(value), 1 if top < 256 else 2 if top < 65536 else 4)
    if isinstance(value, bytes):
        return ("bytes", len(value), 0)
    if isinstance(value, int):
        return ("num", int(value), 0)
    if isinstance(value, (float, complex)) or value is None or value is ...:
        return ("num", -1, 0)
    return None


def _fold(op: ast.operator, left: _Value, right: _Value) -> _Value | None:
    """The folded result of ``left op right``, or ``None`` when CPython leaves it alone."""
    if left[0] == "num" and right[0] == "num":
        return ("num", -1, 0)
    if isinstance(op, ast.Add) and left[0] == right[0] and left[0] in ("str", "bytes"):
        return (left[0], left[1] + right[1], max(left[2], right[2]))
    if isinstance(op, ast.Add) and left[0] == right[0] == "tuple":
        return ("tuple", left[1] + right[1], left[2] + right[2])
    if isinstance(op, ast.Mult):
        seq, num = (left, right) if right[0] == "num" else (right, left)
        if num[0] != "num" or seq[0] == "num":
            return None
        count = num[1]
        if seq[0] == "tuple":
            items = seq[1] * count if count >= 0 else MAX_FOLDED_TUPLE
            if items > MAX_FOLDED_TUPLE:
                return None  # not folded: computed when the code runs
            per = seq[2] // seq[1] if seq[1] else 0
            return ("tuple", max(items, 0), max(items, 0) * per)
        length = seq[1] * count if count >= 0 else MAX_FOLDED_STR
        if length > MAX_FOLDED_STR:
            return None
        return (seq[0], max(length, 0), seq[2])
    return None


def folded_bytes(tree: ast.AST) -> int:
    """An upper bound of the bytes constant folding creates while ``tree`` is compiled.

    Args:
        tree: A parsed module (``ast.parse``; not optimised).

    Returns:
        The sum of the sizes of every value the folding would create, in bytes.
    """
    total = 0
    values: dict[int, _Value] = {}
    # Post-order without recursion: a node is evaluated after its children.
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, done = stack.pop()
        if not done:
            stack.append((node, True))
            stack.extend((child, False) for child in ast.iter_child_nodes(node))
            continue
        if isinstance(node, ast.Constant):
            found = _constant(node.value)
            if found is not None:
                values[id(node)] = found
        elif isinstance(node, ast.Tuple) and isinstance(node.ctx, ast.Load):
            items = [values.get(id(e)) for e in node.elts]
            if all(v is not None for v in items):
                size = sum(_size(v) for v in items if v is not None) + _ITEM * len(items)
                values[id(node)] = ("tuple", len(items), size)
                total += size
        elif isinstance(node, ast.UnaryOp):
            operand = values.get(id(node.operand))
            if operand is not None and operand[0] == "num":
                values[id(node)] = ("num", -1, 0)
        elif isinstance(node, ast.BinOp):
            left, right = values.get(id(node.left)), values.get(id(node.right))
            if left is not None and right is not None:
                result = _fold(node.op, left, right)
                if result is not None:
                    values[id(node)] = result
                    total += _size(result)
    return total
