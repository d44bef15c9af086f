"""What a judged program earns: full credit when it passes every test, partial credit for the hidden ones only.

A test whose input and expected answer the model was shown (``Task.seen_tests``: in its prompt, or among the
visible tests a front door shows and runs for feedback, or a hidden copy of one of those) is passed by a table of
the shown answers as well as by a solution. Partial credit for it would pay such a table a share of the reward
(shown/total), more than an honest attempt that is wrong everywhere, and in a group without a solution the table
is what training would reinforce. So partial credit counts the tests the model did not see that passed, as a
fraction of all the tests: a seen test earns nothing alone, and full credit (1.0) still needs every test, the
seen ones too, to pass (a program right on every hidden test and wrong on an example stays below it). The one
rule of every reward that pays partial credit: TRL's ``CodeReward`` and ``CodeEnvironment``, the trainer's
``tests`` scheme and its code repair.
"""

from __future__ import annotations

from collections.abc import Sequence

from codegym_sandbox.verdicts import Verdict

from .scoring import Score


def earned(passes: Sequence[bool], seen: Sequence[bool], *, partial: bool) -> float:
    """The credit of a program that passed ``passes`` (per test, in the task's order; a test after them was not
    run: early stop, a compile error) of tests of which ``seen`` were shown to the model: 1.0 when every test
    passed; else, with ``partial``, the unseen tests that passed over all the tests (0.0 where every test was
    seen); else 0.0.

    >>> earned([True, True, False, True], [True, False, False, False], partial=True)
    0.5
    >>> earned([True, False], [True, False], partial=True), earned([True, True], [True, True], partial=True)
    (0.0, 1.0)
    """
    if len(passes) > len(seen):
        raise ValueError(f"{len(passes)} test results for a task of {len(seen)} tests")
    passed = [i < len(passes) and bool(passes[i]) for i in range(len(seen))]
    if passed and all(passed):
        return 1.0
    if not partial:
        return 0.0
    return sum(p for p, shown in zip(passed, seen, strict=True) if not shown) / len(seen)


def passes(score: Score) -> list[bool]:
    """Per test of ``score`` (those the sandbox ran, in order), whether it passed."""
    return [v is Verdict.AC for v in score.test_verdicts]
