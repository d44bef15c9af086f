"""The transformations by name, and the parsing of ``--transform`` lists."""

from __future__ import annotations

from .base import Compose, Transformation
from .branches import InvertIf
from .comprehensions import ComprehensionToLoop, LoopToComprehension
from .dead_code import InsertDeadCode
from .docstrings import RemoveDocstrings
from .loops import ForToWhile, WhileToFor
from .rename import Rename
from .reorder import ReorderStatements

TRANSFORMATIONS: dict[str, type[Transformation]] = {
    cls.name: cls
    for cls in (
        ForToWhile,
        WhileToFor,
        Rename,
        InvertIf,
        ComprehensionToLoop,
        LoopToComprehension,
        InsertDeadCode,
        ReorderStatements,
        RemoveDocstrings,
    )
}


class UnknownTransformation(ValueError):
    """A transformation name that is not in ``TRANSFORMATIONS``; the message lists the known ones."""


def get_transformation(name: str) -> Transformation:
    """The transformation called ``name``; ``a+b`` composes ``a`` then ``b``."""
    steps = [step.strip() for step in name.split("+")]
    unknown = [step for step in steps if step not in TRANSFORMATIONS]
    if unknown or not all(steps):
        raise UnknownTransformation(
            f"unknown transformation {'+'.join(unknown) or name!r}; known: {', '.join(TRANSFORMATIONS)}"
        )
    if len(steps) == 1:
        return TRANSFORMATIONS[steps[0]]()
    return Compose([TRANSFORMATIONS[step]() for step in steps])


def parse_transformations(spec: str) -> list[Transformation]:
    """``for_to_while,rename+invert_if`` as two transformations (the second composed); ``all``: every one alone."""
    names = [part.strip() for part in spec.split(",") if part.strip()]
    if not names:
        raise UnknownTransformation(f"no transformation given; known: {', '.join(TRANSFORMATIONS)}")
    if names == ["all"]:
        names = list(TRANSFORMATIONS)
    return [get_transformation(name) for name in names]
