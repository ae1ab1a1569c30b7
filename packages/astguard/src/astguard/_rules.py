"""The rule table: stable rule ids, their family, a summary and an example each.

Rule ids never change meaning once released; a retired rule keeps its id reserved.
Families: ``AG1xx`` imports, ``AG2xx`` builtins and reflection, ``AG3xx`` attributes,
``AG4xx`` format strings, ``AG9xx`` syntax and limits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RULES", "Rule", "rule_table_markdown"]


@dataclass(frozen=True)
class Rule:
    """One documented rule of the checker.

    Attributes:
        rule_id: The stable id, for example ``"AG101"``.
        family: The family name (``imports``, ``builtins``, ``attributes``, ``format``,
            ``syntax``).
        summary: What the rule refuses, in one sentence.
        example: A short source snippet the rule refuses.
    """

    rule_id: str
    family: str
    summary: str
    example: str

    def to_dict(self) -> dict[str, Any]:
        """Return the rule as JSON-compatible data.

        Returns:
            A dict with the keys ``rule_id``, ``family``, ``summary`` and ``example``.
        """
        return {
            "rule_id": self.rule_id,
            "family": self.family,
            "summary": self.summary,
            "example": self.example,
        }


_RULE_LIST = (
    Rule(
        "AG101",
        "imports",
        "Import of a module that is not on the policy's allow-list (any spelling: "
        "`import a.b as c`, `from a import b`), or below a denied or private name.",
        "import os",
    ),
    Rule(
        "AG102",
        "imports",
        "Relative import: sandboxed code is a single script, not a package.",
        "from . import helpers",
    ),
    Rule(
        "AG103",
        "imports",
        "`from m import name` where the name is private, is a module off the allow-list, "
        "or is a refused attribute of the module.",
        "from logging import os",
    ),
    Rule(
        "AG104",
        "imports",
        "Star import: the names it binds cannot be checked.",
        "from math import *",
    ),
    Rule(
        "AG201",
        "builtins",
        "Use of a builtin that reaches code objects, frames, namespaces or the interpreter "
        "(exec, eval, compile, __import__, globals, locals, vars, breakpoint, help, input, "
        "memoryview, ...), called or not.",
        "runner = exec",
    ),
    Rule(
        "AG202",
        "builtins",
        "getattr/setattr/delattr/hasattr with a literal name that is a refused attribute "
        "(dunder outside the allow-list, frame or code internals, a module's private name).",
        "getattr(f, '__globals__')",
    ),
    Rule(
        "AG203",
        "builtins",
        "getattr/setattr/delattr/hasattr with a computed name, unless the policy says a "
        "run-time attribute guard is installed.",
        "getattr(obj, name)",
    ),
    Rule(
        "AG204",
        "builtins",
        "getattr/setattr/delattr/hasattr used as a value (aliased or passed on), unless the "
        "policy says a run-time attribute guard is installed.",
        "g = getattr",
    ),
    Rule(
        "AG205",
        "builtins",
        "String-driven reflection: operator.attrgetter/methodcaller with a refused, private "
        "or computed name; unittest.main/TestProgram used as a value or with string-driven "
        "test selection (module=, defaultTest=, argv= naming tests).",
        "operator.attrgetter('__globals__')",
    ),
    Rule(
        "AG206",
        "builtins",
        "Helpers that evaluate strings as code (typing.get_type_hints, typing.ForwardRef, "
        "string.Formatter internals, ...).",
        "typing.get_type_hints(f)",
    ),
    Rule(
        "AG207",
        "builtins",
        "A special module-level name that exposes the interpreter (__builtins__, __loader__, "
        "__spec__, __build_class__, ...) or a dunder name outside the allow-list.",
        "__builtins__['exec']",
    ),
    Rule(
        "AG208",
        "builtins",
        "A call of a notebook-only function the script never defines (display): it does not "
        "exist in a plain interpreter; print() shows a value.",
        "display(df)",
    ),
    Rule(
        "AG301",
        "attributes",
        "Attribute access to a dunder outside the allow-list (including class-pattern "
        "keywords in `match`).",
        "().__class__.__base__.__subclasses__()",
    ),
    Rule(
        "AG302",
        "attributes",
        "Frame, code, generator, coroutine and traceback internals that are not dunders.",
        "gen.gi_frame.f_back.f_globals",
    ),
    Rule(
        "AG303",
        "attributes",
        "Private (underscore) attribute of an imported module, through any attribute chain.",
        "random._os",
    ),
    Rule(
        "AG304",
        "attributes",
        "Attribute of an imported module that is itself a module off the allow-list, or a "
        "refused attribute of an allowed module.",
        "asyncio.events.os",
    ),
    Rule(
        "AG305",
        "attributes",
        "Process-spawning and network-opening APIs (create_subprocess_*, subprocess_exec, "
        "open_connection, start_server, system, popen, ...).",
        "asyncio.create_subprocess_shell('id')",
    ),
    Rule(
        "AG306",
        "attributes",
        "Assignment to or deletion of an attribute of an imported module (monkey-patching).",
        "random.random = lambda: 4",
    ),
    Rule(
        "AG307",
        "attributes",
        "A module object used as a value (assigned, passed, returned) instead of through "
        "an attribute: its attributes could no longer be checked.",
        "m = random",
    ),
    Rule(
        "AG308",
        "attributes",
        "Positional sub-patterns in a class pattern, unless the class is a builtin type or a "
        "plain class statement of this script: the names in `__match_args__` are read "
        "without checks, so `__match_args__` may also only be set to a literal in a class body.",
        "case Planted(g): ...",
    ),
    Rule(
        "AG309",
        "attributes",
        "When the policy refuses private attributes (refuse_private_attributes; pysandbox's "
        "data-science profile): `x._name` read, assigned or deleted (also a literal "
        "getattr name or a class-pattern keyword) on anything but the self/cls parameter of a "
        "method of this script's own class, except documented public names (namedtuple's "
        "_asdict/_replace/..., _repr_html_ and the other display hooks).",
        "df._mgr.apply('__reduce_ex__', protocol=4)",
    ),
    Rule(
        "AG401",
        "format",
        "Format template whose field walks a refused or private attribute, or a refused item key.",
        "'{0.__class__}'.format(x)",
    ),
    Rule(
        "AG402",
        "format",
        "str.format/format_map with a template that is not a string literal, unless the "
        "policy says the runner routes such calls through a safe formatter "
        "(runtime_format_guard: then only a bound t.format used as a value is refused).",
        "template.format(x)",
    ),
    Rule(
        "AG403",
        "format",
        "string.Formatter and its field-walking methods (vformat, get_field, ...).",
        "string.Formatter().vformat(t, (x,), {})",
    ),
    Rule(
        "AG404",
        "format",
        "Format template that does not parse (refused rather than guessed).",
        "'{0.}'.format(x)",
    ),
    Rule(
        "AG405",
        "format",
        "logging `{`-style formatting (its templates walk attributes in C and a formatter's "
        "template can be replaced after the check), or a computed logging style.",
        "logging.Formatter('{message}', style='{')",
    ),
    Rule(
        "AG900",
        "syntax",
        "Internal error of the checker on this input: the code is refused (fail closed).",
        "(an input that triggers a checker bug)",
    ),
    Rule(
        "AG901",
        "syntax",
        "The source does not parse (syntax error, null byte, undecodable bytes); a notebook line "
        "(`!pip install x`, `%matplotlib inline`) is named as such.",
        "def f(:",
    ),
    Rule(
        "AG902",
        "syntax",
        "The source is larger than the policy's limit in bytes (UTF-8).",
        "(a 2 MB script)",
    ),
    Rule(
        "AG903",
        "syntax",
        "The source has more AST nodes than the policy's limit.",
        "x = [0, 0, 0, ...]  # 10**6 elements",
    ),
    Rule(
        "AG904",
        "syntax",
        "The AST is nested deeper than the policy's limit.",
        "x = 1 + (1 + (1 + ...))",
    ),
    Rule(
        "AG905",
        "syntax",
        "An AST node type with no rule (default deny: syntax of a future Python is refused "
        "until reviewed).",
        "(a node type added after Python 3.13)",
    ),
    Rule(
        "AG906",
        "syntax",
        "A PEP 263 coding declaration other than UTF-8: the interpreter would decode a file "
        "into different code than the text that was checked.",
        "# -*- coding: utf-7 -*-",
    ),
    Rule(
        "AG907",
        "syntax",
        "Constant expressions that the interpreter's constant folding would expand to more "
        "bytes than the policy's limit while compiling (intermediates included).",
        "x = 'a' * 4096 + 'b' * 4096 + ...  # 110 terms: 100 MB at compile time",
    ),
)

RULES: dict[str, Rule] = {rule.rule_id: rule for rule in _RULE_LIST}
"""Every rule, keyed by id, in id order."""


def rule_table_markdown() -> str:
    """Render the rule table as a Markdown table (used for the README and ``--list-rules``).

    Returns:
        The table text, one line per rule, ending with a newline.
    """
    lines = ["| id | family | refuses | example |", "|---|---|---|---|"]
    for rule in RULES.values():
        example = rule.example.replace("|", "\\|")
        lines.append(f"| {rule.rule_id} | {rule.family} | {rule.summary} | `{example}` |")
    return "\n".join(lines) + "\n"
