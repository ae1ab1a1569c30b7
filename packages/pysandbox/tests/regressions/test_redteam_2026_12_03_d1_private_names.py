"""Red team 2026-12-03 D1: private names given as strings reached a library's internals.

The guarded ``getattr`` refused names starting with ``_`` only on modules, so
``getattr(pandas.core.apply.Apply, '_apply_str')(None, f, '__globals__')`` answered a function's
real globals (and so the real builtins), and pandas' string dispatch (``df.agg(NAME)``,
``groupby(...).agg(NAME)``, ...) looked any name up with the real ``getattr``:
``df.groupby('a').agg('__reduce_ex__', 4)`` called a dunder. The audit hook, Landlock and
seccomp held. Now every private name looked up from a string is refused on every object
(except astguard's allow-list of harmless dunders), and pandas refuses a private name before
its dispatch looks it up. Each variant runs in both execution modes; each printed "reached"
before the fix.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pysandbox import DATASCIENCE, RunStatus, Sandbox
from sandbox_helpers import ATTEMPT, LIMITS, MISSING, needs_kernel, needs_stack

# Starts real processes (tests/README.md).
pytestmark = pytest.mark.e2e

#: The start of every refusal of a private name (the guarded getattr family).
GETATTR_REFUSAL = "refused AttributeError sandbox: attribute "
#: The rule both refusals name.
RULE = "names that start with '_' are private and are not looked up from strings on any object"
#: The start of pandas' refusal.
DISPATCH_REFUSAL = "refused SandboxDenied [Errno 1] sandbox: pandas may not look up "


@pytest.fixture(scope="module", params=["warm", "spawn"])
def stack_sb(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Sandbox]:
    """A data-science sandbox (the profile's modules, preloaded) per execution mode."""
    if MISSING:
        pytest.skip(f"the data-science stack is not installed ({MISSING})")
    ws = tmp_path_factory.mktemp(f"d1-{request.param}")
    with Sandbox(
        ws,
        limits=LIMITS,
        require=("landlock", "seccomp"),
        extra_modules=DATASCIENCE.extra_modules,
        preload=DATASCIENCE.preload,
        execution=request.param,
    ) as sb:
        yield sb


@pytest.fixture(scope="module", params=["warm", "spawn"])
def default_sb(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Sandbox]:
    """The default profile's Python layers alone (no kernel layer to hide behind)."""
    ws = tmp_path_factory.mktemp(f"d1-default-{request.param}")
    with Sandbox(ws, require=(), kernel_layers=False, execution=request.param) as sb:
        yield sb


def lines_of(sb: Sandbox, code: str) -> list[str]:
    result = sb.run(ATTEMPT + code)
    assert result.status is RunStatus.OK, (result.stderr, result.violations)
    return result.stdout.splitlines()


PANDAS_SETUP = (
    "import json, functools\n"
    "import pandas as pd\n"
    "import pandas.core.apply as pca\n"
    "df = pd.DataFrame({'a': [1, 1, 2], 'b': [3, 4, 5]})\n"
    "A = [pca.Apply][0]\n"  # a class held in a list: attribute syntax on it is not checkable
)

#: getattr-family spellings that reached pandas' private helpers (and through them a
#: function's real globals).
PRIVATE_GETATTR = {
    "apply_str_globals": "getattr(A, '_apply' + '_str')(None, json.dumps, '__globals__')",
    "apply_str_default": "getattr(A, '_apply_str', None)",
    "instance_private": "getattr(df, '_m' + 'gr')",
    "series_private": "getattr(df['a'], '_values')",
    "reduce_getattr": "functools.reduce(getattr, ['_apply_str'], A)",
    "map_getattr": "list(map(getattr, [A], ['_apply_str']))[0]",
}


@needs_stack
@needs_kernel
@pytest.mark.parametrize("spelling", sorted(PRIVATE_GETATTR))
def test_getattr_refuses_private_names_on_library_objects(stack_sb: Sandbox, spelling: str) -> None:
    lines = lines_of(stack_sb, PANDAS_SETUP + f"attempt(lambda: {PRIVATE_GETATTR[spelling]})\n")
    assert len(lines) == 1 and lines[0].startswith(GETATTR_REFUSAL), lines
    assert RULE in lines[0]


@needs_stack
@needs_kernel
def test_hasattr_setattr_delattr_refuse_private_names(stack_sb: Sandbox) -> None:
    code = PANDAS_SETUP + (
        "print('hasattr', hasattr(A, '_apply_str'), hasattr(df, '_mgr'))\n"
        "attempt(lambda: setattr(df, '_m' + 'gr', None))\n"
        "attempt(lambda: delattr(A, '_apply' + '_str'))\n"
        "print('intact', type(df._mgr).__name__)\n"
    )
    lines = lines_of(stack_sb, code)
    assert lines == [
        "hasattr False False",
        "refused AttributeError sandbox: setting attribute '_mgr' is not permitted",
        "refused AttributeError sandbox: deleting attribute '_apply_str' is not permitted",
        "intact BlockManager",
    ]


#: pandas' string dispatch given a private name (each reached the name before the fix).
PANDAS_DISPATCH = {
    "frame_agg": "df.agg('__reduce_ex__')",
    "frame_aggregate_private": "df.aggregate('_mgr')",
    "series_agg": "df['a'].agg('_values')",
    "frame_apply": "df.apply('__reduce_ex__', args=(4,))",
    "frame_transform": "df.transform('__reduce_ex__')",
    "groupby_agg": "df.groupby('a').agg('__reduce_ex__', 4)",
    "series_groupby_agg": "df.groupby('a')['b'].agg('__reduce_ex__', 4)",
    "groupby_apply": "df.groupby('a').apply('__reduce_ex__', 4)",
    "groupby_filter": "df.groupby('a')['b'].filter('__reduce_ex__', True, 4)",
    "dict_of_names": "df.agg({'a': '__reduce_ex__'})",
    "list_of_names": "df.agg(['sum', '_mgr'])",
    "named_aggregation": "df.groupby('a').agg(x=('b', '__reduce_ex__'))",
    "rolling_agg": "df.rolling(2).agg('__reduce_ex__', 4)",
    "func_keyword": "df.agg(func='_mgr')",
    "resample_groupby_helper": (
        "df.assign(t=pd.date_range('2020', periods=3)).groupby('a').resample('D', on='t')"
        "._apply(f='__reduce_ex__')"
    ),
    "apply_str_helper": "A._apply_str(None, json.dumps, '__globals__')",
    "str_subclass": "df.agg(type('S', (str,), {})('__reduce_ex__'), 4)",
}


@needs_stack
@needs_kernel
@pytest.mark.parametrize("spelling", sorted(PANDAS_DISPATCH))
def test_pandas_string_dispatch_refuses_private_names(stack_sb: Sandbox, spelling: str) -> None:
    lines = lines_of(stack_sb, PANDAS_SETUP + f"attempt(lambda: {PANDAS_DISPATCH[spelling]})\n")
    assert len(lines) == 1 and lines[0].startswith(DISPATCH_REFUSAL), lines
    assert RULE in lines[0]


@needs_stack
@needs_kernel
def test_pandas_string_dispatch_still_works(stack_sb: Sandbox) -> None:
    code = PANDAS_SETUP + (
        "print(df.agg('sum').tolist(), df['b'].agg('mean'), df.agg(['max', 'min'])['b'].tolist())\n"
        "print(df.agg({'a': 'sum', 'b': ['min', 'max']})['b'].dropna().tolist())\n"
        "g = df.groupby('a')\n"
        "print(g.agg('max')['b'].tolist(), g['b'].agg('sum').tolist())\n"
        "print(df.groupby('a').agg(top=('b', 'max'), n=('b', 'count')).values.tolist())\n"
        "print(df.transform('cumsum')['b'].tolist(), df.apply('sum').tolist())\n"
        "print(g['b'].transform('sum').tolist(), df.rolling(2).agg('sum')['b'].tolist())\n"
        "print(df.groupby('a').filter(lambda g: len(g) > 1)['b'].tolist())\n"
        "print(getattr(df, 'shape'), getattr(df.a, '__class__').__name__, hasattr(df, 'sum'))\n"
    )
    assert lines_of(stack_sb, code) == [
        "[4, 12] 4.0 [5, 3]",
        "[3.0, 5.0]",
        "[4, 5] [7, 5]",
        "[[4, 2], [5, 1]]",
        "[3, 7, 12] [4, 12]",
        "[7, 7, 5] [nan, 7.0, 9.0]",
        "[3, 4]",
        "(3, 2) Series True",
    ]


#: The default profile's equivalents: private names of the allowed standard modules' classes
#: and objects, looked up from strings (before the fix only modules' were refused).
DEFAULT_PRIVATE = {
    "class_private_method": "getattr(random.Random, '_rand' + 'below')",
    "instance_private": "getattr(random.Random(), '_randbelow')",
    "private_state": "getattr(argparse.ArgumentParser(), '_regis' + 'tries')",
    "private_with_default": "getattr(json.JSONEncoder(), '_' + 'x', 7)",
    "enum_private_hook": "getattr(enum.Enum, '_missing_')",
    "reduce_getattr": "functools.reduce(getattr, ['_randbelow'], random.Random)",
}


@pytest.mark.parametrize("spelling", sorted(DEFAULT_PRIVATE))
def test_default_profile_refuses_private_names_from_strings(
    default_sb: Sandbox, spelling: str
) -> None:
    code = "import random, argparse, json, enum, functools\n"
    code += f"attempt(lambda: {DEFAULT_PRIVATE[spelling]})\n"
    lines = lines_of(default_sb, code)
    assert len(lines) == 1 and lines[0].startswith(GETATTR_REFUSAL), lines
    assert RULE in lines[0]


def test_default_profile_allowed_dunders_and_own_attributes(default_sb: Sandbox) -> None:
    code = (
        "class C:\n"
        "    def __init__(self):\n"
        "        self._own = 1\n"
        "        self.pub = 2\n"
        "c = C()\n"
        "print(getattr(c, '__class__').__name__, getattr(C, '__name__'), getattr(c, 'pub'))\n"
        "print(c._own, hasattr(c, '_own'), getattr(c, 'missing', 3))\n"
        "attempt(lambda: getattr(c, '_own'))\n"
    )
    lines = lines_of(default_sb, code)
    assert lines[:2] == ["C C 2", "1 False 3"]
    assert lines[2].startswith(GETATTR_REFUSAL + "'_own' is not accessible"), lines
    assert len(lines) == 3


def test_the_rule_has_one_home() -> None:
    """The allowed dunders are astguard's list; the child's rule reads no list of its own."""
    import astguard
    from pysandbox.child._main import private_name_refused

    dunders = astguard.Policy().allowed_dunder_attributes
    assert not private_name_refused("__name__", dunders)
    assert not private_name_refused("__class__", dunders)
    assert not private_name_refused("sum", dunders)
    for name in ("_x", "__globals__", "__reduce_ex__", "_apply_str", "__dict__", "_"):
        assert private_name_refused(name, dunders), name
