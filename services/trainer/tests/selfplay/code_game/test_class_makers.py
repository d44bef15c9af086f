"""The static check's rule on classes made from attribute names: names are text, never values."""

from __future__ import annotations

import pytest
from codegym_trainer.selfplay.code_game.program_check import check_program

# Honest programs that make classes, each with its names written out: dataclasses, named tuples, enums, typed
# dicts, ``type()`` with a literal namespace, the class ``type()`` returns read or called, ``super().__init__``.
FAIR = {
    "a dataclass with fields": "from dataclasses import dataclass, field\n@dataclass(order=True)\nclass P:\n"
    "    x: int\n    tags: list = field(default_factory=list)\nprint(P(1) < P(2), P(3), P(1) == P(1))",
    "a made dataclass with literal fields": "import dataclasses as d\nP = d.make_dataclass('P', ['x', ('y', int, "
    "d.field(default=0))], namespace={'norm': lambda s: s.x + s.y})\nprint(P(1, 2).norm(), P(1))",
    "named tuples": "import collections\nimport typing\nP = collections.namedtuple('P', 'x, y')\n"
    "Q = typing.NamedTuple('Q', [('a', int), ('b', str)])\nW = typing.NamedTuple('W', c=int)\n"
    "class R(typing.NamedTuple):\n    z: int\nprint(P(1, 2), Q(1, 'b'), W(0), R(3).z)",
    "enums": "import enum\nclass Color(enum.Enum):\n    RED = 1\n    GREEN = enum.auto()\n"
    "class Bit(enum.IntFlag):\n    A = 1 << 0\n    B = 1 << 1\nS = enum.Enum('S', 'ON OFF')\n"
    "T = enum.Enum('T', [('UP', 1)])\nprint([c.name for c in Color], Color(1), Color['GREEN'], Bit.A | Bit.B,"
    " S.ON, T.UP.value, isinstance(S.ON, enum.Enum))",
    "a typed dict": "from typing import TypedDict\nclass M(TypedDict):\n    a: int\nN = TypedDict('N', {'b': int})\n"
    "print(M(a=1), N(b=2))",
    "type() read, compared, printed": "class V:\n    __slots__ = ('v',)\n    def __init__(self, v):\n"
    "        self.v = v\n    def __add__(self, o):\n        return V(self.v + o.v)\n"
    "C = type('C', (V,), {'k': 3})\nx = C(1) + V(2)\nprint(type(x).__name__, type(x) is V, type(1) in (int, float),"
    " type(x) == type(V(0)), isinstance(x, type(C(1))), f'{type(1)}', C(0).k)",
    "super().__init__ and the protocols as the interpreter calls them": "class A:\n    def __init__(self, n):\n"
    "        self.name = n\n    def __len__(self):\n        return len(self.name)\nclass B(A):\n"
    "    def __init__(self):\n        super().__init__('b')\nprint(len(B()), B().name, B.__name__)",
    "the arithmetic a class defines": "class M:\n    def __init__(self, v):\n        self.v = v\n"
    "    def __radd__(self, o):\n        return M(o + self.v)\n    def __rtruediv__(self, o):\n"
    "        return o / self.v\n    def __iadd__(self, o):\n        self.v += o\n        return self\n"
    "    def __round__(self, n=0):\n        return round(self.v, n)\nm = M(2)\nm += 1\n"
    "print((1 + m).v, 6 / m, round(M(2.5)))",
    "an abstract class": "import abc\nclass S(metaclass=abc.ABCMeta):\n    @abc.abstractmethod\n"
    "    def area(self):\n        ...\nclass Q(S):\n    def area(self):\n        return 4\nprint(Q().area())",
}


@pytest.mark.parametrize("code", FAIR.values(), ids=FAIR)
def test_honest_classes_pass(code: str) -> None:
    assert check_program(code) == []


@pytest.mark.parametrize("code", FAIR.values(), ids=FAIR)
def test_honest_classes_run(code: str) -> None:
    exec(compile(code, "<program>", "exec"), {"__name__": "__main__"})  # they are Python that works as shown


# The roads to reading any object by a name the program computes, through the methods a class generates from its
# names: a made dataclass's ``__eq__`` reads ``other.<field>`` once the other side passes its class test (a
# ``__class__`` property from a computed namespace key, or a real object of the class the call claims). Each whole
# program reaches ``sys`` and prints the same facts of the machine on both runs.
ROADS = {
    "the generated __eq__ called through the class": (
        "import dataclasses\ndef get(x, name):\n    got = []\n    class Spy:\n        def __eq__(self, other):\n"
        "            got.append(other)\n            return True\n    cls = '_' * 2 + 'class' + '_' * 2\n"
        "    Other = type('O', (), {name: Spy(), cls: property(lambda s: type(x))})\n"
        "    D = dataclasses.make_dataclass('D', [name])\n    D.__eq__(x, Other())\n    return got[0]\n"
        "g = get(dataclasses.fields, '_' * 2 + 'globals' + '_' * 2)\nprint(g['s' + 'ys'].platform)",
        [
            "calls make_dataclass with names that are values",
            "calls type with names that are values",
            "reads __eq__ by attribute",
        ],
    ),
    "an exception of the class the call claims": (
        "import dataclasses\ngot = []\nclass Spy:\n    def __eq__(self, other):\n        got.append(other)\n"
        "        return True\ntry:\n    dataclasses.nothing_here\nexcept AttributeError as e:\n"
        "    D = dataclasses.make_dataclass('D', ['o' + 'bj'])\n"
        "    D.__eq__(e, AttributeError('x', name='x', **{'o' + 'bj': Spy()}))\nprint(got[0].__name__)",
        ["calls make_dataclass with names that are values", "reads __eq__ by attribute"],
    ),
    "a plain == with a class claimed by a made namespace": (
        "import dataclasses\ndef get(x, name):\n    got = []\n    class Spy:\n        def __eq__(self, other):\n"
        "            got.append(other)\n            return True\n"
        "    ns = {'_' * 2 + 'class' + '_' * 2: property(lambda s: type(x))}\n"
        "    D = dataclasses.make_dataclass('D', [name], namespace=ns)\n    if D(Spy()) == x:\n"
        "        return got[0]\ng = get(dataclasses.fields, '_' * 2 + 'globals' + '_' * 2)\n"
        "print(get(g['inspect'], 'o' + 's').uname().release)",
        ["calls make_dataclass with names that are values"],
    ),
}


ROADS |= {
    "copy setting a field's name and a computed __class__ slot": (
        "import copy\nimport dataclasses\ngot = []\nclass Spy:\n    def __eq__(self, other):\n"
        "        got.append(other)\n        return True\ndef put(o, key, value):\n    class R:\n"
        "        def __reduce__(self):\n            return (pick, (o,), (None, {key: value}))\n"
        "    copy.copy(R())\ndef pick(o):\n    return o\ndef get(x, name):\n    @dataclasses.dataclass\n"
        "    class A:\n        v: int\n    put(dataclasses.fields(A)[0], 'na' + 'me', name)\n"
        "    @dataclasses.dataclass\n    class B(A):\n        __slots__ = ('_' * 2 + 'class' + '_' * 2,)\n"
        "    b = B(Spy())\n    put(b, '_' * 2 + 'class' + '_' * 2, type(x))\n    if b == x:\n        return got[0]\n"
        "g = get(dataclasses.fields, '_' * 2 + 'globals' + '_' * 2)\n"
        "print(get(g['inspect'], 'o' + 's').uname().release)",
        ["defines __reduce__", "names __slots__ that are values", "uses the class type() returns"],
    ),
    "copy's dispatch table renaming a field": (
        "import copy\nimport dataclasses\n@dataclasses.dataclass\nclass A:\n    v: int\nclass K:\n    pass\n"
        "copy.dispatch_table[K] = lambda k: (lambda: dataclasses.fields(A)[0], (), (None, {'na' + 'me': 'o' + 'bj'}))\n"
        "copy.copy(K())\n@dataclasses.dataclass\nclass B(A):\n    pass\nprint(B(1))",
        ["uses dispatch_table"],
    ),
    "a field class whose name is a property": (
        "import dataclasses\nN = 'o' + 'bj'\nclass F(dataclasses.Field):\n"
        "    name = property(lambda s: N, lambda s, v: None)\n@dataclasses.dataclass\nclass D:\n"
        "    v: int = F(dataclasses.MISSING, dataclasses.MISSING, True, True, None, True, None, False)\n"
        "print([f.name for f in dataclasses.fields(D)])",
        ["uses Field"],
    ),
    "type as the origin of typing.Type, making computed annotations": (
        "import dataclasses\nimport typing\ngot = []\nclass Spy:\n    def __eq__(self, other):\n"
        "        got.append(other)\n        return True\nu = '_' * 2\nmaker = typing.get_origin(typing.Type[int])\n"
        "try:\n    dataclasses.nothing_here\nexcept AttributeError as e:\n"
        "    ns = {u + 'annotations' + u: {'o' + 'bj': int}, u + 'class' + u: property(lambda s: AttributeError)}\n"
        "    D = dataclasses.dataclass(maker('D', (), ns))\n    D(Spy()) == e\nprint(got[0].__name__)",
        ["uses Type other than called"],
    ),
}


ROADS["a function's parameters copied to a class's fields, and a __class__ property"] = (
    "import dataclasses\nimport functools\ngot = []\nclass Spy:\n    def __eq__(self, other):\n"
    "        got.append(other)\n        return True\ndef f(obj: int):\n    pass\nclass C:\n    @property\n"
    "    def __class__(self):\n        return AttributeError\ntry:\n    functools.update_wrapper(C, f)\n"
    "except AttributeError:\n    pass\nD = dataclasses.dataclass(C)\ntry:\n    dataclasses.nothing_here\n"
    "except AttributeError as e:\n    D(Spy()) == e\nprint(got[0].__name__)",
    ["uses update_wrapper", "defines __class__"],
)


@pytest.mark.parametrize(("code", "problems"), ROADS.values(), ids=ROADS)
def test_classes_made_from_computed_names_are_refused(code: str, problems: list[str]) -> None:
    found = check_program(code)
    for problem in problems:
        assert any(p.startswith(problem) for p in found), (problem, found)


# Each maker of names as data, one at a time: a name that is a value, or a literal the attribute rule refuses.
MAKERS = {
    "make_dataclass's fields": (
        "import dataclasses\nn = 'x'\nprint(dataclasses.make_dataclass('D', [n]))",
        "calls make_dataclass with names that are values",
    ),
    "make_dataclass's (name, type) fields": (
        "import dataclasses\nn = 'x'\nprint(dataclasses.make_dataclass('D', [(n, int)]))",
        "calls make_dataclass with names",
    ),
    "make_dataclass's namespace": (
        "from dataclasses import make_dataclass\nns = {}\nprint(make_dataclass('D', ['x'], namespace=ns))",
        "calls make_dataclass with names",
    ),
    "a literal private field": (
        "import dataclasses\nprint(dataclasses.make_dataclass('D', ['_convert_']))",
        "makes with make_dataclass the attribute _convert_",
    ),
    "a literal banned namespace key": (
        "import dataclasses\nprint(dataclasses.make_dataclass('D', [], namespace={'obj': 1}))",
        "makes with make_dataclass the attribute obj",
    ),
    "namedtuple": (
        "import collections\nn = 'a b'\nprint(collections.namedtuple('N', n))",
        "calls namedtuple with names",
    ),
    "namedtuple through another module": (
        "import functools\nprint(functools.namedtuple('N', ['o' + 'bj']))",
        "calls namedtuple with names",
    ),
    "NamedTuple's fields": (
        "import typing\nf = [('x', int)]\nprint(typing.NamedTuple('N', f))",
        "calls NamedTuple with",
    ),
    "NamedTuple's unpacked keywords": (
        "import typing\nprint(typing.NamedTuple('N', **{'o' + 'bj': int}))",
        "calls NamedTuple with unpacked",
    ),
    "TypedDict": (
        "from typing import TypedDict\nk = 'a'\nprint(TypedDict('T', {k: int}))",
        "calls TypedDict with names",
    ),
    "Enum's functional form": ("import enum\nprint(enum.Enum('E', ['A' + 'B']))", "calls Enum with names"),
    "IntEnum's names=": ("from enum import IntEnum\nn = 'A'\nprint(IntEnum('E', names=n))", "calls IntEnum with names"),
    "a dunder member": (
        "import enum\nprint(enum.Enum('E', [('__class__', 1)]))",
        "makes with Enum the attribute __class__",
    ),
    "an enum class of the program's without members": (
        "import enum\nclass Base(enum.Enum):\n    pass\nprint(Base('E', [('_' * 2 + 'eq' + '_' * 2, 1)]))",
        "defines the enum class Base without a member",
    ),
    "an enum class by its metaclass, without members": (
        "import enum\nclass E(metaclass=enum.EnumMeta):\n    pass\nprint(E('F', ['A' + 'B']))",
        "defines the enum class E without a member",
    ),
    "an enum class whose members _ignore_ leaves out": (
        "import enum\nclass Base(enum.Enum):\n    _ignore_ = ['X']\n    X = 1\nprint(Base('E', ['A' + 'B']))",
        "defines the enum class Base without a member",
    ),
    "an enum class made without members": (
        "import enum\nE = enum.Enum('E', [])\nprint(E('F', ['A' + 'B']))",
        "makes with Enum an enum class without members",
    ),
    "an enum class made with a dunder only": (
        "import enum\nE = enum.Enum('E', [('__doc__', '')])\nprint(E('F', ['A' + 'B']))",
        "makes with Enum an enum class without members",
    ),
    "an enum class made with a property only": (
        "import enum\nE = enum.Enum('E', [('A', property(len))])\nprint(E('F', ['A' + 'B']))",
        "makes with Enum an enum class without members",
    ),
    "a memberless enum class made by type()": (
        "import enum\nE = type('E', (enum.Enum,), {})\nprint(E('F', ['A' + 'B']))",
        "uses Enum other than called",
    ),
    "type() with a namespace that is a value": ("ns = {}\nprint(type('C', (), ns))", "calls type with names that are"),
    "type() with a computed key": ("k = 'x'\nprint(type('C', (), {k: 1}))", "calls type with names that are values"),
    "type() with unpacked arguments": ("a = ('C', (), {})\nprint(type(*a))", "calls type with unpacked arguments"),
    "a metaclass called": ("import abc\nprint(abc.ABCMeta('C', (), {'o' + 'bj': 1}))", "calls ABCMeta with names"),
    "type handed on": ("t = type\nprint(t('C', (), {'k' + 'ey': 1}))", "uses type other than called"),
    "the class type() returns, bound": (
        "class A:\n    pass\nm = type(A)\nprint(m('C', (), {'k' + 'ey': 1}))",
        "uses the class type() returns",
    ),
    "the class type() returns, called as a maker": (
        "class A:\n    pass\nprint(type(A)('C', (), {'k' + 'ey': 1}))",
        "uses the class type() returns",
    ),
    "a metaclass of the program's": (
        "import abc\nclass M(abc.ABCMeta):\n    pass\nprint(M('C', (), {'k' + 'ey': 1}))",
        "uses ABCMeta other than called",
    ),
    "a maker under another name": (
        "from dataclasses import make_dataclass as m\nprint(m('D', ['x']))",
        "imports make_dataclass as m",
    ),
    "a maker handed on": (
        "import dataclasses\nm = dataclasses.make_dataclass\nprint(m('D', ['o' + 'bj']))",
        "uses make_dataclass other than called",
    ),
    "types.new_class, whose namespace a function fills": (
        "import typing\nprint(typing.types.new_class('C'))",
        "uses new_class",
    ),
    "a field's name rewritten": (
        "import dataclasses\n@dataclasses.dataclass\nclass A:\n    x: int\ndataclasses.fields(A)[0].name = 'o' + 'bj'\n"
        "@dataclasses.dataclass\nclass B(A):\n    pass\nprint(B(1))",
        "writes an attribute called name in a program that holds dataclass fields",
    ),
    "a private annotation": (
        "import dataclasses\n@dataclasses.dataclass\nclass A:\n    _convert_: int\nprint(A(1))",
        "annotates the attribute _convert_",
    ),
    "a private annotation in a block of the class body": (
        "import dataclasses\n@dataclasses.dataclass\nclass A:\n    if True:\n        _convert_: int\nprint(A(1))",
        "annotates the attribute _convert_",
    ),
    "the class type() returns, called": (
        "class A:\n    pass\nprint(type(A)(A)('C', (), {'k' + 'ey': 1}))",
        "uses the class type() returns",
    ),
    "the class type() returns, handed to an object of the program's": (
        "class S:\n    def __eq__(self, o):\n        return print(o)\nimport dataclasses\n"
        "type(dataclasses.fields) == S()",
        "uses the class type() returns",
    ),
    "the class type() returns, looked up in a mapping of the program's": (
        "class M(dict):\n    def __missing__(self, k):\n        return k\nprint(M()[type(print)])",
        "uses the class type() returns",
    ),
    "typing.Type called as type": (
        "import typing\nprint(typing.Type('C', (), {'k' + 'ey': 1}))",
        "calls Type with names that are values",
    ),
    "typing.Type handed to get_origin": (
        "import typing\nt = typing.get_origin(typing.Type[int])\nprint(t('C', (), {'k' + 'ey': 1}))",
        "uses Type other than called",
    ),
    "dataclasses' Field class": (
        "import dataclasses\nclass F(dataclasses.Field):\n    name = property(lambda s: 'o' + 'bj')\nprint(F)",
        "uses Field, which is the class of dataclass fields",
    ),
    "copy's dispatch table": (
        "import copy\nclass K:\n    pass\ncopy.dispatch_table[K] = lambda k: (K, ())\nprint(copy.copy(K()))",
        "uses dispatch_table, which hands copy functions",
    ),
    "an enum's members set in a module named by a string": (
        "import enum\nE = enum.Enum('E', 'GenericAlias', module='ty' + 'pes')\nenum.global_enum(E)\nprint(E)",
        "uses global_enum, which sets an enum's members",
    ),
    "a reductor of the program's": (
        "import copy\nclass R:\n    def __reduce__(self):\n        return (int, ())\nprint(copy.copy(R()))",
        "defines __reduce__",
    ),
    "a base that puts another in its place": (
        "class B:\n    def __mro_entries__(self, bases):\n        return (int,)\nclass C(B()):\n    pass\nprint(C)",
        "defines __mro_entries__",
    ),
    "slots that are values": (
        "class A:\n    __slots__ = ('_' * 2 + 'class' + '_' * 2,)\nprint(A)",
        "names __slots__ that are values",
    ),
    "slots in a namespace display": (
        "n = 'x'\nprint(type('A', (), {'__slots__': (n,)}))",
        "names __slots__ that are values",
    ),
    "a literal private slot": ("class A:\n    __slots__ = ['_convert_']\nprint(A)", "makes the slot _convert_"),
    "a __class__ property": (
        "class C:\n    @property\n    def __class__(self):\n        return int\nprint(isinstance(C(), int))",
        "defines __class__",
    ),
    "update_wrapper onto a class": (
        "import functools\ndef f(o: int):\n    pass\nclass C:\n    pass\nfunctools.update_wrapper(C, f)\nprint(C)",
        "uses update_wrapper, which copies",
    ),
    "wraps onto a class": (
        "import functools\ndef f(o: int):\n    pass\n@functools.wraps(f)\nclass C:\n    pass\nprint(C)",
        "uses wraps other than to decorate a function",
    ),
    "a protocol called through the class": ("class A:\n    pass\nprint(A.__eq__(1, 2))", "reads __eq__ by attribute"),
    "a protocol called on an object": ("print((1).__eq__(2), [].__len__())", "reads __eq__ by attribute"),
    "a protocol through a super() of the program's": (
        "def super():\n    return 1\nprint(super().__eq__(1))",
        "reads __eq__ by attribute",
    ),
}


@pytest.mark.parametrize(("code", "problem"), MAKERS.values(), ids=MAKERS)
def test_each_maker_takes_only_names_written_out(code: str, problem: str) -> None:
    assert any(p.startswith(problem) for p in check_program(code)), check_program(code)
