"""The reward tables: a judged program in, a number out (or None for a sandbox error, which TRL masks).

scheme ``tests`` (the default)::

    all tests pass                 +1.0
    some pass                      with partial credit, the tests passed that the model was not shown, over
                                   all tests (``codegym_evaluator.credit``), else 0.0
    none pass                       0.0
    compile/syntax error           -0.1
    timeout                        -0.05
    well-formed fenced code block  +0.05 bonus

scheme ``execution`` (the program runs once, no tests)::

    runs, prints output            +1.0
    runs, prints nothing           +0.5
    syntax/indentation error       -0.5
    runtime error or timeout       -1.0
"""

from __future__ import annotations

from collections.abc import Sequence

from codegym_evaluator.credit import earned, passes
from codegym_evaluator.scoring import RunOutput, Score
from codegym_sandbox.verdicts import Verdict

FORMAT_BONUS = 0.05
COMPILE_ERROR = -0.1
TIMEOUT = -0.05


def tests_reward(score: Score, *, seen: Sequence[bool], partial_credit: bool = False) -> float | None:
    """Reward of one completion under the ``tests`` scheme; ``seen`` says per test of its task whether the model
    was shown it (``Task.seen_tests`` of the door): partial credit is earned on the others alone.

    >>> wrong = [Verdict.AC, Verdict.WA, Verdict.WA, Verdict.WA]
    >>> s = Score(Verdict.WA, passed=1, total=4, test_verdicts=wrong, code="", fenced=True, wall_s=0.0)
    >>> tests_reward(s, seen=[False] * 4, partial_credit=True)
    0.3
    >>> tests_reward(s, seen=[True, False, False, False], partial_credit=True)  # it passed the shown test alone
    0.05

    None (masked) where a test was not judged (``Score.judged``): a test the sandbox failed to run is no failure.
    """
    if not score.judged:
        return None
    bonus = FORMAT_BONUS if score.fenced else 0.0
    # What passed, whatever the first failure was: a time-out there once cancelled the credit, which a program
    # bought back by exiting on an alarm of its own before its limit (RE, not TLE).
    credit = earned(passes(score), seen, partial=partial_credit)
    if score.verdict is Verdict.CE:
        base = COMPILE_ERROR
    elif credit > 0:
        base = credit
    elif score.verdict is Verdict.TLE:
        base = TIMEOUT
    else:
        base = 0.0
    return round(base + bonus, 6)


def execution_reward(execution: RunOutput) -> float | None:
    """Reward of one program under the ``execution`` scheme.

    >>> execution_reward(RunOutput(Verdict.AC, stdout="hi\\n", stderr="", exit_code=0))
    1.0
    """
    if execution.sandbox_error:
        return None
    if execution.verdict is Verdict.CE:
        return -0.5
    if execution.verdict is Verdict.AC and execution.exit_code in (0, None):
        return 1.0 if execution.stdout.strip() else 0.5
    return -1.0  # a runtime error, a timeout, or a limit hit
