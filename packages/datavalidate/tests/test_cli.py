"""The ``datavalidate`` command line: JSON and CSV, text and JSON output, exit codes 0/1/2."""

from __future__ import annotations

import io
import json
import pathlib
import subprocess
import sys
from typing import Any

import pytest

from _support import bad_rows_csv
from datavalidate._cli import main

SCHEMA = {
    "type": "object",
    "required": ["price"],
    "properties": {"price": {"multipleOf": 0.01}, "email": {"format": "email"}},
}


@pytest.fixture
def files(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    (tmp_path / "ok.json").write_text('{"price": 19.99, "email": "bob@example"}')
    (tmp_path / "ok2.json").write_text('{"price": 123456.78}')
    (tmp_path / "bad.json").write_text('{"price": 19.995, "email": "a@"}')
    (tmp_path / "inf.json").write_text('{"price": -1e999}')
    (tmp_path / "broken.json").write_text('{"price": ')
    (tmp_path / "table.json").write_text(
        json.dumps(
            {
                "fields": [
                    {"name": "id", "type": "integer", "constraints": {"unique": True}},
                    {"name": "amount", "type": "number", "groupChar": " ", "decimalChar": ","},
                ]
            }
        )
    )
    (tmp_path / "ok.csv").write_text('id,amount\n1,"1 234,5"\n2,7\n')
    (tmp_path / "bad.csv").write_text('id,amount\n1,"1 234,5"\n1,x\n')
    return tmp_path


def run(*args: str | pathlib.Path) -> tuple[int, str]:
    out = io.StringIO()
    code = main([str(a) for a in args], out=out)
    return code, out.getvalue()


def test_json_valid_files(files: pathlib.Path) -> None:
    code, text = run("json", files / "schema.json", files / "ok.json", files / "ok2.json")
    assert code == 0
    assert text.splitlines() == [f"{files / 'ok.json'}: valid", f"{files / 'ok2.json'}: valid"]


def test_json_invalid_file(files: pathlib.Path) -> None:
    code, text = run("json", files / "schema.json", files / "ok.json", files / "bad.json")
    assert code == 1
    assert text.splitlines()[1:] == [
        f"{files / 'bad.json'}: invalid (2 errors)",
        "  /email: \"a@\" is not a 'email' [format]",
        "  /price: 19.995 is not a multiple of 0.01 [multipleOf]",
    ]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("inf.json", "-1e999 is refused"),
        ("broken.json", "not JSON: Expecting value at line 1 column 11"),
        ("missing.json", "cannot read"),
    ],
)
def test_json_errors_exit_2(files: pathlib.Path, name: str, message: str) -> None:
    code, text = run("json", files / "schema.json", files / "bad.json", files / name)
    assert code == 2
    assert message in text.splitlines()[-1]


def test_json_output_and_options(files: pathlib.Path) -> None:
    code, text = run(
        "json",
        files / "schema.json",
        files / "bad.json",
        "--output",
        "json",
        "--formats",
        "annotate",
        "--numbers",
        "ieee",
    )
    assert code == 1
    data: dict[str, Any] = json.loads(text)
    assert data["valid"] is False
    report = data["files"][0]["report"]
    assert [e["keyword"] for e in report["errors"]] == ["multipleOf"]  # formats annotate
    code, _ = run("json", files / "schema.json", files / "ok.json", "--numbers", "ieee")
    assert code == 1  # 19.99 is not a binary64 multiple of 0.01


def test_json_builtin_schema_name(files: pathlib.Path) -> None:
    (files / "user.json").write_text(json.dumps({"id": "x"}))
    code, text = run("json", "user", files / "user.json")
    assert code == 1
    assert "required" in text


@pytest.mark.parametrize(
    "args",
    [
        ("json", "no-such-schema", "x.json"),
        ("json",),
        ("yaml", "x"),
        ("csv", "x.csv", "--type", "id"),
        ("csv", "x.csv", "--type", "id=int"),
        ("json", "user", "x.json", "--max-errors", "-1"),
    ],
)
def test_usage_errors_exit_2(args: tuple[str, ...]) -> None:
    assert run(*args)[0] == 2


def test_invalid_schema_exits_2(files: pathlib.Path) -> None:
    (files / "wrong.json").write_text('{"type": "nope"}')
    assert run("json", files / "wrong.json", files / "ok.json")[0] == 2


def test_csv_with_a_table_schema(files: pathlib.Path) -> None:
    code, text = run("csv", files / "ok.csv", "--schema", files / "table.json")
    assert (code, text) == (0, f"{files / 'ok.csv'}: valid\n")
    code, text = run("csv", files / "ok.csv", files / "bad.csv", "--schema", files / "table.json")
    assert code == 1
    assert text.splitlines()[1:] == [
        f"{files / 'bad.csv'}: invalid (2 errors)",
        "  row 3, column 'id': value repeats an earlier value of unique column 'id' [unique-error]",
        "  row 3, column 'amount': 'x' is not a valid number [type-error]",
    ]


def test_csv_with_types_and_json_output(files: pathlib.Path) -> None:
    code, text = run(
        "csv",
        files / "bad.csv",
        "--type",
        "id=integer",
        "--type",
        "amount=string",
        "--required",
        "id",
        "--output",
        "json",
    )
    assert code == 0
    data = json.loads(text)
    assert data["valid"] is True
    assert [c["type"] for c in data["files"][0]["report"]["columns"]] == ["integer", "string"]
    code, text = run("csv", files / "bad.csv", "--required", "name")
    assert code == 1
    assert "missing-header" in text


def test_csv_unreadable_file_exits_2(files: pathlib.Path) -> None:
    code, text = run("csv", files / "ok.csv", files / "none.csv")
    assert code == 2
    assert "cannot read" in text


@pytest.mark.e2e
def test_python_dash_m(files: pathlib.Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "datavalidate",
            "json",
            str(files / "schema.json"),
            str(files / "bad.json"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "invalid (2 errors)" in done.stdout


def test_csv_delimiter_option_and_warnings(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "semi.csv"
    path.write_text("id;age\n1;x\n")
    # Read with the default comma and no rules: valid, with both warnings printed.
    code, text = run("csv", path)
    assert code == 0
    lines = text.splitlines()
    assert lines[0] == f"{path}: valid"
    assert lines[1].startswith("  warning: no rules were given")
    hint = (
        "  warning: the header was read as the single column 'id;age' with the default "
        'delimiter ","; if the file is semicolon-separated, give --delimiter ";" (or --dialect '
        "sniff)"
    )
    assert lines[2:] == [hint]
    # Missing columns: each error names the header, the hint (in flag form) is printed once.
    code, text = run("csv", path, "--required", "age", "--required", "name")
    assert code == 1
    assert text.splitlines()[1:] == [
        "  row 1, column 'age': required column 'age' is missing (the header has: id;age) "
        "[missing-header]",
        "  row 1, column 'name': required column 'name' is missing (the header has: id;age) "
        "[missing-header]",
        hint,
    ]
    # The JSON output is the library's report, worded for its ``delimiter`` argument.
    code, text = run("csv", path, "--required", "age", "--output", "json")
    report = json.loads(text)["files"][0]["report"]
    assert report["warnings"] == [
        "the header was read as the single column 'id;age' with the default delimiter \",\"; "
        'if the file is semicolon-separated, give the delimiter ";" (or sniff it)'
    ]
    assert report["errors"][0]["message"] == (
        "required column 'age' is missing (the header has: id;age)"
    )
    # The hint in the error of a typed column, then the fix.
    code, text = run("csv", path, "--type", "age=integer")
    assert code == 1
    assert "column 'age' has constraints but is not in the header" in text
    code, text = run("csv", path, "--type", "age=integer", "--delimiter", ";")
    assert code == 1
    assert "  row 2, column 'age': 'x' is not a valid integer [type-error]" in text
    tabbed = tmp_path / "tab.csv"
    tabbed.write_text("id\tage\n1\t2\n")
    for spelling in ("\\t", "tab", "\t"):
        code, text = run("csv", tabbed, "--type", "age=integer", "--delimiter", spelling)
        assert (code, text) == (0, f"{tabbed}: valid\n"), spelling


@pytest.mark.parametrize("bad", ["", ";;", '"', "\n"])
def test_csv_bad_delimiter_exits_2(tmp_path: pathlib.Path, bad: str) -> None:
    (tmp_path / "x.csv").write_text("a\n1\n")
    assert run("csv", tmp_path / "x.csv", "--delimiter", bad)[0] == 2


def test_csv_delimiter_and_dialect_exclusive(tmp_path: pathlib.Path) -> None:
    (tmp_path / "x.csv").write_text("a\n1\n")
    assert run("csv", tmp_path / "x.csv", "--delimiter", ";", "--dialect", "sniff")[0] == 2


def test_unknown_schema_name_lists_the_built_in_names(
    files: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = run("json", "users", files / "ok.json")
    assert code == 2
    lines = (text + capsys.readouterr().err).strip().splitlines()
    assert lines[-1] == (
        "datavalidate: error: schema 'users' is neither a file nor a built-in schema name "
        "(config, dataset, user)"
    )


def test_csv_encoding_error_names_the_encoding_and_the_flag(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "latin.csv"
    path.write_bytes("city,n\nZürich,1\nMálaga,2\n".encode("latin-1"))
    code, text = run("csv", path, "--type", "n=integer")
    assert code == 1
    assert text.splitlines()[1:] == [
        "  row 2, column 'city': the bytes are not valid utf-8 (the value shows them as \\xNN) "
        "[encoding-error]",
        "  row 3, column 'city': the bytes are not valid utf-8 (the value shows them as \\xNN) "
        "[encoding-error]",
        "  warning: the file was read as utf-8 and some bytes are not valid utf-8; if it is in "
        'another encoding, give --encoding (for example "latin-1" or "cp1252")',
    ]
    assert run("csv", path, "--type", "n=integer", "--encoding", "latin-1") == (
        0,
        f"{path}: valid\n",
    )


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("nope", "--encoding 'nope': unknown encoding; give one Python knows"),
        ("rot13", "--encoding 'rot13': rot-13 is not a text encoding"),
        ("zlib_codec", "--encoding 'zlib_codec': zlib is not a text encoding"),
        ("x" * 10_000, "--encoding: a name of 10,000 characters is not an encoding"),
    ],
)
def test_csv_bad_encoding_exits_2(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], name: str, message: str
) -> None:
    (tmp_path / "x.csv").write_text("a\n1\n")
    assert run("csv", tmp_path / "x.csv", "--encoding", name) == (2, "")
    assert capsys.readouterr().err.startswith(f"datavalidate: error: {message}")


@pytest.mark.parametrize("output", ["json", "text"])
@pytest.mark.e2e
def test_a_reader_that_goes_away_ends_the_command_quietly(
    files: pathlib.Path, tmp_path: pathlib.Path, output: str
) -> None:
    """New-user trial 2026-12-01: ``datavalidate json ... --output json | head`` ended in a
    BrokenPipeError traceback. The reader here closes the pipe after the first line."""
    many = [str(files / "bad.json")] * 2000  # far more than a pipe's buffer of output
    command = [sys.executable, "-m", "datavalidate", "json", "--output", output]
    with subprocess.Popen(
        [*command, str(files / "schema.json"), *many],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        first = process.stdout.readline()
        process.stdout.close()
        stderr = process.stderr.read().decode()
        status = process.wait(timeout=60)
    assert first.strip()
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert status == 141


def _bad_rows_file(tmp_path: pathlib.Path) -> tuple[pathlib.Path, list[str]]:
    """bad_rows_csv() as a file, and the --type flags it breaks (id and age: integer)."""
    path = tmp_path / "bad-rows.csv"
    path.write_text(bad_rows_csv())
    return path, ["--type", "id=integer", "--type", "age=integer"]


def test_csv_max_errors_and_the_summary_in_text(tmp_path: pathlib.Path) -> None:
    path, types = _bad_rows_file(tmp_path)
    # No minimum on the command line: the 2,999 ages of -1 are integers; 2,000 errors remain.
    code, text = run("csv", path, *types, "--max-errors", "3")
    assert code == 1
    assert text.splitlines() == [
        f"{path}: invalid (2000 errors)",
        "  row 2, column 'id': 'x0' is not a valid integer [type-error]",
        "  row 5, column 'age': 'x' is not a valid integer [type-error]",
        "  row 8, column 'age': 'x' is not a valid integer [type-error]",
        "  ... 1997 more",
        "  errors by column (all 2000):",
        "    'id': type-error 495",
        "    'age': type-error 1500",
        "    (no one column): extra-cell 5",
    ]
    code, text = run("csv", path, *types, "--max-errors", "1000")
    assert code == 1
    lines = text.splitlines()
    assert len([line for line in lines if line.startswith("  row ")]) == 1000
    assert "  ... 1000 more" in lines


def test_csv_summary_in_json_output(tmp_path: pathlib.Path) -> None:
    path, types = _bad_rows_file(tmp_path)
    code, text = run("csv", path, *types, "--output", "json")
    assert code == 1
    report = json.loads(text)["files"][0]["report"]
    assert (report["error_count"], len(report["errors"])) == (2000, 100)
    assert report["error_summary"] == {
        "id": {"type-error": 495},
        "age": {"type-error": 1500},
        "": {"extra-cell": 5},
    }


@pytest.mark.parametrize("command", ["csv", "json"])
def test_max_errors_above_1000_exits_2_naming_the_bound(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    path, _ = _bad_rows_file(tmp_path)
    args = ("csv", path) if command == "csv" else ("json", "user", path)
    assert run(*args, "--max-errors", "1001")[0] == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "datavalidate: error: --max-errors must be an integer from 0 to 1,000 (how many errors "
        "are listed; error_count counts them all), not 1001"
    )
