"""Red team 2026-12-03 N1's class: a library's exec()/eval() filled the caller's dict with builtins.

``exec(code, ns)``/``eval(code, ns)`` store the calling frame's builtins in ``ns`` when it has
none: in a library's function those are the real ones. N1 was one spelling
(``numpy.testing.runstring(code, d)``, refused by name since 43034c6); the audit of numpy,
pandas and matplotlib found another reachable one, ``numpy.f2py.crackfortran.myeval(expr, d)``.
The class is closed at the audit hook's ``exec`` event: a non-module dict among the caller's
locals that got the real builtins gets the user's instead, so the code runs with them and the
dict hands out nothing. Each variant printed "leaked" before (both execution modes).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Iterator

import pytest

from pysandbox import DATASCIENCE, RunStatus, Sandbox
from pysandbox._limits import Limits
from sandbox_helpers import needs_kernel

# Starts real processes (tests/README.md).
pytestmark = [
    pytest.mark.e2e,
    needs_kernel,
    pytest.mark.skipif(
        any(importlib.util.find_spec(n) is None for n in DATASCIENCE.extra_modules),
        reason="the data-science stack is not installed; install 'secure-pysandbox[datascience]'",
    ),
]
LIMITS = dataclasses.replace(Limits(), memory_bytes=DATASCIENCE.memory_bytes, timeout_s=30.0)


@pytest.fixture(scope="module", params=["warm", "spawn"])
def stack_sb(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Sandbox]:
    """A data-science sandbox per execution mode."""
    ws = tmp_path_factory.mktemp(f"n1-{request.param}")
    with Sandbox(
        ws,
        limits=LIMITS,
        require=("landlock", "seccomp"),
        extra_modules=DATASCIENCE.extra_modules,
        preload=DATASCIENCE.preload,
        execution=request.param,
    ) as sb:
        yield sb


#: Calls that run a string in the dict ``d`` (bound before the call), and what each returns.
CALLS = {
    "myeval": ("cf.myeval('1', d)", "1"),
    "myeval_locals": ("cf.myeval('2 * 3', d, {})", "6"),
    "myeval_builtin_call": ("cf.myeval('len([1, 2])', d)", "2"),
    "myeval_computed": ("getattr(cf, 'my' + 'eval')('4', d)", "4"),
    "myeval_dict_subclass": ("cf.myeval('5', d)", "5"),
    "myeval_keyword": ("cf.myeval('7', g=d)", "7"),
}


@pytest.mark.parametrize("spelling", sorted(CALLS))
def test_library_exec_gets_the_users_builtins(stack_sb: Sandbox, spelling: str) -> None:
    call, answer = CALLS[spelling]
    setup = "d = type('D', (dict,), {})()\n" if spelling == "myeval_dict_subclass" else "d = {}\n"
    code = (
        "import numpy.f2py.crackfortran as cf\n"
        + setup
        + f"print('ran', {call})\n"
        + "B = [v for v in d.values() if isinstance(v, dict)]\n"
        + "print('builtins', len(B))\n"
        + "for b in B:\n"
        + "    real = b.get('get' + 'attr') is not getattr or 'ex' + 'ec' in b\n"
        + "    print('leaked' if real else 'the sandbox builtins')\n"
    )
    result = stack_sb.run(code)
    assert result.status is RunStatus.OK, (result.stderr, result.violations)
    assert result.stdout.splitlines() == [f"ran {answer}", "builtins 1", "the sandbox builtins"]


def test_generated_code_and_module_namespaces_keep_working(stack_sb: Sandbox) -> None:
    """dataclasses, namedtuple and the libraries' own imports exec code too: unchanged."""
    code = (
        "import dataclasses, collections, enum\n"
        "import numpy as np, pandas as pd, matplotlib.pyplot as plt\n"
        "@dataclasses.dataclass(frozen=True)\n"
        "class P:\n"
        "    x: int\n"
        "    y: int = 2\n"
        "N = collections.namedtuple('N', 'a b')\n"
        "Q = dataclasses.make_dataclass('Q', ['a'])\n"
        "print(P(1), N(1, 2), Q(3), enum.Enum('E', 'A B').B.value)\n"
        "print(np.arange(3).sum(), pd.DataFrame({'a': [1, 2]}).eval('a * 2').tolist())\n"
        "import numpy.f2py.crackfortran as cf\n"
        "print(np.linalg.norm([3, 4]), callable(cf.myeval))\n"
    )
    result = stack_sb.run(code)
    assert result.status is RunStatus.OK, (result.stderr, result.violations)
    assert result.stdout.splitlines() == [
        "P(x=1, y=2) N(a=1, b=2) Q(a=3) 2",
        "3 [2, 4]",
        "5.0 True",
    ]
