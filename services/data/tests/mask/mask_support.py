"""What the masking tests share: a small program whose spans are listed by hand, and a task around it."""

from __future__ import annotations

from codegym_evaluator.tasks import Task

# Its spans, by hand, are in test_mask_spans.py.
PROGRAM = '''\
def f(xs):
    """Doc."""
    total = 0
    for x in xs:
        if x: continue
        a = 1; b = 2
        total += x  # add
    if total > 3:
        total = 3
    elif total < 0:
        total = 0
        total += 1
    return total
'''


def own_task(code: str = PROGRAM, task_id: str = "own/1", test: str = "assert f([1, 2]) == 3") -> Task:
    """A task whose reference solution is ``code`` and whose one test is ``test``."""
    return Task(
        task_id,
        "",
        "assert",
        [{"assert_code": test}],
        "f",
        metadata={"canonical_solution": code, "comparison": "exact"},
    )
