"""Red team 2026-12-03 D1, AG309's limit: a method of the script's own class on a library object.

AG309 exempts ``self._x``/``cls._x`` in the methods of the script's own classes because of where
they are written, not what the receiver holds when the method runs: ``C.m(df)``,
``type(c).m(df)``, a subclass with a pandas base (``type('D', (C, pd.DataFrame), {})``,
``class D(C, pd.DataFrame)``), a classmethod whose ``cls`` is such a subclass, a ``super()``
chain, a module, a pandas class or ``super(pd.DataFrame, df)`` as ``self``;
``self._mgr.apply('__reduce_ex__', protocol=4)`` then called the dunder through pandas'
internals.

Now the parent compiles each ``name._x`` to go through the child's receiver guard (astguard's
``route_private_receivers``), which refuses a receiver whose class (or MRO) is not the
script's own. Each variant runs in both execution modes; each printed "reached" before the
fix (the super object variant reached with the first version of the guard, too).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pysandbox import DATASCIENCE, DEFAULT, RunStatus, Sandbox, SandboxConfig
from sandbox_helpers import ATTEMPT, LIMITS, MISSING, needs_kernel, needs_stack

# Starts real processes (tests/README.md).
pytestmark = pytest.mark.e2e

SETUP = (
    "import pandas as pd\n"
    "df = pd.DataFrame({'a': [1, 1, 2], 'b': [3, 4, 5]})\n"
    "class C:\n"
    "    def m(self):\n"
    "        return self._mgr.apply('__reduce_ex__', protocol=4)\n"
    "    def inner(self):\n"
    "        return (lambda: self._mgr)()\n"
    "    def store(self):\n"
    "        self._mgr = None\n"
    "    def module_internal(self):\n"
    "        return self._from_nested_dict\n"
    "    def constructor(self):\n"
    "        return self._constructor\n"
    "    def axis_number(self):\n"
    "        return self._get_axis_number\n"
    "    @classmethod\n"
    "    def axes(cls):\n"
    "        return cls._AXIS_ORDERS\n"
    "class E(C):\n"
    "    def n(self):\n"
    "        return super().m()\n"
)
#: The start of the receiver guard's refusal.
REFUSAL = "refused SandboxDenied [Errno 1] sandbox: AG309: the private attribute"


@pytest.fixture(scope="module", params=["warm", "spawn"])
def profile_sb(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Sandbox]:
    """A sandbox built for the data-science profile (SandboxConfig.for_profile), per mode."""
    if MISSING:
        pytest.skip(f"the data-science stack is not installed ({MISSING})")
    ws = tmp_path_factory.mktemp(f"d1c-{request.param}")
    config = SandboxConfig.for_profile(DATASCIENCE, limits=LIMITS, execution=request.param)
    with Sandbox.from_config(ws, config) as sb:
        yield sb


#: A method of the script's own class, run on a pandas object (or module, or class).
RECEIVERS = {
    "class_call": "C.m(df)",
    "type_of_instance": "type(C()).m(df)",
    "getattr_public_name": "getattr(C, 'm')(df)",
    "closure_in_method": "C.inner(df)",
    "store": "C.store(df)",
    "series": "C.m(df['a'])",
    "module_as_self": "C.module_internal(pd.core.frame)",
    "pandas_class_as_self": "C.constructor(pd.DataFrame)",
    "type_subclass": "type('D', (C, pd.DataFrame), {})({'a': [1]}).m()",
    "class_subclass": "D({'a': [1]}).m()",
    "classmethod_subclass": "type('D', (C, pd.DataFrame), {}).axes()",
    "classmethod_instance": "D({'a': [1]}).axes()",
    "super_object": "C.axis_number(super(pd.DataFrame, df))",
    "super_chain": "type('G', (E, pd.DataFrame), {})({'a': [1]}).n()",
}
SUBCLASS = "class D(C, pd.DataFrame):\n    pass\n"


@needs_stack
@needs_kernel
@pytest.mark.parametrize("spelling", sorted(RECEIVERS))
def test_own_method_on_a_library_object_is_refused(profile_sb: Sandbox, spelling: str) -> None:
    code = ATTEMPT + SETUP + SUBCLASS + f"attempt(lambda: {RECEIVERS[spelling]})\n"
    code += "print('intact', type(df).__name__, df['b'].sum())\n"
    result = profile_sb.run(code)
    assert result.status is RunStatus.OK, (result.stderr, result.violations)
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith(REFUSAL), lines
    assert "is not this script's own" in lines[0]
    assert lines[1] == "intact DataFrame 12"


#: Ordinary classes: loads, stores, deletes, augmented assignment, classmethods, closures,
#: super(), enum/NamedTuple/Generic/dataclass/ABC bases, exceptions, pandas' accessor pattern.
ORDINARY = """
import abc
import dataclasses
import enum
import typing

class Counter:
    _made = 0
    def __init__(self):
        self._n = 0
        self.__hidden = 'h'
    def bump(self, k=1):
        self._n += k
        return self._n
    def clear(self):
        del self._n
        return 'cleared'
    def hidden(self):
        return self.__hidden
    def later(self):
        return [self._n for _ in range(2)], (lambda: self._n)()
    @classmethod
    def make(cls):
        cls._made += 1
        return cls._made

class Sub(Counter):
    def bump(self, k=1):
        return super().bump(k) * 10

class Color(enum.Enum):
    RED = 1
    def label(self):
        return self._name_.lower()

class P(typing.NamedTuple):
    x: int
    def twice(self):
        return self._replace(x=self.x * 2).x

T = typing.TypeVar('T')
class Box(typing.Generic[T]):
    def __init__(self, v: T):
        self._v = v
    def get(self) -> T:
        return self._v

@dataclasses.dataclass
class Point:
    x: int
    _cache: int = 0
    def norm(self):
        self._cache = self.x * self.x
        return self._cache

class Shape(abc.ABC):
    @abc.abstractmethod
    def area(self): ...
class Sq(Shape):
    def __init__(self):
        self._s = 3
    def area(self):
        return self._s ** 2

class MyError(ValueError):
    def __init__(self, why):
        super().__init__(why)
        self._why = why
    def why(self):
        return self._why

class Row(dict):
    def first(self):
        self._seen = True
        return self._seen

import pandas as pd
@pd.api.extensions.register_dataframe_accessor('geo')
class Geo:
    def __init__(self, obj):
        self._obj = obj
    def total(self):
        return int(self._obj['b'].sum())

c = Counter()
print(c.bump(), c.bump(2), c.later(), c.hidden(), c.clear(), Counter.make(), Counter.make())
print(Sub().bump(3), Color.RED.label(), P(2).twice(), Box(5).get(), Point(3).norm(), Sq().area())
try:
    raise MyError('w')
except MyError as exc:
    print(exc.why(), Row().first(), pd.DataFrame({'b': [1, 2]}).geo.total())
"""


@needs_stack
@needs_kernel
def test_ordinary_classes_keep_their_private_attributes(profile_sb: Sandbox) -> None:
    result = profile_sb.run(ORDINARY)
    assert result.status is RunStatus.OK, (result.stderr, result.violations)
    assert result.stdout.splitlines() == [
        "1 3 ([3, 3], 3) h cleared 1 2",
        "30 red 4 5 9 9",
        "w True 3",
    ]


@needs_kernel
def test_the_default_profile_does_not_route_receivers(tmp_path: Path) -> None:
    """AG309 is off there: ``self._x`` is a plain attribute (no guard to route through)."""
    code = "class C:\n    def m(self):\n        return self._x\n"
    code += "class O:\n    _x = 4\nprint(C.m(O()))\n"
    with Sandbox.from_config(tmp_path, SandboxConfig.for_profile(DEFAULT)) as sb:
        result = sb.run(code)
    assert result.status is RunStatus.OK, (result.stderr, result.violations)
    assert result.stdout == "4\n"
