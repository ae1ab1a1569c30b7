"""Start the real server over stdio, talk to it with the MCP SDK client, print what it answers.

    nox -s demo                        # a temporary workspace, removed afterwards
    nox -s demo -- --workspace DIR     # use (and keep) DIR as the workspace

The demo lists the server's tools, writes a small CSV file into the workspace, asks the server to
run a script that reads it and prints a summary, and prints the structured result.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

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


async def run_demo(workspace: Path, snapshots: Path) -> dict[str, object]:
    """Drive one server session; return the structured result of the summary run."""
    (workspace / "sales.csv").write_text(SALES_CSV, encoding="utf-8")
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
        tools = await session.list_tools()
        print("tools:", ", ".join(tool.name for tool in tools.tools))
        result = await session.call_tool(
            "run_sandbox_code", {"code": SUMMARY_SCRIPT, "timeout_sec": 10}
        )
        if result.is_error or result.structured_content is None:
            raise SystemExit(f"the call failed: {result.content}")
        return dict(result.structured_content)


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
