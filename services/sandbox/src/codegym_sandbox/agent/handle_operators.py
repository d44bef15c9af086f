"""The operators of a handle (an object of the program's, in the checker: ``program_handle.Handle``), done by the
program's process on its own object: between two of its objects, sums and products with a value of the tests',
and the conversions of its object to a number. Never a difference, a quotient or a comparison with a value of the
tests' (:class:`Crossing`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Crossing(BaseException):
    """An operator between an object of the program's and a value of the tests' but a sum or a product (``money <
    3``, ``result - expected``): never the program's to decide, which would answer what passes them. Not an
    ``Exception``: no ``except Exception`` of the tests' meets it, whatever the program does."""


def _operator(op: str, handle: type) -> Callable[..., Any]:
    def method(self: Any, *other: Any) -> Any:
        if op not in _WITH_THE_TESTS and other and not isinstance(other[0], handle):
            raise Crossing(f"{op}: an object of the program's ({self._text}) with a value of the tests'")
        return self._ask(op, *other)

    method.__name__ = f"__{op}__"
    return method


def _conversion(op: str, kinds: tuple[type, ...]) -> Callable[..., Any]:
    def method(self: Any) -> Any:
        value = self._ask(op)
        if type(value) not in kinds:  # plain data, exactly: the program's own number for its object
            raise TypeError(f"{op}() of {self._text} is not a {kinds[0].__name__}")
        return value

    method.__name__ = f"__{op}__"
    return method


# The program's operators on its objects, done in its process: between two of them (``V(1) + V(2)``, ``sorted``),
# and sums and products with a value of the tests' (``V(2) * 3``, ``sum``, ``Money(5) + 'abc'`` that raises
# TypeError). Never a difference, a quotient or a comparison with one (a Crossing): ``abs(result - expected) < tol``,
# ``assertAlmostEqual``, ``np.isclose`` would show the program the expected value, and take its answer (a 0).
# A handle equals no plain data.
_BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift", "rshift")
_COMPARISONS = frozenset({"lt", "le", "gt", "ge"})
_WITH_THE_TESTS = frozenset({"add", "radd", "mul", "rmul", "round"})  # round: its digits
OPERATORS = (*_BINARY, *(f"r{op}" for op in _BINARY), *sorted(_COMPARISONS), "neg", "pos", "abs", "invert", "round")
NUMBERS = {"float": (float,), "int": (int,), "index": (int,), "complex": (complex,)}


def install(handle: type) -> None:
    """Give the class of handles (``program_handle.Handle``) these operators and conversions."""
    for op in OPERATORS:
        setattr(handle, f"__{op}__", _operator(op, handle))
    for op, kinds in NUMBERS.items():
        setattr(handle, f"__{op}__", _conversion(op, kinds))
