"""The code-output game: a writer writes a short program and predicts its output; predictors predict it too.

A round, in order: ``parse_writer`` reads the writer's answer; ``check_program`` (program_check) rejects what
could not be a fair game; the sandbox runs the program twice; ``parse_prediction`` reads each of K
predictors' answers; ``score_round`` gives the rewards.

Rewards (``score_round``)::

    outcome                 writer                         each predictor
    sandbox_error           None (masked)                  None
    unparsable              WRITER_INVALID        -1.5     None (no program to predict)
    rejected                WRITER_INVALID        -1.5     None
    failed (error, TLE..)   WRITER_INVALID        -1.5     None
    no_output               WRITER_INVALID        -1.5     None
    output_too_long         WRITER_INVALID        -1.5     None
    nondeterministic        WRITER_NONDETERMINISTIC -1.5   None (no one output to predict)
    wrong_own_prediction    WRITER_WRONG_OWN      -1.25    1.0 exact match, else 0.0
    played                  1 - 2 * accuracy in [-1, 1]   1.0 exact match, else 0.0

``accuracy`` is the share of the K predictions that match, so the writer gets +1 when every predictor fails
and -1 when every one succeeds. Every penalty lies below -1, the worst result of a game played: pure
zero-sum play would reward unreadable, random or crashing programs, and this way a writer always does better
with a valid program it can predict itself, however easy. Outputs are compared after ``normalise_output``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from codegym_evaluator.extract import fenced_blocks
from codegym_evaluator.scoring import RunOutput
from codegym_sandbox.verdicts import Verdict

from .program_check import ALLOWED_MODULES, MAX_PROGRAM_CHARS, check_program

WRITER_INVALID = -1.5
WRITER_NONDETERMINISTIC = -1.5
WRITER_WRONG_OWN_PREDICTION = -1.25
PREDICTOR_CORRECT = 1.0
PREDICTOR_WRONG = 0.0

MAX_OUTPUT_CHARS = 400  # an output too long to write out is no game: neither side could be expected to predict it

PYTHON_TAGS = frozenset({"python", "py", "python3", "py3"})
OUTPUT_TAG = "output"

Outcome = Literal[
    "played",
    "wrong_own_prediction",
    "unparsable",
    "rejected",
    "failed",
    "no_output",
    "output_too_long",
    "nondeterministic",
    "sandbox_error",
]
INVALID_OUTCOMES: frozenset[Outcome] = frozenset(
    {"unparsable", "rejected", "failed", "no_output", "output_too_long", "nondeterministic"}
)

WRITER_PROMPT = f"""\
You are the writer in a code-output game. Write a short, deterministic Python program that prints something, \
and predict exactly what it prints. Another player will read your program and try to predict its output: you \
win when they get it wrong and lose when they get it right.

Rules: the program runs twice, and both runs must print the same thing. It has at most {MAX_PROGRAM_CHARS} \
characters and prints at most {MAX_OUTPUT_CHARS}. It may import only modules that compute \
({", ".join(sorted(ALLOWED_MODULES - {"__future__"}))}), and may not use input, open, eval, exec, compile, \
__import__, getattr, id, hash or dataclasses' asdict, astuple or replace, nor attributes starting with an \
underscore (its own objects' too) but __init__ and __name__; a str.format template is a string written in the \
program, with plain fields; a match class pattern names attributes as keywords \
(case Point(x=x)), positions only for builtin types (case int(n)); a class's attribute names are written in the \
program (make_dataclass, namedtuple, Enum and type() take string literals, and type(x) is only printed, compared or \
asked its __name__); protocols such as __eq__ and __len__ \
are for the interpreter to call (a == b, len(x)), by name only through super(). Breaking a rule, a crash, or a wrong \
prediction of your own output loses more than any game.

Answer with the program in a ```python block, then its exact output in an ```output block, like this:

```python
print(sum(range(4)))
```

```output
6
```
"""

PREDICTOR_PROMPT = """\
What does this Python program print? Work it out, then give its exact output in an ```output block.

```python
{program}
```
"""


def predictor_prompt(program: str) -> str:
    """The prompt asking for ``program``'s output (the game's predictors and the held-out evaluation)."""
    return PREDICTOR_PROMPT.format(program=program.rstrip("\n"))


def normalise_output(text: str) -> str:
    """Output as the game compares it: newlines as ``\\n``, no trailing whitespace on a line, no trailing lines.

    >>> normalise_output("1 \\r\\n2\\t\\n\\n")
    '1\\n2'
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).rstrip("\n")


@dataclass(frozen=True)
class WriterAnswer:
    """The writer's program and its own prediction of the output."""

    program: str
    prediction: str


def _blocks(text: str, tags: frozenset[str]) -> list[str]:
    closed, _ = fenced_blocks(text)  # an unclosed block is a truncated answer: it does not count
    return [body for tag, body in closed if tag.lower() in tags]


def parse_writer(text: str) -> WriterAnswer | None:
    """The last closed ```python block and the last closed ```output block; None if either is missing.

    >>> parse_writer("```python\\nprint(2 * 3)\\n```\\n```output\\n6\\n```")
    WriterAnswer(program='print(2 * 3)', prediction='6')
    """
    programs, predictions = _blocks(text, PYTHON_TAGS), _blocks(text, frozenset({OUTPUT_TAG}))
    if not programs or not predictions:
        return None
    return WriterAnswer(program=programs[-1], prediction=predictions[-1])


def parse_prediction(text: str) -> str | None:
    """A predictor's answer: the last closed ```output block; None if there is none."""
    predictions = _blocks(text, frozenset({OUTPUT_TAG}))
    return predictions[-1] if predictions else None


@dataclass(frozen=True)
class RoundResult:
    """The rewards of one round and why (``output``: the program's normalised output, when it has one)."""

    outcome: Outcome
    writer: float | None
    predictors: tuple[float | None, ...]
    output: str | None = None
    problems: tuple[str, ...] = ()
    program_chars: int | None = None

    @property
    def predictor_accuracy(self) -> float | None:
        """The share of predictions that matched, for a program with an output."""
        scored = [r for r in self.predictors if r is not None]
        return sum(r == PREDICTOR_CORRECT for r in scored) / len(scored) if scored else None


def _ran(execution: RunOutput) -> bool:
    return execution.verdict is Verdict.AC and execution.exit_code in (0, None)


def score_round(
    answer: WriterAnswer | None, runs: Sequence[RunOutput], predictions: Sequence[str | None]
) -> RoundResult:
    """The writer's and each predictor's reward for one round (the table in this module's docstring).

    ``runs`` are the program's two runs; a program that was not run (no answer, or rejected by the check)
    has none. ``predictions`` are the K predictors' parsed answers, None for an answer without one (it
    counts as wrong).
    """
    k = len(predictions)
    if k == 0:
        raise ValueError("a round needs at least one prediction")
    none: tuple[float | None, ...] = (None,) * k
    if answer is None:
        return RoundResult("unparsable", WRITER_INVALID, none)
    chars = len(answer.program)
    problems = tuple(check_program(answer.program))
    if problems:
        return RoundResult("rejected", WRITER_INVALID, none, problems=problems, program_chars=chars)
    if len(runs) != 2:
        raise ValueError(f"a program that passes the check is run twice, not {len(runs)} times")
    if any(run.sandbox_error for run in runs):
        return RoundResult("sandbox_error", None, none, program_chars=chars)
    if not all(_ran(run) for run in runs):
        return RoundResult("failed", WRITER_INVALID, none, program_chars=chars)
    first, second = (normalise_output(run.stdout) for run in runs)
    if first != second:
        return RoundResult("nondeterministic", WRITER_NONDETERMINISTIC, none, program_chars=chars)
    if not first:
        return RoundResult("no_output", WRITER_INVALID, none, program_chars=chars)
    if len(first) > MAX_OUTPUT_CHARS:
        return RoundResult("output_too_long", WRITER_INVALID, none, program_chars=chars)
    rewards = tuple(
        PREDICTOR_CORRECT if p is not None and normalise_output(p) == first else PREDICTOR_WRONG for p in predictions
    )
    if normalise_output(answer.prediction) != first:
        return RoundResult("wrong_own_prediction", WRITER_WRONG_OWN_PREDICTION, rewards, first, program_chars=chars)
    accuracy = sum(r == PREDICTOR_CORRECT for r in rewards) / k
    return RoundResult("played", 1.0 - 2.0 * accuracy, rewards, first, program_chars=chars)


def round_metrics(rounds: Sequence[RoundResult]) -> dict[str, float]:
    """``code_game/*`` for a logger, over the rounds the sandbox judged (sandbox errors are only counted).

    A writer wins a round it played when most predictions fail (its reward is above 0).
    """
    judged = [r for r in rounds if r.outcome != "sandbox_error"]
    n = max(len(judged), 1)
    predictions = [p for r in judged for p in r.predictors if p is not None]
    valid = [r for r in judged if r.outcome in ("played", "wrong_own_prediction")]
    lengths = [r.program_chars for r in rounds if r.program_chars is not None]
    return {
        "code_game/writer_win_rate": sum(r.outcome == "played" and (r.writer or 0.0) > 0 for r in judged) / n,
        "code_game/predictor_accuracy": sum(p == PREDICTOR_CORRECT for p in predictions) / max(len(predictions), 1),
        "code_game/invalid_rate": sum(r.outcome in INVALID_OUTCOMES for r in judged) / n,
        "code_game/nondeterministic_rate": sum(r.outcome == "nondeterministic" for r in judged) / n,
        "code_game/own_prediction_accuracy": sum(r.outcome == "played" for r in valid) / max(len(valid), 1),
        "code_game/program_chars": sum(lengths) / max(len(lengths), 1),
        "code_game/sandbox_error_rate": (len(rounds) - len(judged)) / max(len(rounds), 1),
    }
