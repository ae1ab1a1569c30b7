"""numpy, pandas and matplotlib under every layer: the public data-science corpora.

``redteam/benign-datascience.jsonl`` must print exactly its expected stdout and
``redteam/escapes-datascience.jsonl`` must break none of SECURITY.md's invariants (no file
written outside the workspace, no canary read, no connection, no process left), judged by the
red-team harness's effect checks. The suite runs once per execution mode (``nox -s tests``: warm,
with the stack preloaded in the zygote, then spawn). The stack comes from the ``test`` dependency
group; without it these tests are skipped, saying so.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from pysandbox import DATASCIENCE, RunStatus, Sandbox, default_execution, runner
from pysandbox.child._main import PARQUET_MISSING
from sandbox_helpers import KERNEL, needs_kernel
from test_corpus import CORPUS, harness

STACK = DATASCIENCE.extra_modules
PRELOAD = DATASCIENCE.preload
MISSING = [name for name in STACK if importlib.util.find_spec(name) is None]
pytestmark = [
    pytest.mark.slow,  # the public corpora: up to 17 s a case under -n 2 (measured)
    pytest.mark.skipif(
        bool(MISSING),
        reason=f"the data-science stack is not installed in this environment ({MISSING}); "
        "install 'secure-pysandbox[datascience]'",
    ),
    needs_kernel,
    pytest.mark.skipif(
        default_execution() == "spawn" and sys.version_info[:2] != (3, 11),
        reason="in spawn mode every run imports the stack afresh (about 1.5 s): the spawn pass "
        "runs these on Python 3.11 only (CI time); every Python runs them warm, and nox -s "
        "redteam runs the corpora over MCP in spawn mode",
    ),
]
#: The harness's limits with the memory a preloaded stack needs (one run's data segment).
LIMITS = dataclasses.replace(harness.LIMITS, memory_bytes=1024 * 1024 * 1024, timeout_s=20.0)


def cases(name: str) -> list[dict[str, Any]]:
    path = CORPUS / name
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def factory(ws: pathlib.Path, *, seccomp_debug: bool = False) -> Sandbox:
    return Sandbox(
        ws,
        limits=LIMITS,
        require=("landlock", "seccomp"),
        extra_modules=STACK,
        preload=PRELOAD,
        policy=DATASCIENCE.policy_for(),  # the profile's checker rules (AG309)
        seccomp_debug=seccomp_debug,
    )


def debug_factory(ws: pathlib.Path) -> Sandbox:
    """The sandbox of the benign runs, whose filter traps every call the allow-list does not name.

    A run that made one would die by SIGSYS naming it (``seccomp_debug``) instead of going on
    after ENOSYS.
    """
    return factory(ws, seccomp_debug=True)


def test_corpora_are_large_enough() -> None:
    assert len(cases("benign-datascience.jsonl")) >= 20
    assert len(cases("escapes-datascience.jsonl")) >= 20


@pytest.mark.parametrize("case", cases("benign-datascience.jsonl"), ids=lambda c: c["id"])
def test_benign_datascience(case: dict[str, Any], tmp_path: pathlib.Path) -> None:
    # The stack's calls the filter refuses are listed (mbind: ENOSYS on purpose, OpenBLAS goes
    # on without it), so even the debug filter lets every case finish with its exact output.
    report = harness.run_benign(debug_factory, case, tmp_path)
    assert report.problems == []
    for name in ("line.png", "bars.png", "hist.png", "grid.png"):
        if f"'{name}'" in case["code"]:
            data = (tmp_path / case["id"] / "ws" / name).read_bytes()
            assert data[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("case", cases("escapes-datascience.jsonl"), ids=lambda c: c["id"])
def test_escape_datascience(
    case: dict[str, Any], tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {"SANDBOX_CANARY_SECRET": "secret-canary-value", "CANARY_PROXY": "http://c.invalid:9"}
    for key, value in secrets.items():
        monkeypatch.setenv(key, value)
    listener = harness.Listener()
    try:
        report = harness.run_escape(factory, case, tmp_path, listener, secrets)
    finally:
        listener.close()
    assert report.problems == []
    assert report.passed


def test_every_run_is_single_threaded_with_a_read_only_matplotlib_cache(
    workspace: pathlib.Path,
) -> None:
    code = (
        "import os, matplotlib, numpy\n"
        "print(sorted((k, os.environ[k]) for k in os.environ if k.endswith(('THREADS', 'MAX'))))\n"
        "print(matplotlib.get_configdir() == os.environ['MPLCONFIGDIR'],"
        " matplotlib.get_backend())\n"
        "try:\n"
        "    open(os.path.join(os.environ['MPLCONFIGDIR'], 'x'), 'w')\n"
        "except PermissionError:\n"
        "    print('read-only')\n"
    )
    with Sandbox(
        workspace,
        limits=LIMITS,
        extra_modules=(*STACK, "os"),
        preload=PRELOAD,
    ) as sb:
        result = sb.run(code)
        assert result.status is RunStatus.OK, result.stderr
        expected = sorted(runner.RUN_ENV.items())
        assert result.stdout.splitlines() == [str(expected), "True Agg", "read-only"]
        assert list(workspace.iterdir()) == []  # nothing of matplotlib's written there
        if sb.capabilities().execution["mode"] == "warm":
            pid = sb.capabilities().execution["zygote_pid"]
            status = pathlib.Path(f"/proc/{pid}/status").read_text()
            assert "Threads:\t1\n" in status


def test_native_extensions_need_the_kernel_layers(workspace: pathlib.Path) -> None:
    with pytest.raises(
        ValueError, match=r"native extension modules.*kernel layers on and required"
    ):
        Sandbox(workspace, require=(), extra_modules=["numpy"])
    with pytest.raises(ValueError, match="native extension modules"):
        Sandbox(workspace, require=(), kernel_layers=False, extra_modules=["numpy"])


def test_preload_must_be_allowed(workspace: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="preload: module 'pandas' is not allowed"):
        Sandbox(workspace, extra_modules=["numpy"], preload=["pandas"])


@pytest.mark.skipif(not KERNEL.landlock_abi, reason="Landlock unavailable")
def test_grants_cover_the_stack_and_nothing_beside(workspace: pathlib.Path) -> None:
    # Found, not imported: the stack in this process would raise the peak every spawned child
    # inherits (see Reaped.maxrss_floor_bytes) past other tests' memory limits.
    spec = importlib.util.find_spec("numpy")
    assert spec is not None and spec.origin is not None
    sb = Sandbox(workspace, limits=LIMITS, extra_modules=["numpy"])
    site = pathlib.Path(spec.origin).resolve().parent.parent
    result = sb.run(
        "import numpy\n"
        f"print(len(numpy.fromfile({str(site / 'numpy' / '__init__.py')!r}, dtype='u1')) > 0)\n"
    )
    assert (result.status, result.stdout) == (RunStatus.OK, "True\n"), result.stderr
    pandas_init = site / "pandas" / "__init__.py"
    result = sb.run(f"import numpy\nnumpy.fromfile({str(pandas_init)!r}, dtype='u1')\n")
    assert result.status is RunStatus.ERROR
    assert "Permission" in result.stderr or "SandboxDenied" in result.stderr


@pytest.fixture(scope="module", params=["warm", "spawn"])
def stack_sb(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Sandbox]:
    """One sandbox with the stack preloaded per execution mode, shared by the tests below."""
    ws = tmp_path_factory.mktemp(f"stack-{request.param}")
    with Sandbox(
        ws,
        limits=LIMITS,
        require=("landlock", "seccomp"),
        extra_modules=STACK,
        preload=PRELOAD,
        execution=request.param,
    ) as sb:
        yield sb


#: pandas expressions that work, and what each prints.
PANDAS_WORKING = {
    "df.eval('b = a * 2')['b'].tolist()": "[2, 4, 6]",
    "df.query('a * 2 > 2')['a'].tolist()": "[2, 3]",
    "df.query('a > 1 and not (a == 3) or a < 1')['a'].tolist()": "[2]",
    "df.eval('-a ** 2 % 5 // 1 - c / 2').tolist()": "[2.5, -1.0, -1.5]",
    "df.query('a >= @low & c != 4')['a'].tolist()": "[3]",
    "df.eval('a + a[0]').tolist()": "[2, 3, 4]",
    "df.query('s.str.len() > 1')['s'].tolist()": "['yy', 'zzz']",
    "df.query('s in [\"x\", \"zzz\"]')['a'].tolist()": "[1, 3]",
}
#: pandas expressions refused, and a part of each refusal.
PANDAS_REFUSED = {
    "df.query('a > @np.pi')": "@np is the module 'numpy'",
    "df.query('a > @pd.io.common')": "@pd is the module 'pandas'",
    "df.query('a.__class__ == 1')": "the attribute '__class__'",
    "df.eval('a._mgr')": "the private attribute '_mgr'",
    "df.eval('@df._mgr')": "the private attribute '_mgr'",
    "df.query('a > @_hidden')": "the private name '@_hidden'",
    "df.eval('@open')": "the name 'open' (as @open)",
    "df.eval('@out.append(@df._mgr) + (lambda __pd_eval_local_df: 0)')": "attribute '_mgr'",
    "df.eval('@out.append(a._mgr) + (lambda a: 0)')": "the private attribute '_mgr'",
}


def test_pandas_expressions_work_and_refuse_what_pandas_would_read_unguarded(
    stack_sb: Sandbox,
) -> None:
    """eval/query with arithmetic, comparisons, boolean operators, subscripts, attributes and @
    values work; modules, dunder and private names are refused naming pandas and the
    alternatives (one run per mode: a spawn run imports the stack afresh)."""
    cases = [*PANDAS_WORKING, *PANDAS_REFUSED]
    table = ", ".join(f"lambda: {case}" for case in cases)
    code = (
        "import numpy as np, pandas as pd\n"
        "df = pd.DataFrame({'a': [1, 2, 3], 'c': [3, 4, 5], 's': ['x', 'yy', 'zzz']})\n"
        "low, _hidden, out = 3, 1, []\n"
        f"for compute in [{table}]:\n"
        "    try:\n"
        "        print('ok', compute())\n"
        "    except Exception as exc:\n"
        "        print('refused', type(exc).__name__, exc)\n"
        "print('out', len(out))\n"
    )
    result = stack_sb.run(code)
    assert result.status is RunStatus.OK, result.stderr
    lines = result.stdout.splitlines()
    assert lines.pop() == "out 0"  # nothing a refused expression reached was kept
    assert len(lines) == len(cases)
    for line, (expression, printed) in zip(lines, PANDAS_WORKING.items(), strict=False):
        assert line == f"ok {printed}", expression
    refusals = lines[len(PANDAS_WORKING) :]
    for line, (expression, part) in zip(refusals, PANDAS_REFUSED.items(), strict=True):
        assert line.startswith("refused SandboxDenied [Errno 1] sandbox: "), (expression, line)
        assert part in line, (expression, line)
        assert "pandas eval()/query() expression" in line, line
        assert "df.assign(b=df['a'] * 2)" in line and "boolean mask" in line, line


#: How user code calls each pandas expression entry point with ``expr``, the engine and ``kw``.
PANDAS_ENTRIES = tuple(
    f"{entry}({{expr}}, engine={{engine}}, {{kw}})" for entry in ("pd.eval", "df.eval", "df.query")
)
#: Each way a name reaches pandas' Scope, as (expression, keywords, a part of the refusal): a
#: ``level`` above the code (the sandbox's own frame: ``_run_user_code``'s ``code_obj``), and the
#: sandbox's own functions (the user's guarded builtins) through each dict pandas accepts.
PANDAS_SCOPE_CHANNELS = (
    ("'@out.append(@code_obj)'", "level=2, global_dict={'out': out}", "a frame outside the code"),
    ("'@out.append(@g)'", "local_dict={'out': out, 'g': getattr}", "sandbox's own code (@g)"),
    ("'@out.append(@o)'", "global_dict={'out': out, 'o': open}", "sandbox's own code (@o)"),
    ("'out.append(h)'", "resolvers=[{'out': out, 'h': hasattr}]", "sandbox's own code (h)"),
)
#: Further classes, through pd.eval: private plain names, frames and generators, a negative
#: level (pandas' own frame) and a Scope as local_dict (pandas reads the locals of every frame
#: up to its level).
PANDAS_SCOPE_MORE = {
    "pd.eval('out.append(_x)', local_dict={'out': out, '_x': 1})": "the private name '_x'",
    "pd.eval('out.append(_run_user_code)', level=2, local_dict={'out': out})": "outside the code",
    "pd.eval('out.append(run_config)', level=2, local_dict={'out': out})": "outside the code",
    "pd.eval('out.append(gen)', local_dict={'out': out, 'gen': (i for i in [1])})": "generator",
    "pd.eval('out.append(self)', level=-3, global_dict={'out': out})": "a level= that is not",
    "scope_as_locals(out)": "a Scope as local_dict",
}


def pandas_scope_cases() -> dict[str, str]:
    """Every entry point x every channel x both engines (numexpr, the default, if installed)."""
    table: dict[str, str] = {}
    for entry in PANDAS_ENTRIES:
        top = entry.startswith("pd.")  # a top-level pd.eval takes no @ (its names are local)
        for written, kw, said in PANDAS_SCOPE_CHANNELS:
            expr = written.replace("@", "") if top else written
            part = said.replace("@", "") if top else said
            for engine in ("'python'", "None"):
                table[entry.format(expr=expr, engine=engine, kw=kw)] = part
    return {**table, **PANDAS_SCOPE_MORE}


def test_pandas_expressions_read_no_frame_and_no_value_of_the_sandbox(stack_sb: Sandbox) -> None:
    """F1: pd.eval/df.eval/df.query read names only from the code's own frames (level= cannot
    reach the sandbox's frames) and hand out none of its functions, frames or private names,
    whichever dict they come through; the default level and a level naming a caller in the
    code still work."""
    cases = pandas_scope_cases()
    table = ", ".join(f"lambda: {case}" for case in cases)
    code = (
        "import pandas as pd\n"
        "df = pd.DataFrame({'a': [1, 2, 3]})\n"
        "out, x = [], 2\n"
        "def scope_as_locals(out):\n"
        "    scope = pd.core.computation.scope.Scope(0)\n"
        "    scope.level = 10\n"
        "    return pd.eval('out.append(code_obj)', local_dict=scope, global_dict={'out': out})\n"
        "def caller_names():\n"
        "    return pd.eval('x * 3', level=1), df.query('a > @x', level=1)['a'].tolist()\n"
        "print(caller_names(), df.query('a > @x', level=0)['a'].tolist())\n"
        f"for compute in [{table}]:\n"
        "    try:\n"
        "        print('ok', compute())\n"
        "    except Exception as exc:\n"
        "        print('refused', type(exc).__name__, str(exc).replace('\\n', ' '))\n"
        "print('out', len(out))\n"
    )
    result = stack_sb.run(code)
    assert result.status is RunStatus.OK, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "(6, [3]) [3]"
    assert lines[-1] == "out 0", lines
    assert len(lines) == len(cases) + 2
    for line, (case, part) in zip(lines[1:-1], cases.items(), strict=True):
        assert line.startswith("refused SandboxDenied [Errno 1] sandbox: "), (case, line)
        assert part in line, (case, line)
        assert "pandas eval()/query() expression" in line, line


#: Modules user code may not import, which the stack's module helpers used to hand back.
REFUSED_MODULES = ("os", "ctypes", "pickle", "subprocess", "socket")
#: The helpers that import a module by name and return it (F3).
MODULE_HELPERS = (
    "pandas.core.frame.import_optional_dependency({name!r})",
    "pd.io.common.import_optional_dependency({name!r}, extra='x')",
    "pd.io.parquet.import_optional_dependency({name!r}, '', 'raise')",
    "backend_registry.load_backend_module('module://' + {name!r})",
    "matplotlib.use('module://' + {name!r})",
)


def test_the_stacks_module_helpers_hand_back_no_module_the_code_may_not_import(
    stack_sb: Sandbox,
) -> None:
    """F3: pandas' import_optional_dependency and matplotlib's backend loader refuse what the
    import guard refuses, with its message (errors='ignore' answers None, as for a missing
    package); allowed modules and matplotlib's own backends still load."""
    calls = [helper.format(name=name) for helper in MODULE_HELPERS for name in REFUSED_MODULES]
    table = ", ".join(f"lambda: {call}" for call in calls)
    code = (
        "import matplotlib, pandas as pd, pandas.core.frame, pandas.io.parquet\n"
        "from matplotlib.backends import backend_registry\n"
        "print(pandas.core.frame.import_optional_dependency('numpy').__name__,\n"
        "      pandas.core.frame.import_optional_dependency('os', errors='ignore'),\n"
        "      backend_registry.load_backend_module('agg').__name__)\n"
        f"for compute in [{table}]:\n"
        "    try:\n"
        "        print('ok', type(compute()).__name__)\n"
        "    except Exception as exc:\n"
        "        print('refused', type(exc).__name__, exc)\n"
        "matplotlib.use('agg')\n"
        "print(matplotlib.get_backend())\n"
    )
    result = stack_sb.run(code)
    assert result.status is RunStatus.OK, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "numpy None matplotlib.backends.backend_agg"
    assert lines[-1] == "agg"
    names = [name for _ in MODULE_HELPERS for name in REFUSED_MODULES]
    for line, call, name in zip(lines[1:-1], calls, names, strict=True):
        expected = f"sandbox: import of {name!r} is not permitted (not on the allow-list)"
        assert line == f"refused ModuleNotFoundError {expected}", (call, line)


#: Where a run could leave a matplotlib configuration for later runs: the working directory,
#: and the configuration directories under HOME (when HOME was the workspace).
PLANTED_RC = ("matplotlibrc", ".config/matplotlib/matplotlibrc", ".matplotlib/matplotlibrc")


def test_a_matplotlibrc_left_in_the_workspace_configures_no_later_run(stack_sb: Sandbox) -> None:
    """matplotlib is imported before the chdir (warm: in the zygote; spawn: in the child) and
    HOME is an empty read-only directory outside the workspace."""
    plant = (
        "import pathlib\n"
        f"for rel in {PLANTED_RC!r}:\n"
        "    path = pathlib.Path(rel)\n"
        "    path.parent.mkdir(parents=True, exist_ok=True)\n"
        "    path.write_text('lines.linewidth: 7.25\\nfigure.dpi: 33\\n')\n"
        "print(sorted(str(p) for p in pathlib.Path('.').rglob('matplotlibrc')))\n"
    )
    planted = stack_sb.run(plant)
    assert planted.status is RunStatus.OK, planted.stderr
    assert planted.stdout == f"{sorted(PLANTED_RC)}\n"
    check = (
        "import pathlib, matplotlib\n"
        "import matplotlib.pyplot as plt\n"
        "print(matplotlib.rcParams['lines.linewidth'], plt.rcParams['figure.dpi'])\n"
        "home = pathlib.Path.home()\n"
        "print(home != pathlib.Path.cwd(), list(home.iterdir()))\n"
        "try:\n"
        "    (home / 'x').write_text('x')\n"
        "except PermissionError as exc:\n"
        "    print('read-only', 'sandbox:' in str(exc))\n"
    )
    result = stack_sb.run(check)
    assert result.status is RunStatus.OK, result.stderr
    assert result.stdout.splitlines() == ["1.5 100.0", "True []", "read-only True"]


def test_every_warm_run_gets_fresh_global_generators(stack_sb: Sandbox) -> None:
    """numpy's legacy RandomState (np.random.rand, unseeded DataFrame.sample) and random are
    reseeded after each fork: runs of one zygote do not replay one sequence."""
    if stack_sb.capabilities().execution["mode"] != "warm":
        pytest.skip("a spawn-mode run is a new interpreter: its generators seed themselves")
    code = (
        "import random, numpy as np, pandas as pd\n"
        "df = pd.DataFrame({'a': range(1000)})\n"
        "print(np.random.rand(), int(df.sample(1)['a'].iloc[0]), random.random())\n"
    )
    runs = [stack_sb.run(code) for _ in range(4)]
    assert [r.status for r in runs] == [RunStatus.OK] * 4, [r.stderr for r in runs]
    columns = list(zip(*(r.stdout.split() for r in runs), strict=True))
    assert len(columns) == 3
    for name, values in zip(("np.random.rand", "DataFrame.sample", "random"), columns, strict=True):
        assert len(set(values)) > 1, (name, values)


def test_persistence_pickle_through_pandas_parquet_named_without_pip(stack_sb: Sandbox) -> None:
    """One story: pandas' own pickling works (the kernel layers are the boundary here), the
    pickle module stays refused naming it, and parquet without an engine names pyarrow and what
    works instead, not "use pip"."""
    refused = stack_sb.run("import pickle\n")
    assert refused.status is RunStatus.REJECTED
    message = refused.violations[0].message
    assert message.startswith("import of 'pickle' is refused")
    assert "df.to_pickle(path) and pd.read_pickle(path)" in message
    code = (
        "import pandas as pd\n"
        "df = pd.DataFrame({'a': [1, 2], 'when': pd.to_datetime(['2026-01-01', '2026-01-02'])})\n"
        "df.to_pickle('frame.pkl')\n"
        "back = pd.read_pickle('frame.pkl')\n"
        "print(back.equals(df), back.dtypes['when'])\n"
        "for store in [lambda: df.to_parquet('f.parquet'), lambda: pd.read_parquet('frame.pkl'),\n"
        "              lambda: df.to_parquet('f.parquet', engine='pyarrow')]:\n"
        "    try:\n"
        "        store()\n"
        "    except ImportError as exc:\n"
        "        print(exc)\n"
    )
    result = stack_sb.run(code)
    assert result.status is RunStatus.OK, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] in ("True datetime64[ns]", "True datetime64[us]")  # pandas 2 | 3
    assert lines[1:] == [PARQUET_MISSING] * 3
    assert "pip" not in result.stdout
    assert "pyarrow" in lines[1] and "packages cannot be installed" in lines[1]


@pytest.mark.parametrize("execution", ["warm", "spawn"])
def test_matplotlib_is_imported_before_the_chdir_without_a_preload_too(
    workspace: pathlib.Path, execution: str
) -> None:
    """Allowed but not preloaded, matplotlib is still imported outside the workspace."""
    (workspace / "matplotlibrc").write_text("lines.linewidth: 7.25\n", encoding="utf-8")
    with Sandbox(
        workspace, limits=LIMITS, extra_modules=("matplotlib",), execution=execution
    ) as sb:
        result = sb.run("import matplotlib\nprint(matplotlib.rcParams['lines.linewidth'])\n")
    assert (result.status, result.stdout) == (RunStatus.OK, "1.5\n"), result.stderr


#: How user code can set matplotlib's figure.hooks (``{hooks!r}`` is the list); each is
#: followed by ``plt.figure()``.
HOOK_SETTERS = (
    "plt.rcParams['figure.hooks'] = {hooks!r}",
    "matplotlib.rcParams.update({{'figure.hooks': {hooks!r}}})",
    "plt.rc('figure', hooks={hooks!r})",
    "stack.enter_context(plt.rc_context({{'figure.hooks': {hooks!r}}}))",
    "pathlib.Path('h.mplstyle').write_text('figure.hooks: ' + ', '.join({hooks!r}))\n"
    "    plt.style.use('./h.mplstyle')",
)
#: Hooks naming a module the code may not import, or reaching one through attributes, and
#: what each refusal says.
REFUSED_HOOKS = {
    ("os:system",): "ModuleNotFoundError sandbox: import of 'os' is not permitted",
    ("subprocess:getoutput",): "ModuleNotFoundError sandbox: import of 'subprocess' is not",
    ("numpy:shape", "ctypes:CDLL"): "ModuleNotFoundError sandbox: import of 'ctypes' is not",
    ("matplotlib:os.system",): "AttributeError sandbox: attribute 'os' is not accessible",
    ("matplotlib.cbook:os.getcwd",): "AttributeError sandbox: attribute 'os' is not accessible",
    ("numpy:_core.multiarray.__class__",): "AttributeError sandbox: attribute '_core' is not",
}


def test_figure_hooks_import_and_read_only_what_the_code_may(stack_sb: Sandbox) -> None:
    """plt.figure() imports each figure.hooks module and walks its dotted name: however the
    setting was made (and also when a FigureClass sets it while the figure is made), the
    module must be one the code may import and each attribute one it may read."""
    steps = [setter.format(hooks=list(hooks)) for hooks in REFUSED_HOOKS for setter in HOOK_SETTERS]
    code = "import contextlib, pathlib, matplotlib\nimport matplotlib.pyplot as plt\n"
    code += "class Fig(matplotlib.figure.Figure):\n"
    code += "    def __init__(self, *args, **kwargs):\n"
    code += "        super().__init__(*args, **kwargs)\n"
    code += "        plt.rcParams['figure.hooks'] = ['os:getcwd']\n"
    for step in [*steps, "plt.rcParams['figure.hooks'] = ['numpy:shape']", "Fig"]:
        figure = "plt.figure(FigureClass=Fig)" if step == "Fig" else "plt.figure()"
        code += (
            "with contextlib.ExitStack() as stack:\n"
            "    try:\n"
            f"    {step if step != 'Fig' else 'pass'}\n"
            f"        print('made', type({figure}).__name__)\n"
            "    except Exception as exc:\n"
            "        print('refused', type(exc).__name__, exc)\n"
            "    plt.close('all')\n"
            "    plt.rcParams['figure.hooks'] = []\n"
        ).replace("\n    plt.style", "\n        plt.style")
    result = stack_sb.run(code.replace("    try:\n    ", "    try:\n        "))
    assert result.status is RunStatus.OK, result.stderr
    lines = result.stdout.splitlines()
    expected = [f"refused {why}" for why in REFUSED_HOOKS.values() for _ in HOOK_SETTERS]
    expected += ["made Figure", f"refused {REFUSED_HOOKS['os:system',]}"]  # FigureClass sets it
    assert len(lines) == len(expected), result.stdout
    for line, start in zip(lines, expected, strict=True):
        assert line.startswith(start), (start, line)


def test_pandas_plotting_backend_names_only_modules_the_code_may_import(stack_sb: Sandbox) -> None:
    """pd.set_option('plotting.backend', NAME) (and plot(backend=NAME)) import NAME."""
    calls = [
        *(f"pd.set_option('plotting.backend', {name!r})" for name in REFUSED_MODULES),
        "opts = pd.options.plotting\n    opts.backend = 'os'",
        "pd.Series([1]).plot(backend='subprocess')",
        "pd.DataFrame({'a': [1]}).plot.line(backend='ctypes')",
    ]
    code = "import pandas as pd\n" + "".join(
        f"try:\n    {call}\n    print('set', pd.get_option('plotting.backend'))\n"
        "except Exception as exc:\n    print('refused', type(exc).__name__, exc)\n"
        for call in calls
    )
    code += "pd.set_option('plotting.backend', 'matplotlib')\n"
    code += "print(pd.get_option('plotting.backend'))\n"
    result = stack_sb.run(code)
    assert result.status is RunStatus.OK, (result.stderr, result.violations)
    lines = result.stdout.splitlines()
    names = [*REFUSED_MODULES, "os", "subprocess", "ctypes"]
    assert lines[-1] == "matplotlib"
    for line, name in zip(lines[:-1], names, strict=True):
        assert line.startswith(
            f"refused ModuleNotFoundError sandbox: import of {name!r} is not permitted"
        ), line


def test_numpy_matrix_strings_read_no_frame_of_the_sandbox(stack_sb: Sandbox) -> None:
    """np.bmat('names') and np.r_['names'] look the names up in their caller's frame: called
    as __getattr__ through the guarded getattr() that frame was the sandbox's (its globals:
    os, sys); now only the code's own frame is read."""
    helpers = ("np.bmat", "np.matrixlib.bmat", "np.r_.__getitem__", "np.c_.__getitem__")
    probes = ("getattr(S('os'), 'x')", "getattr(S('sys'), 'x', None)", "hasattr(S('name'), 'x')")
    code = "import numpy as np\nA = np.eye(2)\n"
    code += "print(np.bmat('A,A').shape, np.r_['A;A'].shape, np.c_['A,A'].shape)\n"
    code += "print(np.bmat('A', ldict={'A': A}).shape)\n"
    for helper in helpers:
        code += f"S = type('S', (str,), {{'__getattr__': {helper}}})\n"
        for probe in probes:
            code += (
                f"try:\n    print('read', {probe})\n"
                "except Exception as exc:\n    print('refused', type(exc).__name__, exc)\n"
            )
    result = stack_sb.run(code)
    assert result.status is RunStatus.OK, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["(2, 4) (4, 2) (2, 4)", "(2, 2)"]
    assert len(lines) == 2 + len(helpers) * len(probes), result.stdout
    for line in lines[2:]:
        assert line.startswith("refused SandboxDenied [Errno 1] sandbox: np.bmat('names')"), line


def test_the_stacks_own_test_suites_are_refused(stack_sb: Sandbox) -> None:
    """np.test()/pd.test() would start pytest, which imports plugins and test modules."""
    calls = ("np.test()", "np.linalg.test('fast')", "np.fft.test(verbose=0)", "pd.test()",
             "pd.test(['-p', 'os'])")  # fmt: skip
    code = "import numpy as np, pandas as pd\n"
    code += "".join(
        f"try:\n    print('ran', {call})\n"
        "except Exception as exc:\n    print('refused', type(exc).__name__, exc)\n"
        for call in calls
    )
    result = stack_sb.run(code)
    assert result.status is RunStatus.OK, (result.stderr, result.violations)
    lines = result.stdout.splitlines()
    assert len(lines) == len(calls), result.stdout
    for line in lines:
        assert line.startswith("refused SandboxDenied [Errno 1] sandbox: running a library's"), line


def test_numpys_code_runners_are_refused(stack_sb: Sandbox) -> None:
    """Red team 2026-12-03 N1: numpy.testing.runstring(code, {}) filled the dict with numpy's
    real builtins (real getattr/__import__, the child's globals and frames); measure and rundocs
    run code too. Every spelling that reaches them is refused and nothing is handed out."""
    calls = (
        "nt.runstring('x = 1', d)",
        "runstring('x = 1', d)",
        "getattr(nt, 'run' + 'string')('x = 1', d)",
        "np.testing.runstring('y = 2', d)",
        "nt.measure('x = 1')",
        "np.testing.measure('x = 1', 3)",
        "nt.rundocs('doc.py')",
    )
    code = "import numpy as np, numpy.testing as nt\nfrom numpy.testing import runstring\n"
    code += "d = {}\n"
    code += "".join(
        f"try:\n    print('ran', {call})\n"
        "except Exception as exc:\n    print('refused', type(exc).__name__, exc)\n"
        for call in calls
    )
    code += "print('leaked', sorted(k for k, v in d.items() if isinstance(v, dict)))\n"
    result = stack_sb.run(code)
    assert result.status is RunStatus.OK, (result.stderr, result.violations)
    lines = result.stdout.splitlines()
    assert lines.pop() == "leaked []", result.stdout
    assert len(lines) == len(calls), result.stdout
    for call, line in zip(calls, lines, strict=True):
        assert line.startswith(
            "refused SandboxDenied [Errno 1] sandbox: numpy.testing.runstring, measure and"
        ), (call, line)


@pytest.mark.parametrize("execution", ["warm", "spawn"])
def test_figure_hooks_are_guarded_when_a_library_imports_pyplot(
    execution: str, tmp_path: pathlib.Path
) -> None:
    """Without pyplot preloaded, pandas' df.plot() imports it: its figure() is guarded too."""
    code = (
        "import matplotlib\n"
        "matplotlib.rcParams['figure.hooks'] = ['os:getcwd']\n"
        "import pandas as pd\n"
        "for plot in (lambda: pd.Series([1, 2]).plot(), lambda: pd.DataFrame({'a': [1]}).hist()):\n"
        "    try:\n"
        "        plot()\n"
        "        print('made')\n"
        "    except Exception as exc:\n"
        "        print('refused', type(exc).__name__, exc)\n"
    )
    preload = ("numpy", "pandas", "matplotlib")
    with Sandbox(
        tmp_path, limits=LIMITS, require=("landlock", "seccomp"), extra_modules=STACK,
        preload=preload, execution=execution,
    ) as sb:  # fmt: skip
        result = sb.run(code)
    assert result.status is RunStatus.OK, result.stderr
    expected = "refused ModuleNotFoundError sandbox: import of 'os' is not permitted"
    lines = result.stdout.splitlines()
    assert len(lines) == 2, result.stdout
    assert all(line.startswith(expected) for line in lines), result.stdout
