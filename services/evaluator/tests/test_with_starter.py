"""A task's starter code before a model's code, whose ``from __future__`` imports go first."""

from __future__ import annotations

import pytest
from codegym_evaluator.python_syntax import lines
from codegym_evaluator.scoring import with_starter

STARTER = "import sys\n"


@pytest.mark.parametrize("char", ["", "\u2028", "\x0c", "\x1c", "\x85"])
def test_future_imports_open_the_program_whatever_the_docstring_holds(char: str) -> None:
    """Round 58: the lines were cut by ``str.splitlines``, which ends a line at a U+2028 or a form feed, by the
    numbers of Python's parser, which does not: an honest program's docstring holding one put its ``__future__``
    import after the starter, and the program was CE."""
    code = f'"""Add one.{char}"""\nfrom __future__ import annotations\n\nn = int(input())\nprint(n + 1)\n'
    program = with_starter(STARTER, code)
    assert program.startswith("from __future__ import annotations\n"), program
    compile(program, "<program>", "exec")
    assert f'"""Add one.{char}"""' in program and "print(n + 1)" in program


def test_lines_are_the_parsers() -> None:
    assert lines("a\r\nb\x0cc\u2028d\re\nf") == ["a\r\n", "b\x0cc\u2028d\r", "e\n", "f"]
    assert lines("") == [] and lines("x\n") == ["x\n"]
