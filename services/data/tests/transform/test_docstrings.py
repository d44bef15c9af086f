"""Docstring removal."""

from __future__ import annotations

from codegym_data.transform import RemoveDocstrings
from rewrite_support import call, rewrite, same_program

REMOVE = RemoveDocstrings()


def test_docstrings_of_module_classes_and_functions_go_and_comments_with_them() -> None:
    code = '''
    """Module."""
    class A:
        """A class."""
        def m(self):
            """Only a docstring."""
    def f(x):
        """Doubles."""
        return x * 2  # a comment
    '''
    expected = "class A:\n    def m(self):\n        pass\ndef f(x):\n    return x * 2\n"
    got = rewrite(REMOVE, code)
    assert same_program(got, expected), got
    assert got is not None and "#" not in got and call(got, "f", 4) == 8


def test_a_string_that_is_not_first_is_no_docstring() -> None:
    assert rewrite(REMOVE, "def f():\n    x = 1\n    'not a docstring'\n    return x\n") is None


def test_a_program_that_reads_docstrings_is_left_alone() -> None:
    assert rewrite(REMOVE, 'def f():\n    """Doc."""\n    return f.__doc__\n') is None
