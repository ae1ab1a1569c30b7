"""One or more examples per rule, refused with that rule id, and ordinary code accepted."""

from __future__ import annotations

import sys
import textwrap

import pytest

import astguard
from astguard import Policy, check

GUARDED = Policy(runtime_attribute_guard=True)

REFUSED = [
    # AG1xx imports
    ("AG101", "import os"),
    ("AG101", "import os.path as p"),
    ("AG101", "import importlib"),
    ("AG101", "from subprocess import run"),
    ("AG101", "import logging.config"),
    ("AG101", "import asyncio.subprocess"),
    ("AG101", "import json.tool"),
    ("AG101", "import collections._private"),
    ("AG101", "from urllib import request"),
    ("AG101", "import \uff53\uff59\uff53"),
    ("AG102", "from . import helpers"),
    ("AG102", "from ..pkg import x"),
    ("AG101", "class A:\n    import random\nA.random._os"),
    ("AG101", "class A:\n    if True:\n        from random import choice"),
    ("AG103", "from logging import os"),
    ("AG103", "from random import _os"),
    ("AG103", "from asyncio import create_subprocess_shell"),
    ("AG103", "from typing import get_type_hints"),
    ("AG103", "from string import Formatter"),
    ("AG103", "from io import FileIO"),
    ("AG103", "from logging import currentframe"),
    ("AG103", "from logging import config"),
    ("AG104", "from math import *"),
    ("AG103", "from __future__ import barry_as_FLUFL"),
    # AG2xx builtins and reflection
    ("AG201", "exec('1')"),
    ("AG201", "runner = exec"),
    ("AG201", "holder = {'go': eval}"),
    ("AG201", "compile('1', 'f', 'exec')"),
    ("AG201", "__import__('os')"),
    ("AG201", "globals()['x']"),
    ("AG201", "locals()"),
    ("AG201", "vars(x)"),
    ("AG201", "breakpoint()"),
    ("AG201", "help(str)"),
    ("AG201", "input()"),
    ("AG201", "memoryview(b'x')"),
    ("AG201", "f = lambda: eval"),
    ("AG202", "getattr(f, '__globals__')"),
    ("AG202", "setattr(obj, '__class__', Other)"),
    ("AG202", "delattr(obj, '__dict__')"),
    ("AG202", "hasattr(gen, 'gi_frame')"),
    ("AG202", "getattr(f, '__\uff47lobals__')"),
    ("AG203", "getattr(obj, name)"),
    ("AG203", "getattr(self, f'do_{name}', None)"),
    ("AG203", "setattr(obj, key, 1)"),
    ("AG203", "getattr(*args)"),
    ("AG204", "g = getattr"),
    ("AG204", "list(map(getattr, objs, names))"),
    ("AG205", "import operator\noperator.attrgetter('__globals__')"),
    ("AG205", "from operator import attrgetter\nattrgetter('a', 'b._c')"),
    ("AG205", "from operator import methodcaller\nmethodcaller('__reduce__')"),
    ("AG205", "from operator import attrgetter\nattrgetter(name)"),
    ("AG205", "from operator import attrgetter as ag\nag('__globals__')"),
    ("AG205", "import operator\nag = operator.attrgetter"),
    ("AG205", "from operator import methodcaller as mc\nf = mc"),
    ("AG205", "import operator\noperator.methodcaller('format', 1)"),
    ("AG205", "import operator\noperator.attrgetter('format')"),
    ("AG205", "getattr(operator, 'attrgetter')"),
    ("AG206", "import typing\ntyping.get_type_hints(f)"),
    ("AG206", "import typing\ntyping.ForwardRef('x')"),
    ("AG206", "hints = obj.get_type_hints"),
    ("AG206", "getattr(typing, 'get_type_hints')"),
    ("AG207", "__builtins__['exec']"),
    ("AG207", "x = __loader__"),
    ("AG207", "__spec__.name"),
    ("AG207", "def __builtins__():\n    pass"),
    ("AG207", "global __builtins__"),
    ("AG207", "import math as __builtins__"),
    ("AG207", "x = __dict__"),
    ("AG208", "display(df)"),
    # AG3xx attributes
    ("AG301", "().__class__.__base__.__subclasses__()"),
    ("AG301", "f.__globals__"),
    ("AG301", "f.__code__.co_code"),
    ("AG301", "print.__self__"),
    ("AG301", "object.__getattribute__(x, 'y')"),
    ("AG301", "err.__traceback__"),
    ("AG301", "x.__dict__"),
    ("AG301", "class C:\n    @property\n    def __annotations__(self):\n        return {}"),
    ("AG301", "def __globals__():\n    pass"),
    ("AG301", "class C:\n    def __reduce__(self):\n        return (f, (), None)"),
    ("AG301", "class C:\n    def __reduce_ex__(self, p):\n        return (f, ())"),
    ("AG304", "import copy\ncopy.dispatch_table[C] = reducer"),
    ("AG103", "from copy import dispatch_table"),
    ("AG301", "class C:\n    def __prepare__(name, bases):\n        return {}"),
    ("AG301", "obj.__class__ = Other"),
    ("AG301", "del obj.__class__"),
    ("AG301", "match p:\n    case Point(__class__=c):\n        pass"),
    ("AG301", "match p:\n    case Point(__name__=c):\n        pass"),
    ("AG302", "gen.gi_frame.f_back"),
    ("AG302", "coro.cr_frame"),
    ("AG302", "agen.ag_frame"),
    ("AG302", "tb.tb_frame.f_globals"),
    ("AG302", "frame.f_locals"),
    ("AG302", "code.co_consts"),
    ("AG302", "task.get_stack()"),
    ("AG302", "import typing\ntyping.get_args(typing.List['x'])[0]._evaluate(None, None)"),
    ("AG302", "match p:\n    case Frame(f_globals=g):\n        pass"),
    ("AG303", "import random\nrandom._os"),
    ("AG303", "import random\nrandom._inst.seed"),
    ("AG303", "import random as r\nr._os.system('id')"),
    ("AG303", "from random import Random\nRandom._randbelow"),
    ("AG303", "import random\ngetattr(random, '_os')"),
    ("AG303", "def later():\n    return random._os\n\nimport random"),
    ("AG303", "def later():\n    return choice._x\n\nfrom random import choice"),
    ("AG304", "import statistics\nstatistics.random._os"),
    ("AG304", "import typing\ntyping.operator.attrgetter('x')"),
    ("AG304", "import json\nx = json.re.compile"),
    ("AG304", "import asyncio\nasyncio.events.os"),
    ("AG304", "import pathlib\npathlib.os.system('id')"),
    ("AG304", "import dataclasses\ndataclasses.sys.modules"),
    ("AG304", "import dataclasses\ndataclasses.builtins.exec"),
    ("AG304", "import re\nre.copyreg"),
    ("AG304", "import io\nio.FileIO('x')"),
    ("AG304", "import contextlib\ncontextlib.chdir('/')"),
    ("AG304", "import zoneinfo\nzoneinfo.reset_tzpath(['/etc'])"),
    ("AG302", "import pathlib\npathlib.Path('.')._flavour.os.system('id')"),
    ("AG304", "flavour = get_flavour()\nflavour.os.system('id')"),
    ("AG304", "x.sys.modules"),
    ("AG304", "obj._os.system('id')"),
    ("AG304", "match p:\n    case Thing(os=o):\n        pass"),
    ("AG202", "getattr(obj, 'builtins')"),
    ("AG401", "'{0.os}'.format(flavour)"),
    ("AG205", "import operator\noperator.attrgetter('sys.modules')"),
    ("AG302", "import logging\nlogging.FileHandler._builtin_open('/etc/passwd')"),
    ("AG304", "import traceback\nfor f, n in traceback.walk_stack(None):\n    pass"),
    ("AG304", "import traceback\ntraceback.print_stack()"),
    ("AG304", "import traceback\ntraceback.sys.modules"),
    ("AG103", "from traceback import walk_stack"),
    ("AG304", "import uuid\nuuid.uuid1()"),
    ("AG304", "import logging\nlogging.config.dictConfig({})"),
    ("AG304", "import urllib.parse\nurllib.request.urlopen('http://x')"),
    ("AG304", "from asyncio import events\nevents.os"),
    ("AG305", "import asyncio\nasyncio.create_subprocess_shell('id')"),
    ("AG305", "loop.subprocess_exec(proto, 'id')"),
    ("AG305", "import asyncio\nasyncio.open_connection('h', 1)"),
    ("AG305", "loop.create_connection(proto, 'h', 1)"),
    ("AG305", "loop._make_subprocess_transport(p, 'id', True, 0, 1, 2, 0)"),
    ("AG306", "import random\nrandom.random = lambda: 4"),
    ("AG306", "import math\ndel math.pi"),
    ("AG306", "import math\nsetattr(math, 'pi', 3)"),
    ("AG307", "import random\nm = random"),
    ("AG307", "import random\nprint(random)"),
    ("AG307", "from collections import abc\nx = abc"),
    ("AG307", "import asyncio\nx = asyncio.events"),
    ("AG307", "def f():\n    return random\n\nimport random"),
    ("AG307", "import random\ndef f(random):\n    return random._os\nf(random)"),
    ("AG307", "import random\nx = [r for r in [random]]"),
    ("AG307", "import random\nx = [[random._os for random in y] for y in [[random]]]"),
    ("AG307", "def f(random):\n    import random\n    return random._os"),
    (
        "AG303",
        "import random\ndef f(random):\n    def g():\n        global random\n"
        "        return random._os\n    return g",
    ),
    ("AG303", "import random\nf = lambda r=random._os: r"),
    ("AG303", "import random\nx = [y for random in random._os]"),
    ("AG301", "class P:\n    __match_args__ = ('__globals__',)"),
    ("AG301", "class P:\n    __match_args__ = names"),
    ("AG301", "class P:\n    __match_args__ = ('x',)\n    __match_args__ += ('y',)"),
    ("AG301", "P.__match_args__ = ('x',)"),
    ("AG301", "__match_args__ = ('x',)"),
    ("AG202", "setattr(P, '__match_args__', ('x',))"),
    ("AG308", "P = type('P', (), {})\nmatch p:\n    case P(a):\n        pass"),
    ("AG308", "match p:\n    case mod.P(a):\n        pass"),
    ("AG308", "from somewhere import P\nmatch p:\n    case P(a):\n        pass"),
    (
        "AG308",
        "def deco(c):\n    return c\n@deco\nclass P:\n    x: int\nmatch p:\n"
        "    case P(a):\n        pass",
    ),
    (
        "AG308",
        "class M(type):\n    pass\nclass P(metaclass=M):\n    x: int\nmatch p:\n"
        "    case P(a):\n        pass",
    ),
    ("AG308", "class P:\n    pass\nP = other\nmatch p:\n    case P(a):\n        pass"),
    (
        "AG308",
        "from abc import ABC\nfrom dataclasses import dataclass\n@dataclass\nclass P(ABC):\n"
        "    f_back: int\nmatch frame:\n    case P(fb):\n        pass",
    ),
    (
        "AG308",
        "from collections import namedtuple\nP = namedtuple('P', 'f_back x')\n"
        "match frame:\n    case P(fb, x):\n        pass",
    ),
    (
        "AG308",
        "from collections import namedtuple\nP = namedtuple('P', names)\n"
        "match p:\n    case P(a):\n        pass",
    ),
    (
        "AG308",
        "from collections import namedtuple\nP = namedtuple('P', 'x')\nP = other\n"
        "match p:\n    case P(a):\n        pass",
    ),
    (
        "AG308",
        "def namedtuple(*a):\n    return Evil\nP = namedtuple('P', 'x')\n"
        "match p:\n    case P(a):\n        pass",
    ),
    ("AG308", "def f(str):\n    match p:\n        case str(a):\n            pass"),
    (
        "AG308",
        "class B:\n    pass\nB = make()\nclass P(B):\n    pass\nmatch p:\n"
        "    case P(a):\n        pass",
    ),
    (
        "AG308",
        "import random\nmatch random.choice:\n    case F(g):\n        print(g)",
    ),
    (
        "AG205",
        "import functools, random\nfunctools.update_wrapper(t, random.choice, assigned=(), "
        "updated=('__globals__',))",
    ),
    ("AG205", "import functools\nfunctools.wraps(f, ('__globals__',))"),
    ("AG205", "from functools import wraps\nwraps(f, **opts)"),
    # AG4xx format strings
    ("AG401", "'{0.__class__}'.format(x)"),
    ("AG401", "'{x[__globals__]}'.format(x=d)"),
    ("AG401", "'{0.__class__.__base__.__subclasses__}'.format(())"),
    ("AG401", "'{0._private}'.format(x)"),
    ("AG401", "'{0.gi_frame}'.format(g)"),
    ("AG401", "'{0:{1.__class__}}'.format(1, 2)"),
    ("AG401", "str.format('{0.__init__}', x)"),
    ("AG401", "'{m.__globals__}'.format_map(d)"),
    ("AG405", "import logging\nlogging.Formatter('{msg.__class__.__mro__}', style='{')"),
    ("AG405", "import logging\nlogging.Formatter('{asctime} {message}', style='{')"),
    ("AG405", "import logging\nlogging.basicConfig(format='{message}', style='{')"),
    ("AG402", "template.format(x)"),
    ("AG402", "('{0.' + '__class__}').format(x)"),
    ("AG402", "str.format(t, 1)"),
    ("AG402", "f'{{0.__class__}}'.format(x)"),
    ("AG402", "fmt = template.format_map"),
    ("AG402", "getattr(t, 'format')(x)"),
    ("AG402", "f = str.format"),
    ("AG403", "import string\nstring.Formatter().format('{0}', 1)"),
    ("AG403", "f.vformat('{0.__class__}', (1,), {})"),
    ("AG403", "f.get_field('0.__class__', (1,), {})"),
    ("AG404", "'{0.}'.format(x)"),
    ("AG404", "'{'.format(x)"),
    ("AG404", "'{0[}'.format(x)"),
    ("AG404", "'{0[a]b}'.format(x)"),
    ("AG405", "import logging\nlogging.Formatter(fmt, style='{')"),
    ("AG405", "import logging\nlogging.basicConfig(style=s)"),
    ("AG405", "import logging\nlogging.Formatter('%(x)s', None, s)"),
    # string annotations are code for get_type_hints / singledispatch
    (
        "AG201",
        textwrap.dedent(
            """
            import functools

            @functools.singledispatch
            def f(x):
                pass

            @f.register
            def _(x: "__import__('os').system('id')"):
                pass
            """
        ),
    ),
    ("AG201", "def h(x: list[\"__import__('os')\"]) -> None:\n    pass"),
    ("AG301", "x: 'int.__subclasses__()' = 1"),
    ("AG201", "from typing import Annotated\nx: Annotated['eval(1)', 'meta'] = 1"),
    # AG9xx syntax and limits
    ("AG901", "def f(:"),
    ("AG901", "x = 1\0"),
    ("AG901", "  indented = 1"),
]

ACCEPTED = [
    'if __name__ == "__main__":\n    pass',
    "class A:\n    def __init__(self):\n        super().__init__()\n        self._items = []",
    "class A:\n    def __repr__(self):\n        return f'{self.__class__.__name__}({self._x!r})'",
    "class V:\n    def __mul__(self, o):\n        return self\n    __rmul__ = __mul__",
    "class S:\n    __slots__ = ('a', 'b')\n    __match_args__ = ('a',)",
    "name = type(x).__name__",
    "try:\n    pass\nexcept ValueError as err:\n    cause = err.__cause__",
    "with open('data.csv', newline='') as fh:\n    rows = fh.read()",
    "import csv, json, math, statistics, datetime, re, collections, itertools, functools",
    "import decimal, fractions, random, hashlib, pathlib, heapq, bisect, string, textwrap",
    "from collections.abc import Mapping\nisinstance({}, Mapping)",
    "import collections.abc\nisinstance({}, collections.abc.Mapping)",
    "import datetime\nisinstance(x, datetime.datetime)\nt = datetime.time(1)",
    "import pathlib\np = pathlib.Path('.')\nprint(pathlib.Path.cwd())",
    "from urllib.parse import quote\nimport urllib.parse\nurllib.parse.urlsplit('http://x')",
    "from urllib import parse\nparse.quote('a b')",
    "from dataclasses import dataclass, field\n@dataclass\nclass P:\n    x: int = field(default=0)",
    "print(f'{1234.5:>10,.2f} {0.5:.1%} {x=} {y!r:>{w}}')",
    "print('{0} owes {1:.2f}'.format('a', 1.5))",
    "print('{item[name]} {p.x}'.format(item={'name': 'tea'}, p=pt))",
    "print('{city}'.format_map({'city': 'Lyon'}))",
    "print('%s has %d' % ('a', 1))",
    "print(str.format('{0}', 1))",
    "import operator\nk = operator.attrgetter('name', 'address.city')\n"
    "m = operator.methodcaller('strip')",
    "hasattr(x, '__len__') and getattr(x, 'name', None)",
    "setattr(self, 'value', 3)",
    "import asyncio\nasync def main():\n    await asyncio.sleep(0)\nasyncio.run(main())",
    "async def g():\n    async with lock:\n        async for x in src:\n            yield x",
    "squares = [x * x for x in range(10) if x % 2]\ngen = (x for x in range(3))",
    "d = {k: v for k, v in pairs}\ns = {x for x in xs}",
    "import functools\n@functools.lru_cache(maxsize=None)\ndef f(n):\n    return n",
    "def g(x: 'list[int]') -> 'Stack[U]':\n    pass",
    "def g(x: 'not valid python !'):\n    pass",
    "import logging\nlogging.basicConfig(level=logging.INFO)\nlog = logging.getLogger(__name__)",
    "import logging\nlogging.Formatter('%(message)s', style='%')",
    "import logging\nlogging.Formatter('$message', style='$')",
    "draw(shape, style='bold')",
    "match cmd.split():\n    case ['go', d]:\n        pass\n"
    "    case {'k': v, **rest}:\n        pass",
    "match p:\n    case Point(x=0, y=y) | Point(x=y, y=0):\n        pass",
    "import io\nbuf = io.StringIO()\nbuf.write('x')",
    "import random\nrng = random.Random(1)\nrandom.seed(7)\nrandom.random()",
    "import uuid\nuuid.uuid4().hex",
    "import typing\nT = typing.TypeVar('T')\nx: typing.Optional[int] = None",
    "from __future__ import annotations",
    "def f():\n    global counter\n    counter += 1",
    "lambda *a, **k: (a, k)",
    "x = [*a, *b]\ny = {**c}\ndel y",
    "while (line := f.readline()):\n    pass",
    "assert x, 'message'\nraise ValueError('x') from None",
    "import re\nm = re.match('a', 's')\nprint(m.string, m.group(0))",
    "import traceback\ntry:\n    run()\nexcept Exception:\n    traceback.print_exc()\n"
    "    text = traceback.format_exc()",
    "class E(Exception):\n    def __init__(self, msg):\n        super().__init__(msg)",
    "import enum\nclass C(enum.Enum):\n    A = 1\nprint(C.__members__)",
    "x = obj.system\ny = obj.popen",
    "class P:\n    def __getattr__(self, name):\n        return 1\n"
    "    def __getstate__(self):\n        return {}\n"
    "    def __class_getitem__(cls, item):\n        return cls",
    "def __getattr__(name):\n    raise AttributeError(name)",
    "import string\ndef clean(string):\n    return string.strip()",
    "import time\nprint([time for time in (1, 2)])",
    "import random\nf = lambda random: random.x",
    "from dataclasses import dataclass\n@dataclass(order=True)\nclass Point:\n    x: int\n"
    "    y: int\nmatch p:\n    case Point(x, y):\n        pass\n    case str(s) | int(s):\n"
    "        pass",
    "class P(dict):\n    __match_args__ = ('x',)\nmatch p:\n    case P(a):\n        pass",
    "class P:\n    __match_args__ = ('x', 'y')\nclass Q(P):\n    pass\nmatch p:\n"
    "    case Q(a, b):\n        pass",
    "import enum\nclass E(enum.Enum):\n    A = 1\nmatch e:\n    case E(x):\n        pass",
    "from collections import namedtuple\nPoint = namedtuple('Point', 'x y')\nmatch p:\n"
    "    case Point(x, y):\n        pass",
    "import collections\nPoint = collections.namedtuple('Point', ['x', 'y'])\nmatch p:\n"
    "    case Point(x, 0):\n        pass",
    "from typing import NamedTuple\nP = NamedTuple('P', [('x', int)])\nmatch p:\n"
    "    case P(x):\n        pass",
    "from abc import ABC\nfrom typing import Generic, TypeVar\nT = TypeVar('T')\n"
    "class Box(ABC, Generic[T]):\n    __match_args__ = ('item',)\nmatch b:\n"
    "    case Box(i):\n        pass",
    "import functools\ndef deco(f):\n    @functools.wraps(f)\n    def inner(*a):\n"
    "        return f(*a)\n    return inner",
    "from typing import Literal\nmode: Literal['input', 'output'] = 'input'",
    "from typing import Annotated\nx: Annotated[int, 'input'] = 1",
    "from operator import attrgetter, itemgetter\nrows.sort(key=attrgetter('name'))",
    "class A:\n    def f(self):\n        import random\n        return random.choice([1])",
    "print(dir(x), id(x), hash(x), callable(x), type(x), isinstance(x, int))",
]


@pytest.mark.parametrize(
    ("rule_id", "source"), REFUSED, ids=[f"{r}-{i}" for i, (r, _) in enumerate(REFUSED)]
)
def test_refused_with_rule(rule_id: str, source: str) -> None:
    result = check(source)
    assert not result.ok
    assert rule_id in result.rule_ids, str(result)


@pytest.mark.parametrize("source", ACCEPTED, ids=[f"ok-{i}" for i in range(len(ACCEPTED))])
def test_ordinary_code_accepted(source: str) -> None:
    result = check(source)
    assert result.ok, str(result)


#: The private-attribute rule is the policy's to switch on (pysandbox's data-science profile).
PRIVATE = Policy().with_private_attribute_rule()

PRIVATE_REFUSED = [
    "o = object()\no._x",
    "o = object()\no._x = 1",
    "o = object()\ndel o._x",
    "o = object()\ngetattr(o, '_x')",
    "match 1:\n    case int(_x=y):\n        pass",
    "class C:\n    def __eq__(self, other):\n        return self._v == other._v",
]
PRIVATE_ACCEPTED = [
    "class C:\n    def __init__(self):\n        self._v = 1\n    def get(self):\n"
    "        return self._v",
    "class C:\n    _n = 0\n    @classmethod\n    def bump(cls):\n        cls._n += 1",
    "from collections import namedtuple\nP = namedtuple('P', 'x y')\n"
    "print(P(1, 2)._asdict(), P(1, 2)._replace(x=3), P._fields, P._make([1, 2]))",
    "class C:\n    def _repr_html_(self):\n        return '<b>c</b>'\nprint(C()._repr_html_())",
    "o = object()\nprint(o.__class__.__name__)",
    "import random\nprint(random.random())",
]


@pytest.mark.parametrize("source", PRIVATE_REFUSED)
def test_private_attribute_rule_refuses_when_the_policy_says_so(source: str) -> None:
    assert check(source, PRIVATE).rule_ids == ("AG309",)
    assert "AG309" not in check(source).rule_ids  # off by default


@pytest.mark.parametrize("source", PRIVATE_ACCEPTED)
def test_private_attribute_rule_accepts_own_receivers_and_public_names(source: str) -> None:
    result = check(source, PRIVATE)
    assert result.ok, str(result)


def test_private_attribute_rule_keeps_the_dunder_and_module_rules() -> None:
    assert check("o = 1\no.__globals__", PRIVATE).rule_ids == ("AG301",)
    assert check("class C:\n    def m(self):\n        return self.__dict__", PRIVATE).rule_ids == (
        "AG301",
    )
    assert check("import random\nrandom._inst", PRIVATE).rule_ids == ("AG303",)
    assert check("from random import _inst", PRIVATE).rule_ids == ("AG103",)


def test_private_attribute_message_says_what_to_use_instead() -> None:
    result = check("import pandas as pd\npd.DataFrame()._mgr", PRIVATE.with_modules("pandas"))
    (violation,) = result.violations
    assert violation.rule_id == "AG309"
    assert "'_mgr'" in violation.message
    assert "df.to_numpy()" in violation.message
    assert "self._x and cls._x are fine" in violation.message


def test_private_attribute_rule_is_policy_data() -> None:
    assert Policy().refuse_private_attributes is False
    assert PRIVATE.refuse_private_attributes is True
    assert PRIVATE.to_dict()["refuse_private_attributes"] is True
    assert PRIVATE.with_private_attribute_rule(refuse=False) == Policy()
    with pytest.raises(TypeError):
        Policy(refuse_private_attributes=1)  # type: ignore[arg-type]


def test_every_rule_has_a_refusing_example_here() -> None:
    tested = {rule_id for rule_id, _ in REFUSED} | {"AG309"}  # PRIVATE_REFUSED
    # AG9xx: the limits, each tested where it is defined (AG907:
    # tests/regressions/test_redteam_2026_12_01_ag907_constant_folding.py).
    untested = set(astguard.RULES) - tested - {f"AG90{i}" for i in (0, 2, 3, 4, 5, 6, 7)}
    assert untested == set()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="except* is Python 3.11+")
@pytest.mark.parametrize(
    ("source", "rule_id"),
    [
        ("try:\n    pass\nexcept* ValueError as __builtins__:\n    pass", "AG207"),
        ("try:\n    pass\nexcept* ValueError as eg:\n    eg.__traceback__", "AG301"),
        ("try:\n    pass\nexcept* (ValueError, TypeError):\n    exec('x')", "AG201"),
        ("try:\n    pass\nexcept* ValueError:\n    pass\nelse:\n    import os", "AG101"),
        ("try:\n    pass\nexcept* ValueError:\n    pass\nfinally:\n    g.gi_frame", "AG302"),
        ("try:\n    pass\nexcept* __import__('os').error:\n    pass", "AG201"),
    ],
)
def test_try_star_edges_refused(source: str, rule_id: str) -> None:
    assert rule_id in check(source).rule_ids


@pytest.mark.skipif(sys.version_info < (3, 11), reason="except* is Python 3.11+")
def test_try_star_ordinary_accepted() -> None:
    source = "try:\n    run()\nexcept* ValueError as eg:\n    print(eg.exceptions)"
    assert check(source).ok


@pytest.mark.skipif(sys.version_info < (3, 12), reason="PEP 695 syntax is Python 3.12+")
def test_pep695_syntax_checked() -> None:
    assert check("type Pair[T] = tuple[T, T]\nclass Box[T]:\n    pass").ok
    assert "AG201" in check("type X = eval('1')").rule_ids
    assert "AG207" in check("def f[__builtins__](x):\n    pass").rule_ids


def test_runtime_guard_policy_allows_computed_reflection_only() -> None:
    assert check("getattr(self, f'do_{name}', None)", GUARDED).ok
    assert check("g = getattr", GUARDED).ok
    assert check("setattr(obj, key, 1)", GUARDED).ok
    # Literal refused names and the other rules stay.
    assert "AG202" in check("getattr(f, '__globals__')", GUARDED).rule_ids
    assert "AG303" in check("import random\ngetattr(random, '_os')", GUARDED).rule_ids
    assert "AG201" in check("exec('1')", GUARDED).rule_ids
    assert "AG205" in check("from operator import attrgetter\nattrgetter(n)", GUARDED).rule_ids


def test_unknown_node_type_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Default deny: a node type with no rule (simulated by removing Lambda's rule)."""
    from astguard import _checker

    allowed = _checker.ALLOWED_NODE_TYPES - {__import__("ast").Lambda}
    monkeypatch.setattr(_checker, "ALLOWED_NODE_TYPES", allowed)
    result = check("f = lambda: 1")
    assert result.rule_ids == ("AG905",)
    assert "'Lambda'" in result.violations[0].message
    assert result.violations[0].line == 1
    assert result.violations[0].col == 5


def test_every_node_type_of_this_python_is_reviewed_or_refused() -> None:
    import ast

    reviewed = {cls.__name__ for cls in astguard.ALLOWED_NODE_TYPES}
    # Node classes this interpreter can produce that astguard deliberately does not accept.
    refused = {"Interactive", "FunctionType", "TypeIgnore", "TemplateStr", "Interpolation"}
    concrete = {
        name
        for name in dir(ast)
        if isinstance(getattr(ast, name), type)
        and issubclass(getattr(ast, name), ast.AST)
        and getattr(ast, name)._fields is not None
        and not getattr(ast, name).__subclasses__()
        and name
        not in {
            "Num",
            "Str",
            "Bytes",
            "NameConstant",
            "Ellipsis",
            "Index",
            "ExtSlice",
            "Suite",
            "_ast_Ellipsis",
            "Param",
            "AugLoad",
            "AugStore",
            "slice",
        }
    }
    assert concrete - reviewed - refused == set()


def test_refused_import_message_suggests_an_alternative() -> None:
    message = check("import os").violations[0].message
    assert message.startswith("import of 'os' is refused")
    assert "pathlib" in message
    assert "SystemExit" in check("import sys").violations[0].message
    assert check("import xml").violations[0].message == (
        "import of 'xml' is refused: it is not on the allowed module list"
    )


def test_refused_archive_and_reflection_modules_and_vars_say_why_and_what_instead() -> None:
    def message(source: str) -> str:
        return check(source).violations[0].message

    assert message("import zipfile") == (
        "import of 'zipfile' is refused: it is not on the allowed module list; archives read "
        "and write files named by strings outside the guarded open(); compress single files "
        "with gzip, bz2 or lzma (bytes with zlib)"
    )
    assert message("from tarfile import open") == (
        "import of 'tarfile' is refused: it is not on the allowed module list; archives read "
        "and write files (and links) named by strings outside the guarded open(); compress "
        "single files with gzip, bz2 or lzma (bytes with zlib)"
    )
    assert message("import inspect") == (
        "import of 'inspect' is refused: it is not on the allowed module list; it reaches "
        "frames, code objects and source; use type(), isinstance(), callable(), dir() or "
        "dataclasses.fields()"
    )
    assert message("print(vars(x))") == (
        "the builtin 'vars' is refused: it reads an object's or the caller's namespace; use the "
        "attributes by name, dataclasses.asdict(obj) or a dict of your own; if this is your own "
        "variable, rename it"
    )
    # Every suggested replacement passes the checker.
    assert check(
        "import bz2, dataclasses, gzip, lzma, zlib\ntype(x), isinstance(x, int), callable(x)\n"
        "dir(x), dataclasses.fields(x), dataclasses.asdict(x)\n"
    ).ok
    # The other refused builtins keep the general reason.
    assert message("globals()").startswith("the builtin 'globals' is refused (it reaches code")


def test_violations_in_source_order_with_locations() -> None:
    source = "import os\nx = 1\ny = eval('2')\n"
    result = check(source)
    assert [(v.rule_id, v.line, v.col) for v in result.violations] == [
        ("AG101", 1, 8),
        ("AG201", 3, 5),
    ]
    first = result.violations[1]
    assert (first.end_line, first.end_col) == (3, 9)


def test_columns_count_characters_not_bytes() -> None:
    result = check("é = 1; exec('x')")
    assert result.violations[0].col == 8


def test_violation_inside_string_annotation_points_at_string() -> None:
    result = check("def f(x: 'eval(1)'):\n    pass")
    v = result.violations[0]
    assert (v.rule_id, v.line, v.col, v.end_col) == ("AG201", 1, 10, 19)


def test_third_party_attribute_named_like_a_stdlib_module_is_its_own() -> None:
    # numpy.array, numpy.random, numpy.copy and pandas.array are numpy's and pandas' own
    # attributes, not the standard library's array, random and copy modules; os.path (a module
    # held by a standard-library module) is still treated as the module it is.
    policy = Policy().with_modules("numpy", "pandas")
    source = (
        "import numpy as np, pandas as pd\n"
        "a = np.array([1, 2])\n"
        "b = np.copy(a)\n"
        "rng = np.random.default_rng(1)\n"
        "s = pd.array([1, 2])\n"
    )
    assert check(source, policy).ok, str(check(source, policy))
    refused = check("import os\np = os.path\n", Policy().with_modules("os"))
    assert "AG307" in refused.rule_ids, str(refused)


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("import json\n!pip install pandas\nprint(1)\n", 2),
        ("%pip install numpy\n", 1),
        ("%matplotlib inline\nprint(1)\n", 1),
        ("x = 1\n    !ls\n", 2),
    ],
)
def test_a_notebook_line_is_named_with_what_is_available(source: str, line: int) -> None:
    policy = astguard.Policy().with_modules("numpy")
    result = astguard.check(source, policy)
    assert result.rule_ids == ("AG901",)
    message = result.violations[0].message
    assert result.violations[0].line == line
    assert f"line {line} is notebook syntax" in message
    assert "Packages cannot be installed here" in message
    assert "available are installed already: numpy, the standard library's json, csv" in message
    assert "%matplotlib" in message


def test_an_ordinary_syntax_error_gets_no_notebook_hint() -> None:
    result = astguard.check("x = (1 +\nprint(2 % 3)\n")
    assert result.rule_ids == ("AG901",)
    assert "notebook" not in result.violations[0].message


@pytest.mark.parametrize(
    "source", ["display(df)\n", "import json\nif True:\n    display(json.dumps(1))\n"]
)
def test_display_is_named_a_notebook_function(source: str) -> None:
    result = astguard.check(source)
    assert result.rule_ids == ("AG208",)
    message = result.violations[0].message
    assert message.startswith("display() is a notebook function")
    assert "print(df)" in message


@pytest.mark.parametrize(
    "source",
    [
        "def display(x):\n    print(x)\ndisplay(1)\n",
        "display = print\ndisplay(1)\n",
        "for display in [print]:\n    display(1)\n",
        "class display:\n    pass\ndisplay()\n",
        "obj = []\nobj.display = 1\n",
    ],
)
def test_a_display_the_script_defines_is_its_own(source: str) -> None:
    assert astguard.check(source).ok


def test_the_pickle_refusal_names_pandas_pickling_where_pandas_is_allowed() -> None:
    plain = astguard.check("import pickle\n").violations[0].message
    assert plain.endswith("is not on the allowed module list; use json to store data")
    with_pandas = astguard.check("import pickle\n", Policy().with_modules("pandas"))
    message = with_pandas.violations[0].message
    assert message.startswith(plain + "; a DataFrame or Series keeps its types")
    assert "df.to_pickle(path) and pd.read_pickle(path)" in message
    assert "kernel layers are the boundary" in message
