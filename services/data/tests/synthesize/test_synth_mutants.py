"""Each mutation operator's exact mutants on small programs, checked by hand; the draw of ``generate_mutants``."""

from __future__ import annotations

import ast
import random
import textwrap

from codegym_data.synthesize.mutants import (
    OPERATORS,
    ConstantReturn,
    DeleteStatement,
    FlipComparison,
    NegateCondition,
    OffByOne,
    Operator,
    SwapArithmetic,
    SwapBoolean,
    all_mutants,
    generate_mutants,
)


def mutants_of(operator: Operator, code: str) -> set[str]:
    """The mutants ``operator`` makes of ``code`` (dedented), each printed from its syntax tree."""
    return {m.code for m in all_mutants(textwrap.dedent(code), [operator])}


def printed(*codes: str) -> set[str]:
    return {ast.unparse(ast.parse(textwrap.dedent(c))) for c in codes}


def test_flip_comparison_flips_one_operator_of_a_chain_at_a_time() -> None:
    got = mutants_of(FlipComparison(), "def f(a, b, c):\n    return a < b <= c and a is not None\n")
    assert got == printed(
        "def f(a, b, c):\n    return a <= b <= c and a is not None\n",
        "def f(a, b, c):\n    return a < b < c and a is not None\n",
        "def f(a, b, c):\n    return a < b <= c and a is None\n",
    )
    assert mutants_of(FlipComparison(), "def f(x, s):\n    return x in s or x == 1 or x > 2\n") == printed(
        "def f(x, s):\n    return x not in s or x == 1 or x > 2\n",
        "def f(x, s):\n    return x in s or x != 1 or x > 2\n",
        "def f(x, s):\n    return x in s or x == 1 or x >= 2\n",
    )


def test_off_by_one_moves_integer_literals_not_bools_or_floats() -> None:
    got = mutants_of(OffByOne(), "def f(xs):\n    return xs[0] + 2.5 if True else -3\n")
    assert got == printed(
        "def f(xs):\n    return xs[1] + 2.5 if True else -3\n",
        "def f(xs):\n    return xs[-1] + 2.5 if True else -3\n",
        "def f(xs):\n    return xs[0] + 2.5 if True else -4\n",
        "def f(xs):\n    return xs[0] + 2.5 if True else -2\n",
    )


def test_swap_arithmetic_in_expressions_and_augmented_assignments() -> None:
    got = mutants_of(SwapArithmetic(), "def f(a, b):\n    a += b * 2\n    return a % b\n")
    assert got == printed(
        "def f(a, b):\n    a -= b * 2\n    return a % b\n",
        "def f(a, b):\n    a += b // 2\n    return a % b\n",
        "def f(a, b):\n    a += b * 2\n    return a // b\n",
    )
    assert mutants_of(SwapArithmetic(), "def f(a):\n    return a ** 2 / 3 - 1\n") == printed(
        "def f(a):\n    return a ** 2 / 3 + 1\n",
        "def f(a):\n    return a ** 2 * 3 - 1\n",
        "def f(a):\n    return a * 2 / 3 - 1\n",
    )


def test_negate_condition_of_if_while_and_conditional_expressions() -> None:
    code = """\
        def f(n):
            while n > 10:
                n -= 1
            if not n:
                return 0
            return 1 if n % 2 else 2
        """
    got = mutants_of(NegateCondition(), code)
    assert got == printed(
        code.replace("while n > 10", "while not n > 10"),
        code.replace("if not n:", "if n:"),  # a negated condition loses its not
        code.replace("1 if n % 2 else 2", "1 if not n % 2 else 2"),
    )


def test_swap_boolean_operators_and_literals() -> None:
    got = mutants_of(SwapBoolean(), "def f(a, b):\n    return (a and b) or False\n")
    assert got == printed(
        "def f(a, b):\n    return (a or b) or False\n",
        "def f(a, b):\n    return (a and b) and False\n",
        "def f(a, b):\n    return (a and b) or True\n",
    )


def test_constant_return_uses_every_constant_but_the_one_returned() -> None:
    got = mutants_of(ConstantReturn(), "def f(x):\n    return 0\n")
    assert got == printed(*(f"def f(x):\n    return {c}\n" for c in ("None", "1", "''", "True", "False", "[]")))
    assert len(mutants_of(ConstantReturn(), "def f(x):\n    return x + 1\n")) == 7
    # a bare return is None already
    assert "def f(x):\n    return None" not in mutants_of(ConstantReturn(), "def f(x):\n    return\n")


def test_delete_statement_leaves_definitions_imports_and_docstrings_and_fills_empty_bodies() -> None:
    code = '''\
        import math
        def f(xs):
            """Doc."""
            total = 0
            for x in xs:
                total += math.floor(x)
            return total
        '''
    got = mutants_of(DeleteStatement(), code)
    head = 'import math\ndef f(xs):\n    """Doc."""\n'
    assert got == printed(
        head + "    for x in xs:\n        total += math.floor(x)\n    return total\n",
        head + "    total = 0\n    return total\n",
        head + "    total = 0\n    for x in xs:\n        pass\n    return total\n",
        head + "    total = 0\n    for x in xs:\n        total += math.floor(x)\n",
    )


def test_every_mutant_differs_from_the_original_and_compiles() -> None:
    code = textwrap.dedent(
        """\
        def f(xs, k):
            if not xs or k < 1:
                return []
            out = [x * k for x in xs if x % 2 == 0]
            while len(out) > 3:
                out.pop()
            return out
        """
    )
    mutants = all_mutants(code)
    assert {m.operator for m in mutants} == {op.name for op in OPERATORS}
    codes = [m.code for m in mutants]
    assert len(codes) == len(set(codes)) and ast.unparse(ast.parse(code)) not in codes
    for c in codes:
        compile(c, "<mutant>", "exec")
    # an operator that would make invalid code (an empty body) or the same program makes no mutant
    assert all_mutants("def f():\n    pass\n") == []


def test_generate_mutants_is_seeded_and_takes_operators_in_turn() -> None:
    code = "def f(a, b):\n    if a > b and a:\n        return a - b + 1\n    return b - a\n"
    first = generate_mutants(code, 7, random.Random(3))
    assert first == generate_mutants(code, 7, random.Random(3))
    assert [m.operator for m in first] == [op.name for op in OPERATORS]  # one of each before any second
    assert len(generate_mutants(code, 1000, random.Random(0))) == len(all_mutants(code))
