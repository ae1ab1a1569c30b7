"""Every tool call bounded (issue 15, F06 and F07): validations of caller-supplied input run in
confined workers with a deadline, other tools keep answering, a call that cannot start is told
"busy", and exports of any size are served in chunks within the response budget."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from _client import call, call_error, in_process
from _paths import REDTEAM_DIR
from mcp_secure_sandbox import budget

# In process: the server's confined workers are its children, as a run's sandbox is (not e2e).
pytestmark = pytest.mark.slow  # most cases > 5 s (measured)

REDTEAM = REDTEAM_DIR / "findings-2026-12-01"
TOO_EXPENSIVE = "stopped after 3 s / 256 MiB: the schema or data is too expensive"


def _doubling(keyword: str, depth: int = 30) -> dict[str, Any]:
    defs: dict[str, Any] = {"d0": {"type": "integer"}}
    for i in range(1, depth + 1):
        defs[f"d{i}"] = {keyword: [{"$ref": f"#/$defs/d{i - 1}"}, {"$ref": f"#/$defs/d{i - 1}"}]}
    return {"$defs": defs, "$ref": f"#/$defs/d{depth}"}


BOMBS: dict[str, dict[str, Any]] = {
    # F06 as found: a $ref/allOf chain doubling 30 times.
    "F06-allOf": json.loads((REDTEAM / "F06_json_schema_exponential.json").read_text()),
    # The same class through anyOf (every branch valid, each evaluated) and oneOf.
    "anyOf-doubling": {"schema_name_or_dict": _doubling("anyOf"), "data": "x"},
    "oneOf-doubling": {"schema_name_or_dict": _doubling("oneOf"), "data": 1},
    # (uniqueItems over thousands of distinct objects was a spelling here; datavalidate's fast
    # path decides it in milliseconds now, so it no longer costs anything to stop.)
}


async def _error(s: Client, tool: str, **arguments: Any) -> str:
    """The tool error's own text (the SDK puts "Error executing tool NAME: " before it)."""
    return re.sub(r"^Error executing tool \w+: ", "", await call_error(s, tool, **arguments))


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_expensive_validation_is_stopped_and_the_server_goes_on(
    dirs: tuple[Path, Path], name: str
) -> None:
    async def scenario(s: Client) -> None:
        errors: list[str] = []

        async def bomb() -> None:
            errors.append(await _error(s, "validate_json_data", **BOMBS[name]))

        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(bomb)
            await anyio.sleep(0.5)
            # While both workers are busy, the light tools answer (F06: nothing answered).
            with anyio.fail_after(20):
                metrics = await call(s, "get_sandbox_metrics")
                listing = await call(s, "list_workspace_files")
                run = await call(s, "run_sandbox_code", code="print(6 * 7)")
            assert metrics["process"]["pid"] > 0
            assert listing["files"] == []
            assert run["stdout"] == "42\n"
        assert errors == [f"validation {TOO_EXPENSIVE}"] * 2
        # The pool replaced its killed workers: an ordinary validation works.
        ok = await call(s, "validate_json_data", schema_name_or_dict={"type": "integer"}, data=1)
        assert ok["valid"] is True
        workers = _workers(metrics["process"]["pid"])
        assert len(workers) <= 2
        for worker in workers:
            assert worker.environ() == {"LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
            assert worker.cwd() == "/"
            assert [f.fd for f in worker.open_files()] == []

    in_process(*dirs, scenario, "--worker-deadline", "3", "--worker-pool-size", "2")


def _workers(server_pid: int) -> list[psutil.Process]:
    return [
        p
        for p in psutil.Process(server_pid).children()
        if "mcp_secure_sandbox._worker" in " ".join(p.cmdline())
    ]


def test_a_call_that_cannot_start_in_time_is_told_busy(dirs: tuple[Path, Path]) -> None:
    bomb = BOMBS["F06-allOf"]

    async def scenario(s: Client) -> list[str]:
        answers: list[str] = []

        async def one() -> None:
            answers.append(await _error(s, "validate_json_data", **bomb))

        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            await anyio.sleep(0.3)
            tg.start_soon(one)
            tg.start_soon(one)
        return sorted(answers)

    answers = in_process(
        *dirs,
        scenario,
        "--worker-deadline",
        "3",
        "--worker-pool-size",
        "1",
        "--admission-wait",
        "0.5",
    )
    busy = [a for a in answers if a.startswith("busy, retry: the validation waited 0.5 s for a")]
    assert len(busy) == 2, answers
    assert [a for a in answers if a not in busy] == [f"validation {TOO_EXPENSIVE}"]


def test_validation_errors_still_name_the_argument(dirs: tuple[Path, Path]) -> None:
    async def scenario(s: Client) -> list[str]:
        return [
            await _error(s, "validate_json_data", schema_name_or_dict={"type": "x"}, data_json="1"),
            await _error(
                s, "validate_json_data", schema_name_or_dict={"type": "integer"}, data_json="{"
            ),
            await _error(s, "validate_csv_data", csv_path="../etc/passwd"),
        ]

    bad_schema, bad_json, bad_path = in_process(*dirs, scenario)
    assert bad_schema.startswith("schema_name_or_dict: ")
    assert bad_json.startswith("data_json is not valid JSON: ")
    assert bad_path.startswith("csv_path ../etc/passwd: ")


# -- F07: exports of any size, every message within the budget ----------------------------------

BIG = """
import random
r = random.Random({seed})
for i in range({files}):
    with open("f%02d.bin" % i, "wb") as fh:
        for _ in range({mib}):
            fh.write(r.randbytes(1 << 20))
print("written")
"""


def _rss(session_metrics: dict[str, Any]) -> int:
    return int(psutil.Process(session_metrics["process"]["pid"]).memory_info().rss)


@pytest.mark.parametrize(("files", "mib"), [(1, 48), (12, 4)])
def test_a_large_export_is_served_in_chunks_in_bounded_memory(
    dirs: tuple[Path, Path], files: int, mib: int
) -> None:
    async def scenario(s: Client) -> None:
        run = await call(
            s, "run_sandbox_code", code=BIG.format(seed=files, files=files, mib=mib), timeout_sec=60
        )
        assert run["stdout"] == "written\n", run
        info = await call(s, "create_state_snapshot")
        before = _rss(await call(s, "get_sandbox_metrics"))
        export = await call(s, "export_state_snapshot", snapshot_id=info["id"])
        assert export["record"] is None
        size = export["size_bytes"]
        assert size > files * mib * (1 << 20) * 4 // 3
        assert export["chunk_bytes"] == budget.EXPORT_CHUNK_BYTES
        assert export["chunk_count"] == -(-size // budget.EXPORT_CHUNK_BYTES)
        template = export["chunk_uri_template"]
        assert template == f"sandbox://exports/{info['id']}/{{chunk}}"
        last = export["chunk_count"] - 1
        for index in (0, last // 2, last):
            read = await s.read_resource(template.replace("{chunk}", str(index)))
            blob = read.contents[0].blob  # type: ignore[union-attr]
            assert len(base64.b64decode(blob)) == (
                budget.EXPORT_CHUNK_BYTES if index < last else size - last * export["chunk_bytes"]
            )
            assert len(read.model_dump_json(by_alias=True)) < budget.RESPONSE_BUDGET_BYTES
        after = _rss(await call(s, "get_sandbox_metrics"))
        assert after - before < 40 * (1 << 20), (before, after)  # F07: +2.9 GB for 0.99 GB

    in_process(*dirs, scenario)


def test_chunks_reassemble_into_the_record_and_files_check(dirs: tuple[Path, Path]) -> None:
    code = (
        "import random\nr = random.Random(7)\n"
        "open('bin.dat', 'wb').write(r.randbytes(700_000))\n"
        "open('t\u00e9xt.txt', 'w').write('caf\u00e9 \"q\" \\\\ ' * 20_000)\n"
    )

    async def scenario(s: Client) -> None:
        await call(s, "run_sandbox_code", code=code)
        info = await call(s, "create_state_snapshot")
        export = await call(s, "export_state_snapshot", snapshot_id=info["id"])
        parts = []
        for k in range(export["chunk_count"]):
            read = await s.read_resource(f"sandbox://exports/{info['id']}/{k}")
            parts.append(base64.b64decode(read.contents[0].blob))  # type: ignore[union-attr]
        data = b"".join(parts)
        assert len(data) == export["size_bytes"]
        record = json.loads(data)
        for path, entry in record["files"].items():
            content = base64.b64decode(entry["content"])
            assert hashlib.sha256(content).hexdigest() == entry["sha256"], path
        assert record["files"]["bin.dat"]["size"] == 700_000
        for bad in (str(export["chunk_count"]), "-1", "x", "01a"):
            with pytest.raises(MCPError) as caught:
                await s.read_resource(f"sandbox://exports/{info['id']}/{bad}")
            assert caught.value.error.code == -32602
            assert "chunk must be a whole number from 0" in caught.value.error.message
        # The single-read resource refuses a record over the budget before reading it.
        with pytest.raises(MCPError, match="read it in chunks"):
            await s.read_resource(f"sandbox://exports/{info['id']}")

    in_process(*dirs, scenario)


def test_an_export_over_the_mcp_limit_is_refused_with_the_host_command(
    dirs: tuple[Path, Path],
) -> None:
    async def scenario(s: Client) -> tuple[str, str]:
        await call(s, "run_sandbox_code", code="open('m', 'wb').write(bytes(3_000_000))")
        info = await call(s, "create_state_snapshot")
        refusal = await _error(s, "export_state_snapshot", snapshot_id=info["id"])
        with pytest.raises(MCPError) as caught:
            await s.read_resource(f"sandbox://exports/{info['id']}/0")
        return refusal, caught.value.error.message

    tool, resource = in_process(*dirs, scenario, "--export-max", "2M")
    for text in (tool, resource):
        assert "more than this server serves over MCP (2,097,152 bytes, --export-max)" in text
        assert "wsnapshot --workspace W --store S export ID -o FILE" in text
