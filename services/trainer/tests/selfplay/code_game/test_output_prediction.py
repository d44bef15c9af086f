"""The held-out output-prediction set: its stored outputs still hold, and its scoring."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from codegym_trainer.selfplay.code_game.output_prediction import (
    OutputProblem,
    load_output_problems,
    score_output_predictions,
)
from codegym_trainer.selfplay.code_game.program_check import check_program

PROBLEMS = load_output_problems()


def test_the_set_is_twenty_odd_distinct_problems() -> None:
    assert len(PROBLEMS) >= 20
    assert len({p.task_id for p in PROBLEMS}) == len(PROBLEMS)
    assert len({p.program for p in PROBLEMS}) == len(PROBLEMS)


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.task_id)
def test_every_program_prints_its_stored_output_and_is_a_legal_writer_program(problem: OutputProblem) -> None:
    run = subprocess.run([sys.executable, "-c", problem.program], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0 and run.stderr == ""
    assert run.stdout == problem.output
    assert check_program(problem.program) == []


def test_exact_outputs_score_full_marks_and_anything_else_none() -> None:
    right = [f"Reasoning...\n```output\n{p.output}```" for p in PROBLEMS]
    report = score_output_predictions(PROBLEMS, right)
    assert report.accuracy == 1.0 and report.correct == report.total == len(PROBLEMS)
    wrong = score_output_predictions(PROBLEMS, ["```output\n42\n```"] * len(PROBLEMS))
    assert wrong.accuracy == 0.0 and not any(wrong.passed.values())


def test_scoring_normalises_trailing_whitespace_and_needs_an_output_block() -> None:
    problem = OutputProblem("t", "print('a ')\nprint('b')", "a \nb\n")
    assert score_output_predictions([problem], ["```output\na\nb   \n\n```"]).accuracy == 1.0
    assert score_output_predictions([problem], ["a\nb"]).accuracy == 0.0
    with pytest.raises(ValueError):
        score_output_predictions([problem], [])


def test_the_prompt_asks_for_the_programs_output() -> None:
    assert PROBLEMS[0].program.rstrip() in PROBLEMS[0].prompt()


def test_a_row_without_its_output_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"task_id": "a", "program": "print(1)", "output": "1\\n"}\n\n{"task_id": "b", "program": "x"}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:3: no 'output'"):
        load_output_problems(path)
