"""Red team 2026-12-03 D1, the gap its fix left: private attribute syntax on library objects.

D1's fix refused private names given as strings, but attribute syntax is astguard's to judge
and AG303 refused private attributes of modules only: in the data-science profile
``df._mgr.apply('__reduce_ex__', protocol=4)`` called the dunder through pandas' internal
``BlockManager.apply`` (pandas calls it with private names itself, so it cannot be guarded),
and ``pandas.api.extensions.register_dataframe_accessor`` (``_series_``, ``_index_``) set a
user-chosen name, private ones included, on pandas' own classes with the real ``setattr``.
Now the data-science profile switches on astguard's AG309 (``Profile.policy_for``) and the
child refuses a private accessor name. Each variant runs in both execution modes; each
printed "reached" before the fix.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pysandbox import DATASCIENCE, DEFAULT, RunStatus, Sandbox, SandboxConfig
from sandbox_helpers import ATTEMPT, LIMITS, MISSING, needs_kernel, needs_stack

# Starts real processes (tests/README.md).
pytestmark = pytest.mark.e2e

SETUP = "import pandas as pd\ndf = pd.DataFrame({'a': [1, 1, 2], 'b': [3, 4, 5]})\n"
#: The start of the child's refusal of an accessor name.
ACCESSOR_REFUSAL = "refused SandboxDenied [Errno 1] sandbox: pandas may not register an accessor"


@pytest.fixture(scope="module", params=["warm", "spawn"])
def profile_sb(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Sandbox]:
    """A sandbox built for the data-science profile (SandboxConfig.for_profile), per mode."""
    if MISSING:
        pytest.skip(f"the data-science stack is not installed ({MISSING})")
    ws = tmp_path_factory.mktemp(f"d1b-{request.param}")
    config = SandboxConfig.for_profile(DATASCIENCE, limits=LIMITS, execution=request.param)
    with Sandbox.from_config(ws, config) as sb:
        yield sb


#: Attribute syntax that reached pandas' internals (BlockManager.apply calls the name it is
#: given with the real getattr: the dunder ran).
ATTRIBUTE_SYNTAX = {
    "the_finding": "df._mgr.apply('__reduce_ex__', protocol=4)",
    "chained_call": "pd.DataFrame({'a': [1]})._mgr.apply('__reduce_ex__', protocol=4)",
    "subscripted": "[df][0]._mgr.apply('__reduce_ex__', protocol=4)",
    "column": "df['a']._mgr",
    "walrus": "(d := df)._mgr",
    "lambda_body": "(lambda d: d._mgr)(df)",
    "comprehension": "[d._mgr for d in [df]][0]",
    "own_subclass": "type('F', (pd.DataFrame,), {})({'a': [1]})._mgr",
}


@needs_stack
@needs_kernel
@pytest.mark.parametrize("spelling", sorted(ATTRIBUTE_SYNTAX))
def test_private_attribute_syntax_is_refused_before_it_runs(
    profile_sb: Sandbox, spelling: str
) -> None:
    result = profile_sb.run(ATTEMPT + SETUP + f"attempt(lambda: {ATTRIBUTE_SYNTAX[spelling]})\n")
    assert result.status is RunStatus.REJECTED, (result.status, result.stdout)
    assert [v.rule_id for v in result.violations] == ["AG309"], result.violations
    assert result.stdout == ""


#: Store, delete and method spellings, each refused by the checker.
STATEMENTS = {
    "store": "df._x = 1\n",
    "delete": "del df._mgr\n",
    "subclass_method": "class F(pd.DataFrame):\n    def m(self):\n"
    "        return self._mgr.apply('__reduce_ex__', protocol=4)\nF({'a': [1]}).m()\n",
    "staticmethod": "class C:\n    @staticmethod\n    def m(self):\n        return self._mgr\n"
    "C.m(df)\n",
    "rebound_self": "class C:\n    def m(self):\n        self = df\n        return self._mgr\n"
    "C().m()\n",
}


@needs_stack
@needs_kernel
@pytest.mark.parametrize("spelling", sorted(STATEMENTS))
def test_private_attribute_statements_are_refused(profile_sb: Sandbox, spelling: str) -> None:
    result = profile_sb.run(SETUP + STATEMENTS[spelling])
    assert result.status is RunStatus.REJECTED, (result.status, result.stdout)
    assert "AG309" in [v.rule_id for v in result.violations], result.violations


#: Accessor registration with a private or dunder name (set on pandas' own class).
ACCESSORS = {
    "dataframe_private": "pd.api.extensions.register_dataframe_accessor('_mgr')",
    "series_dunder": "pd.api.extensions.register_series_accessor('__reduce_ex__')",
    "index_private": "pd.api.extensions.register_index_accessor('_data')",
    "computed": "pd.api.extensions.register_dataframe_accessor('_' + 'constructor')",
    "str_subclass": "pd.api.extensions.register_dataframe_accessor(type('S', (str,), {})('geo'))",
    "not_an_identifier": "pd.api.extensions.register_dataframe_accessor('a b')",
}


@needs_stack
@needs_kernel
@pytest.mark.parametrize("spelling", sorted(ACCESSORS))
def test_accessor_registration_refuses_private_names(profile_sb: Sandbox, spelling: str) -> None:
    code = ATTEMPT + SETUP + f"attempt(lambda: {ACCESSORS[spelling]}(type('A', (), {{}})))\n"
    code += "print('intact', type(df).__name__, callable(df.agg))\n"
    result = profile_sb.run(code)
    assert result.status is RunStatus.OK, (result.stderr, result.violations)
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith(ACCESSOR_REFUSAL), lines
    assert "an accessor name must be a public identifier" in lines[0]
    assert lines[1] == "intact DataFrame True"


@needs_stack
@needs_kernel
def test_ordinary_pandas_code_and_public_accessors_still_work(profile_sb: Sandbox) -> None:
    code = SETUP + (
        "@pd.api.extensions.register_dataframe_accessor('geo')\n"
        "class Geo:\n"
        "    def __init__(self, obj):\n"
        "        self._obj = obj\n"
        "    def total(self):\n"
        "        return int(self._obj['b'].sum())\n"
        "print(df.geo.total(), df.to_numpy().tolist(), df.dtypes.tolist())\n"
        "print('<table' in df._repr_html_(), df.agg('sum').tolist())\n"
    )
    result = profile_sb.run(code)
    assert result.status is RunStatus.OK, (result.stderr, result.violations)
    assert result.stdout.splitlines() == [
        "12 [[1, 3], [1, 4], [2, 5]] [dtype('int64'), dtype('int64')]",
        "True [4, 12]",
    ]


def test_the_profiles_switch_the_rule_as_data() -> None:
    """The data-science profile turns AG309 on; the default profile leaves it off."""
    assert DATASCIENCE.policy_for().refuse_private_attributes is True
    assert DEFAULT.policy_for().refuse_private_attributes is False
    config = SandboxConfig.for_profile(DATASCIENCE, limits=LIMITS)
    assert config.policy is not None and config.policy.refuse_private_attributes
    assert SandboxConfig.for_profile(DEFAULT).policy == DEFAULT.policy_for()
