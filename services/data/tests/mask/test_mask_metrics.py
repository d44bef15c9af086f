"""The metrics against values counted by hand (the counting is in the comments), function by function."""

from __future__ import annotations

import ast
import math
import textwrap

import pytest
from codegym_data.mask.metrics import Halstead, cyclomatic, function_metrics, halstead_counts, measure, nesting_depth


def only_function(code: str) -> tuple[str, ast.FunctionDef | ast.AsyncFunctionDef, dict[str, float]]:
    (found,) = function_metrics(textwrap.dedent(code))
    m = found.metrics
    values = {
        "cyclomatic": m.cyclomatic,
        "volume": m.halstead_volume,
        "nesting": m.nesting_depth,
        "lines": m.lines,
        "statements": m.statements,
    }
    return found.name, found.node, values


def test_straight_line_function() -> None:
    name, _, m = only_function(
        """
        def add(a, b):
            return a + b
        """
    )
    # No decision: cyclomatic 1. Operators: FunctionDef, Return, + -> n1 = 3, N1 = 3. Operands: add, a, b (the
    # parameters), a, b (the sum) -> n2 = 3, N2 = 5. Volume = (3 + 5) * log2(3 + 3) = 8 * log2(6).
    assert name == "add"
    assert m == {"cyclomatic": 1, "volume": pytest.approx(8 * math.log2(6)), "nesting": 0, "lines": 2, "statements": 1}


def test_branches_with_boolean_operators_and_elif() -> None:
    _, node, m = only_function(
        """
        def sign(x, strict=False):
            if x > 0 and not strict:
                return 1
            elif x < 0 or x == 0 and strict:
                return -1
            else:
                return 0
        """
    )
    # Decisions: if, elif (2); "x > 0 and not strict" (1); "x < 0 or (x == 0 and strict)": the or (1) and the
    # inner and (1) -> 5; cyclomatic 1 + 5 = 6. The elif is at the depth of its if: nesting 1.
    # Statements of the body: if, return, elif's if, return, return = 5.
    # Operators: FunctionDef 1, If 2, and 2, > 1, not 1, Return 3, or 1, < 1, == 1, unary - 1 (-1 is -(1))
    #   -> n1 = 10, N1 = 14.
    # Operands: sign 1, x 4 (parameter, three comparisons), strict 3 (parameter, not strict, and strict),
    #   False 1 (the default), 0 4 (three comparisons, return 0), 1 2 (return 1, -1) -> n2 = 6, N2 = 15.
    # Volume = (14 + 15) * log2(10 + 6) = 29 * 4 = 116.
    assert halstead_counts([node]) == Halstead(n1=10, n2=6, N1=14, N2=15)
    assert m == {"cyclomatic": 6, "volume": pytest.approx(116.0), "nesting": 1, "lines": 7, "statements": 5}


def test_loop_try_and_comprehension() -> None:
    _, node, m = only_function(
        """
        def count(items):
            total = 0
            for item in items:
                try:
                    total += int(item)
                except ValueError:
                    continue
            return total + sum(1 for x in items if x)
        """
    )
    # Decisions: for (1), except handler (1), the generator's for clause (1) and its if (1): cyclomatic 5.
    # Nesting: for > try > statements: 2. Statements: =, for, try, +=, continue, return = 6 (a handler is not a
    # statement node).
    # Operators: FunctionDef, =, For, Try, +=, Call 2 (int, sum), ExceptHandler, Continue, Return, +,
    #   GeneratorExp, comprehension -> n1 = 12, N1 = 13.
    # Operands: count 1, items 3, total 3, 0 1, item 2, int 1, ValueError 1, sum 1, 1 1, x 2 -> n2 = 10, N2 = 16.
    # Volume = 29 * log2(22).
    assert halstead_counts([node]) == Halstead(n1=12, n2=10, N1=13, N2=16)
    assert m == {
        "cyclomatic": 5,
        "volume": pytest.approx(29 * math.log2(22)),
        "nesting": 2,
        "lines": 8,
        "statements": 6,
    }


def test_match_cases_and_a_nested_if_in_else() -> None:
    _, node, m = only_function(
        """
        def kind(value):
            match value:
                case 0:
                    return "zero"
                case [x, *_] if x:
                    return "list"
                case _:
                    if value is None:
                        return "none"
                    else:
                        if value:
                            return "other"
                    return "falsy"
        """
    )
    # Decisions: case 0 (1), the guarded case (1), not the last catch-all "case _"; if (1), the if inside the
    # else (1, not an elif: it is indented further): cyclomatic 1 + 4 = 5. Nesting: match > if > else's if: 3.
    assert m["cyclomatic"] == 5 and m["nesting"] == 3 and m["lines"] == 13
    # Statements: match, the two cases' returns, if, return, the else's if, its return, the last return = 8.
    assert m["statements"] == 8
    # "case x if x:" as the last case is guarded, so it is a decision too.
    guarded = ast.parse("match v:\n    case 1:\n        pass\n    case x if x:\n        pass\n")
    assert cyclomatic(guarded.body) == 3
    assert isinstance(node.body[0], ast.Match) and nesting_depth(node.body[0]) == 3


def test_lambdas_nested_functions_methods_and_decorators() -> None:
    code = textwrap.dedent(
        """
        class Box:
            @staticmethod
            @decorated
            def outer(xs):
                def inner(y):
                    return y if y else -y
                return [inner(x) for x in xs if x] or sorted(xs, key=lambda v: v and 1)
        """
    )
    outer, inner = function_metrics(code)
    # Names are qualified; methods under their class, nested functions under <locals>.
    assert (outer.name, inner.name) == ("Box.outer", "Box.outer.<locals>.inner")
    # inner: the conditional expression: 1 + 1 = 2. Operators: FunctionDef, Return, IfExp, unary - (n1 = 4);
    # operands: inner, y x 4 (parameter, body, test, -y) -> n2 = 2, N2 = 5. Volume = 9 * log2(6).
    assert inner.metrics.cyclomatic == 2
    assert inner.metrics.halstead_volume == pytest.approx(9 * math.log2(6))
    # outer holds inner's decision (1), the comprehension's for and if (2), the or (1) and the lambda's and (1):
    # 1 + 5 = 6. Its lines start at the first decorator: 6. Statements: def inner, its return, return = 3.
    assert outer.metrics.cyclomatic == 6 and outer.metrics.lines == 6 and outer.metrics.statements == 3
    assert outer.metrics.nesting_depth == 0  # a nested def adds no level


def test_a_span_of_statements_is_measured_alone() -> None:
    tree = ast.parse("x = 1\nwhile x:\n    x -= 1\n")
    m = measure(tree.body)
    # Decisions: while (1): cyclomatic 2. Operators: =, While, -= (n1 = 3, N1 = 3); operands: x 3, 1 2
    # (n2 = 2, N2 = 5). Volume = 8 * log2(5). Statements: =, while, -= = 3.
    assert (m.cyclomatic, m.nesting_depth, m.lines, m.statements) == (2, 1, 3, 3)
    assert m.halstead_volume == pytest.approx(8 * math.log2(5))
    assert measure([tree.body[0]]).halstead == Halstead(n1=1, n2=2, N1=1, N2=2)


def test_literals_differ_by_their_text() -> None:
    # 1, 1.0 and '1' are three operands; a and a.a are two occurrences of the operand a (the name and the
    # attribute's name), with one Attribute operator.
    assert halstead_counts(ast.parse("f(1, 1.0, '1')").body) == Halstead(n1=1, n2=4, N1=1, N2=4)
    assert halstead_counts(ast.parse("a.a").body) == Halstead(n1=1, n2=1, N1=1, N2=2)
    assert Halstead(0, 0, 0, 0).volume == 0.0
