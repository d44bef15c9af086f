"""Candidate spans: which statements and blocks, in whole lines, with metrics of their own; cut and put back."""

from __future__ import annotations

import ast
import textwrap

from codegym_data import solutions
from codegym_data.mask.spans import function_spans, split_lines
from codegym_evaluator.tasks import load_tasks
from mask_support import PROGRAM


def test_statements_and_blocks_in_whole_lines() -> None:
    (function,) = function_spans(PROGRAM)
    found = [(s.kind, s.node, s.start, s.end) for s in function.spans]
    assert found == [
        ("block", "FunctionDef.body", 3, 13),  # the body after its docstring; the docstring is no span
        ("statement", "Assign", 3, 3),
        ("statement", "For", 4, 7),
        ("block", "For.body", 5, 7),
        ("statement", "If", 5, 5),  # "continue" shares its line with the if: no span; "a = 1; b = 2" neither
        ("statement", "AugAssign", 7, 7),  # a trailing comment is part of the line
        ("statement", "If", 8, 12),
        ("statement", "Assign", 9, 9),  # the if's body is this one statement: one span, a statement
        ("block", "If.body", 11, 12),  # the elif is no statement span of its own, its body is a block
        ("statement", "Assign", 11, 11),
        ("statement", "AugAssign", 12, 12),
        ("statement", "Return", 13, 13),
    ]
    assert all(s.function == "f" for s in function.spans)


def test_a_span_has_metrics_of_its_own() -> None:
    (function,) = function_spans(PROGRAM)
    loop = next(s for s in function.spans if s.node == "For")
    # for (1) and if (1): cyclomatic 3; for > if: nesting 2; for, if, continue, a = 1, b = 2, += : 6 statements.
    m = loop.metrics
    assert (m.cyclomatic, m.nesting_depth, m.lines, m.statements) == (3, 2, 4, 6)
    assert function.function.metrics.cyclomatic == 5  # for, if, if, elif


def test_nested_functions_own_their_bodies_and_classes_hold_no_spans() -> None:
    code = textwrap.dedent(
        """
        def outer(n):
            @cache
            def inner(k):
                return k * 2
            class Local:
                size = 3
            return inner(n)
        """
    )
    outer, inner = function_spans(code)
    assert [(s.node, s.start, s.end) for s in outer.spans] == [
        ("FunctionDef.body", 3, 8),
        ("FunctionDef", 3, 5),  # from its decorator
        ("ClassDef", 6, 7),
        ("Return", 8, 8),
    ]
    assert (inner.function.name, [(s.node, s.start, s.end) for s in inner.spans]) == (
        "outer.<locals>.inner",
        [("Return", 5, 5)],
    )


def test_windows_line_endings_are_lines_too() -> None:
    code = "def f(x):\r\n    y = x\r\n    return y\r\n"
    (function,) = function_spans(code)
    lines = split_lines(code)
    assert [(s.start, s.end) for s in function.spans] == [(2, 3), (2, 2), (3, 3)]
    assert "".join(lines[1:2]) == "    y = x\r\n"


def test_every_humaneval_span_is_cut_out_and_put_back() -> None:
    spans = functions = 0
    for task in load_tasks("humaneval"):
        ref = solutions.reference(task)
        assert ref is not None
        lines = split_lines(ref.source)
        for function in function_spans(ref.source):
            functions += 1
            for span in function.spans:
                prefix, middle = "".join(lines[: span.start - 1]), "".join(lines[span.start - 1 : span.end])
                assert prefix + middle + "".join(lines[span.end :]) == ref.source
                ast.parse(textwrap.dedent(middle))  # whole statements: the middle parses on its own
                spans += 1
    # 179 functions (some rows have helpers) with 1150 spans when written: a finder that stopped finding fails here
    assert functions == 179 and spans >= 1100
