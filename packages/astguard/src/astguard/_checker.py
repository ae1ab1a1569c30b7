"""The checker: one pass over the AST with a rule per node type and default deny."""

from __future__ import annotations

import ast
import builtins
import codecs
import re
import threading
import warnings
from collections.abc import Callable
from typing import Any

from astguard._folding import folded_bytes
from astguard._format import template_problems
from astguard._policy import (
    ALLOWED_DUNDER_NAMES,
    DEFAULT_ALLOWED_MODULES,
    DEFINABLE_DUNDERS,
    FORBIDDEN_ATTRIBUTES,
    FORBIDDEN_NAMES,
    FUTURE_FEATURES,
    MODULE_NAME_ATTRIBUTES,
    PUBLIC_UNDERSCORE_ATTRIBUTES,
    REFLECTION_BUILTINS,
    SAME_NAME_NON_MODULES,
    SPAWN_ATTRIBUTES,
    STDLIB_MODULE_NAMES,
    Policy,
    _normalize,
    is_dunder,
    is_forbidden_attribute,
    is_known_module,
    is_module_allowed,
    module_attribute_problem,
)
from astguard._result import CheckResult, Violation

__all__ = ["ALLOWED_NODE_TYPES", "check"]

_ALLOWED_NODE_NAMES = [
    "Module",
    "Expression",
    "FunctionDef",
    "AsyncFunctionDef",
    "ClassDef",
    "Return",
    "Delete",
    "Assign",
    "AugAssign",
    "AnnAssign",
    "For",
    "AsyncFor",
    "While",
    "If",
    "With",
    "AsyncWith",
    "Match",
    "Raise",
    "Try",
    "TryStar",
    "Assert",
    "Import",
    "ImportFrom",
    "Global",
    "Nonlocal",
    "Expr",
    "Pass",
    "Break",
    "Continue",
    "TypeAlias",
    "BoolOp",
    "NamedExpr",
    "BinOp",
    "UnaryOp",
    "Lambda",
    "IfExp",
    "Dict",
    "Set",
    "ListComp",
    "SetComp",
    "DictComp",
    "GeneratorExp",
    "Await",
    "Yield",
    "YieldFrom",
    "Compare",
    "Call",
    "FormattedValue",
    "JoinedStr",
    "Constant",
    "Attribute",
    "Subscript",
    "Starred",
    "Name",
    "List",
    "Tuple",
    "Slice",
    "Load",
    "Store",
    "Del",
    "And",
    "Or",
    "Add",
    "Sub",
    "Mult",
    "MatMult",
    "Div",
    "Mod",
    "Pow",
    "LShift",
    "RShift",
    "BitOr",
    "BitXor",
    "BitAnd",
    "FloorDiv",
    "Invert",
    "Not",
    "UAdd",
    "USub",
    "Eq",
    "NotEq",
    "Lt",
    "LtE",
    "Gt",
    "GtE",
    "Is",
    "IsNot",
    "In",
    "NotIn",
    "comprehension",
    "ExceptHandler",
    "arguments",
    "arg",
    "keyword",
    "alias",
    "withitem",
    "match_case",
    "MatchValue",
    "MatchSingleton",
    "MatchSequence",
    "MatchMapping",
    "MatchClass",
    "MatchStar",
    "MatchAs",
    "MatchOr",
    "TypeVar",
    "ParamSpec",
    "TypeVarTuple",
]

ALLOWED_NODE_TYPES: frozenset[type[ast.AST]] = frozenset(
    getattr(ast, name) for name in _ALLOWED_NODE_NAMES if hasattr(ast, name)
)
"""AST node classes the checker has a rule for; any other node type is refused (AG905)."""

_STRING_EVAL_NAMES = frozenset({"get_type_hints", "ForwardRef", "evaluate_forward_ref"})
_FORMATTER_NAMES = frozenset(
    {"vformat", "get_field", "_vformat", "convert_field", "format_field", "parse_fields"}
)
_FORMAT_METHODS = frozenset({"format", "format_map"})
_ATTRGETTERS = frozenset({"attrgetter", "methodcaller"})
_SAFE_LOGGING_STYLES = frozenset({"%", "$"})


# Operator and context nodes carry no names: accepted without a visit when their type is one
# this interpreter is known to produce (any other type still goes through visit -> AG905).
_LEAF_TYPES: frozenset[type[ast.AST]] = frozenset(
    cls
    for cls in ALLOWED_NODE_TYPES
    if issubclass(cls, (ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.expr_context))
)
# Builtin types whose class patterns match the subject itself: `case str(x)` reads nothing.
_SELF_MATCHING = frozenset(
    {
        "bool",
        "bytearray",
        "bytes",
        "dict",
        "float",
        "frozenset",
        "int",
        "list",
        "set",
        "str",
        "tuple",
    }
)
_BUILTIN_NAMES = frozenset(dir(builtins))
# Class decorators and bases that cannot plant a `__match_args__` of their own choosing.
_SAFE_CLASS_DECORATORS = frozenset(
    {
        "dataclasses.dataclass",
        "functools.total_ordering",
        "enum.unique",
        "typing.final",
        "typing.runtime_checkable",
    }
)
# Class decorators that hand the class back as it is, so that its methods' self is its instance
# (AG309): the above, and pandas' accessor registration (`self._obj` is the documented pattern).
_RECEIVER_CLASS_DECORATORS = _SAFE_CLASS_DECORATORS | frozenset(
    f"pandas.api.extensions.register_{kind}_accessor" for kind in ("dataframe", "series", "index")
)
_SAFE_BASES = frozenset(
    {
        "abc.ABC",
        "typing.Generic",
        "typing.Protocol",
        "typing.NamedTuple",
        "enum.Enum",
        "enum.IntEnum",
        "enum.Flag",
        "enum.IntFlag",
        "enum.StrEnum",
        "enum.ReprEnum",
    }
)
#: The library bases (besides builtins and the script's own classes) a class may have for AG309
#: to exempt ``self._x`` in its methods; what a run-time receiver guard accepts besides those.
RECEIVER_BASES = _SAFE_BASES
_WRAPPER_HELPERS = {"update_wrapper": 2, "wraps": 1}
# unittest's entry points resolve test names from strings (module=, defaultTest=, argv=):
# imports by name and attribute walks no guard sees; only their default form is accepted.
_TEST_PROGRAMS = frozenset(
    {"unittest.main", "unittest.TestProgram", "unittest.main.main", "unittest.main.TestProgram"}
)
# What to use instead of modules that ordinary scripts reach for.
_IMPORT_HINTS = {
    "os": "use pathlib.Path for files and directories (Path.mkdir, Path.iterdir, Path.unlink)",
    "os.path": "use pathlib.Path (Path.exists, Path.name, Path / 'child')",
    "sys": "print() writes to stdout, print(..., file=...) to a file; end with raise SystemExit(n)",
    "shutil": "use pathlib.Path (read_bytes/write_bytes to copy, unlink, rmdir)",
    "subprocess": "starting processes is not possible in the sandbox",
    "socket": "network access is not possible in the sandbox",
    "tempfile": "write scratch files into the workspace with pathlib",
    "requests": "network access is not possible in the sandbox",
    "urllib": "only urllib.parse is available; network access is not possible",
    "urllib.request": "network access is not possible in the sandbox",
    "threading": "use asyncio for concurrency",
    "multiprocessing": "starting processes is not possible in the sandbox",
    "concurrent": "use asyncio for concurrency",
    "concurrent.futures": "use asyncio for concurrency",
    "pickle": "use json to store data",
    "shelve": "use json to store data",
    "importlib": "import allowed modules with import statements",
    "zipfile": "archives read and write files named by strings outside the guarded open(); "
    "compress single files with gzip, bz2 or lzma (bytes with zlib)",
    "tarfile": "archives read and write files (and links) named by strings outside the guarded "
    "open(); compress single files with gzip, bz2 or lzma (bytes with zlib)",
    "inspect": "it reaches frames, code objects and source; use type(), isinstance(), "
    "callable(), dir() or dataclasses.fields()",
}
# What to use instead of refused builtins that ordinary scripts reach for (AG201).
_BUILTIN_HINTS = {
    "vars": "it reads an object's or the caller's namespace; use the attributes by name, "
    "dataclasses.asdict(obj) or a dict of your own",
}
# What to use instead of private attributes of library objects that scripts reach for (AG309).
_PRIVATE_ATTRIBUTE_HINTS = {
    "_mgr": "use df.to_numpy(), df.dtypes or df.values",
    "_data": "use df.to_numpy(), df.dtypes or df.values",
    "_values": "use .to_numpy() or .array",
    "_get_value": "use df.at[row, column]",
    "_set_value": "use df.at[row, column] = value",
    "_constructor": "use type(obj)",
}
# Method decorators that call the function with the instance (or class) as its first argument.
_RECEIVER_DECORATORS = frozenset(
    {
        "classmethod",
        "property",
        "abc.abstractmethod",
        "functools.cached_property",
        "functools.cache",
        "functools.lru_cache",
        "typing.override",
    }
)
# Per node class, the fields that may hold child nodes (ctx is checked by the parser itself).
_CHILD_FIELDS: dict[type[ast.AST], tuple[str, ...]] = {}


class _Abort(Exception):
    """Internal: a limit was hit; the walk stops."""


class _Checker:
    """State of one check. Not thread-safe; one instance per call."""

    def __init__(self, policy: Policy, source: str) -> None:
        self.policy = policy
        self.source = source
        self.guard = policy.runtime_attribute_guard
        self.hits: list[tuple[int, int, int, int, str, str]] = []
        # name -> dotted module path, for names certainly bound to modules
        self.modules: dict[str, str] = {}
        # name -> "module.attr" for names bound by `from module import attr`
        self.from_imports: dict[str, str] = {}
        # chains on names not yet known as modules: (root, steps, node, store, value_use)
        self.deferred: list[tuple[str, list[tuple[str, ast.AST]], ast.AST, bool, bool]] = []
        # first use as a value of each name not yet known as a module
        self.value_uses: dict[str, ast.Name] = {}
        self.nodes = 0
        self.max_nodes = policy.max_nodes
        self.max_depth = policy.max_depth
        self.annotation = 0
        self.location: ast.AST | None = None
        self.in_class_body = False
        # names bound other than by a class statement or an import; class statements by name
        self.bound_names: set[str] = set()
        self.store_counts: dict[str, int] = {}
        # `Point = namedtuple("Point", "x y")`: candidates for positional class patterns
        self.namedtuple_defs: dict[str, ast.Call] = {}
        self.class_defs: dict[str, ast.ClassDef] = {}
        self.positional_patterns: list[tuple[str, ast.MatchClass]] = []
        self.match_args_target: ast.Name | None = None
        self.special_names = policy.denied_builtins | FORBIDDEN_NAMES | REFLECTION_BUILTINS
        # function/lambda/comprehension scopes: (parameter names, names declared global)
        self.scopes: list[tuple[frozenset[str], set[str]]] = []
        # per scope: the method's receiver (self/cls) and its class's name, or None
        self.scope_receivers: list[tuple[str, str] | None] = []
        # the names of the class statements whose bodies enclose the current node
        self.class_stack: list[str] = []
        # AG309: `self._x` in methods, decided at the end (the class's bases): (node, class)
        self.private_pending: list[tuple[ast.AST, str, str]] = []
        self.shadow_count: dict[str, int] = {}
        self.handlers: dict[type[ast.AST], Callable[[Any, int], None]] = dict.fromkeys(
            ALLOWED_NODE_TYPES, self._generic
        )
        for leaf in (ast.Load, ast.Store, ast.Del, ast.Pass, ast.Break, ast.Continue):
            self.handlers[leaf] = self._leaf
        for cls in ALLOWED_NODE_TYPES:
            if issubclass(cls, (ast.operator, ast.unaryop, ast.cmpop, ast.boolop)):
                self.handlers[cls] = self._leaf
        special: dict[str, Callable[[Any, int], None]] = {
            "Name": self._name_node,
            "Attribute": self._attribute_node,
            "Call": self._call,
            "Import": self._import,
            "ImportFrom": self._import_from,
            "Constant": self._constant,
            "FunctionDef": self._function,
            "AsyncFunctionDef": self._function,
            "ClassDef": self._class,
            "arg": self._arg,
            "AnnAssign": self._ann_assign,
            "Assign": self._assign,
            "ExceptHandler": self._except_handler,
            "Global": self._global,
            "Nonlocal": self._global,
            "MatchAs": self._match_binding,
            "MatchStar": self._match_binding,
            "MatchMapping": self._match_mapping,
            "MatchClass": self._match_class,
            "Subscript": self._subscript,
            "Lambda": self._lambda,
            "ListComp": self._comprehension,
            "SetComp": self._comprehension,
            "GeneratorExp": self._comprehension,
            "DictComp": self._comprehension,
            "TypeVar": self._type_param,
            "ParamSpec": self._type_param,
            "TypeVarTuple": self._type_param,
        }
        for name, handler in special.items():
            node_cls = getattr(ast, name, None)
            if node_cls in ALLOWED_NODE_TYPES:
                self.handlers[node_cls] = handler

    # ----------------------------------------------------------------- reporting

    def report(self, node: ast.AST, rule_id: str, message: str) -> None:
        where = self.location if self.location is not None else node
        line = getattr(where, "lineno", 1) or 1
        col = getattr(where, "col_offset", 0) or 0
        end_line = getattr(where, "end_lineno", None) or line
        end_col = getattr(where, "end_col_offset", None)
        if end_col is None:
            end_col = col
        self.hits.append((line, col, end_line, end_col, rule_id, message))

    # ----------------------------------------------------------------- walking

    def visit(self, node: ast.AST, depth: int) -> None:
        self.nodes += 1
        if self.nodes > self.max_nodes or depth > self.max_depth:
            self._limit(node, depth)
        handler = self.handlers.get(type(node))
        if handler is None:
            self._unknown(node)
            return
        handler(node, depth)

    def _limit(self, node: ast.AST, depth: int) -> None:
        if self.nodes > self.max_nodes:
            self.report(
                node,
                "AG903",
                f"the code has more than {self.max_nodes} syntax nodes; split it into "
                "smaller scripts",
            )
            raise _Abort
        if depth > self.max_depth:
            self.report(
                node,
                "AG904",
                f"the code is nested deeper than {self.max_depth} levels; flatten the "
                "expression or statement",
            )
            raise _Abort

    def _unknown(self, node: ast.AST) -> None:
        self.report(
            node,
            "AG905",
            f"syntax {type(node).__name__!r} has no reviewed rule in astguard and is "
            "refused; rewrite it with reviewed syntax",
        )

    def _leaf(self, node: ast.AST, depth: int) -> None:
        return

    def _generic(self, node: ast.AST, depth: int) -> None:
        depth += 1
        visit = self.visit
        cls = type(node)
        fields = _CHILD_FIELDS.get(cls)
        if fields is None:
            fields = _CHILD_FIELDS[cls] = tuple(f for f in cls._fields if f != "ctx")
        for field in fields:
            value = getattr(node, field, None)
            if value is None:
                continue
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        if type(item) in _LEAF_TYPES:
                            continue
                        visit(item, depth)
            elif isinstance(value, ast.AST):
                if type(value) in _LEAF_TYPES:
                    continue
                visit(value, depth)

    def _visit_annotation(self, node: ast.AST | None, depth: int) -> None:
        if node is None:
            return
        self.annotation += 1
        try:
            self.visit(node, depth)
        finally:
            self.annotation -= 1

    # ----------------------------------------------------------------- names

    def _binding(self, name: str | None, node: ast.AST, *, track: bool = True) -> None:
        """Check an identifier the code binds (def, class, parameter, import as, ...)."""
        if name is None:
            return
        if track:
            self.bound_names.add(name)
        if name in FORBIDDEN_NAMES:
            self.report(
                node,
                "AG207",
                f"binding the special name {name!r} is refused; choose another name",
            )

    def _name_node(self, node: ast.Name, depth: int) -> None:
        self._name(node, attr_root=False)

    def _name(self, node: ast.Name, *, attr_root: bool, called: bool = False) -> None:
        name = node.id
        load = type(node.ctx) is ast.Load
        if name in self.special_names or name[:2] == "__":
            self._special_name(node, name, load, called)
        if not load:
            self.bound_names.add(name)
            self.store_counts[name] = self.store_counts.get(name, 0) + 1
        if load and not attr_root:
            if name in self.from_imports or name in _ATTRGETTERS:
                qualified = self.from_imports.get(name, name)
                if not called and qualified.rsplit(".", 1)[-1] in _ATTRGETTERS:
                    self._attrgetter_value(node, name)
                elif not called and qualified in _TEST_PROGRAMS:
                    self._test_program_value(node, qualified)
            if self.shadow_count.get(name) and self._shadowed(name):
                return
            if name in self.modules:
                self._module_value(node, self.modules[name])
            elif name not in self.value_uses:
                self.value_uses[name] = node

    def _special_name(self, node: ast.Name, name: str, load: bool, called: bool) -> None:
        if name == "input" and name in self.policy.denied_builtins:
            self.report(
                node,
                "AG201",
                "input() is refused: sandboxed code has no standard input; read data from a "
                "file in the workspace (open('data.txt')) or define it in the code",
            )
        elif name in self.policy.denied_builtins and name in _BUILTIN_HINTS:
            self.report(
                node,
                "AG201",
                f"the builtin {name!r} is refused: {_BUILTIN_HINTS[name]}; if this is your own "
                "variable, rename it",
            )
        elif name in self.policy.denied_builtins:
            self.report(
                node,
                "AG201",
                f"the builtin {name!r} is refused (it reaches code, frames, namespaces or the "
                "interpreter); if this is your own variable, rename it",
            )
        elif name in FORBIDDEN_NAMES:
            self.report(
                node,
                "AG207",
                f"the special name {name!r} exposes the interpreter and is refused",
            )
        elif name in REFLECTION_BUILTINS:
            if load and not self.guard and not called:
                self.report(
                    node,
                    "AG204",
                    f"{name!r} used as a value is refused; call it directly with a literal "
                    "attribute name, or use attribute syntax",
                )
        elif (
            is_dunder(name)
            and name not in ALLOWED_DUNDER_NAMES
            and name not in self.policy.allowed_dunder_attributes
        ):
            self.report(node, "AG207", f"the dunder name {name!r} is refused")
        if name == "__match_args__" and not load and node is not self.match_args_target:
            self._match_args_write(node)

    def _match_args_write(self, node: ast.AST) -> None:
        self.report(
            node,
            "AG301",
            "'__match_args__' may only be set in a class body to a literal tuple of public "
            "attribute names",
        )

    def _attrgetter_value(self, node: ast.AST, name: str) -> None:
        self.report(
            node,
            "AG205",
            f"{name!r} used as a value is refused; call it directly with literal names",
        )

    def _test_program_value(self, node: ast.AST, name: str) -> None:
        self.report(
            node,
            "AG205",
            f"{name} used as a value is refused; call it directly (unittest.main() or "
            "unittest.main(exit=False))",
        )

    def _test_program_call(self, node: ast.Call, name: str) -> None:
        """Accept ``unittest.main(...)`` only without string-driven test selection."""
        problem = None
        if node.args:
            problem = "positional arguments"
        for kw in node.keywords:
            value = kw.value
            if kw.arg is None or kw.arg == "defaultTest":
                problem = f"{kw.arg or '**'}="
            elif kw.arg == "module" and not (
                isinstance(value, ast.Constant) and value.value in ("__main__", None)
            ):
                problem = "module= other than '__main__'"
            elif kw.arg == "argv" and not (
                isinstance(value, (ast.List, ast.Tuple))
                and len(value.elts) <= 1
                and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
                )
            ):
                problem = "argv= naming tests"
        if problem is not None:
            self.report(
                node,
                "AG205",
                f"{name}() with {problem} is refused: it looks tests up by name from strings; "
                "call unittest.main() (tests of this script) or unittest.main(exit=False)",
            )

    def _module_value(self, node: ast.AST, module: str) -> None:
        self.report(
            node,
            "AG307",
            f"the module {module!r} is used as a value; use its attributes directly "
            f"({module}.name) so they can be checked",
        )

    # ----------------------------------------------------------------- attributes

    def _attribute_name(self, attr: str, node: ast.AST) -> None:
        """The rules every attribute name obeys, whatever the object."""
        name = _normalize(attr)
        if is_dunder(name):
            if name not in self.policy.allowed_dunder_attributes:
                self.report(
                    node,
                    "AG301",
                    f"the dunder attribute {name!r} is refused (it reaches interpreter "
                    "internals); use the public API or builtins such as type() and "
                    "isinstance()",
                )
        elif name in FORBIDDEN_ATTRIBUTES:
            if name in _FORMATTER_NAMES:
                self.report(
                    node,
                    "AG403",
                    f"the formatter method {name!r} walks attributes from strings and is "
                    "refused; use f-strings",
                )
            else:
                self.report(
                    node,
                    "AG302",
                    f"the attribute {name!r} exposes interpreter internals (frames, code, "
                    "tracebacks, evaluators) and is refused",
                )
        elif name in SPAWN_ATTRIBUTES:
            self.report(
                node,
                "AG305",
                f"{name!r} starts processes or opens network connections and is refused in "
                "the sandbox",
            )
        elif name in _STRING_EVAL_NAMES:
            self.report(
                node,
                "AG206",
                f"{name!r} evaluates strings as code and is refused",
            )
        elif name in MODULE_NAME_ATTRIBUTES:
            self.report(
                node,
                "AG304",
                f"an attribute named like the module {name!r} is refused on every object (a "
                "library object can hold that module); rename the attribute if it is yours",
            )

    def _private_attribute(self, attr: str, receiver: ast.AST | None, node: ast.AST) -> None:
        """AG309: a private attribute of anything but a method's own receiver is refused."""
        name = _normalize(attr)
        if (
            not name.startswith("_")
            or is_dunder(name)
            or name in PUBLIC_UNDERSCORE_ATTRIBUTES
            or is_forbidden_attribute(name, self.policy)  # reported by its own rule
        ):
            return
        if isinstance(receiver, ast.Name):
            imported = receiver.id in self.modules or receiver.id in self.from_imports
            if imported and not (
                self.shadow_count.get(receiver.id) and self._shadowed(receiver.id)
            ):
                return  # an imported name: the module rules decide (AG303)
            owner = self._receiver_class(receiver.id)
            if owner is not None:
                self.private_pending.append((node, name, owner))
                return
        self._private_refused(node, name)

    def _private_refused(self, node: ast.AST, name: str, why: str = "") -> None:
        hint = _PRIVATE_ATTRIBUTE_HINTS.get(name, "use the object's public API")
        self.report(
            node,
            "AG309",
            f"the private attribute {name!r} is refused here{why}: a library object's "
            f"internals can reach code no guard sees; {hint} (in the methods of your own "
            "classes, self._x and cls._x are fine)",
        )

    def _receiver_class(self, name: str) -> str | None:
        """The class whose method has ``name`` as its receiver here, or None."""
        for (params, declared_global), receiver in zip(
            reversed(self.scopes), reversed(self.scope_receivers), strict=True
        ):
            if name in declared_global:
                return None
            if name in params:
                if receiver is not None and receiver[0] == name:
                    return receiver[1]
                return None
        return None

    def _method_receiver(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
        """The first parameter of a method, when it can only be the instance or class.

        Not for static methods or unknown decorators, a parameter with a default (``C.m()``
        would bind it), or a name the body rebinds anywhere (``self = df``, ``nonlocal``).
        """
        for deco in node.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            if isinstance(target, ast.Attribute) and target.attr in ("setter", "getter", "deleter"):
                continue
            qualified = (
                target.id
                if isinstance(target, ast.Name) and target.id not in self.from_imports
                else self._qualified(target)
            )
            if qualified not in _RECEIVER_DECORATORS:
                return None
        args = node.args
        positional = [*args.posonlyargs, *args.args]
        if not positional or len(args.defaults) >= len(positional):
            return None
        first = positional[0].arg
        for stmt in node.body:
            for sub in ast.walk(stmt):
                if _binds(sub, first):
                    return None
        return first

    def _attribute_node(self, node: ast.Attribute, depth: int) -> None:
        self._attribute(node, depth, call=None)

    def _attribute(self, node: ast.Attribute, depth: int, *, call: ast.Call | None) -> None:
        chain: list[ast.Attribute] = []
        cur: ast.expr = node
        while isinstance(cur, ast.Attribute):
            chain.append(cur)
            cur = cur.value
        chain.reverse()
        extra = len(chain) - 1
        self.nodes += extra
        if self.nodes > self.max_nodes or depth + extra > self.max_depth:
            self.visit(chain[0], depth + extra)  # reports the limit and aborts
        for link in chain:
            self._attribute_name(link.attr, link)
        if self.policy.refuse_private_attributes:
            for link in chain:
                self._private_attribute(link.attr, link.value, link)
        outer = chain[-1]
        for link in chain[:-1]:
            if link.attr in _FORMAT_METHODS:  # `t.format.__call__(...)`: a bound method value
                self._format_receiver(link, None)
        if outer.attr in _FORMAT_METHODS:
            self._format_receiver(outer, call)
        elif outer.attr in _ATTRGETTERS and call is None:
            self._attrgetter_value(outer, outer.attr)
        elif outer.attr in ("main", "TestProgram") and call is None:
            qualified = self._qualified(outer)
            if qualified in _TEST_PROGRAMS:
                self._test_program_value(outer, qualified)
        store = not isinstance(node.ctx, ast.Load)
        if store and _normalize(outer.attr) == "__class__":
            self._class_write(outer)
        elif store and _normalize(outer.attr) == "__match_args__":
            self._match_args_write(outer)
        base_depth = depth + extra + 1
        if isinstance(cur, ast.Name):
            self._name(cur, attr_root=True)
            steps: list[tuple[str, ast.AST]] = [(link.attr, link) for link in chain]
            self._rooted(cur.id, steps, node, store, True)
        else:
            self.visit(cur, base_depth)

    def _rooted(
        self,
        root: str,
        steps: list[tuple[str, ast.AST]],
        node: ast.AST,
        store: bool,
        value_use: bool,
    ) -> None:
        """Apply (or defer) the module rules to attribute steps on the name ``root``."""
        if self.shadow_count.get(root) and self._shadowed(root):
            return  # a parameter or comprehension variable; its callers' values are checked
        if root in self.modules:
            self._module_chain(self.modules[root], True, steps, node, store, value_use)
        elif root in self.from_imports:
            self._module_chain(self.from_imports[root], False, steps, node, store, value_use)
        else:
            self.deferred.append((root, steps, node, store, value_use))

    # ----------------------------------------------------------------- scopes

    def _shadowed(self, name: str) -> bool:
        """Return whether ``name`` refers to a parameter or comprehension variable here."""
        for params, declared_global in reversed(self.scopes):
            if name in declared_global:
                return False
            if name in params:
                return True
        return False

    def _push_scope(self, params: frozenset[str], receiver: tuple[str, str] | None = None) -> None:
        self.scopes.append((params, set()))
        self.scope_receivers.append(receiver)
        counts = self.shadow_count
        for name in params:
            counts[name] = counts.get(name, 0) + 1

    def _pop_scope(self) -> None:
        params, _ = self.scopes.pop()
        self.scope_receivers.pop()
        counts = self.shadow_count
        for name in params:
            counts[name] -= 1

    @staticmethod
    def _params(args: ast.arguments) -> frozenset[str]:
        names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
        if args.vararg is not None:
            names.append(args.vararg.arg)
        if args.kwarg is not None:
            names.append(args.kwarg.arg)
        return frozenset(names)

    def _lambda(self, node: ast.Lambda, depth: int) -> None:
        inner = depth + 1
        self.visit(node.args, inner)  # defaults are evaluated in the enclosing scope
        self._push_scope(self._params(node.args))
        try:
            self.visit(node.body, inner)
        finally:
            self._pop_scope()

    def _comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp, depth: int
    ) -> None:
        inner = depth + 1
        generators = node.generators
        if not generators:  # pragma: no cover - the parser never produces this
            return
        self.nodes += 1
        # The first iterable is evaluated in the enclosing scope.
        self.visit(generators[0].iter, inner + 1)
        targets = frozenset(
            n.id for gen in generators for n in ast.walk(gen.target) if isinstance(n, ast.Name)
        )
        self._push_scope(targets)
        try:
            first = generators[0]
            self.visit(first.target, inner + 1)
            for cond in first.ifs:
                self.visit(cond, inner + 1)
            for gen in generators[1:]:
                self.visit(gen, inner)
            if isinstance(node, ast.DictComp):
                self.visit(node.key, inner)
                self.visit(node.value, inner)
            else:
                self.visit(node.elt, inner)
        finally:
            self._pop_scope()

    def _class_write(self, node: ast.AST) -> None:
        self.report(
            node,
            "AG301",
            "assigning or deleting '__class__' is refused; '__class__' may only be read",
        )

    def _module_chain(  # noqa: PLR0917 - internal, called from three places
        self,
        module: str,
        definite: bool,
        steps: list[tuple[str, ast.AST]],
        node: ast.AST,
        store: bool,
        value_use: bool,
    ) -> None:
        """Apply the module-attribute rules along a chain rooted at an imported name."""
        path = module
        is_module = definite
        policy = self.policy
        for attr, link in steps:
            name = _normalize(attr)
            if is_dunder(name):
                return
            problem = module_attribute_problem(path, name, policy)
            if problem is not None:
                self._module_problem(problem, path, name, link)
                return
            dotted = f"{path}.{name}"
            if is_known_module(dotted, policy):
                path, is_module = dotted, True
            elif (
                name in STDLIB_MODULE_NAMES
                and dotted not in SAME_NAME_NON_MODULES
                and path.partition(".")[0] in STDLIB_MODULE_NAMES
            ):
                # A standard-library module held by another one (``typing.operator``): the
                # user's own import may be a guarded copy (operator), so the library's is
                # refused. A third-party module's attribute of such a name is its own
                # (numpy.array, numpy.random): the run-time attribute guard refuses it if it
                # is a module off the allow-list.
                self._module_problem("AG304", path, name, link)
                return
            elif name[:1].islower():
                path, is_module = dotted, False
            else:
                path, is_module = dotted, False
                break
        if store:
            self.report(
                node,
                "AG306",
                f"changing attributes of the imported module {module!r} is refused; keep "
                "your own state in your own objects",
            )
        elif value_use and is_module and steps:
            self._module_value(node, path)

    def _module_problem(self, rule_id: str, module: str, name: str, node: ast.AST) -> None:
        if rule_id == "AG303":
            message = (
                f"{module}.{name} is a private attribute of a module and is refused; use "
                "the module's public API"
            )
        elif rule_id == "AG305":
            message = f"{module}.{name} starts processes and is refused in the sandbox"
        elif name in _STRING_EVAL_NAMES:
            rule_id = "AG206"
            message = f"{module}.{name} evaluates strings as code and is refused"
        elif name == "Formatter":
            rule_id = "AG403"
            message = (
                f"{module}.{name} walks attributes from format strings and is refused; "
                "use f-strings"
            )
        elif name in STDLIB_MODULE_NAMES and is_module_allowed(name, self.policy):
            message = (
                f"{module}.{name} is the module {name!r} reached through another module; "
                f"import {name} directly"
            )
        else:
            message = (
                f"{module}.{name} is a module off the allow-list or a refused attribute of "
                "an allowed module"
            )
        self.report(node, rule_id, message)

    def _format_receiver(self, attr: ast.Attribute, call: ast.Call | None) -> None:
        receiver = attr.value
        template: ast.expr | None = None
        if isinstance(receiver, ast.Constant) and isinstance(receiver.value, str):
            template = receiver
        elif (
            isinstance(receiver, ast.Name)
            and receiver.id == "str"
            and call is not None
            and call.args
            and isinstance(call.args[0], ast.Constant)
            and isinstance(call.args[0].value, str)
        ):
            template = call.args[0]
        if template is None:
            if isinstance(receiver, ast.Constant):
                return  # bytes and numbers have no .format; it fails at run time
            if call is not None and self.policy.runtime_format_guard:
                return  # a call: routed through the safe formatter (route_format_calls)
            self.report(
                attr,
                "AG402",
                f"str.{attr.attr} with a template that is not a string literal is refused; "
                "write the template as a literal or use an f-string",
            )
            return
        self._template(template, str(getattr(template, "value", "")))

    def _template(self, node: ast.AST, text: str) -> None:
        for rule_id, message in template_problems(text, self.policy):
            self.report(node, rule_id, message)

    # ----------------------------------------------------------------- calls

    def _call(self, node: ast.Call, depth: int) -> None:
        func = node.func
        inner = depth + 1
        if isinstance(func, ast.Name) and func.id in REFLECTION_BUILTINS:
            self._reflection_call(node, func, inner)
            return
        if isinstance(func, ast.Attribute):
            self.nodes += 1
            self._attribute(func, inner, call=node)
            last = func.attr
        elif isinstance(func, ast.Name):
            self.nodes += 1
            self._name(func, attr_root=False, called=True)
            last = self.from_imports.get(func.id, func.id).rsplit(".", 1)[-1]
        else:
            self.visit(func, inner)
            last = ""
        if last in ("main", "TestProgram") and isinstance(func, (ast.Name, ast.Attribute)):
            qualified = self._qualified(func)
            if qualified in _TEST_PROGRAMS:
                self._test_program_call(node, qualified)
        if last in _ATTRGETTERS:
            self._attrgetter(node, last)
        elif last in _WRAPPER_HELPERS and (
            len(node.args) > _WRAPPER_HELPERS[last]
            or any(kw.arg in (None, "assigned", "updated") for kw in node.keywords)
        ):
            self.report(
                node,
                "AG205",
                f"{last}() with custom attribute lists is refused (they name attributes to "
                "copy as strings); use the defaults",
            )
        self._logging_style(node, last)
        for arg in node.args:
            self.visit(arg, inner)
        for kw in node.keywords:
            self.visit(kw, inner)

    def _reflection_call(self, node: ast.Call, func: ast.Name, depth: int) -> None:
        self.nodes += 1
        self._name(func, attr_root=True, called=True)
        fname = func.id
        args = node.args
        target = args[0] if args else None
        name_arg = args[1] if len(args) > 1 else None
        literal: str | None = None
        if (
            isinstance(name_arg, ast.Constant)
            and isinstance(name_arg.value, str)
            and not any(isinstance(a, ast.Starred) for a in args[:2])
        ):
            literal = _normalize(name_arg.value)
            if fname in ("setattr", "delattr") and literal in ("__class__", "__match_args__"):
                self.report(
                    node,
                    "AG202",
                    f"{fname}() on {literal!r} is refused; it may only be read",
                )
            elif literal in _FORMAT_METHODS or literal in _ATTRGETTERS:
                self.report(
                    node,
                    "AG402" if literal in _FORMAT_METHODS else "AG205",
                    f"{fname}() with the name {literal!r} is refused: it would hide a "
                    "string-driven lookup from the checker; use attribute syntax",
                )
            elif is_forbidden_attribute(literal, self.policy):
                self.report(
                    node,
                    "AG202",
                    f"{fname}() with the attribute name {literal!r} is refused (it reaches "
                    "interpreter internals)",
                )
            elif literal in _STRING_EVAL_NAMES:
                self.report(node, "AG206", f"{literal!r} evaluates strings as code")
            elif self.policy.refuse_private_attributes:
                self._private_attribute(literal, target, node)
        elif not self.guard:
            self.report(
                node,
                "AG203",
                f"{fname}() with a computed attribute name is refused; use attribute syntax "
                "or a dict of handlers (a runner with a run-time attribute guard allows it)",
            )
        store = fname in ("setattr", "delattr")
        if isinstance(target, ast.Name):
            self.nodes += 1
            self._name(target, attr_root=True)
            steps: list[tuple[str, ast.AST]] = [(literal, node)] if literal is not None else []
            self._rooted(target.id, steps, node, store, False)
            rest = args[1:]
        else:
            rest = args
        for arg in rest:
            self.visit(arg, depth)
        for kw in node.keywords:
            self.visit(kw, depth)

    def _attrgetter(self, node: ast.Call, fname: str) -> None:
        args = node.args if fname == "attrgetter" else node.args[:1]
        if not args:
            return
        for arg in args:
            if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                self.report(
                    node,
                    "AG205",
                    f"{fname}() with a computed attribute name is refused; use a lambda with "
                    "attribute syntax",
                )
                return
            for raw in arg.value.split("."):
                part = _normalize(raw)
                if (
                    part.startswith("_")
                    or part in _FORMAT_METHODS
                    or is_forbidden_attribute(part, self.policy)
                ):
                    self.report(
                        node,
                        "AG205",
                        f"{fname}() with the name {arg.value!r} is refused (private or "
                        "internal attribute)",
                    )
                    return

    def _logging_style(self, node: ast.Call, last: str) -> None:
        """Refuse `{`-style logging.

        Its templates walk attributes in C (str.format), and a formatter's template can be
        swapped after the check (``fmt._style._fmt = ...``).
        """
        style: ast.expr | None = None
        for kw in node.keywords:
            if kw.arg == "style":
                style = kw.value
        if last == "Formatter" and len(node.args) >= 3:
            style = node.args[2]
        if style is None:
            return
        if isinstance(style, ast.Constant) and style.value in _SAFE_LOGGING_STYLES:
            return
        if (
            isinstance(style, ast.Constant)
            and style.value != "{"
            and last not in ("Formatter", "basicConfig")
        ):
            return  # some other API's `style=` option
        self.report(
            node,
            "AG405",
            "logging with style '{' (or a computed style) is refused: its templates walk "
            "attributes; use style='%' or style='$'",
        )

    # ----------------------------------------------------------------- imports

    def _import_refused(self, name: str) -> str:
        top = name.split(".", 1)[0]
        hint = _IMPORT_HINTS.get(name) or _IMPORT_HINTS.get(top)
        for module, more in _ALLOWED_MODULE_HINTS.get(top, ()):
            if module in self.policy.allowed_modules:
                hint = f"{hint}; {more}" if hint else more
        if hint is None and top not in STDLIB_MODULE_NAMES and _installed(top):
            hint = (
                "it is installed here but not allowed; an operator can allow it "
                "(pysandbox extra_modules, the server's --extra-modules)"
            )
        message = f"import of {name!r} is refused: it is not on the allowed module list"
        return f"{message}; {hint}" if hint else message

    def _import(self, node: ast.Import, depth: int) -> None:
        if self.in_class_body:
            self._class_body_import(node)
        for alias in node.names:
            self.nodes += 1
            name = alias.name
            if not is_module_allowed(name, self.policy):
                self.report(
                    alias if hasattr(alias, "lineno") else node,
                    "AG101",
                    self._import_refused(name),
                )
            self._binding(alias.asname, node, track=False)
            self._import_shadow(alias.asname or name.split(".", 1)[0], node)
            if alias.asname:
                self.modules[alias.asname] = name
            else:
                top = name.split(".", 1)[0]
                self.modules[top] = top

    def _import_from(self, node: ast.ImportFrom, depth: int) -> None:
        where: ast.AST
        if node.level:
            self.report(
                node,
                "AG102",
                "relative imports are refused: sandboxed code is a single script",
            )
            return
        if self.in_class_body:
            self._class_body_import(node)
        module = node.module or ""
        policy = self.policy
        module_ok = is_module_allowed(module, policy)
        for alias in node.names:
            self.nodes += 1
            where = alias if hasattr(alias, "lineno") else node
            name = alias.name
            if name == "*":
                self.report(
                    where,
                    "AG104",
                    f"`from {module} import *` is refused; import the names you use",
                )
                continue
            dotted = f"{module}.{name}"
            known = is_known_module(dotted, policy)
            if not module_ok:
                if not (known and is_module_allowed(dotted, policy)):
                    self.report(where, "AG101", self._import_refused(module))
            elif module == "__future__":
                if name not in FUTURE_FEATURES:
                    self.report(
                        where,
                        "AG103",
                        f"`from __future__ import {name}` is refused: only ordinary future "
                        "features are accepted",
                    )
            else:
                problem = module_attribute_problem(module, name, policy)
                if problem is None and is_forbidden_attribute(name, policy):
                    problem = "AG302"
                if problem is not None:
                    self._from_problem(problem, module, name, where)
            target = alias.asname or name
            self._binding(target, node, track=False)
            self._import_shadow(target, node)
            if known:
                self.modules[target] = dotted
            elif name in STDLIB_MODULE_NAMES and dotted not in SAME_NAME_NON_MODULES:
                self.modules[target] = name
            else:
                self.from_imports[target] = dotted

    def _import_shadow(self, name: str, node: ast.AST) -> None:
        if self.shadow_count.get(name) and self._shadowed(name):
            self.report(
                node,
                "AG307",
                f"an import rebinding the parameter {name!r} is refused; import under a "
                "different name",
            )

    def _from_problem(self, rule_id: str, module: str, name: str, where: ast.AST) -> None:
        if rule_id == "AG303":
            detail = "it is private"
        elif rule_id == "AG305":
            detail = "it starts processes or opens connections"
        elif rule_id == "AG302":
            detail = "it exposes frames or code"
        else:
            detail = "it is a module off the allow-list or a refused attribute"
        self.report(
            where,
            "AG103",
            f"`from {module} import {name}` is refused: {detail}",
        )

    # ----------------------------------------------------------------- definitions

    def _definition_name(self, name: str, node: ast.AST) -> None:
        if (
            is_dunder(name)
            and name not in self.policy.allowed_dunder_attributes
            and name not in DEFINABLE_DUNDERS
        ):
            self.report(
                node,
                "AG301",
                f"defining {name!r} is refused: it is a dunder outside the allow-list that "
                "the interpreter or the standard library reads (for example __annotations__ "
                "is evaluated by typing.get_type_hints)",
            )

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, depth: int) -> None:
        self._binding(node.name, node)
        self._definition_name(node.name, node)
        inner = depth + 1
        for deco in node.decorator_list:
            self.visit(deco, inner)
        for param in getattr(node, "type_params", ()):
            self.visit(param, inner)
        self.visit(node.args, inner)
        self._visit_annotation(node.returns, inner)
        outer = self.in_class_body
        receiver: tuple[str, str] | None = None
        if outer and self.class_stack:
            first = self._method_receiver(node)
            if first is not None:
                receiver = (first, self.class_stack[-1])
        self.in_class_body = False
        self._push_scope(self._params(node.args), receiver)
        try:
            for stmt in node.body:
                self.visit(stmt, inner)
        finally:
            self.in_class_body = outer
            self._pop_scope()

    def _class(self, node: ast.ClassDef, depth: int) -> None:
        self._binding(node.name, node, track=node.name in self.class_defs)
        self._definition_name(node.name, node)
        self.class_defs[node.name] = node
        inner = depth + 1
        for expr in (*node.decorator_list, *getattr(node, "type_params", ()), *node.bases):
            self.visit(expr, inner)
        for kw in node.keywords:
            self.visit(kw, inner)
        outer = self.in_class_body
        self.in_class_body = True
        self.class_stack.append(node.name)
        try:
            for stmt in node.body:
                self.visit(stmt, inner)
        finally:
            self.in_class_body = outer
            self.class_stack.pop()

    def _class_body_import(self, node: ast.AST) -> None:
        self.report(
            node,
            "AG101",
            "imports inside a class body are refused (the module would become a class "
            "attribute whose use cannot be checked); import at module level",
        )

    def _arg(self, node: ast.arg, depth: int) -> None:
        self._binding(node.arg, node)
        self._visit_annotation(node.annotation, depth + 1)

    def _assign(self, node: ast.Assign, depth: int) -> None:
        targets = node.targets
        if (
            len(targets) == 1
            and isinstance(targets[0], ast.Name)
            and targets[0].id == "__match_args__"
        ):
            self._match_args_value(targets[0], node.value)
        elif (
            len(targets) == 1
            and isinstance(targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and _callee_name(node.value.func) in ("namedtuple", "NamedTuple")
        ):
            self.namedtuple_defs[targets[0].id] = node.value
        self._generic(node, depth)

    def _match_args_value(self, target: ast.Name, value: ast.expr | None) -> None:
        """Accept `__match_args__ = ("x", "y")` in a class body when every name is public."""
        if not self.in_class_body or not isinstance(value, (ast.Tuple, ast.List)):
            return
        for elt in value.elts:
            if not (isinstance(elt, ast.Constant) and isinstance(elt.value, str)):
                return
            name = _normalize(elt.value)
            if name.startswith("_") or is_forbidden_attribute(name, self.policy):
                return
        self.match_args_target = target

    def _ann_assign(self, node: ast.AnnAssign, depth: int) -> None:
        if isinstance(node.target, ast.Name) and node.target.id == "__match_args__":
            self._match_args_value(node.target, node.value)
        inner = depth + 1
        self.visit(node.target, inner)
        self._visit_annotation(node.annotation, inner)
        if node.value is not None:
            self.visit(node.value, inner)

    def _except_handler(self, node: ast.ExceptHandler, depth: int) -> None:
        self._binding(node.name, node)
        self._generic(node, depth)

    def _global(self, node: ast.Global | ast.Nonlocal, depth: int) -> None:
        for name in node.names:
            self._binding(name, node)
        if isinstance(node, ast.Global) and self.scopes:
            self.scopes[-1][1].update(node.names)

    def _match_binding(self, node: ast.MatchAs | ast.MatchStar, depth: int) -> None:
        self._binding(node.name, node)
        self._generic(node, depth)

    def _match_mapping(self, node: ast.MatchMapping, depth: int) -> None:
        self._binding(node.rest, node)
        self._generic(node, depth)

    def _match_class(self, node: ast.MatchClass, depth: int) -> None:
        if node.patterns:
            if isinstance(node.cls, ast.Name):
                self.positional_patterns.append((node.cls.id, node))
            else:
                self._positional_refused(node)
        for attr in node.kwd_attrs:
            name = _normalize(attr)
            if is_dunder(name):
                self.report(
                    node,
                    "AG301",
                    f"a class pattern reading the dunder attribute {name!r} is refused; match "
                    "on public attributes",
                )
            else:
                self._attribute_name(name, node)
                if self.policy.refuse_private_attributes:
                    self._private_attribute(name, None, node)
        self._generic(node, depth)

    def _positional_refused(self, node: ast.MatchClass) -> None:
        self.report(
            node,
            "AG308",
            "positional sub-patterns are only accepted for builtin types and for classes "
            "defined by a plain class statement in this script (their __match_args__ names "
            "are read without checks); use keyword patterns such as Point(x=x)",
        )

    def _qualified(self, expr: ast.expr) -> str | None:
        """Resolve a Name or attribute chain to ``module.attr`` through the imports."""
        if isinstance(expr, ast.Name):
            if expr.id in self.bound_names or expr.id in self.class_defs:
                return None
            return self.from_imports.get(expr.id)
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if isinstance(expr, ast.Name) and expr.id in self.modules:
            if expr.id in self.bound_names:
                return None
            return ".".join([self.modules[expr.id], *reversed(parts)])
        return None

    def _safe_class(
        self, name: str, seen: set[str], decorators: frozenset[str] = _SAFE_CLASS_DECORATORS
    ) -> bool:
        """A class whose __match_args__ can only come from checked literals of this file.

        Its bases are this file's safe classes, builtins or ``_SAFE_BASES``: what AG309's
        receivers need too (with ``decorators`` accepted on it and its bases).
        """
        if name in seen:
            return False
        seen.add(name)
        node = self.class_defs.get(name)
        if node is None and name in self.namedtuple_defs:
            return self._safe_namedtuple(name, self.namedtuple_defs[name])
        if (
            node is None
            or name in self.bound_names
            or name in self.from_imports
            or name in self.modules
            or node.keywords
        ):
            return False
        for stmt in node.body:
            # dataclass and NamedTuple fields become __match_args__ names
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and is_forbidden_attribute(stmt.target.id, self.policy)
            ):
                return False
        for deco in node.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            if self._qualified(target) not in decorators:
                return False
        for base in node.bases:
            expr = base.value if isinstance(base, ast.Subscript) else base
            if isinstance(expr, ast.Name) and expr.id in self.class_defs:
                if not self._safe_class(expr.id, seen, decorators):
                    return False
            elif (
                isinstance(expr, ast.Name)
                and expr.id in _BUILTIN_NAMES
                and expr.id not in self.bound_names
                and expr.id not in self.from_imports
                and expr.id not in self.modules
            ):
                continue
            elif self._qualified(expr) not in _SAFE_BASES:
                return False
        return True

    def _safe_namedtuple(self, name: str, call: ast.Call) -> bool:
        """`P = namedtuple("P", "x y")` bound once, with literal public field names."""
        if (
            self.store_counts.get(name) != 1
            or name in self.class_defs
            or name in self.from_imports
            or name in self.modules
            or self._qualified(call.func) not in ("collections.namedtuple", "typing.NamedTuple")
            or len(call.args) != 2
            or any(kw.arg in (None, "field_names", "fields") for kw in call.keywords)
        ):
            return False
        spec = call.args[1]
        names: list[str] = []
        if isinstance(spec, ast.Constant) and isinstance(spec.value, str):
            names = spec.value.replace(",", " ").split()
        elif isinstance(spec, (ast.List, ast.Tuple)):
            for item in spec.elts:
                field = item
                if isinstance(item, (ast.Tuple, ast.List)) and item.elts:
                    field = item.elts[0]  # typing.NamedTuple("P", [("x", int)])
                if not (isinstance(field, ast.Constant) and isinstance(field.value, str)):
                    return False
                names.append(field.value)
        else:
            return False
        return all(
            not n.startswith("_") and not is_forbidden_attribute(_normalize(n), self.policy)
            for n in names
        )

    def _subscript(self, node: ast.Subscript, depth: int) -> None:
        if not self.annotation:
            self._generic(node, depth)
            return
        inner = depth + 1
        head = node.value
        kind = head.id if isinstance(head, ast.Name) else getattr(head, "attr", "")
        self.visit(head, inner)
        if kind == "Literal":
            # Literal["r", "w"] holds values, not forward references: not code.
            self._visit_plain(node.slice, inner)
        elif kind == "Annotated" and isinstance(node.slice, ast.Tuple) and node.slice.elts:
            self.nodes += 1
            self.visit(node.slice.elts[0], inner + 1)
            for meta in node.slice.elts[1:]:
                self._visit_plain(meta, inner + 1)
        else:
            self.visit(node.slice, inner)

    def _visit_plain(self, node: ast.AST, depth: int) -> None:
        """Visit outside annotation mode (strings there are data, not code)."""
        saved = self.annotation
        self.annotation = 0
        try:
            self.visit(node, depth)
        finally:
            self.annotation = saved

    def _type_param(self, node: ast.AST, depth: int) -> None:
        self._binding(getattr(node, "name", None), node)
        self._generic(node, depth)

    # ----------------------------------------------------------------- constants

    def _constant(self, node: ast.Constant, depth: int) -> None:
        if self.annotation and isinstance(node.value, str):
            self._string_annotation(node, node.value, depth)

    def _string_annotation(self, node: ast.Constant, text: str, depth: int) -> None:
        """A string annotation is code for get_type_hints/singledispatch: check it as code."""
        try:
            with _WARNINGS_LOCK, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = compile(text, "<annotation>", "eval", ast.PyCF_ONLY_AST, dont_inherit=True)
        except (SyntaxError, ValueError):
            return  # cannot be evaluated either
        except (RecursionError, MemoryError):
            self.report(
                node,
                "AG904",
                "a string annotation is too deeply nested or complex to analyse; simplify it",
            )
            return
        outer = self.location
        self.location = outer if outer is not None else node
        try:
            self.visit(tree, depth + 1)
        finally:
            self.location = outer

    # ----------------------------------------------------------------- end of walk

    def finish(self) -> None:
        """Apply module rules to uses that came before the import that bound the name."""
        for root, steps, node, store, value_use in self.deferred:
            if root in self.modules:
                self._module_chain(self.modules[root], True, steps, node, store, value_use)
            elif root in self.from_imports:
                self._module_chain(self.from_imports[root], False, steps, node, store, value_use)
        for name, node in self.value_uses.items():
            if name in self.modules:
                self._module_value(node, self.modules[name])
        for name, pattern in self.positional_patterns:
            unbound = (
                name not in self.bound_names
                and name not in self.class_defs
                and name not in self.from_imports
                and name not in self.modules
            )
            if name in _SELF_MATCHING and unbound and len(pattern.patterns) == 1:
                continue
            if not self._safe_class(name, set()):
                self._positional_refused(pattern)
        for node, attr, owner in self.private_pending:
            if not self._safe_class(owner, set(), _RECEIVER_CLASS_DECORATORS):
                self._private_refused(
                    node,
                    attr,
                    f" (the class {owner!r} has a base, decorator or keyword that is not this "
                    "script's own or a builtin, so self can be a library object)",
                )

    def violations(self) -> tuple[Violation, ...]:
        lines = self.source.splitlines()
        out = {
            (
                line,
                _char_col(lines, line, col),
                end_line,
                _char_col(lines, end_line, end_col),
                rule_id,
                message,
            )
            for line, col, end_line, end_col, rule_id, message in self.hits
        }
        return tuple(
            Violation(rule_id, message, line, col, end_line, end_col)
            for line, col, end_line, end_col, rule_id, message in sorted(out)
        )


def _binds(node: ast.AST, name: str) -> bool:
    """Return whether ``node`` (re)binds ``name`` in its scope or declares it global/nonlocal."""
    if isinstance(node, ast.Name):
        return node.id == name and type(node.ctx) is not ast.Load
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return name in node.names
    if isinstance(node, ast.alias):
        return (node.asname or node.name.partition(".")[0]) == name
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
        return node.name == name
    if isinstance(node, ast.MatchMapping):
        return node.rest == name
    return False


def _installed(top: str) -> bool:
    """Whether the top-level module ``top`` can be found on this interpreter's path.

    Only asked for a refused import (the message); finding a top-level spec runs no module
    code.
    """
    if not top.isidentifier():
        return False
    import importlib.util

    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def _callee_name(func: ast.expr) -> str:
    """The last name of a callee expression (``a.b.c`` -> ``c``), or an empty string."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _char_col(lines: list[str], line: int, byte_col: int) -> int:
    """Convert a 0-based UTF-8 byte offset on a 1-based line to a 1-based character column."""
    if 1 <= line <= len(lines):
        text = lines[line - 1]
        if not text.isascii():
            prefix = text.encode("utf-8", "surrogatepass")[:byte_col]
            return len(prefix.decode("utf-8", "replace")) + 1
    return byte_col + 1


# warnings.catch_warnings() swaps process-wide state: serialise it so that concurrent checks
# restore the filters they found (otherwise an "ignore" could be left installed for good).
_WARNINGS_LOCK = threading.Lock()

_CODING_RE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_LINE_END_RE = re.compile(r"\r\n|\r|\n")
_BLANK_OR_COMMENT_RE = re.compile(r"^[ \t\f]*(?:[#\r\n]|$)")
_UTF8_CODECS = frozenset({"utf-8", "utf-8-sig"})


def _coding_problem(source: str | bytes) -> str | None:
    """Return the declared codec when it is not UTF-8, else None.

    PEP 263: the declaration is on line 1, or on line 2 after a blank or comment line.
    """
    head = source[:1024]
    text = head.decode("latin-1") if isinstance(head, bytes) else head
    # Only \r\n, \r and \n end lines for the tokenizer (str.splitlines also splits on \x0c,
    # \x1c, \u2028, ... and would misplace line 2).
    lines = _LINE_END_RE.split(text, maxsplit=2)[:2]
    for index, line in enumerate(lines):
        match = _CODING_RE.match(line)
        if match:
            declared = match.group(1)
            try:
                name = codecs.lookup(declared).name
            except LookupError:
                return declared
            return None if name in _UTF8_CODECS else declared
        if index == 0 and not _BLANK_OR_COMMENT_RE.match(line):
            return None
    return None


def _parse(source: str | bytes, filename: str) -> ast.Module:
    with _WARNINGS_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = compile(source, filename, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    assert isinstance(tree, ast.Module)  # noqa: S101 - compile(..., "exec") returns a Module
    return tree


def _single(filename: str, rule_id: str, message: str, line: int = 1, col: int = 1) -> CheckResult:
    return CheckResult(
        ok=False,
        violations=(Violation(rule_id, message, line, col, line, col),),
        filename=filename,
    )


#: What an import refusal adds when another module is allowed: ``{refused top-level: ((allowed
#: module, hint), ...)}``. pickle is refused as a module (its data names callables to run); the
#: data-science libraries keep their own pickling (SECURITY.md "Native extension modules").
_ALLOWED_MODULE_HINTS: dict[str, tuple[tuple[str, str], ...]] = {
    "pickle": (
        (
            "pandas",
            "a DataFrame or Series keeps its types with df.to_pickle(path) and "
            "pd.read_pickle(path) (pandas' own pickling works where native extension modules "
            "are allowed: there the kernel layers are the boundary), or df.to_csv / df.to_json",
        ),
    ),
}
#: Functions a notebook provides that a plain interpreter does not (AG208), and what to use.
NOTEBOOK_FUNCTIONS = {"display": "print(value) shows it (print(df) or print(df.to_string()))"}
#: Standard-library modules named as examples of what is available (those the policy allows).
_EXAMPLE_MODULES = ("json", "csv", "math", "statistics", "datetime", "re", "collections")


def _notebook_line_hint(text: str, line: int, policy: Policy) -> str:
    """What to add to a syntax error on ``line`` when it is a notebook shell or magic line."""
    lines = text.splitlines()
    code = lines[line - 1].lstrip() if 0 < line <= len(lines) else ""
    if not code.startswith(("!", "%")):
        return ""
    tops = sorted({m.split(".")[0] for m in policy.allowed_modules if not m.startswith("_")})
    standard = STDLIB_MODULE_NAMES | {m.split(".")[0] for m in DEFAULT_ALLOWED_MODULES}
    extra = [name for name in tops if name not in standard]  # tomllib is not 3.10's
    examples = [name for name in _EXAMPLE_MODULES if name in tops]
    available = ", ".join([*extra, f"the standard library's {', '.join(examples)}, ..."])
    return (
        f"; line {line} is notebook syntax (a shell command '!...' or a magic '%...'), which a "
        "plain Python script does not have: remove it. Packages cannot be installed here; the "
        f"modules available are installed already: {available} (an import of another is "
        "refused naming it); plots need no %matplotlib"
    )


def _notebook_calls(tree: ast.AST) -> list[ast.Call]:
    """Calls of :data:`NOTEBOOK_FUNCTIONS` names the script binds nowhere (AG208)."""
    bound: set[str] = set()
    calls: list[ast.Call] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).partition(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in NOTEBOOK_FUNCTIONS
        ):
            calls.append(node)
    return [call for call in calls if call.func.id not in bound]  # type: ignore[attr-defined]


def check(
    source: str | bytes, policy: Policy | None = None, *, filename: str = "<sandbox>"
) -> CheckResult:
    """Check untrusted Python source against a policy, without running it.

    One pass over the AST. Nothing in ``source`` makes this raise: a syntax error, an
    oversized source, too many nodes or too deep nesting are violations like every rule hit.

    Args:
        source: The Python source text. ``bytes`` are accepted and decoded as Python does
            (PEP 263 coding cookie, default UTF-8).
        policy: What to allow; None means ``Policy()``, the safe default.
        filename: The name to report the source under (no file is read).

    Returns:
        A :class:`CheckResult` with every violation in source order.

    Raises:
        TypeError: If ``source`` is not ``str`` or ``bytes`` or ``policy`` is not a
            :class:`Policy` (caller mistakes, not bad input).

    Example:
        >>> check("import os").violations[0].rule_id
        'AG101'
    """
    if policy is None:
        policy = _DEFAULT
    elif not isinstance(policy, Policy):
        raise TypeError(f"policy must be an astguard.Policy, not {type(policy).__name__}")
    if not isinstance(source, (str, bytes)):
        raise TypeError(f"source must be str or bytes, not {type(source).__name__}")
    limit = policy.max_source_bytes
    if isinstance(source, bytes):
        size = len(source)
    elif len(source) * 4 <= limit:
        size = 0
    else:
        size = len(source.encode("utf-8", "surrogatepass"))
    if size > limit:
        return _single(
            filename,
            "AG902",
            f"the source is {size} bytes, over the limit of {limit} bytes; send a smaller script",
        )
    declared = _coding_problem(source)
    if declared is not None:
        return _single(
            filename,
            "AG906",
            f"the coding declaration {declared!r} is refused: sandboxed source must be UTF-8 "
            "(another codec would make the interpreter run different code than was checked); "
            "remove the declaration",
        )
    try:
        tree = _parse(source, filename)
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = exc.offset or 1
        text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
        hint = _notebook_line_hint(text, line, policy)
        return _single(filename, "AG901", f"syntax error: {exc.msg}{hint}", line, max(col, 1))
    except (ValueError, UnicodeError) as exc:
        return _single(filename, "AG901", f"the source cannot be parsed: {exc}")
    except (RecursionError, MemoryError):
        return _single(
            filename,
            "AG904",
            "the source is too deeply nested or complex to parse; simplify it",
        )
    except Exception as exc:  # fail closed on anything else the parser may raise
        return _single(
            filename,
            "AG900",
            f"the parser failed on this source ({type(exc).__name__}); the code is refused",
        )
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    checker = _Checker(policy, text)
    try:
        checker.visit(tree, 0)
        checker.finish()
        for call in _notebook_calls(tree):
            name = call.func.id  # type: ignore[attr-defined]
            checker.report(
                call,
                "AG208",
                f"{name}() is a notebook function that does not exist in a plain Python "
                f"script: {NOTEBOOK_FUNCTIONS[name]}",
            )
        folded = folded_bytes(tree)
        if folded > policy.max_folded_bytes:
            checker.report(
                tree,
                "AG907",
                f"the constant expressions of this code would expand to about {folded} bytes while "
                f"it is compiled, over the limit of {policy.max_folded_bytes}; build large "
                "strings, bytes and tuples when the code runs (from a variable, a loop or "
                "str.join)",
            )
    except _Abort:
        pass
    except (RecursionError, MemoryError):
        checker.report(
            tree,
            "AG904",
            "the code is nested too deeply to analyse; flatten it",
        )
    except Exception as exc:  # fail closed: a checker bug refuses, never crashes
        checker.report(
            tree,
            "AG900",
            f"internal error in astguard ({type(exc).__name__}); the code is refused (fail "
            "closed); please report this input",
        )
    return CheckResult(
        ok=not checker.hits,
        violations=checker.violations(),
        filename=filename,
    )


_DEFAULT = Policy()
