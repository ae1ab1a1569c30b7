"""A stand-in for a compromised confined pool worker (tests of ConfinedPool's distrust).

``python fake_pool_worker.py MODE``: reads the configuration line, answers ready (or not, for
``bad-ready``), then answers every job with MODE's line.
"""

from __future__ import annotations

import json
import sys

ANSWERS: dict[str, bytes] = {
    "garbage": b"hello, I am not JSON\n",
    "nan": b'{"ok": NaN}\n',
    "huge": b'{"ok": "' + b"x" * (17 * 1024 * 1024) + b'"}\n',
    "deep": b"[" * 200_000 + b"]" * 200_000 + b"\n",
    "not-object": b'["ok", 1]\n',
    "two-keys": b'{"ok": 1, "error": {"kind": "failed", "message": "x"}}\n',
    "unknown-kind": b'{"error": {"kind": "pwned", "message": "x"}}\n',
    "message-type": b'{"error": {"kind": "failed", "message": ["x"]}}\n',
    "long-message": b'{"error": {"kind": "failed", "message": "' + b"m" * 4001 + b'"}}\n',
    "good": b'{"ok": {"valid": true}}\n',
}


def main() -> int:
    mode = sys.argv[1]
    out = sys.stdout.buffer
    json.loads(sys.stdin.buffer.readline())
    if mode == "bad-ready":
        out.write(b'"already"\n')
        out.flush()
        return 0
    out.write(b'{"ready": {}}\n')
    out.flush()
    for _line in sys.stdin.buffer:
        out.write(ANSWERS[mode])
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
