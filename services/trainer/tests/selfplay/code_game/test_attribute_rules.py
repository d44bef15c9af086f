"""Every syntax that names an attribute in the text meets the same rules: ``x.name`` and a class pattern's keyword."""

from __future__ import annotations

import pytest
from codegym_trainer.selfplay.code_game.attribute_rules import KEYWORD_REFUSED
from codegym_trainer.selfplay.code_game.program_check import check_program

HONEST_PATTERNS = {
    "fields by keyword": "from dataclasses import dataclass\n@dataclass\nclass Point:\n    x: int\n    y: int\n"
    "match Point(0, 3):\n    case Point(x=0, y=y):\n        print('on the axis', y)",
    "data attributes named like library ones": "class Token:\n    def __init__(self):\n        self.type = 'op'\n"
    "        self.name = '+'\nmatch Token():\n    case Token(type='op', name=n):\n        print(n)",
    "a method of a builtin": "match 'ab':\n    case str(upper=up):\n        print(up())",
}


@pytest.mark.parametrize("code", HONEST_PATTERNS.values(), ids=HONEST_PATTERNS)
def test_class_patterns_by_plain_names_pass(code: str) -> None:
    assert check_program(code) == []


ROADS = {
    # ``str.format`` of a computed template walks attributes by names that are data
    "a bound format": (
        "import dataclasses\nt = '{0.' + '_' * 2 + 'globals' + '_' * 2 + '[sys].version}'\nmatch t:\n"
        "    case str(format=f):\n        print(f(dataclasses.fields))",
        "matches the attribute format",
    ),
    # a class's protocols unbound: any object as ``self``
    "protocols unbound": (
        "import dataclasses\nD = dataclasses.make_dataclass('D', ['real'])\nmatch D:\n"
        "    case object(__eq__=e, __init__=i):\n        print(e(D(1), D(1)), i)",
        "matches the attribute __eq__",
    ),
    # a dataclass's generated __init__ sets a field's name to a computed one, its __repr__ then reads it
    "a field renamed by a generated __init__": (
        "import dataclasses\n@dataclasses.dataclass\nclass N:\n    name: str\n@dataclasses.dataclass\nclass D:\n"
        "    v: int\nf = dataclasses.fields(D)[0]\nmatch N:\n    case object(__init__=init):\n"
        "        init(f, '_' * 2 + 'globals' + '_' * 2)\n@dataclasses.dataclass\nclass E(D):\n    pass\n"
        "match E:\n    case object(__repr__=show):\n        print(show(dataclasses.fields)[:60])",
        "matches the attribute __init__",
    ),
    "a private name": ("match 1:\n    case int(_x=v):\n        print(v)", "matches the attribute _x"),
    "a banned name": ("match 1:\n    case object(f_globals=g):\n        print(g)", "matches the attribute f_globals"),
    # a keyword that reads ``fields`` holds them as ``x.fields`` does: then no attribute ``name`` is written
    "fields held by a keyword, a name written": (
        "from dataclasses import dataclass\n@dataclass\nclass Form:\n    fields: tuple\nf = Form(())\n"
        "match f:\n    case Form(fields=fs):\n        f.name = 'x'\n        print(fs)",
        "writes an attribute called name",
    ),
}


@pytest.mark.parametrize(("code", "problem"), ROADS.values(), ids=ROADS)
def test_a_class_patterns_keyword_meets_the_attribute_rules(code: str, problem: str) -> None:
    problems = check_program(code)
    assert any(p.startswith(problem) for p in problems), problems


@pytest.mark.parametrize("name", sorted(KEYWORD_REFUSED))
def test_no_name_a_rule_reads_in_context_is_a_keyword(name: str) -> None:
    # format, the protocols, NAMES_AS_DATA, FIELD_READERS and the class makers: their rules read the text around
    problems = check_program(f"match 1:\n    case object({name}=v):\n        print(v)")
    assert f"matches the attribute {name}, which a program uses only where the text around it shows how" in problems


def test_the_same_names_pass_as_attributes_where_the_text_shows_their_use() -> None:
    code = "class P(int):\n    def __eq__(self, other):\n        return super().__eq__(other)\n"
    code += "print('{}'.format(P(1)), P(1) == 1)"
    assert check_program(code) == []
