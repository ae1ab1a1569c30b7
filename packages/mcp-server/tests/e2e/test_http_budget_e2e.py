"""A 5 MB print over streamable HTTP with the SDK client: a capped answer, the session goes on.

Before the response budget, any call whose stdout passed ~512 KB failed in the SDK's HTTP client
("Server-sent event exceeded the 1048576 byte limit").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from mcp_secure_sandbox import budget
from test_http_e2e import TOKEN, http_server

__all__ = ["http_server"]  # the fixture, imported to be used here


def test_five_megabytes_over_http_answer_and_the_session_goes_on(
    http_server: tuple[str, Path],
) -> None:
    base, _ = http_server

    async def scenario() -> tuple[dict[str, Any], int, str]:
        client = httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}, timeout=120)
        async with (
            client,
            streamable_http_client(f"{base}/mcp", http_client=client) as (r, w),
            ClientSession(r, w) as s,
        ):
            await s.initialize()
            big = await s.call_tool(
                "run_sandbox_code", {"code": "print('h' + 'x' * 5_000_000 + 'TAIL')"}
            )
            size = len(big.model_dump_json(by_alias=True, exclude_none=True).encode())
            after = await s.call_tool("run_sandbox_code", {"code": "print('still here')"})
            assert after.structured_content is not None
            return dict(big.structured_content or {}), size, after.structured_content["stdout"]

    out, size, after = anyio.run(scenario)
    print(f"5 MB run over streamable HTTP: answer of {size:,} bytes")
    assert size + budget.ENVELOPE_BYTES <= budget.RESPONSE_BUDGET_BYTES
    assert out["status"] == "ok"
    assert out["stdout_truncated"] is True and out["stderr_truncated"] is False
    assert out["stdout"].startswith("hxxx") and out["stdout"].endswith("xTAIL\n")
    assert "bytes cut by the server" in out["stdout"]
    assert after == "still here\n"
