"""ConfinedPool: a library user bounds hostile input (a datavalidate schema) with deadlines,
memory budgets and the kernel layers, and the pool goes on after every kill.

Imports only pysandbox and datavalidate (a test-only dependency: pysandbox never imports it).
The handlers are an application's modules written to ``tmp_path`` (``import_paths``).
"""

from __future__ import annotations

import json
import pathlib
import textwrap
from typing import Any

import psutil
import pytest

from pysandbox import ConfinedPool
from pysandbox.exceptions import (
    JobError,
    WorkerLimitExceeded,
    WorkerProtocolError,
    WorkerStartError,
)
from sandbox_helpers import needs_kernel

HANDLERS = textwrap.dedent(
    """
    import importlib

    from datavalidate import DataValidateError, validate_json
    from pysandbox.exceptions import JobError


    def validate(job):
        try:
            return validate_json(job["instance"], job["schema"]).to_dict()
        except DataValidateError as exc:
            raise JobError("schema", str(exc)) from None


    def hog(job):
        kind, size = job["kind"], job["bytes"]
        if kind == "bytearray":
            return len(bytearray(size))
        if kind == "str":
            return len("x" * size)
        return sum(len(c) for c in [bytearray(4096) for _ in range(size // 4096)])


    def echo(job):
        return job


    def read(job):
        with open(job["path"], "rb") as f:
            return len(f.read())


    def load(job):
        importlib.import_module(job["module"])
        return "imported"


    def odd(job):
        return {"module": importlib, "set": {1}, "nan": float("nan"), "ok": "ok"}[job["kind"]]
    """
)

VALID = {"valid": True, "draft": "draft2020-12", "error_count": 0, "truncated": False, "errors": []}


def _doubling(keyword: str, depth: int = 30) -> dict[str, Any]:
    """A schema whose evaluation doubles at each of ``depth`` levels (2**30 evaluations)."""
    defs: dict[str, Any] = {"d0": {"type": "integer"}}
    for i in range(1, depth + 1):
        defs[f"d{i}"] = {keyword: [{"$ref": f"#/$defs/d{i - 1}"}, {"$ref": f"#/$defs/d{i - 1}"}]}
    return {"$defs": defs, "$ref": f"#/$defs/d{depth}"}


@pytest.fixture
def handlers(tmp_path: pathlib.Path) -> pathlib.Path:
    directory = tmp_path / "app"
    directory.mkdir()
    (directory / "pool_handlers.py").write_text(HANDLERS)
    return directory


def _pool(handlers: pathlib.Path, function: str, **options: Any) -> ConfinedPool:
    settings: dict[str, Any] = {
        "distributions": ("datavalidate",),
        "import_paths": (handlers,),
        "size": 1,
        "deadline_s": 3.0,
        "memory_bytes": 256 << 20,
        "error_kinds": ("schema",),
    }
    settings.update(options)
    return ConfinedPool(f"pool_handlers:{function}", **settings)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@needs_kernel
@pytest.mark.parametrize("keyword", ["allOf", "anyOf", "oneOf"])
def test_an_exponential_schema_hits_the_deadline_and_the_pool_answers_the_next_job(
    handlers: pathlib.Path, keyword: str
) -> None:
    instance = "x" if keyword == "anyOf" else 1
    with _pool(handlers, "validate") as pool:
        assert pool.call({"instance": 1, "schema": {"type": "integer"}}) == VALID
        (first,) = pool.pids
        with pytest.raises(WorkerLimitExceeded) as caught:
            pool.call({"instance": instance, "schema": _doubling(keyword)}, what="validation")
        assert caught.value.reason == "deadline"
        assert str(caught.value) == (
            "validation stopped after 3 s / 256 MiB: the job is too expensive"
        )
        assert pool.pids == []  # killed and reaped
        assert not _alive(first)
        assert pool.pool.replaced == 1
        # The pool goes on with a fresh worker.
        assert pool.call({"instance": 2, "schema": {"type": "integer"}}) == VALID
        (second,) = pool.pids
        assert second != first


@needs_kernel
def test_a_schema_datavalidate_refuses_is_the_jobs_own_error_and_the_worker_stays(
    handlers: pathlib.Path,
) -> None:
    with _pool(handlers, "validate") as pool:
        assert pool.call({"instance": 1, "schema": {}}) == VALID
        (pid,) = pool.pids
        with pytest.raises(JobError) as caught:
            pool.call({"instance": 1, "schema": {"type": "no-such-type"}})
        assert caught.value.kind == "schema"
        assert pool.pids == [pid]
        assert pool.pool.replaced == 0


@needs_kernel
@pytest.mark.parametrize("kind", ["bytearray", "str", "list"])
def test_past_the_memory_budget_the_worker_is_replaced(handlers: pathlib.Path, kind: str) -> None:
    with _pool(handlers, "hog") as pool:
        assert pool.call({"kind": kind, "bytes": 1 << 20}) == 1 << 20
        (first,) = pool.pids
        with pytest.raises(WorkerLimitExceeded) as caught:
            pool.call({"kind": kind, "bytes": 1 << 30})
        assert caught.value.reason in ("memory", "deadline")  # answered, or died of RLIMIT_AS
        assert not _alive(first)
        assert pool.call({"kind": kind, "bytes": 4096}) == 4096
        assert pool.pids != [first]


@needs_kernel
def test_a_worker_is_retired_after_max_jobs(handlers: pathlib.Path) -> None:
    with _pool(handlers, "echo", max_jobs=2) as pool:
        pids = []
        for n in range(5):
            assert pool.call(n) == n
            pids.append(tuple(pool.pids))
        # Ended after its second job: the next job starts a fresh one.
        assert pids[1] == () and pids[3] == ()
        assert len({p for p in pids if p}) == 3
        assert pool.pool.retired == 2


@needs_kernel
@pytest.mark.parametrize(
    ("answer", "schema"),
    [
        ({"n": "1"}, {"type": "object", "properties": {"n": {"type": "integer"}}}),
        (
            {"n": 1, "x": 2},
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {"n": {"type": "integer"}},
            },
        ),
        ({}, {"type": "object", "required": ["n"]}),
        ([1, True], {"type": "array", "items": {"type": "integer"}}),
        ("a" * 100, {"type": "string", "maxLength": 10}),
    ],
)
def test_an_answer_against_the_callers_schema_is_refused_and_its_worker_replaced(
    handlers: pathlib.Path, answer: Any, schema: dict[str, Any]
) -> None:
    with _pool(handlers, "echo", answer_schema=schema) as pool:
        with pytest.raises(WorkerProtocolError, match=r"the result has the wrong shape"):
            pool.call(answer)
        assert pool.pids == []
        assert pool.pool.replaced == 1


@needs_kernel
def test_a_validator_callable_checks_and_converts_the_answer(handlers: pathlib.Path) -> None:
    def positive(value: Any) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError("not a positive integer")
        return value * 10

    with _pool(handlers, "echo", answer_schema=positive) as pool:
        assert pool.call(4) == 40
        for bad in (0, -1, "4", True, [4]):
            with pytest.raises(WorkerProtocolError):
                pool.call(bad)


@needs_kernel
def test_the_worker_reads_only_its_distributions_and_import_paths(
    handlers: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s")
    with _pool(handlers, "read") as pool:
        assert pool.call({"path": str(handlers / "pool_handlers.py")}) == len(HANDLERS)
        for path in (str(secret), "/etc/shadow", str(pathlib.Path.home() / ".bashrc")):
            with pytest.raises(JobError) as caught:
                pool.call({"path": path})
            assert caught.value.kind == "failed"
            assert str(caught.value) in (
                "the handler raised PermissionError",
                "the handler raised FileNotFoundError",
            )
    with _pool(handlers, "load") as pool:
        assert pool.call({"module": "datavalidate._csv"}) == "imported"
        # Installed in this environment, but no distribution the pool named: not readable.
        for module in ("hypothesis", "coverage", "pytest"):
            with pytest.raises(JobError, match="PermissionError"):
                pool.call({"module": module})


def test_a_closed_pool_refuses_jobs(handlers: pathlib.Path) -> None:
    pool = _pool(handlers, "echo", require_kernel_layers=False)
    assert pool.call([1]) == [1]
    pool.close()
    pool.close()  # idempotent
    with pytest.raises(WorkerStartError, match="closed"):
        pool.call([1])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"handler": "no_such_module_x:f"}, "is not installed"),
        ({"distributions": ("no_such_module_y",)}, "^distributions: module 'no_such_module_y'"),
        ({"import_paths": ("/nonexistent-dir",)}, "is not a directory"),
        ({"handler": "json"}, "is not 'pkg.module:function'"),
        ({"handler": "json:dumps;os"}, "is not 'pkg.module:function'"),
        ({"size": 0}, "at least 1"),
        ({"deadline_s": float("inf")}, "deadline_s"),
        ({"memory_bytes": 1 << 20}, "at least 16 MiB"),
        ({"answer_schema": {"type": "object", "patternProperties": {}}}, "not checked"),
    ],
)
def test_a_pool_that_cannot_be_what_it_says_is_refused(
    options: dict[str, Any], message: str
) -> None:
    settings: dict[str, Any] = {"handler": "json:dumps", "deadline_s": 1.0, "memory_bytes": 1 << 28}
    settings.update(options)
    handler = settings.pop("handler")
    with pytest.raises(ValueError, match=message):
        ConfinedPool(handler, **settings)


def test_the_configuration_line_is_json_with_the_grants() -> None:
    pool = ConfinedPool("json:dumps", deadline_s=1.0, memory_bytes=1 << 28)
    try:
        config = pool.pool.config
        assert json.loads(json.dumps(config)) == config
        assert config["installed_code"] is False
        assert any(p.endswith("/src") or "pysandbox" in p for p in config["read_only"])
    finally:
        pool.close()


@needs_kernel
@pytest.mark.parametrize("job", [{"kind": "module"}, {"kind": "set"}, {"kind": "nan"}])
def test_a_result_that_is_not_json_is_a_failed_job_and_the_pool_goes_on(
    handlers: pathlib.Path, job: dict[str, str]
) -> None:
    with _pool(handlers, "odd") as pool:
        with pytest.raises(JobError, match="the result is not JSON") as caught:
            pool.call(job)
        assert caught.value.kind == "failed"
        assert pool.pids == []
        assert pool.call({"kind": "ok"}) == "ok"
