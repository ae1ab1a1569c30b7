"""Command line: ``astguard FILE... | -`` checks files like a linter.

Exit status: 0 when every file is clean, 1 when any file has a violation, 2 on a usage or
I/O error (a file that cannot be read is reported on stderr; the others are still checked).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from astguard.__about__ import __version__
from astguard._checker import check
from astguard._policy import Policy
from astguard._result import CheckResult
from astguard._rules import RULES, rule_table_markdown

__all__ = ["main"]

EXIT_CLEAN = 0
EXIT_VIOLATIONS = 1
EXIT_ERROR = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="astguard",
        description="Statically check untrusted Python source against the astguard policy.",
        epilog="Exit status: 0 clean, 1 violations found, 2 usage or I/O error.",
    )
    parser.add_argument("files", nargs="*", metavar="FILE", help="files to check; '-' is stdin")
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="output format (default: text, one 'path:line:col: RULE message' per line)",
    )
    parser.add_argument("--list-rules", action="store_true", help="print the rule table and exit")
    parser.add_argument(
        "--allow-module",
        action="append",
        default=[],
        metavar="NAME",
        help="also allow importing this module (repeatable)",
    )
    parser.add_argument(
        "--runtime-attribute-guard",
        action="store_true",
        help="accept computed getattr()-family names (the runner guards them at run time)",
    )
    parser.add_argument("--version", action="version", version=f"astguard {__version__}")
    return parser


def _read(path: str, limit: int) -> bytes:
    """Read at most ``limit + 1`` bytes of a regular file or stdin (so size limits apply)."""
    if path == "-":
        return sys.stdin.buffer.read(limit + 1)
    file = Path(path)
    if not file.is_file():
        raise OSError("not a regular file")
    with file.open("rb") as fh:
        return fh.read(limit + 1)


def _json_out(results: list[tuple[str, CheckResult]], errors: list[dict[str, str]]) -> str:
    payload: dict[str, Any] = {
        "ok": all(r.ok for _, r in results) and not errors,
        "results": [{**r.to_dict(), "path": path} for path, r in results],
        "errors": errors,
    }
    return json.dumps(payload, indent=2)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Args:
        argv: The arguments without the program name; None means ``sys.argv[1:]``.

    Returns:
        The exit status: 0 clean, 1 violations, 2 usage or I/O error.
    """
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors and 0 on --help/--version
        return int(exc.code) if isinstance(exc.code, int) else EXIT_ERROR
    if args.list_rules:
        if args.format == "json":
            print(json.dumps([rule.to_dict() for rule in RULES.values()], indent=2))
        else:
            print(rule_table_markdown(), end="")
        return EXIT_CLEAN
    if not args.files:
        parser.print_usage(sys.stderr)
        print("astguard: error: give at least one FILE or '-'", file=sys.stderr)
        return EXIT_ERROR
    try:
        policy = Policy().with_modules(*args.allow_module)
    except ValueError as exc:
        print(f"astguard: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.runtime_attribute_guard:
        policy = policy.with_runtime_attribute_guard()
    results: list[tuple[str, CheckResult]] = []
    errors: list[dict[str, str]] = []
    for path in args.files:
        display = "<stdin>" if path == "-" else path
        try:
            data = _read(path, policy.max_source_bytes)
        except OSError as exc:
            message = exc.strerror if exc.strerror else str(exc)
            errors.append({"path": display, "error": message})
            print(f"astguard: error: {display}: {message}", file=sys.stderr)
            continue
        result = check(data, policy, filename=display)
        results.append((display, result))
        if args.format == "text":
            for v in result.violations:
                print(f"{display}:{v.line}:{v.col}: {v.rule_id} {v.message}")
    if args.format == "json":
        print(_json_out(results, errors))
    if errors:
        return EXIT_ERROR
    return EXIT_CLEAN if all(r.ok for _, r in results) else EXIT_VIOLATIONS


if __name__ == "__main__":
    sys.exit(main())
