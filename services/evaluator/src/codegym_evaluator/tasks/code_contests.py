"""DeepMind CodeContests: stdin/stdout problems with public, private and generated tests.

The hub repository ``deepmind/code_contests`` holds parquet shards under ``data/``:
``train-000NN-of-00039-<hash>.parquet``, ``valid-00000-of-00001-<hash>.parquet`` and
``test-00000-of-00001-<hash>.parquet``. A row: ``name``, ``description``, ``public_tests``,
``private_tests`` and ``generated_tests`` (``{input: [...], output: [...]}``), ``source``, ``difficulty``
(an enum), ``solutions`` and ``incorrect_solutions`` (``{language: [...], solution: [...]}``),
``cf_contest_id``, ``cf_index``, ``cf_points``, ``cf_rating``, ``cf_tags``, ``time_limit``
(``{seconds, nanos}``), ``memory_limit_bytes`` and a few more.
"""

from __future__ import annotations

from typing import Any

from .hub import HubFiles
from .model import Task
from .rules import rule
from .stdio import stdio_tests

HUB = HubFiles("deepmind/code_contests", ("data/{split}-*.parquet",), ("train", "valid", "test"))

# The dataset's Difficulty enum.
DIFFICULTY_NAMES = {
    0: "unknown",
    1: "easy",
    2: "medium",
    3: "hard",
    4: "harder",
    5: "hardest",
    6: "external",
    7: "A",
    8: "B",
    9: "C",
    10: "D",
    11: "E",
    12: "F",
    13: "G",
    14: "H",
    15: "I",
    16: "J",
    17: "K",
    18: "L",
    19: "M",
    20: "N",
    21: "O",
    22: "P",
    23: "Q",
    24: "R",
    25: "S",
    26: "T",
    27: "U",
    28: "V",
}
PYTHON3 = 3  # in the dataset's Language enum


def _cases(block: Any) -> tuple[list[Any], list[Any]]:
    if not isinstance(block, dict):
        return [], []
    return list(block.get("input") or []), list(block.get("output") or [])


class CodeContestsAdapter:
    """Rows of ``deepmind/code_contests``; tests are public then private (then ``generated`` when asked)."""

    def __init__(self, *, generated: bool = False, max_tests: int | None = None) -> None:
        self.generated = generated
        self.max_tests = max_tests

    def extract_tests(self, sample: dict[str, Any]) -> list[dict[str, Any]]:
        inputs: list[Any] = []
        outputs: list[Any] = []
        for key in ("public_tests", "private_tests", *(("generated_tests",) if self.generated else ())):
            i, o = _cases(sample.get(key))
            inputs += i
            outputs += o
        return stdio_tests(inputs, outputs, self.max_tests)

    def format_problem(self, sample: dict[str, Any]) -> str:
        return str(sample.get("description", "")).strip()

    def to_task(self, sample: dict[str, Any], index: int) -> Task | None:
        tests = self.extract_tests(sample)
        if not tests:
            return None
        difficulty = sample.get("difficulty")
        if isinstance(difficulty, int):
            difficulty = DIFFICULTY_NAMES.get(difficulty, str(difficulty))
        solutions = sample.get("solutions") or {}
        python = [
            s
            for lang, s in zip(solutions.get("language", []), solutions.get("solution", []), strict=False)
            if lang == PYTHON3
        ]
        limit = sample.get("time_limit") or {}
        return Task(
            task_id=f"CodeContests/{sample.get('name', index)}",
            prompt=self.format_problem(sample),
            kind="stdio",
            tests=tests,
            difficulty=difficulty,
            metadata={
                **rule("code_contests").metadata(),
                "canonical_solution": python[0] if python else "",
                "public_tests": min(*map(len, _cases(sample.get("public_tests"))), len(tests)),
                "time_limit_s": (limit.get("seconds") or 0) + (limit.get("nanos") or 0) / 1e9 if limit else None,
                "cf_rating": sample.get("cf_rating"),
                "source": sample.get("source"),
            },
        )
