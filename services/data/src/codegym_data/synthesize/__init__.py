"""New problems from a model, kept only when their tests pass a test of the tests.

``prompts`` asks for a problem, a reference solution and assert tests; ``parse`` reads the answer; ``checks``
and ``mutants`` give the static checks, the stand-ins and the mutants that ``pipeline`` has the sandbox judge;
``report`` counts every candidate as kept or under its rejection reason. ``codegym-data synthesize`` (``cli``)
is the command line.
"""

from __future__ import annotations

from .config import SynthesizeConfig
from .mutants import OPERATORS, Mutant, Operator, all_mutants, generate_mutants
from .parse import MALFORMED, Candidate, Malformed, parse_answer
from .pipeline import Outcome, SynthesisRun, synthesize
from .report import REASONS, SynthesisReport

__all__ = [
    "MALFORMED",
    "OPERATORS",
    "REASONS",
    "Candidate",
    "Malformed",
    "Mutant",
    "Operator",
    "Outcome",
    "SynthesisReport",
    "SynthesisRun",
    "SynthesizeConfig",
    "all_mutants",
    "generate_mutants",
    "parse_answer",
    "synthesize",
]
