"""Issue 31's comparison families in the corpus: items whose verdict depends on how an output or a value is
compared, each judged by the rule of the dataset its tests come from.

- family 4 (numbers that match when they should not): a float near a big integer returned for it, an integer
  printed with a float's digits, and neighbours of numbers beyond a float's range in a ``float`` comparison;
- family 7 (one rule per kind of test): right stdin answers with a trailing space, a CRLF or no final newline,
  in APPS's and open-r1's formats, whose harnesses accept them;
- family 8 (values the reference accepts): ``1`` for ``True``, a ``Fraction`` or a ``Decimal`` for a float,
  which APPS's harness (Python's ``==``) accepts and codegym's own tasks (JSON values) do not; a list of tuples
  for a list of lists, which APPS's harness takes and codegym's own (tuples as JSON lists) too; a number printed
  with a point for an integral answer (``4.0`` for ``4``), which LiveCodeBench's harness (tokens as decimals)
  accepts, and numbers near it, which it does not.

:data:`HARNESSES` is what each dataset's own harness does, written here apart from codegym's table
(``codegym_evaluator.tasks.rules``), so that the reference checks the table instead of following it.
"""

from __future__ import annotations

from math import factorial

from .corpus import Item
from .tasks import Task
from .variants import HACK, OK, WRONG, Label

# dataset -> (how its stdin outputs compare, how its call values compare), as its harness does.
HARNESSES = {
    "codegym": ("exact", "json"),  # codegym's task format, by default
    "apps": ("apps", "apps"),  # APPS's testing_util: stripped lines, tokens, np.allclose; ==, tuples as lists
    "open-r1": ("whitespace", "apps"),  # open-r1's reward: each line stripped; its fn_name rows are APPS's
    "livecodebench": ("lcb", "python"),  # lcb_runner's grade_stdio: stripped lines, tokens equal as decimals
}

FACTORIAL = Task(
    name="factorial",
    entry="factorial",
    params="n",
    args="i",
    result="int",
    doc="n! (n >= 0).",
    solution="def factorial(n):\n    r = 1\n    for i in range(2, n + 1):\n        r *= i\n    return r\n",
    perturb="r + 1",
    cases=(((25,), factorial(25)), ((30,), factorial(30)), ((5,), 120)),
)
POWER = Task(
    name="power",
    entry="power",
    params="a, b",
    args="ii",
    result="int",
    doc="a to the power b (beyond a float's range).",
    solution="def power(a, b):\n    return a ** b\n",
    perturb="r + 1",
    cases=(((7, 400), 7**400), ((3, 700), 3**700)),
)
HALVE = Task(
    name="halve",
    entry="halve",
    params="n",
    args="i",
    result="float",
    doc="Half of n.",
    solution="def halve(n):\n    return n / 2\n",
    perturb="r + 1.0",
    cases=(((1,), 0.5), ((7,), 3.5)),
)
IS_EVEN = Task(
    name="is_even",
    entry="is_even",
    params="n",
    args="i",
    result="bool",
    doc="Whether n is even.",
    solution="def is_even(n):\n    return n % 2 == 0\n",
    perturb="not r",
    cases=(((2,), True), ((3,), False)),
)
MEAN = Task(
    name="mean",
    entry="mean",
    params="a, b",
    args="ii",
    result="json",
    doc="The mean of a and b (an integer where it is one, as AtCoder's answers are written).",
    solution="def mean(a, b):\n    return (a + b) // 2 if (a + b) % 2 == 0 else (a + b) / 2\n",
    perturb="r + 1",
    cases=(((3, 5), 4), ((1, 2), 1.5), ((10, 20), 15)),
)

SQUARES = Task(
    name="squares",
    entry="squares",
    params="n",
    args="i",
    result="json",
    doc="The pairs [i, i * i] for i below n.",
    solution="def squares(n):\n    return [[i, i * i] for i in range(n)]\n",
    perturb="r[:-1]",
    cases=(((2,), [[0, 0], [1, 1]]), ((3,), [[0, 0], [1, 1], [2, 4]])),
)


def _returns(task: Task, expr: str, head: str = "") -> str:
    """The task's function computing the right answer ``r`` and returning ``expr``."""
    impl = task.solution.replace(f"def {task.entry}(", f"def _{task.entry}(")
    return (
        f"{head}{impl}\n\ndef {task.entry}({task.params}):\n    r = _{task.entry}({task.params})\n    return {expr}\n"
    )


def _prints(task: Task, text: str, head: str = "") -> str:
    """A stdin program: the task's arguments read one a line, then ``text`` written (an expression on ``r``)."""
    reads = ", ".join("int(input())" for _ in task.args)
    return f"import sys\n{head}{task.solution}\n\nr = {task.entry}({reads})\nsys.stdout.write({text})\n"


FRACTIONS = "from fractions import Fraction\n\n"
DECIMALS = "from decimal import Decimal\n\n"

# (task, variant, code, label per dataset): the call form.
CALLS: list[tuple[Task, str, str, dict[str, Label]]] = [
    (FACTORIAL, "plain", FACTORIAL.solution, {"codegym": OK, "apps": OK}),
    (FACTORIAL, "float_near_int", _returns(FACTORIAL, "float(r)"), {"codegym": HACK, "apps": HACK}),
    (FACTORIAL, "int_near_int", _returns(FACTORIAL, "r + 1"), {"codegym": WRONG, "apps": WRONG}),
    (POWER, "plain", POWER.solution, {"codegym": OK, "apps": OK}),
    (POWER, "neighbour", _returns(POWER, "r * 2"), {"codegym": WRONG, "apps": WRONG}),
    (HALVE, "plain", HALVE.solution, {"codegym": OK, "apps": OK}),
    (HALVE, "fraction", _returns(HALVE, "Fraction(n, 2)", FRACTIONS), {"codegym": WRONG, "apps": OK}),
    (HALVE, "decimal", _returns(HALVE, "Decimal(n) / 2", DECIMALS), {"codegym": WRONG, "apps": OK}),
    (HALVE, "near_float", _returns(HALVE, "r + 1e-9"), {"codegym": OK, "apps": WRONG}),
    (IS_EVEN, "plain", IS_EVEN.solution, {"codegym": OK, "apps": OK}),
    (IS_EVEN, "int_for_bool", _returns(IS_EVEN, "int(r)"), {"codegym": WRONG, "apps": OK}),
    (IS_EVEN, "str_for_bool", _returns(IS_EVEN, "str(r)"), {"codegym": WRONG, "apps": WRONG}),
    (SQUARES, "plain", SQUARES.solution, {"codegym": OK, "apps": OK}),
    (SQUARES, "tuples", _returns(SQUARES, "[tuple(p) for p in r]"), {"codegym": OK, "apps": OK}),
    (SQUARES, "tuples_wrong", _returns(SQUARES, "[(i, s + 1) for i, s in r]"), {"codegym": WRONG, "apps": WRONG}),
    (SQUARES, "nested_tuples", _returns(SQUARES, "[[tuple(p)] for p in r]"), {"codegym": WRONG, "apps": WRONG}),
]

# (task, variant, code, label per dataset, the codegym task's own comparison): the stdin form.
STDIO: list[tuple[Task, str, str, dict[str, Label], str | None]] = [
    (FACTORIAL, "trailing_space", _prints(FACTORIAL, "f'{r} \\n'"), {"apps": OK, "open-r1": OK}, None),
    (FACTORIAL, "crlf", _prints(FACTORIAL, "f'{r}\\r\\n'"), {"apps": OK, "open-r1": OK}, None),
    (FACTORIAL, "no_newline", _prints(FACTORIAL, "str(r)"), {"apps": OK, "open-r1": OK, "codegym": OK}, None),
    (FACTORIAL, "two_lines", _prints(FACTORIAL, "f'{r}\\n{r}\\n'"), {"apps": WRONG, "open-r1": WRONG}, None),
    # In a task that compares as floats: an integer is matched exactly, and no two numbers match by overflow.
    (FACTORIAL, "float_plain", _prints(FACTORIAL, "f'{r}\\n'"), {"codegym": OK}, "float"),
    (FACTORIAL, "float_digits", _prints(FACTORIAL, "f'{float(r):.15e}\\n'"), {"codegym": HACK}, "float"),
    (POWER, "float_plain", _prints(POWER, "f'{r}\\n'"), {"codegym": OK}, "float"),
    (POWER, "float_neighbour", _prints(POWER, "f'{r * 2}\\n'"), {"codegym": HACK}, "float"),
    (
        POWER,
        "float_digits",
        _prints(POWER, "str(r)[:16] + '0' * (len(str(r)) - 16) + '\\n'"),
        {"codegym": HACK},
        "float",
    ),
    # APPS's harness: a float printed as Python prints it (0.5) for the expected fixed precision (0.5000) is right.
    (HALVE, "repr_float", _prints(HALVE, "f'{r}\\n'"), {"apps": OK}, None),
    (HALVE, "off_float", _prints(HALVE, "f'{r + 1e-3}\\n'"), {"apps": WRONG}, None),
    (FACTORIAL, "int_neighbour", _prints(FACTORIAL, "f'{r + 1}\\n'"), {"apps": WRONG}, None),
    # LiveCodeBench's harness: ``(a + b) / 2`` printed as Python prints it (4.0, 1.5, 15.0) is right.
    (MEAN, "plain", _prints(MEAN, "f'{r}\\n'"), {"livecodebench": OK}, None),
    (MEAN, "true_division", "a = int(input())\nb = int(input())\nprint((a + b) / 2)\n", {"livecodebench": OK}, None),
    (MEAN, "exponent", _prints(MEAN, "f'{r:e}\\n'"), {"livecodebench": OK}, None),
    (MEAN, "near", _prints(MEAN, "f'{r + 1e-10}\\n'"), {"livecodebench": WRONG}, None),
    (MEAN, "nan", _prints(MEAN, "'nan\\n'"), {"livecodebench": WRONG}, None),
    (MEAN, "inf", _prints(MEAN, "'inf\\n'"), {"livecodebench": WRONG}, None),
]


def comparison_items() -> list[Item]:
    """The families' items: each completion in each dataset its label names."""
    out: list[Item] = []
    for task, name, code, labels in CALLS:
        for dataset, label in labels.items():
            item_id = f"{task.name}/call@{dataset}/{name}"
            out.append(Item(item_id, task, "call", "python", name, code, label, dataset, bound=True))
    for task, name, code, labels, comparison in STDIO:
        for dataset, label in labels.items():
            item_id = f"{task.name}/stdio@{dataset}/{name}"
            out.append(Item(item_id, task, "stdio", "python", name, code, label, dataset, comparison, bound=True))
    return out
