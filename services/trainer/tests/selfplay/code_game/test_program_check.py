"""The writer's static check: allowed modules, banned names, dunders, formats, length, and printing something."""

from __future__ import annotations

import pytest
from codegym_trainer.selfplay.code_game.program_check import MAX_PROGRAM_CHARS, check_program


@pytest.mark.parametrize(
    "code",
    [
        "print(sum(x * x for x in range(5)))",
        "from math import gcd\nimport itertools as it\nprint(gcd(12, 18), list(it.islice(it.count(), 3)))",
        "class A:\n    def __init__(self):\n        self.v = 1\n\nprint(A().v, type(A()).__name__)",
        "def main():\n    print('hi')\n\nif __name__ == '__main__':\n    main()",
        "from __future__ import annotations\nprint(1)",
        "import hashlib\nprint(hashlib.sha256(b'x').hexdigest()[:8])",
        "import re\np = re.compile('a+')\nprint(p.findall('aaba'))",
        "from collections import Counter\nprint(Counter('abca').most_common(1), '{} {:>5}'.format(1, 'x'))",
        "x = 3\nprint(f'{x!r:>4}', '{0}{name}'.format(1, name=2), '%s' % x)",
        "import collections.abc\nfrom json import decoder\nprint(isinstance([], collections.abc.Set), decoder.re.A)",
        # ordinary Python that reaches nothing past the program (V39-7): a parameter named like a module, items
        # and nested specs in a template, the protocols of values
        "import string\ndef is_pal(string):\n    return string == string[::-1]\nprint(is_pal('aba'), string.digits)",
        "print('{:>{w}.{p}f}'.format(3.14159, w=10, p=2), '{0[0]}{1[k]}'.format('ab', {'k': 1}))",
        "class V:\n    __slots__ = ('x',)\n    def __init__(self, x):\n        self.x = x\n"
        "    def __len__(self):\n        return self.x\n    def __repr__(self):\n        return 'V'\n"
        "print(len(V(3)), repr(V(1)), V.__doc__, V.__qualname__)",
        # match statements by literals, sequences, mappings, keywords, and the classes that match themselves
        "from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\n    y: int\n"
        "for s in [P(0, 2), (1, [2, 3]), {'k': 'v'}, 7, 'ab']:\n    match s:\n"
        "        case P(x=0, y=y):\n            print('on the axis', y)\n"
        "        case (int(a), [b, *rest]):\n            print(a, b, rest)\n"
        "        case {'k': str(v)}:\n            print(v)\n        case 7 | 8:\n            print('seven')\n"
        "        case str() as t if len(t) == 2:\n            print(t)",
        "import functools\ndef logged(f):\n    @functools.wraps(f)\n    def w(*a):\n        return f(*a)\n"
        "    return w\n@logged\ndef g(x):\n    return x + 1\nprint(g(1), g.__name__)",
        "register = [0] * 4\nfor op in [1, 2, 3]:\n    register[op] += op\nprint(register)",
        "from dataclasses import dataclass, fields\n@dataclass\nclass P:\n    x: int\n"
        "print('ab'.replace('a', 'c'), [f.name for f in fields(P)], P(1).x)",
    ],
)
def test_fair_programs_pass(code: str) -> None:
    assert check_program(code) == []


@pytest.mark.parametrize(
    "code",
    [
        "import random\nprint(random.random())",
        "import os.path\nprint(os.path.sep)",
        "from time import time\nprint(time())",
        "from datetime import date\nprint(date.today())",
        "import numpy.random\nprint(1)",
        "from numpy import random\nprint(1)",
        "import subprocess as sp\nprint(1)",
        "import sys\nprint(sys.argv)",
        "import socket\nprint(1)",
        "import io\nprint(1)",
        "import pathlib\nprint(1)",
        "import secrets\nprint(1)",
        "import uuid\nprint(1)",
        "import threading\nprint(1)",
        "import multiprocessing\nprint(1)",
        "from importlib import import_module\nprint(1)",
        "import builtins\nprint(1)",
        # doors to files, the machine and the clock that are none of the above: only modules that compute
        "import linecache\nprint(linecache.getline('/proc/sys/kernel/osrelease', 1))",
        "import _io\nprint(_io.FileIO('/etc/hostname').read())",
        "import codecs\nprint(1)",
        "import posixpath\nprint(posixpath.expanduser('~'))",
        "from pkgutil import iter_modules\nprint(1)",
        "import _random\nprint(1)",
        "import struct\nprint(struct.calcsize('P'))",
    ],
)
def test_banned_modules_are_rejected_however_imported(code: str) -> None:
    problems = check_program(code)
    assert problems and all("banned" in p for p in problems)


@pytest.mark.parametrize(
    ("code", "problem"),
    [
        ("print(input())", "uses input, which is banned"),
        ("print(open('f').read())", "uses open, which is banned"),
        ("print(eval('1 + 1'))", "uses eval, which is banned"),
        ("exec('print(1)')", "uses exec, which is banned"),
        ("print(__import__('os').getcwd())", "uses __import__, which is banned"),
        ("print(getattr(1, 'real'))", "uses getattr, which is banned"),
        ("print(id(1))", "uses id, which is banned"),
        ("print(hash('a'))", "uses hash, which is banned"),
        ("print(compile('1', 'f', 'eval'))", "uses compile, which is banned"),
        ("id = 3\nprint(id)", "uses id, which is banned"),
        ("print(().__class__.__bases__)", "uses the attribute __class__"),
        ("def f(): pass\nprint(f.__globals__)", "uses the attribute __globals__"),
        ("print(__builtins__)", "uses __builtins__"),
        ("from . import x\nprint(x)", "a relative import"),
        ("from math import *\nprint(pi)", "from math import *"),
        ("x = 1", "never calls print"),
        ("p = print\np(1)", "never calls print"),
        ("print(1", "does not parse"),
        # an attribute reached by a name in a string
        ("def f(): pass\nprint('{0.__globals__}'.format(f))", "holds __globals__ in a string"),
        ("print('{0.real}'.format(1))", "formats with a field that reaches into an attribute"),
        ("print('{:>{w.real}}'.format(1, w=3))", "formats with a field that reaches into an attribute"),
        ("import string\ndef f(string=string):\n    return string.sys\nprint(f())", "uses the module string other"),
        ("import string\ndef f(s):\n    global string\n    return string\nprint(f(1))", "uses the module string other"),
        ("class A:\n    pass\nprint(A().__class__.__name__)", "uses the attribute __class__"),
        ("import re\ne = re.enum\nprint(e.sys)", "uses the module re.enum other than by its attributes"),
        ("import typing\ntry:\n    typing.x\nexcept AttributeError as e:\n    print(e.obj)", "uses obj, which is"),
        ("def f():\n    pass\nmatch f:\n    case object(__globals__=g):\n        print(g)", "matches the attribute"),
        ("import re\ndef f(t=re.enum):\n    return t.sys\nprint(f())", "uses the module re.enum other than"),
        ("t = '{}'\nprint(t.format(1))", "formats with a template that is not a string of its own text"),
        ("from operator import attrgetter\nprint(1)", "imports attrgetter from operator, which is banned"),
        ("import operator\nprint(operator.attrgetter('real')(1))", "uses attrgetter, which is banned"),
        ("import string\nprint(string.Formatter().format('{0}', 1))", "uses Formatter, which is banned"),
        ("import typing\nprint(typing.get_type_hints(int))", "uses get_type_hints, which is banned"),
        # a module it may not import, reached through one it may
        (
            "import dataclasses\nprint(dataclasses.builtins.open('/etc/hostname').read())",
            "reaches the module builtins through dataclasses.builtins",
        ),
        ("import typing as t\nprint(t.sys.modules['os'].environ)", "reaches the module sys through t.sys"),
        ("import statistics\nprint(statistics.random.random())", "reaches the module random through statistics.random"),
        ("from dataclasses import builtins\nprint(builtins)", "imports the module builtins as builtins"),
        ("import dataclasses\nprint(dataclasses._create_fn)", "uses _create_fn, a private attribute"),
        ("from typing import _eval_type\nprint(1)", "imports _eval_type, a private name of typing"),
        ("def g():\n    yield 1\nprint(g().gi_frame.f_builtins['open'])", "uses gi_frame, which is banned"),
        ("f = '{0.real}'.format\nprint(f(1))", "formats with a field that reaches into an attribute"),
        (
            "import dataclasses\nd = dataclasses\nprint(d.sys)",
            "uses the module dataclasses other than by its attributes",
        ),
        ("print(1)\x00", "does not parse"),
        # positional sub-patterns only on the classes that match themselves, under their own names
        (
            "from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\nmatch P(1):\n    case P(x):\n"
            "        print(x)",
            "matches P by position",
        ),
        (
            "import dataclasses\nint = dataclasses.make_dataclass('D', ['o' + 'bj'])\nmatch int(1):\n"
            "    case int(m):\n        print(m)",
            "matches int by position",
        ),
        ("import abc\nclass A(abc.ABC):\n    pass\nA.register(int)\nprint(1)", "uses register, which is banned"),
        (
            "import abc\nclass A(abc.ABC):\n    pass\nmatch A:\n    case A(register=r):\n        print(r)",
            "matches the attribute",
        ),
    ],
)
def test_each_rule_names_its_problem(code: str, problem: str) -> None:
    assert any(p.startswith(problem) for p in check_program(code)), check_program(code)


# Whole programs that read an attribute by a name the program computes (a class pattern's positional
# sub-patterns read the names in ``__match_args__``; ``update_wrapper`` copies the attributes it is told), or run
# a string as code (singledispatch evaluates annotations): each reaches ``sys`` past the rules above, and what
# it prints of the machine is alike on both runs. Each is refused by the rule its problem names.
CAUGHT = (
    "import functools\nimport typing\nbox = []\nclass W:\n    def __setattr__(self, k, v):\n        box.append(v)\n"
)
CAUGHT += "try:\n    typing.nothing_here\nexcept AttributeError as e:\n"
NAMES_AS_DATA = {
    "a made dataclass's fields, registered with an ABC": (
        "import abc\nimport dataclasses\nname = '_' * 2 + 'globals' + '_' * 2\n"
        "D = dataclasses.make_dataclass('D', [name], bases=(abc.ABC,), init=False, repr=False, eq=False)\n"
        "D.register(type(dataclasses.fields))\n"
        "match dataclasses.fields:\n    case D(g):\n        print(g['sys'].modules['posix'].uname().sysname)",
        "matches D by position",
    ),
    "type() with computed dunder keys": (
        "import typing\nu = '_' * 2\ndef get(thing, name):\n"
        "    meta = type('M', (type,), {u + 'instancecheck' + u: lambda cls, other: True})\n"
        "    D = meta('D', (), {u + 'match_args' + u: (name,)})\n"
        "    match thing:\n        case D(value):\n            return value\n"
        "try:\n    typing.nothing_here\nexcept AttributeError as e:\n    print(get(get(e, 'o' + 'bj'), 's' + 'ys'))",
        "matches D by position",
    ),
    "a named tuple's fields, inherited": (
        CAUGHT.replace("import typing", "import typing\nimport abc\nimport collections")
        + "    N = collections.namedtuple('N', ['o' + 'bj'])\n    class D(N, metaclass=abc.ABCMeta):\n        pass\n"
        "    D.register(AttributeError)\n    match e:\n        case D(m):\n            print(m)",
        "matches D by position",
    ),
    "update_wrapper told what to copy": (
        CAUGHT + "    functools.update_wrapper(W(), e, assigned=('o' + 'bj',), updated=())\n"
        "functools.update_wrapper(W(), box[0], ('s' + 'ys',), ())\nprint(box[2].platform)",
        "uses update_wrapper other than called with the objects alone",
    ),
    "wraps told what to copy": (
        CAUGHT + "    functools.wraps(e, ('o' + 'bj',), ())(W())\nprint(box[0])",
        "uses wraps other than called with the objects alone",
    ),
    "wraps under another name": (
        CAUGHT.replace("import functools", "from functools import wraps as w") + "    w(e, ('o' + 'bj',), ())(W())\n"
        "print(box[0])",
        "imports wraps as w",
    ),
    "wraps handed on": (
        CAUGHT + "    copy = functools.wraps\n    copy(e, ('o' + 'bj',), ())(W())\nprint(box[0])",
        "uses wraps other than called with the objects alone",
    ),
    "astuple reading a renamed field of a metaclass's": (
        "import dataclasses\nimport enum\nF = dataclasses.field(init=False)\n"
        "D = dataclasses.make_dataclass('D', [('_' + 'convert_', int, F)], bases=(enum.EnumMeta,), init=False)\n"
        "class E(enum.Enum, metaclass=D):\n    pass\nf = dataclasses.astuple(E)[0]\n"
        "print(f('S', 'dataclasses', lambda n: n == 's' + 'ys')['s' + 'ys'].value.version)",
        "uses dataclasses.astuple, which reads the attributes a dataclass's fields name",
    ),
    "asdict under another name": (
        "from dataclasses import asdict as a, dataclass\n@dataclass\nclass P:\n    x: int\nprint(a(P(1)))",
        "uses a, which reads the attributes",
    ),
    "replace handed on": (
        "import dataclasses as d\nr = d.replace\nprint(r)",
        "uses d.replace, which reads the attributes",
    ),
    "singledispatch evaluating a computed annotation": (
        "import functools\nimport typing\n@functools.singledispatch\ndef f(x):\n    return 0\n"
        "s = 'typing.s' + 'ys.platform'\ntry:\n    @f.register\n    def _(x: s):\n        return 1\n"
        "except Exception as e:\n    print(e)",
        "uses register, which is banned",
    ),
}


@pytest.mark.parametrize(("code", "problem"), NAMES_AS_DATA.values(), ids=NAMES_AS_DATA)
def test_attribute_names_that_are_values_are_refused(code: str, problem: str) -> None:
    assert any(p.startswith(problem) for p in check_program(code)), check_program(code)


# Whole programs that read a private attribute of an object an allowed module made or returned, not of the module
# itself: an enum class's ``_convert_`` looks a module up by a name the program computes and makes its globals
# members (the machine's facts, ``sys.modules``), a ``ForwardRef``'s ``_evaluate`` is ``eval``. Each prints the
# same facts of the machine on both runs; each is refused by the attribute's name alone, whatever its object.
PRIVATE = {
    "an enum class bound by from-import": (
        "from enum import Enum\nP = Enum._convert_('P', 'po' + 'six', lambda n: n == 'u' + 'name')\n"
        "print(P['u' + 'name'].value().release)"
    ),
    "an enum class bound to a name of the program's": (
        "import enum\nE = enum.Enum\nP = E._convert_('P', 'po' + 'six', lambda n: n in ('u' + 'name',))\n"
        "u = P['u' + 'name'].value()\nprint(u.release, u.machine)"
    ),
    "the modules through an enum of dataclasses' globals": (
        "import enum\nE = enum.Enum\nS = E._convert_('S', 'dataclasses', lambda n: n == 's' + 'ys')\n"
        "m = S['s' + 'ys'].value.modules\np = m['po' + 'six']\nprint(p.uname().release, p.cpu_count(), len(m))"
    ),
    "a subclass of an allowed enum": (
        "import enum\nclass X(enum.IntEnum):\n    pass\nprint(X._convert_('S', 's' + 'ys', lambda n: n == 'version'))"
    ),
    "a value a library call returned": (
        "import typing\ndef builtin(name):\n    ref = typing.get_args(typing.List[name])[0]\n"
        "    return ref._evaluate({}, {}, frozenset())\nev = builtin('ev' + 'al')\n"
        'print(ev("(lambda m: m.uname().release)(" + "__imp" + "ort__(\'po\' + \'six\'))"))'
    ),
    "a class pattern's keyword": "import enum\nclass C(enum.Enum):\n    A = 1\nmatch C.A:\n    case C(_value_=v):\n"
    "        print(v)",
}


@pytest.mark.parametrize("code", PRIVATE.values(), ids=PRIVATE)
def test_private_attributes_are_refused_whatever_their_object(code: str) -> None:
    problems = check_program(code)
    assert any("a private attribute" in p or p.startswith("matches the attribute _") for p in problems), problems


@pytest.mark.parametrize(
    "code",
    [
        "class Box:\n    def __init__(self):\n        self._items = []\nprint(Box()._items)",
        "from collections import namedtuple\nP = namedtuple('P', 'x y')\nprint(P(1, 2)._replace(x=3))",
        "class A:\n    def __secret(self):\n        return 1\n    def f(self):\n        return self.__secret()\n"
        "print(A().f())",
    ],
)
def test_the_programs_own_private_attributes_are_refused_too(code: str) -> None:
    # a program's own and a library's private attributes look alike in the text: public names do the same work
    assert any("a private attribute" in p for p in check_program(code)), check_program(code)


def test_the_length_limit() -> None:
    longest = "print(1)\n#" + "x" * (MAX_PROGRAM_CHARS - len("print(1)\n#"))
    assert len(longest) == MAX_PROGRAM_CHARS and check_program(longest) == []
    too_long = longest + "x"
    assert check_program(too_long) == [f"{MAX_PROGRAM_CHARS + 1} characters, more than {MAX_PROGRAM_CHARS}"]


def test_a_problem_is_listed_once_and_several_are_all_listed() -> None:
    problems = check_program("import random\nimport random\nx = input()")
    banned = "imports random, which is banned: a program may import only modules that compute (ALLOWED_MODULES)"
    assert problems == [banned, "uses input, which is banned", "never calls print"]


@pytest.mark.parametrize(
    "program",
    [
        "class A:\n    d = {f\"{'\u00a0'}\": 1}\nprint(A.d)\n",
        "d = {f\"{'\u00a0'}\": 1}\nprint(d)\n",
        "import enum\nclass E(enum.Enum):\n    A = enum.auto()\n    B = f\"{'\u00a0'}\"\nprint(E.A)\n",
    ],
)
def test_a_program_unparse_cannot_print_is_checked(program: str) -> None:
    """Round 58: names were read from ``ast.unparse``'s text, which raised on an f-string of a no-break space
    (3.11), out of the check of every answer of the round."""
    assert isinstance(check_program(program), list)
