"""The code-output game's rules: parsing both players' answers, normalising outputs, and every reward row."""

from __future__ import annotations

import subprocess
import sys

import pytest
from codegym_evaluator.scoring import RunOutput
from codegym_trainer.selfplay.code_game.rules import (
    MAX_OUTPUT_CHARS,
    WRITER_INVALID,
    WRITER_NONDETERMINISTIC,
    WRITER_PROMPT,
    WRITER_WRONG_OWN_PREDICTION,
    RoundResult,
    WriterAnswer,
    normalise_output,
    parse_prediction,
    parse_writer,
    predictor_prompt,
    round_metrics,
    score_round,
)

PROGRAM = "print(sum(range(4)))"
GOOD = WriterAnswer(PROGRAM, "6")


def ran(stdout: str, verdict: str = "AC", exit_code: int | None = 0) -> RunOutput:
    return RunOutput(verdict, stdout, "", exit_code)


TWICE = [ran("6\n"), ran("6\n")]


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("6\n", "6"),
        ("a  \nb\t\n\n\n", "a\nb"),
        ("x\r\ny\r\n", "x\ny"),
        ("\n  lead\n", "\n  lead"),  # leading blank lines and indentation are part of the output
        ("", ""),
    ],
)
def test_normalising_outputs(text: str, normal: str) -> None:
    assert normalise_output(text) == normal


def test_parsing_the_writer() -> None:
    text = "Here it is.\n```python\nprint(1)\n```\nand\n```output\n1\n```\n"
    assert parse_writer(text) == WriterAnswer("print(1)", "1")
    assert parse_writer("```py\nprint(2)\n```\n```output\n2\n```") == WriterAnswer("print(2)", "2")
    two = "```python\nprint(1)\n```\n```output\n1\n```\nBetter:\n```python\nprint(3)\n```\n```output\n3\n```"
    assert parse_writer(two) == WriterAnswer("print(3)", "3")  # the last of each


@pytest.mark.parametrize(
    "text",
    [
        "```python\nprint(1)\n```",  # no prediction
        "```output\n1\n```",  # no program
        "```\nprint(1)\n```\n```output\n1\n```",  # the program's block must say python
        "```python\nprint(1)\n```\n```output\n1\n",  # the prediction was cut off
        "print(1)\n1",
    ],
)
def test_a_writer_answer_without_both_blocks_is_none(text: str) -> None:
    assert parse_writer(text) is None


def test_parsing_a_prediction() -> None:
    assert parse_prediction("It sums 0..3.\n```output\n6\n```") == "6"
    assert parse_prediction("```output\n1\n```\nNo wait:\n```output\n2\n```") == "2"
    assert parse_prediction("```output\n```") == ""
    assert parse_prediction("The output is 6.") is None
    assert parse_prediction("```python\n6\n```") is None


def test_a_played_round_pays_the_writer_by_the_predictors_failure_rate() -> None:
    assert score_round(GOOD, TWICE, ["6", "6", "6", "6"]).writer == -1.0  # every predictor right
    assert score_round(GOOD, TWICE, ["6", "7", "6", None]).writer == 0.0  # half right
    assert score_round(GOOD, TWICE, ["6", "7", "5", None]).writer == 0.5  # a quarter right
    result = score_round(GOOD, TWICE, ["7", None, "six"])
    assert result.writer == 1.0 and result.outcome == "played" and result.output == "6"
    assert result.predictors == (0.0, 0.0, 0.0) and result.predictor_accuracy == 0.0


def test_predictions_are_compared_after_normalising() -> None:
    result = score_round(WriterAnswer(PROGRAM, "6   \n\n"), [ran("6  \n"), ran("6\n")], ["6\n\n", " 6"])
    assert result.outcome == "played" and result.predictors == (1.0, 0.0)


def test_a_wrong_own_prediction_is_a_penalty_however_the_predictors_did() -> None:
    result = score_round(WriterAnswer(PROGRAM, "7"), TWICE, ["5", "4"])
    assert result.outcome == "wrong_own_prediction" and result.writer == WRITER_WRONG_OWN_PREDICTION
    assert result.predictors == (0.0, 0.0)  # the program is valid: predictors are still judged
    assert score_round(WriterAnswer(PROGRAM, "7"), TWICE, ["6"]).predictors == (1.0,)


@pytest.mark.parametrize(
    ("answer", "runs", "outcome", "writer"),
    [
        (None, [], "unparsable", WRITER_INVALID),
        (WriterAnswer("import random\nprint(random.random())", "0.5"), [], "rejected", WRITER_INVALID),
        (GOOD, [ran("6\n"), ran("", "RE", 1)], "failed", WRITER_INVALID),
        (GOOD, [ran("6\n", "AC", 1), ran("6\n", "AC", 1)], "failed", WRITER_INVALID),
        (GOOD, [ran("", "TLE", None), ran("", "TLE", None)], "failed", WRITER_INVALID),
        (GOOD, [ran("6\n"), ran("7\n")], "nondeterministic", WRITER_NONDETERMINISTIC),
        (GOOD, [ran(" \n"), ran("\n")], "no_output", WRITER_INVALID),
        (GOOD, [ran("9" * (MAX_OUTPUT_CHARS + 1))] * 2, "output_too_long", WRITER_INVALID),
        (GOOD, [ran("6\n"), RunOutput("SE", "", "", None, "down")], "sandbox_error", None),
    ],
)
def test_a_program_that_is_no_game_gets_the_writer_a_penalty_and_the_predictors_nothing(
    answer: WriterAnswer | None, runs: list[RunOutput], outcome: str, writer: float | None
) -> None:
    result = score_round(answer, runs, ["6", "6"])
    assert result.outcome == outcome and result.writer == writer
    assert result.predictors == (None, None) and result.predictor_accuracy is None


def test_a_rejected_program_says_why() -> None:
    result = score_round(WriterAnswer("print(input())", "x"), [], ["x"])
    assert result.problems == ("uses input, which is banned",) and result.program_chars == len("print(input())")


def test_an_output_of_exactly_the_limit_is_played() -> None:
    long = "9" * MAX_OUTPUT_CHARS
    assert score_round(WriterAnswer(PROGRAM, long), [ran(long)] * 2, [long]).outcome == "played"


def test_every_penalty_is_worse_than_losing_a_game() -> None:
    assert score_round(GOOD, TWICE, ["6"]).writer == -1.0  # the worst result of a game played
    assert WRITER_WRONG_OWN_PREDICTION < -1.0
    assert WRITER_INVALID <= WRITER_WRONG_OWN_PREDICTION and WRITER_NONDETERMINISTIC <= WRITER_WRONG_OWN_PREDICTION


def test_a_round_needs_predictions_and_a_checked_program_two_runs() -> None:
    with pytest.raises(ValueError):
        score_round(GOOD, TWICE, [])
    with pytest.raises(ValueError):
        score_round(GOOD, [ran("6\n")], ["6"])


def test_round_metrics_by_hand() -> None:
    rounds = [
        score_round(GOOD, TWICE, ["7", "7"]),  # writer wins: +1
        score_round(GOOD, TWICE, ["6", "7"]),  # 0: not a win
        score_round(WriterAnswer(PROGRAM, "5"), TWICE, ["6", "6"]),  # wrong own prediction
        score_round(GOOD, [ran("6\n"), ran("7\n")], ["6", "6"]),  # nondeterministic
        score_round(None, [], ["6", "6"]),  # unparsable
        RoundResult("sandbox_error", None, (None, None), program_chars=20),
    ]
    metrics = round_metrics(rounds)
    assert metrics["code_game/writer_win_rate"] == 1 / 5
    assert metrics["code_game/predictor_accuracy"] == 3 / 6  # predictions of the three valid programs
    assert metrics["code_game/invalid_rate"] == 2 / 5
    assert metrics["code_game/nondeterministic_rate"] == 1 / 5
    assert metrics["code_game/own_prediction_accuracy"] == 2 / 3
    assert metrics["code_game/program_chars"] == (4 * len(PROGRAM) + 20) / 5
    assert metrics["code_game/sandbox_error_rate"] == 1 / 6


def test_the_writer_prompt_example_is_a_winning_answer_format() -> None:
    answer = parse_writer(WRITER_PROMPT)
    assert answer is not None
    runs = [subprocess.run([sys.executable, "-c", answer.program], capture_output=True, text=True, timeout=30)]
    runs.append(subprocess.run([sys.executable, "-c", answer.program], capture_output=True, text=True, timeout=30))
    result = score_round(answer, [ran(r.stdout, "AC", r.returncode) for r in runs], ["0"])
    assert result.outcome == "played" and result.writer == 1.0


def test_the_predictor_prompt_shows_the_program_and_the_format() -> None:
    prompt = predictor_prompt("print(1)\n\n")
    assert "```python\nprint(1)\n```" in prompt and "```output" in prompt
