"""How each dataset's tests are judged: one table, read by every adapter and by every route that judges a row.

A dataset's tests mean what its own harness accepts, so codegym judges them as that harness does, apart from
what would pass a program that did not solve the problem (no ``zip`` that drops lines, no tolerance that
reaches an integer, no match through an overflow). A rule names how stdin tests' outputs are compared
(``Comparison``) and how call tests' returned values are (``CallComparison``); a task carries its rule in its
``metadata`` (``JudgingRule.metadata``), and ``scoring.evaluate_body`` puts it in the sandbox request. The
adapters (``tasks/*.py``), ``trl_rows`` (the rows ``CodeReward`` and the trainer's reward read) and SandboxFusion's
``/submit`` (through the adapters) all take it from here; nothing else chooses a comparison.

A rule also names what the harness runs before every program (``prelude``: its imports, its recursion limit,
its integer digits), which the adapters put before a program of that dataset (``tasks.preludes``).

Assert tests (HumanEval, MBPP, LeetCodeDataset, and the LeetCode-style problems of APPS and LiveCodeBench) are
Python run by the checker: their ``==`` is Python's, as in the harness, and neither comparison applies.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from codegym_sandbox.models import CallComparison, Comparison

from . import preludes

# The metadata of a task that its sandbox request carries (``scoring.evaluate_body``): its rule, and tolerances.
JUDGE_KEYS = ("comparison", "call_comparison", "rel_tol", "abs_tol")


@dataclass(frozen=True)
class JudgingRule:
    """How one dataset's tests are compared, and the harness behaviour it follows."""

    comparison: Comparison  # stdin tests
    call_comparison: CallComparison  # function-call tests
    harness: str  # what the dataset's own harness accepts, in a sentence
    # A ``float`` comparison's tolerances where the harness has its own (0: numbers equal as decimals); None:
    # the sandbox's default. ``abs_tolerance``: the absolute one, where it differs from the relative one.
    tolerance: float | None = None
    abs_tolerance: float | None = None
    # What the harness runs before every program (``tasks.preludes``): the adapters put it before a stdin or
    # method program of the dataset's, as the task's starter code.
    prelude: str = ""
    # The harness calls a call test's function on ``Solution()`` where the program writes ``class Solution``
    # (APPS's testing_util chooses by the program's text, not by the row): ``scoring.build_program`` follows it.
    solution_class: bool = False

    def tolerances(self) -> dict[str, float]:
        """The rule's ``rel_tol`` and ``abs_tol``, where it names them (as ``outputs_match`` takes them)."""
        if self.tolerance is None:
            return {}
        absolute = self.tolerance if self.abs_tolerance is None else self.abs_tolerance
        return {"rel_tol": self.tolerance, "abs_tol": absolute}

    def metadata(self) -> dict[str, str | float]:
        """The rule as a task's metadata (what ``scoring.evaluate_body`` sends to the sandbox)."""
        meta: dict[str, str | float] = {
            "comparison": self.comparison.value,
            "call_comparison": self.call_comparison.value,
        }
        if self.solution_class:
            meta["solution_class"] = 1
        return {**meta, **self.tolerances()}


# APPS's testing_util takes an output whose tokens are all numbers when np.allclose finds them close to the
# expected ones (rtol 1e-5, atol 1e-8); TACO's copy first compares them exactly where all are integers
# (combined_int_check). A ``float`` comparison with np.allclose's tolerances is that, with an integer always
# exact: a tolerance that reaches an integer (1000001 for 1000000) would pass a program that did not solve it.
_APPS = JudgingRule(
    Comparison.FLOAT,
    CallComparison.APPS,
    "testing_util.py: stdout lines compared after strip, then split into tokens, then as numbers within"
    " np.allclose (rtol 1e-5, atol 1e-8; beyond codegym, an integer too); a call's value with Python's =="
    " against the JSON value (a tuple as a list, and a list of tuples as a list of lists): True == 1,"
    " Fraction(1, 2) == 0.5, no float tolerance",
    tolerance=1e-5,
    abs_tolerance=1e-8,
    prelude=preludes.APPS,
    solution_class=True,
)

RULES: dict[str, JudgingRule] = {
    "codegym": JudgingRule(
        Comparison.EXACT,
        CallComparison.JSON,
        "codegym's task format: a task names its comparison in its metadata; by default stdout exactly (apart"
        " from trailing newlines) and values as JSON (an expected float within the tolerances)",
    ),
    "apps": _APPS,
    "taco": replace(_APPS, harness="APPS's testing_util, unchanged: " + _APPS.harness),
    "code_contests": JudgingRule(
        Comparison.WHITESPACE,
        CallComparison.JSON,
        "the contests' checkers: tokens, however spaced (no call tests)",
    ),
    # A ``float`` comparison with no tolerance is lcb_runner's: tokens equal as text or as decimals (``4.0`` and
    # ``1e3`` for ``4`` and ``1000``, never ``4.0000000001``, ``nan`` or ``inf``).
    "livecodebench": JudgingRule(
        Comparison.FLOAT,
        CallComparison.PYTHON,
        "lcb_runner's testing_util: stdout lines after strip, equal as text or their tokens as Decimals (beyond"
        " codegym, the same number of lines); functional tests with Python's == against json.loads of the output"
        " (a tuple as a list), no tolerance (codegym runs those as assert tests); every program after its"
        " import prelude, in a process reading integers of up to 50000 digits",
        tolerance=0.0,
        prelude=preludes.LIVECODEBENCH,
    ),
    "open-r1": JudgingRule(
        Comparison.WHITESPACE,
        CallComparison.APPS,
        "open-r1's code reward: stdout stripped, then each line stripped (its zip, which drops missing lines, is not"
        " followed); rows with fn_name are APPS and TACO problems, compared as their harness does",
    ),
    "humaneval": JudgingRule(Comparison.EXACT, CallComparison.JSON, "assert tests: Python's own =="),
    "mbpp": JudgingRule(
        Comparison.WHITESPACE,
        CallComparison.JSON,
        "assert tests: Python's own ==; a tests column of input/output pairs compares tokens, as the stdin datasets do",
    ),
    "leetcode": JudgingRule(Comparison.EXACT, CallComparison.JSON, "assert tests: the dataset's check, Python's =="),
}


def rule(dataset: str) -> JudgingRule:
    """The rule of ``dataset`` (a name of ``RULES``); ``KeyError`` for a dataset with none."""
    return RULES[dataset]
