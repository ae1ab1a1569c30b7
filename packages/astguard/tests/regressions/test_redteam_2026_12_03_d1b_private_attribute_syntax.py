"""AG309: private attribute syntax on library objects (red team 2026-12-03 D1, the gap left).

D1's fix refused private names given as *strings* on every object at run time, but attribute
*syntax* is astguard's to judge, and AG303 refuses private attributes of modules only: in the
data-science profile ``df._mgr.apply('__reduce_ex__', protocol=4)`` reached pandas' internal
``BlockManager.apply``, which looks its first argument up with the real ``getattr`` (pandas
itself calls it with private names, so it cannot be guarded). With
``Policy.refuse_private_attributes`` (the data-science profile's), ``x._name`` is refused on
everything but a method's own ``self``/``cls``, in every spelling of the receiver and of the
access. Each variant was accepted before the rule.
"""

from __future__ import annotations

import pytest

from astguard import Policy, check

#: The data-science profile's policy as pysandbox builds it (pysandbox's Profile.policy_for).
POLICY = (
    Policy()
    .with_modules("numpy", "pandas", "matplotlib")
    .with_runtime_attribute_guard()
    .with_runtime_format_guard()
    .with_private_attribute_rule()
)
PD = "import pandas as pd\ndf = pd.DataFrame({'a': [1]})\n"

REFUSED = {
    "the-finding": PD + "df._mgr.apply('__reduce_ex__', protocol=4)",
    "chained": PD + "print(df.a.values.base._x)",
    "on-a-call": "import pandas as pd\npd.DataFrame({'a': [1]})._mgr.apply('__reduce_ex__')",
    "subscripted": PD + "[df][0]._mgr.apply('__reduce_ex__')",
    "subscripted-column": PD + "df['a']._mgr",
    "walrus": "import pandas as pd\n(d := pd.DataFrame())._mgr",
    "lambda-body": PD + "f = lambda d: d._mgr\nf(df)",
    "lambda-default": PD + "f = lambda d=df: d._mgr\nf()",
    "comprehension": PD + "blocks = [d._mgr for d in [df]]",
    "comprehension-condition": PD + "blocks = [1 for d in [df] if d._mgr]",
    "nested-function": PD + "def f(d):\n    return d._mgr\nf(df)",
    "store": PD + "df._x = 1",
    "augmented-store": PD + "df._x += 1",
    "delete": PD + "del df._mgr",
    "getattr-literal": PD + "getattr(df, '_mgr')",
    "class-pattern": PD + "match df:\n    case pd.DataFrame(_mgr=m):\n        print(m)",
    "mangled-name": PD + "df.__mgr",
    # not a receiver: a static method, a default, a rebound self, a library base class
    "staticmethod": PD + "class C:\n    @staticmethod\n    def m(self):\n"
    "        return self._mgr\nC.m(df)",
    "receiver-default": PD + "class C:\n    def m(self=df):\n        return self._mgr\nC.m()",
    "receiver-rebound": PD + "class C:\n    def m(self):\n        self = df\n"
    "        return self._mgr",
    "receiver-walrus": PD + "class C:\n    def m(self):\n        (self := df)\n"
    "        return self._mgr",
    "receiver-shadowed-in-comprehension": PD + "class C:\n    def m(self):\n"
    "        return [self._mgr for self in [df]]",
    "receiver-shadowed-in-lambda": PD + "class C:\n    def m(self):\n"
    "        return (lambda self: self._mgr)(df)",
    "unknown-decorator": PD + "def deco(f):\n    return lambda *a: f(df)\n"
    "class C:\n    @deco\n    def m(self):\n        return self._mgr\nC().m()",
    "library-base-class": "import pandas as pd\nclass F(pd.DataFrame):\n    def m(self):\n"
    "        return self._mgr.apply('__reduce_ex__', protocol=4)\nF({'a': [1]}).m()",
    "own-class-on-a-library-base": "import pandas as pd\nclass F(pd.DataFrame):\n    pass\n"
    "class G(F):\n    def m(self):\n        return self._mgr",
    "unknown-class-decorator": PD + "def deco(c):\n    return c\n@deco\nclass C:\n"
    "    def m(self):\n        return self._mgr",
    "parameter-named-like-a-module": PD + "def f(pd):\n    return pd._mgr\nf(df)",
    "parameter-named-like-an-import": "from pandas import DataFrame\n"
    "def f(DataFrame):\n    return DataFrame._mgr\nf(DataFrame())",
    "comprehension-variable-named-like-a-module": PD + "x = [pd._mgr for pd in [df]]",
    "other-parameter": "class C:\n    def __eq__(self, other):\n        return other._mgr",
}

ACCEPTED = {
    "self": "class C:\n    def __init__(self):\n        self._n = 1\n    def m(self):\n"
    "        self._n += 1\n        del self._n",
    "cls": "class C:\n    _n = 0\n    @classmethod\n    def m(cls):\n        return cls._n",
    "property": "class C:\n    @property\n    def n(self):\n        return self._n\n"
    "    @n.setter\n    def n(self, v):\n        self._n = v",
    "nested-closure": "class C:\n    def m(self):\n        return [self._n for _ in range(2)], "
    "(lambda: self._n)()",
    "own-base": "class A:\n    def __init__(self):\n        self._n = 1\nclass B(A):\n"
    "    def m(self):\n        return self._n",
    "builtin-base": "class E(ValueError):\n    def m(self):\n        return self._n",
    "namedtuple": "from collections import namedtuple\nP = namedtuple('P', 'x y')\n"
    "p = P(1, 2)\nprint(p._asdict(), p._replace(x=3), P._fields, P._make([1, 2]))",
    "pandas-accessor": "import pandas as pd\n"
    "@pd.api.extensions.register_dataframe_accessor('geo')\nclass Geo:\n"
    "    def __init__(self, obj):\n        self._obj = obj\n    def total(self):\n"
    "        return self._obj['b'].sum()",
    "display-hook": PD + "html = df._repr_html_()",
    "dunder-allowed": PD + "print(type(df).__name__, df.__class__.__name__)",
}


@pytest.mark.parametrize("source", REFUSED.values(), ids=REFUSED.keys())
def test_private_attribute_syntax_is_refused(source: str) -> None:
    result = check(source, POLICY)
    assert "AG309" in result.rule_ids, str(result)


@pytest.mark.parametrize("source", REFUSED.values(), ids=REFUSED.keys())
def test_without_the_rule_the_same_code_was_accepted(source: str) -> None:
    """What the finding was: these passed the checker (the rule is what refuses them)."""
    unruled = POLICY.with_private_attribute_rule(refuse=False)
    assert "AG309" not in check(source, unruled).rule_ids


@pytest.mark.parametrize("source", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_own_objects_and_public_underscore_names_are_accepted(source: str) -> None:
    result = check(source, POLICY)
    assert result.ok, str(result)


def test_the_dunder_rule_still_decides_dunders() -> None:
    result = check(PD + "df.__reduce_ex__(4)", POLICY)
    assert result.rule_ids == ("AG301",)
