"""Start the real server over stdio, talk to it with the MCP SDK client, print what it answers.

    nox -s demo                        # a temporary workspace, removed afterwards
    nox -s demo -- --workspace DIR     # use (and keep) DIR as the workspace

The demo lists the server's tools, writes a small CSV file into the workspace with
write_workspace_file, asks the server to run a script that reads it and prints a summary, and
prints the structured result. Before each call it prints what it sends: the tool's name and
its arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

SALES_CSV = """region,units,unit_price
north,12,2.50
south,7,4.00
north,3,2.50
east,10,1.25
"""

SUMMARY_SCRIPT = """\
import csv
from collections import Counter

with open("sales.csv", newline="") as f:
    rows = list(csv.DictReader(f))
revenue = Counter()
for row in rows:
    revenue[row["region"]] += int(row["units"]) * float(row["unit_price"])
print(f"{len(rows)} rows")
for region, total in sorted(revenue.items()):
    print(f"{region}: {total:.2f}")
"""


def show_request(tool: str, arguments: dict[str, Any]) -> None:
    """Print one call as it is sent: the tool's name, then each argument (text as it is)."""
    print(f"-> tools/call {tool}")
    for name, value in arguments.items():
        if isinstance(value, str) and "\n" in value:
            print(f"   {name}:")
            print(textwrap.indent(value.rstrip("\n"), "   | ", lambda _: True))
        else:
            print(f"   {name}: {json.dumps(value)}")


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Print the request, send it, print the answer's status; return its structured result."""
    show_request(tool, arguments)
    result = await session.call_tool(tool, arguments)
    if result.is_error or result.structured_content is None:
        raise SystemExit(f"the call failed: {result.content}")
    print(f"<- {tool} answered")
    return dict(result.structured_content)


async def run_demo(workspace: Path, snapshots: Path) -> dict[str, Any]:
    """Drive one server session; return the structured result of the summary run."""
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "mcp_secure_sandbox",
            "--workspace",
            str(workspace),
            "--snapshots",
            str(snapshots),
        ],
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        print(f"connected to {init.server_info.name} {init.server_info.version}")
        print("-> tools/list")
        tools = await session.list_tools()
        print("<- tools:", ", ".join(tool.name for tool in tools.tools))
        written = await call(
            session, "write_workspace_file", {"path": "sales.csv", "content": SALES_CSV}
        )
        print(f"   wrote {written['bytes_written']} bytes to {written['path']}")
        return await call(session, "run_sandbox_code", {"code": SUMMARY_SCRIPT, "timeout_sec": 10})


def main() -> None:
    """Parse the arguments, run the demo, print the structured result."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--workspace", type=Path, help="workspace to use (default: a temporary one)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcp-demo-") as tmp:
        workspace = args.workspace.resolve() if args.workspace else Path(tmp) / "workspace"
        workspace.mkdir(parents=True, exist_ok=True)
        structured = anyio.run(run_demo, workspace, Path(tmp) / "snapshots")
    print("structured result:")
    print(json.dumps(structured, indent=2))
    print("script output:")
    print(structured["stdout"], end="")


if __name__ == "__main__":
    main()
