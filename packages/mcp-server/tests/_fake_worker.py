"""A stand-in for a compromised or broken confined worker (tests of the pool's distrust).

``python _fake_worker.py MODE``: reads the pool's configuration line, answers ready (or not,
for ``bad-ready``), then answers each job as MODE says. ``spin`` is a well-behaved worker that
applies ``RLIMIT_CPU`` as the real one does (start-up CPU plus the configured seconds) and burns
the CPU time a job asks for (``{"op": "spin", "cpu_s": 0.4}``) before answering a valid report.
"""

from __future__ import annotations

import json
import math
import resource
import sys

GOOD = {"valid": True, "draft": "draft2020-12", "error_count": 0, "truncated": False, "errors": []}

ANSWERS: dict[str, bytes] = {
    "garbage": b"hello, I am not JSON\n",
    "invalid-json": b'{"ok": {"valid": tr\n',
    "huge": b'{"ok": "' + b"x" * (17 * 1024 * 1024) + b'"}\n',
    "deep": b"[" * 200_000 + b"]" * 200_000 + b"\n",
    "big-int": b'{"ok": ' + b"9" * 10_000 + b"}\n",
    "not-object": b'["ok", 1]\n',
    "two-keys": json.dumps({"ok": GOOD, "error": {"kind": "input", "message": "x"}}).encode()
    + b"\n",
    "unknown-kind": b'{"error": {"kind": "pwned", "message": "x"}}\n',
    "message-type": b'{"error": {"kind": "input", "message": ["x"]}}\n',
    "wrong-types": json.dumps({"ok": {**GOOD, "valid": "yes"}}).encode() + b"\n",
    "missing-key": json.dumps({"ok": {k: v for k, v in GOOD.items() if k != "draft"}}).encode()
    + b"\n",
    "extra-key": json.dumps({"ok": {**GOOD, "__class__": "os.system"}}).encode() + b"\n",
    "error-item": json.dumps({"ok": {**GOOD, "errors": [{"keyword": 1}]}}).encode() + b"\n",
    "good": json.dumps({"ok": GOOD}).encode() + b"\n",
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    mode = sys.argv[1]
    out = sys.stdout.buffer
    config = json.loads(sys.stdin.buffer.readline())
    if mode == "bad-ready":
        out.write(b'"already"\n')
        out.flush()
        return 0
    if mode == "spin":
        soft = math.ceil(_cpu()) + int(config["cpu_time_s"])
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
    out.write(b'{"ready": {}}\n')
    out.flush()
    for line in sys.stdin.buffer:
        job = json.loads(line)
        if mode == "spin":
            end = _cpu() + float(job.get("cpu_s", 0))
            while _cpu() < end:
                pass
            out.write(ANSWERS["good"])
        else:
            out.write(ANSWERS[mode])
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
