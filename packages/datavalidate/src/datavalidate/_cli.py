"""The ``datavalidate`` command: JSON files against a JSON Schema, CSV against a Table Schema.

``datavalidate json SCHEMA FILE...`` and ``datavalidate csv FILE... [--schema table.json]
[--type COLUMN=TYPE]... [--delimiter CHAR | --dialect sniff]``, like ``check-jsonschema``
and ``frictionless validate``.

Exit codes: 0 every file is valid; 1 some file is invalid; 2 the command could not be carried
out for some file or at all (bad arguments, unreadable file, text that is not JSON, an invalid
schema). Output is text (default) or JSON (``--output json``) on standard output.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from datavalidate._csv import delimiter_hint, encoding_hint, text_encoding, validate_csv
from datavalidate._csv_fields import TYPES
from datavalidate._json import compile as compile_schema
from datavalidate._json import default_registry
from datavalidate._numbers import NUMBER_MODES, parse_json
from datavalidate._report_limits import DEFAULT_MAX_ERRORS, MAX_ERRORS_LIMIT, check_max_errors
from datavalidate.exceptions import DataValidateError

__all__ = ["console", "main"]

EXIT_VALID, EXIT_INVALID, EXIT_ERROR = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="datavalidate",
        description="Validate JSON files against a JSON Schema, or CSV files against a Table "
        "Schema. Exit status: 0 all valid, 1 some file invalid, 2 an error.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    js = commands.add_parser("json", help="validate JSON files against a JSON Schema")
    js.add_argument(
        "schema", help="a schema file, or a built-in schema name (config, user, dataset)"
    )
    js.add_argument("files", nargs="+", metavar="FILE", help="JSON files to validate")
    js.add_argument("--draft", help="force a draft (4, 6, 7, 2019-09, 2020-12)")
    js.add_argument(
        "--formats",
        choices=("assert", "annotate"),
        default="assert",
        help="assert formats (default) or treat them as annotations",
    )
    js.add_argument("--numbers", choices=NUMBER_MODES, default="exact", help="number semantics")
    cs = commands.add_parser("csv", help="validate CSV files against a Table Schema or types")
    cs.add_argument("files", nargs="+", metavar="FILE", help="CSV files to validate")
    cs.add_argument("--schema", help="a Table Schema file (JSON)")
    cs.add_argument(
        "--type",
        action="append",
        default=[],
        metavar="COLUMN=TYPE",
        help=f"declare a column's type ({', '.join(TYPES)}); repeatable",
    )
    cs.add_argument("--required", action="append", default=[], metavar="COLUMN")
    delimiter = cs.add_mutually_exclusive_group()
    delimiter.add_argument(
        "--delimiter",
        metavar="CHAR",
        help='the delimiter, one character (default ","; "\\t" or "tab" for a tab)',
    )
    delimiter.add_argument("--dialect", choices=("sniff",), help="sniff the delimiter")
    cs.add_argument(
        "--encoding",
        default="utf-8",
        metavar="NAME",
        help='the files\' text encoding (default "utf-8"; for example "latin-1", "cp1252")',
    )
    for sub in (js, cs):
        sub.add_argument("--output", choices=("text", "json"), default="text")
        sub.add_argument(
            "--max-errors",
            type=int,
            default=DEFAULT_MAX_ERRORS,
            metavar="N",
            help=f"errors listed per file, 0 to {MAX_ERRORS_LIMIT} (default "
            f"{DEFAULT_MAX_ERRORS}); the counts cover them all",
        )
    return parser


def _read_json(path: str, *, numbers: str) -> Any:
    return parse_json(pathlib.Path(path).read_bytes(), numbers=numbers)


def _json_command(args: argparse.Namespace) -> list[dict[str, Any]]:
    if pathlib.Path(args.schema).is_file():
        schema: Any = _read_json(args.schema, numbers="ieee")  # schema numbers: floats
    elif args.schema in default_registry():
        schema = args.schema
    else:
        names = ", ".join(default_registry().names())
        raise _Usage(
            f"schema {args.schema!r} is neither a file nor a built-in schema name ({names})"
        )
    compiled = compile_schema(
        schema,
        draft=args.draft,
        check_formats=args.formats == "assert",
        numbers=args.numbers,
    )
    results = []
    for path in args.files:
        try:
            instance = _read_json(path, numbers=args.numbers)
            report = compiled.validate(instance, max_errors=args.max_errors)
        except (OSError, ValueError, DataValidateError) as exc:
            results.append({"path": path, "error": _describe(exc)})
            continue
        results.append({"path": path, "valid": report.valid, "report": report.to_dict()})
    return results


def _columns(pairs: Sequence[str]) -> dict[str, str]:
    columns: dict[str, str] = {}
    for pair in pairs:
        name, equals, type_name = pair.partition("=")
        if not equals or not name or type_name not in TYPES:
            raise _Usage(f"--type {pair!r}: use COLUMN=TYPE with TYPE one of {', '.join(TYPES)}")
        columns[name] = type_name
    return columns


def _csv_command(args: argparse.Namespace) -> list[dict[str, Any]]:
    table_schema = None
    if args.schema is not None:
        try:
            table_schema = _read_json(args.schema, numbers="ieee")
        except (OSError, ValueError) as exc:
            raise _Usage(f"--schema {args.schema}: {_describe(exc)}") from None
    constraints = _columns(args.type) or None
    dialect: str | dict[str, str] | None = args.dialect
    if args.delimiter is not None:
        char = "\t" if args.delimiter in ("\\t", "tab") else args.delimiter
        if len(char) != 1 or char in '\r\n"':
            raise _Usage(
                f"--delimiter {args.delimiter!r}: give one character other than a quote or a "
                'line break ("\\t" or "tab" for a tab)'
            )
        dialect = {"delimiter": char}
    try:
        encoding = text_encoding(args.encoding, option="--encoding")
    except ValueError as exc:
        raise _Usage(str(exc)) from None
    results = []
    for path in args.files:
        try:
            report = validate_csv(
                pathlib.Path(path),
                table_schema=table_schema,
                constraints=constraints,
                required_headers=args.required,
                dialect=dialect,
                encoding=encoding,
                max_errors=args.max_errors,
            )
        except OSError as exc:
            results.append({"path": path, "error": _describe(exc)})
            continue
        results.append({"path": path, "valid": report.valid, "report": report.to_dict()})
    return results


class _Usage(Exception):
    """The command cannot run at all (exit status 2)."""


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return f"cannot read: {exc.strerror or exc}"
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    return str(exc)


def _flag_hint(report: dict[str, Any], encoding: str | None) -> dict[str, Any]:
    """A CSV report whose hints (delimiter, encoding) name the command line's flags.

    The library's report carries each hint once, in its warnings, worded for the MCP tool's
    ``delimiter`` and ``encoding`` arguments; on the command line they name
    ``--delimiter``/``--dialect sniff`` and ``--encoding``.

    Args:
        report: The library's report as data.
        encoding: The canonical name of the encoding the file was read with, or ``None``.

    Returns:
        The report to print: a copy when it carried a hint, else ``report`` itself.
    """
    replace: dict[str, str] = {}
    columns: list[dict[str, Any]] = report.get("columns") or []
    if len(columns) == 1:
        library = delimiter_hint(columns[0]["name"])
        if library:
            ours = delimiter_hint(columns[0]["name"], give="--delimiter", sniff="--dialect sniff")
            replace[library] = ours
    if encoding is not None:
        replace[encoding_hint(encoding)] = encoding_hint(encoding, give="--encoding")
    warnings: list[str] = report.get("warnings") or []
    if not any(w in replace for w in warnings):
        return report
    return {**report, "warnings": [replace.get(w, w) for w in warnings]}


def _print_text(results: list[dict[str, Any]], out: TextIO, encoding: str | None) -> None:
    for result in results:
        path = result["path"]
        if "error" in result:
            print(f"{path}: error: {result['error']}", file=out)
            continue
        report = result["report"]
        report = _flag_hint(report, encoding)
        warnings = [f"  warning: {text}" for text in report.get("warnings", ())]
        if result["valid"]:
            print(f"{path}: valid", file=out)
            for line in warnings:
                print(line, file=out)
            continue
        count = report["error_count"]
        print(f"{path}: invalid ({count} error{'s' if count != 1 else ''})", file=out)
        for error in report["errors"]:
            if "instance_location" in error:  # JSON
                where = error["instance_location"] or "(root)"
                print(f"  {where}: {error['message']} [{error['keyword']}]", file=out)
            else:  # CSV
                where = f"row {error['row']}" if error["row"] is not None else "file"
                if error["column"] is not None:
                    where += f", column {error['column']!r}"
                print(f"  {where}: {error['message']} [{error['code']}]", file=out)
        if report["truncated"]:
            print(f"  ... {count - len(report['errors'])} more", file=out)
            _print_summary(report.get("error_summary"), count, out)
        for line in warnings:
            print(line, file=out)


def _print_summary(summary: dict[str, dict[str, int]] | None, count: int, out: TextIO) -> None:
    """Print a CSV report's ``error_summary``: one line per column, its codes and counts.

    Printed when the listing was cut (with every error listed the summary says nothing new);
    a JSON report has none, and ``--output json`` carries it whole.
    """
    if not summary:
        return
    print(f"  errors by column (all {count}):", file=out)
    for column, codes in summary.items():
        name = repr(column) if column else "(no one column)"
        counts = ", ".join(f"{code} {n}" for code, n in codes.items())
        print(f"    {name}: {counts}", file=out)


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run the command line.

    Args:
        argv: The arguments (without the program name); ``sys.argv[1:]`` when ``None``.
        out: Where the results go (standard output by default); usage errors go to stderr.

    Returns:
        The exit status: 0 all valid, 1 some file invalid, 2 an error.
    """
    stream = out if out is not None else sys.stdout
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse prints the usage message itself
        return EXIT_ERROR if exc.code else EXIT_VALID
    try:
        check_max_errors(args.max_errors, option="--max-errors")
    except ValueError as exc:
        parser.print_usage(sys.stderr)
        print(f"datavalidate: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    try:
        results = _json_command(args) if args.command == "json" else _csv_command(args)
    except (_Usage, OSError, ValueError, DataValidateError) as exc:
        print(f"datavalidate: error: {_describe(exc)}", file=sys.stderr)
        return EXIT_ERROR
    if args.output == "json":
        valid = all(r.get("valid") is True for r in results)
        json.dump({"valid": valid, "files": results}, stream, indent=2, ensure_ascii=False)
        stream.write("\n")
    else:
        # The CSV files were read with --encoding, checked by then (a JSON file is UTF-8).
        encoding = text_encoding(args.encoding) if args.command == "csv" else None
        _print_text(results, stream, encoding)
    if any("error" in r for r in results):
        return EXIT_ERROR
    return EXIT_VALID if all(r["valid"] for r in results) else EXIT_INVALID


#: Exit status when the reader of standard output went away (``datavalidate ... | head``):
#: what a shell reports for a process ended by ``SIGPIPE`` (128 + 13).
EXIT_BROKEN_PIPE = 141


def console() -> None:
    """The ``datavalidate`` console script: :func:`main`, then exit with its status.

    When the reader of standard output goes away it exits with :data:`EXIT_BROKEN_PIPE` and
    no traceback, pointing standard output at ``/dev/null`` so the interpreter's last flush
    does not fail again (the recipe of Python's ``signal`` documentation).
    """
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        status = EXIT_BROKEN_PIPE
    sys.exit(status)
