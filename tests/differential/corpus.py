"""The differential corpus: every task's completions in every form, each labelled, with the tests of its form.

An :class:`Item` is one completion judged in one form:

- ``stdio``: a whole program (Python, C, C++, JavaScript, bash) fed each case's stdin, its stdout compared;
- ``call``: the task's prompt followed by the completion; each case calls the function, the value compared;
- ``assert``: the same program, judged by the task's ``check(candidate)`` (HumanEval's shape: the check may
  call the prompt's helpers).

An item's tests compare by the rule of its ``dataset`` (codegym's own by default; ``comparisons.py`` adds the
items whose verdict depends on it, in APPS's and open-r1's formats too).

Labels: ``honest-correct`` and ``honest-wrong`` (the plain reference is the truth for these; the label is
what the corpus means them to be, and a mismatch is a corpus bug the report shows), ``hack`` (must never pass),
``model`` (a real model's answer, ``completions.py``: the reference alone says whether it is right). The
data is made in code, but for the model's answers, generated once and shipped as a fixture; nothing is
downloaded.

Issue 31's families: ``comparisons.py`` (4, 7, 8), ``families.py`` (3, 6, 9), the variants ``names_answered``
(1) and ``*by_path`` (5).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from .tasks import TASKS, Task
from .variants import Label, function_variants, native_variants, stdio_variants

Form = Literal["stdio", "call", "assert"]
FORMS: tuple[Form, ...] = ("stdio", "call", "assert")
LABELS: tuple[Label, ...] = ("honest-correct", "honest-wrong", "hack")
STDIO_CASES = 2  # cases per task run in the stdin form (each is a run per route)
CALL_CASES = 2  # cases per task run as function-call tests

# The variants each form runs (every run costs time on each route): those whose verdict can differ in that form.
CALL_VARIANTS = {
    "plain",
    "main_demo",
    "main_input",
    "top_print",
    "print_inside",
    "numpy_value",
    "returns_generator",
    "off_by_one",
    "wrong_type",
    "sys_exit_in_call",
    "fake_results",
    "always_equal",
    "stop_iteration",
    "names_answered",
    "redefined_past_odd_line_ends",
    "form_feed_comment",
}
ASSERT_VARIANTS = {
    "plain",
    "main_demo",
    "main_input",
    "top_print",
    "top_self_test",
    "sleep",
    "numpy_value",
    "helper_redefined",
    "off_by_one",
    "returns_none",
    "raises",
    "sys_exit_at_import",
    "os_exit_at_import",
    "sys_exit_in_call",
    "os_exit_in_call",
    "atexit_exit",
    "excepthook_exit",
    "fake_results",
    "always_equal",
    "stop_iteration",
    "read_tests",
    "helper_hack",
    "names_answered",
    "redefined_past_odd_line_ends",
    "form_feed_comment",
}
STDIO_VARIANTS = {
    "plain",
    "main_guard",
    "main_function",
    "read_all",
    "stderr_debug",
    "off_by_one",
    "stdout_debug",
    "raises",
    "fake_results",
    "exit_before_output",
    "numpy_value",
    "forge_cell_result",
    "closes_descriptors",
    "broken_excepthook",
    "stdin_by_path",
    "stdout_by_path",
    "descriptor_zero",
}


@dataclass(frozen=True)
class Item:
    """One completion of one task, judged in one form."""

    id: str
    task: Task
    form: Form
    language: str
    variant: str
    code: str  # what the model wrote (for call and assert: what follows the prompt)
    label: Label
    dataset: str = "codegym"  # whose rule its tests compare by: codegym, apps, open-r1 (``comparisons.HARNESSES``)
    comparison: str | None = None  # a codegym task's own comparison of outputs, where it names one
    bound: bool = False  # its verdict depends on its dataset's rule: routes judge it only in that dataset's format
    family: str = ""  # the attack or fidelity family it stands for, where it was added for one (``report.family``)
    timeout_s: float | None = None  # its time limit in every route, where not ``route_http.TIMEOUT_S``
    repeat: bool = False  # judged twice with the routes' caches on (issue 31, family 9: ``families.repeat_items``)

    @property
    def program(self) -> str:
        """The whole program a route runs: the prompt and the completion, or the stdin program itself."""
        return self.code if self.form == "stdio" else f"{self.task.starter}\n{self.code}"

    @property
    def fenced(self) -> str:
        """The program as a chat model's answer: one fenced block."""
        fence = {"nodejs": "javascript"}.get(self.language, self.language)
        return f"Here is the solution.\n\n```{fence}\n{self.program}\n```\n"

    @property
    def completion(self) -> str:
        """What follows the prompt as a chat answer (the prompt is the program's start: HumanEval, /submit)."""
        return f"Here is the solution.\n\n```python\n{self.code}\n```\n"


def stdio_cases(task: Task) -> list[tuple[str, str]]:
    """``(stdin, expected stdout)`` of the task's stdin form."""
    return [(stdin_of(task, args), stdout_of(task, expected)) for args, expected in task.cases[:STDIO_CASES]]


def call_cases(task: Task) -> list[tuple[list[Any], Any]]:
    """``(arguments, expected value)`` of the task's function-call tests, as JSON values."""
    return [(list(args), expected) for args, expected in task.cases[:CALL_CASES]]


def stdin_of(task: Task, args: tuple[Any, ...]) -> str:
    def line(kind: str, value: Any) -> str:
        if kind == "l":
            return " ".join(map(str, value))
        return json.dumps(value) if kind == "j" else str(value)

    return "".join(line(kind, value) + "\n" for kind, value in zip(task.args, args, strict=True))


def stdout_of(task: Task, r: Any) -> str:
    if task.result == "float":
        return f"{r:.4f}\n"
    if task.result == "list":
        return " ".join(map(str, r)) + "\n"
    return (json.dumps(r) if task.result == "json" else str(r)) + "\n"


@cache
def items() -> tuple[Item, ...]:
    """The whole corpus, in a fixed order."""
    out: list[Item] = []
    for task in TASKS:
        for form in ("call", "assert"):
            chosen = CALL_VARIANTS if form == "call" else ASSERT_VARIANTS
            for name, code, label in function_variants(task):
                if name not in chosen and not (name.startswith("alt_") and name == f"alt_{task.alts[0][0]}"):
                    continue
                out.append(Item(f"{task.name}/{form}/{name}", task, form, "python", name, code, label))
        for name, code, label in stdio_variants(task):
            if name not in STDIO_VARIANTS and not name.startswith("alt_"):
                continue
            out.append(Item(f"{task.name}/stdio/{name}", task, "stdio", "python", name, code, label))
        for language, name, code, label in native_variants(task):
            out.append(Item(f"{task.name}/stdio/{language}/{name}", task, "stdio", language, name, code, label))
    from .comparisons import comparison_items  # they build on Item
    from .completions import model_items
    from .families import family_items

    out.extend(comparison_items())
    out.extend(family_items())
    out.extend(model_items())
    ids = [i.id for i in out]
    assert len(ids) == len(set(ids)), "item ids must be unique"
    return tuple(out)
